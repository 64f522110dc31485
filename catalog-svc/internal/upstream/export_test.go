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

// SetParkedFor makes parked calls run out after d (tests); the returned
// func restores the default.
func SetParkedFor(d time.Duration) func() {
	old := parkedFor
	parkedFor = d
	return func() { parkedFor = old }
}
