package upstream

import "time"

// ExpireSpecChecks makes m compare every connection's spec with the store
// on its next use (tests: instead of waiting specRecheck).
func ExpireSpecChecks(m *Manager) {
	m.connsMu.Lock()
	defer m.connsMu.Unlock()
	for _, c := range m.conns {
		c.checked = time.Time{}
	}
}
