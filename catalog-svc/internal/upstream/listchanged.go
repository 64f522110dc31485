package upstream

import (
	"log/slog"
	"time"

	"github.com/sharedos/toolshare/services/platform/telemetry"
)

// listChangedGap is the least time between the end of one refresh of an
// upstream asked for by its list_changed notifications and the start of
// the next: an upstream that sends them without end (and answers slowly)
// is listed by one refresh at a time, no more often than this.
var listChangedGap = 10 * time.Second

// changeState is what the manager knows of an upstream's list_changed
// notifications (guarded by changedMu).
type changeState struct {
	queued  bool      // a refresh waits to start
	running bool      // a refresh runs
	dirty   bool      // a notification came while one ran: one more after it
	ended   time.Time // when the last one ended
}

// listChanged refreshes ns soon: its upstream said the list of its
// tools, prompts or resources changed. The refresh is the same as any
// other (a changed definition is quarantined, a new tool waits for
// approval unless the provider auto-approves new ones); the notification
// only makes it sooner than the refresh interval. One refresh at a time
// per upstream, each listChangedGap after the last ended: notifications
// while one waits join it, those while one runs ask for one more after
// it. It never runs in the transport's reader (which reads the listing).
func (m *Manager) listChanged(ns string) {
	m.changedMu.Lock()
	defer m.changedMu.Unlock()
	st := m.changed[ns]
	if st == nil {
		st = &changeState{}
		m.changed[ns] = st
	}
	switch {
	case st.queued:
	case st.running:
		st.dirty = true
	default:
		m.queueChange(ns, st)
	}
}

// queueChange starts st's refresh of ns listChangedGap after the last
// ended; changedMu is held.
func (m *Manager) queueChange(ns string, st *changeState) {
	if m.life.Err() != nil {
		return
	}
	st.queued = true
	wait := listChangedGap - time.Since(st.ended)
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
		st.queued, st.running, st.dirty = false, true, false
		m.changedMu.Unlock()
		if _, _, err := m.refresh(m.life, ns, listChangedActor, false); err != nil && m.life.Err() == nil {
			m.log.WarnContext(m.life, "upstream refresh on list_changed", slog.String(telemetry.LogUpstream, ns), slog.Any("error", err))
		}
		m.changedMu.Lock()
		defer m.changedMu.Unlock()
		st.running, st.ended = false, time.Now()
		if st.dirty {
			st.dirty = false
			m.queueChange(ns, st)
		}
	}()
}

// listChangedActor is who a refresh asked for by the upstream is recorded
// as (the events of the tools it quarantines or withdraws).
const listChangedActor = "list_changed"
