package upstream

import (
	"log/slog"
	"time"

	"github.com/sharedos/toolshare/services/platform/telemetry"
)

// listChangedGap is the least time between two refreshes of one upstream
// asked for by its list_changed notifications: an upstream that sends
// them without end is listed no more often than this.
const listChangedGap = 10 * time.Second

// changeState is what the manager knows of an upstream's list_changed
// notifications (guarded by changedMu).
type changeState struct {
	queued bool      // a refresh is waiting to start
	last   time.Time // when the last one started
}

// listChanged refreshes ns soon: its upstream said the list of its
// tools, prompts or resources changed. The refresh is the same as any
// other (a changed definition is quarantined, a new tool waits for
// approval unless the provider auto-approves new ones); the notification
// only makes it sooner than the refresh interval. Notifications that come
// while one waits join it; the refresh starts at most once per
// listChangedGap, after the manager's other work, never in the
// transport's reader (the listing is read by it).
func (m *Manager) listChanged(ns string) {
	m.changedMu.Lock()
	defer m.changedMu.Unlock()
	st := m.changed[ns]
	if st == nil {
		st = &changeState{}
		m.changed[ns] = st
	}
	if st.queued || m.life.Err() != nil {
		return
	}
	st.queued = true
	wait := listChangedGap - time.Since(st.last)
	m.bg.Add(1)
	go func() {
		defer m.bg.Done()
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-m.life.Done():
				t.Stop()
				return
			}
		}
		m.changedMu.Lock()
		st.queued, st.last = false, time.Now()
		m.changedMu.Unlock()
		if _, _, err := m.refresh(m.life, ns, listChangedActor, false); err != nil && m.life.Err() == nil {
			m.log.WarnContext(m.life, "upstream refresh on list_changed", slog.String(telemetry.LogUpstream, ns), slog.Any("error", err))
		}
	}()
}

// listChangedActor is who a refresh asked for by the upstream is recorded
// as (the events of the tools it quarantines or withdraws).
const listChangedActor = "list_changed"
