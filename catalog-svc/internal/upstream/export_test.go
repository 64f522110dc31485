package upstream

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"time"

	"github.com/sharedos/toolshare/catalog-svc/internal/budget"
)

// CheckRedirect is what g's HTTP client says of a redirect to req after via.
func CheckRedirect(g Guard, req *http.Request, via []*http.Request) error {
	return g.httpClient().CheckRedirect(req, via)
}

// HTTPClient is the client g's HTTP upstreams are reached with.
func HTTPClient(g Guard) *http.Client { return g.httpClient() }

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
func SetParkedFor(d time.Duration) func() { return set(&parkedFor, d) }

// SetMaxParkedPerTurn bounds one turn's parked calls per upstream at n
// (tests); the returned func restores the default.
func SetMaxParkedPerTurn(n int) func() { return set(&maxParkedPerTurn, n) }

// RunOnWorker runs do as an upstream request of a connection to nowhere
// and returns its outcome (tests of the worker's recovery).
func RunOnWorker(do func() error) error {
	c := newConn(context.Background(), nil, Guard{}, slog.New(slog.DiscardHandler), nil)
	defer c.close()
	r := c.start(context.Background(), "", "", nil, func(context.Context) (json.RawMessage, error) { return nil, do() })
	<-r.done
	return r.err
}

// MaxWaitingAsks is the bound of one call's waiting upstream requests;
// FloodAsks what the fixture's flood tool asks at once.
const (
	MaxWaitingAsks = maxWaitingAsks
	FloodAsks      = 100
)

// SetTokenTimeout bounds each token fetch at d (tests); the returned func
// restores the default.
func SetTokenTimeout(d time.Duration) func() { return set(&tokenTimeout, d) }

// SetMaxResponseBytes bounds each upstream message (an HTTP response, a
// stdio line) at n bytes for the connections made after it (tests); the
// returned func restores the default.
func SetMaxResponseBytes(n int64) func() { return set(&maxResponseBytes, n) }

// set makes *p v and returns the func that restores what it was.
func set[T any](p *T, v T) func() {
	old := *p
	*p = v
	return func() { *p = old }
}

// SetListChangedGap sets the least time between list_changed refreshes of
// one upstream; the returned func restores it.
func SetListChangedGap(d time.Duration) func() { return set(&listChangedGap, d) }

// ListChanged is the manager told that ns's upstream's list changed, as
// its notification does.
func (m *Manager) ListChanged(ns string) { m.listChanged(ns) }

// ListChangedIdle reports whether no list_changed refresh of ns waits or
// runs.
func (m *Manager) ListChangedIdle(ns string) bool {
	m.changedMu.Lock()
	defer m.changedMu.Unlock()
	st := m.changed[ns]
	return st == nil || !st.queued && !st.running
}

// StdinMessages is how many requests to ns's stdio server are being
// written now, and how many wait to be (tests: what a caller leaving
// meets).
func (m *Manager) StdinMessages(ns string) (writing, waiting int) {
	m.connsMu.Lock()
	c := m.conns[ns]
	m.connsMu.Unlock()
	if c == nil {
		return 0, 0
	}
	c.mu.Lock()
	t, ok := c.live.tr.(*capturingStdio)
	c.mu.Unlock()
	if !ok {
		return 0, 0
	}
	t.in.mu.Lock()
	defer t.in.mu.Unlock()
	for _, o := range t.in.unwritten {
		switch {
		case o.started && !o.done:
			writing++
		case !o.started && !o.abandoned:
			waiting++
		}
	}
	return writing, waiting
}

// SetDefaultListTimeout bounds each listing of an upstream with no
// timeout of its own at d (tests); the returned func restores the default.
func SetDefaultListTimeout(d time.Duration) func() {
	old := defaultListTimeout.Swap(int64(d))
	return func() { defaultListTimeout.Store(old) }
}

// StdioServer is the process id of the server of ns's live stdio session;
// 0 when there is none (tests: whether a session was dropped, without
// asking the server).
func (m *Manager) StdioServer(ns string) int {
	m.connsMu.Lock()
	c := m.conns[ns]
	m.connsMu.Unlock()
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.live.tr.(*capturingStdio); ok && t.cmd.Process != nil {
		return t.cmd.Process.Pid
	}
	return 0
}

// SetReplyWriteTimeout bounds the write of a stdio server's message no
// caller waits for (a reply to its own request) at d (tests); the returned
// func restores the default.
func SetReplyWriteTimeout(d time.Duration) func() { return set(&replyWriteTimeout, d) }

// StdinWriting reports whether a message to ns's stdio server is being
// written now, whoever's it is (tests: a reply no caller waits for).
func (m *Manager) StdinWriting(ns string) bool {
	m.connsMu.Lock()
	c := m.conns[ns]
	m.connsMu.Unlock()
	if c == nil {
		return false
	}
	c.mu.Lock()
	t, ok := c.live.tr.(*capturingStdio)
	c.mu.Unlock()
	if !ok {
		return false
	}
	t.in.mu.Lock()
	defer t.in.mu.Unlock()
	return t.in.writing != nil
}

// SetParkedQuiet makes a call parked on its own requests for d no longer
// a stdio server request's candidate (tests); the returned func restores
// the default.
func SetParkedQuiet(d time.Duration) func() { return set(&parkedQuiet, d) }

// SetLeftCallGrace sets how long a call its caller left stays its stdio
// server's candidate (tests); the returned func restores the default.
func SetLeftCallGrace(d time.Duration) func() { return set(&leftCallGrace, d) }

// Unanswered is how many calls of ns have a request its stdio server has
// not answered yet, their callers there or not (tests: when a call the
// server went on with stops being a candidate for its requests).
func (m *Manager) Unanswered(ns string) int {
	m.connsMu.Lock()
	c := m.conns[ns]
	m.connsMu.Unlock()
	if c == nil {
		return 0
	}
	c.callsMu.Lock()
	defer c.callsMu.Unlock()
	return len(c.unanswered)
}

// ResultShare is the share of the result budget the calls of upstream ns
// hold theirs in (its connection's).
func ResultShare(m *Manager, ns string) (*budget.Budget, error) {
	c, err := m.conn(ns)
	if err != nil {
		return nil, err
	}
	return c.budget, nil
}

// The bounds of a provider's record (record.go).
const (
	MaxRecordBytes    = maxRecordBytes
	MaxEventsBytes    = maxEventsBytes
	MaxEventDiffBytes = maxEventDiffBytes
	MaxDiffBytes      = maxDiffBytes
)

// How many of an upstream's requests a connection handles at once, and
// how many answers to them it has on their way.
const (
	MaxServerRequests = maxServerRequests
	MaxReplies        = maxReplies
)

// ServerRequests is how many requests ns's upstream sent its client, and
// how many of them were dropped unanswered (tests: when a flood was read
// whole).
func (m *Manager) ServerRequests(ns string) (received, dropped int64) {
	m.connsMu.Lock()
	c := m.conns[ns]
	m.connsMu.Unlock()
	if c == nil {
		return 0, 0
	}
	return c.asked.Load(), c.dropped.Load()
}

// SetMaxConnsPerUpstream bounds the connections to an upstream's host at
// n for the clients made after it (tests); the returned func restores the
// default.
func SetMaxConnsPerUpstream(n int) func() { return set(&maxConnsPerUpstream, n) }
