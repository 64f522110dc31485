package mcpserver_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sharedos/toolshare/bridge-svc/internal/forward"
	"github.com/sharedos/toolshare/bridge-svc/internal/leases"
	"github.com/sharedos/toolshare/bridge-svc/internal/leases/memory"
	"github.com/sharedos/toolshare/bridge-svc/internal/leases/storetest"
	"github.com/sharedos/toolshare/bridge-svc/internal/mcpserver"
	"github.com/sharedos/toolshare/bridge-svc/internal/protocol"
	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/outcome"
)

// TestSweepFreesTurnsClosedElsewhere: a turn closed through another pod (a
// direct store write here) loses its cached server at the next sweep, and
// its next request is a 404 whatever the sweep did.
func TestSweepFreesTurnsClosedElsewhere(t *testing.T) {
	br := newTestBridge(t, mcpserver.Config{})
	h, ctx := br.h, context.Background()
	a, tokA := br.open(br.storeNow().Add(time.Hour))
	b, tokB := br.open(br.storeNow().Add(time.Hour))
	if br.list(a, tokA) != 200 || br.list(b, tokB) != 200 {
		t.Fatal("lists failed")
	}
	if n := len(h.Cached()); n != 2 {
		t.Fatalf("cached = %d, want 2", n)
	}
	if err := br.store.Close(ctx, a.TurnID); err != nil {
		t.Fatal(err)
	}
	if err := h.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if got := h.Cached(); len(got) != 1 || got[0] != b.TurnID {
		t.Errorf("cached after sweep = %v, want only %s", got, b.TurnID)
	}
	if st := br.list(a, tokA); st != http.StatusNotFound {
		t.Errorf("closed turn answered %d", st)
	}
}

// TestSweepEvictsIdleTurnServers: a turn server unused for longer than
// IdleEvict is dropped at the next sweep while a recently used one stays;
// the idle turn's next request rebuilds it from the lease and succeeds.
func TestSweepEvictsIdleTurnServers(t *testing.T) {
	br := newTestBridge(t, mcpserver.Config{IdleEvict: time.Minute})
	a, tokA := br.open(br.storeNow().Add(time.Hour))
	b, tokB := br.open(br.storeNow().Add(time.Hour))
	if br.list(a, tokA) != 200 {
		t.Fatal("list a failed")
	}
	br.pod.t = br.pod.t.Add(50 * time.Second)
	if br.list(b, tokB) != 200 {
		t.Fatal("list b failed")
	}
	br.pod.t = br.pod.t.Add(30 * time.Second) // a idle 80 s, b 30 s
	if err := br.h.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := br.h.Served(); n != 1 {
		t.Fatalf("turn servers after the sweep = %d, want 1 (b's)", n)
	}
	if br.list(a, tokA) != 200 || br.h.Served() != 2 {
		t.Errorf("the idle turn's next request: served %d turns, want 2 after a rebuild", br.h.Served())
	}
}

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

// testBridge is a Handler on a fake pod clock, over a memory store whose
// clock runs 2 s ahead of the pod's, with helpers to open a turn and list
// its tools over HTTP.
type testBridge struct {
	t     testing.TB
	pod   *fakeClock
	store *memory.Store
	h     *mcpserver.Handler
	srv   *httptest.Server
}

// newCachedBridge is a testBridge with a status cache of ttl.
func newCachedBridge(t *testing.T, ttl time.Duration) *testBridge {
	return newTestBridge(t, mcpserver.Config{StatusCacheTTL: ttl})
}

func newTestBridge(t testing.TB, cfg mcpserver.Config) *testBridge {
	pod := &fakeClock{t: time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)}
	b := &testBridge{t: t, pod: pod}
	b.store = memory.New(memory.WithClock(b.storeNow))
	cfg.Store, cfg.Forwarder, cfg.Now = b.store, &forward.Forwarder{}, pod.now
	cfg.Edge = protocol.NewEdge(protocol.EdgeConfig{AllowedHosts: protocol.DefaultAllowedHosts})
	b.h = mcpserver.NewHandler(cfg)
	mux := http.NewServeMux()
	mux.Handle(mcpserver.Pattern, b.h)
	b.srv = httptest.NewServer(mux)
	t.Cleanup(func() { b.srv.Client().CloseIdleConnections(); b.srv.Close() })
	return b
}

func (b *testBridge) storeNow() time.Time { return b.pod.t.Add(2 * time.Second) }

func (b *testBridge) open(expires time.Time) (*leases.Lease, string) {
	return createLease(b.t, b.store, b.storeNow().Add(-time.Minute), expires)
}

func (b *testBridge) list(l *leases.Lease, token string) int {
	req, _ := http.NewRequest(http.MethodPost, b.srv.URL+leases.MCPPath(l.TurnID), strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/list")
	resp, err := b.srv.Client().Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestStatusCacheBounds: with a status cache, a close made through another
// pod is seen once the TTL has passed, a close through this pod at once,
// and expiry is judged on the store's clock even when the pod's lags.
func TestStatusCacheBounds(t *testing.T) {
	ctx := context.Background()
	const ttl = 500 * time.Millisecond
	b := newCachedBridge(t, ttl)

	// Closed through another pod (a direct store write).
	a, tokA := b.open(b.storeNow().Add(time.Hour))
	if st := b.list(a, tokA); st != 200 {
		t.Fatalf("open turn: %d", st)
	}
	if err := b.store.Close(ctx, a.TurnID); err != nil {
		t.Fatal(err)
	}
	b.pod.t = b.pod.t.Add(ttl)
	if st := b.list(a, tokA); st != http.StatusNotFound {
		t.Errorf("closed elsewhere, TTL passed: %d, want 404", st)
	}

	// Closed through this pod: Evict (CloseTurn's hook) drops it at once.
	c, tokC := b.open(b.storeNow().Add(time.Hour))
	if st := b.list(c, tokC); st != 200 {
		t.Fatalf("open turn: %d", st)
	}
	if err := b.store.Close(ctx, c.TurnID); err != nil {
		t.Fatal(err)
	}
	b.h.Evict(c.TurnID)
	if st := b.list(c, tokC); st != http.StatusNotFound {
		t.Errorf("closed here: %d, want 404", st)
	}
}

// TestStatusCacheExpiryOnStoreClock: a cached status expires when the
// store's clock says so, though the pod's clock (2 s behind) says it has a
// second left.
func TestStatusCacheExpiryOnStoreClock(t *testing.T) {
	b := newCachedBridge(t, time.Hour)
	l, tok := b.open(b.storeNow().Add(time.Second))
	if st := b.list(l, tok); st != 200 {
		t.Fatalf("open turn: %d", st)
	}
	b.pod.t = b.pod.t.Add(time.Second) // store clock now at expires_at; pod clock 2 s before it
	if st := b.list(l, tok); st != http.StatusNotFound {
		t.Errorf("expired by the store's clock: %d, want 404", st)
	}
}

// gatedStore holds Status answers until released: a read that started
// before a close and returns after it.
type gatedStore struct {
	*memory.Store
	read, release chan struct{}
}

func (g *gatedStore) Status(ctx context.Context, turnID string) (leases.Status, error) {
	st, err := g.Store.Status(ctx, turnID)
	g.read <- struct{}{}
	<-g.release
	return st, err
}

// TestEvictWinsOverAnOlderStatusRead (issue 17, item 9): a status read that
// started before CloseTurn and returns after its Evict must not put the
// closed turn back in this pod's cache as open.
func TestEvictWinsOverAnOlderStatusRead(t *testing.T) {
	pod := &fakeClock{t: time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)}
	g := &gatedStore{Store: memory.New(memory.WithClock(pod.now)), read: make(chan struct{}), release: make(chan struct{})}
	h := mcpserver.NewHandler(mcpserver.Config{
		Store: g, Forwarder: &forward.Forwarder{},
		Edge:           protocol.NewEdge(protocol.EdgeConfig{AllowedHosts: protocol.DefaultAllowedHosts}),
		StatusCacheTTL: time.Hour, Now: pod.now,
	})
	l, token := createLease(t, g, pod.now().Add(-time.Minute), pod.now().Add(time.Hour))
	ctx := context.Background()
	done := make(chan int, 1)
	go func() { done <- serveList(h, l.TurnID, token) }()
	<-g.read // the status read has seen the turn open
	if err := g.Close(ctx, l.TurnID); err != nil {
		t.Fatal(err)
	}
	h.Evict(l.TurnID) // CloseTurn's hook on this pod
	close(g.release)
	<-done
	if slices.Contains(h.Cached(), l.TurnID) {
		t.Fatalf("the closed turn is cached again after its Evict: %v", h.Cached())
	}
}

// countingStore counts the store reads a request costs.
type countingStore struct {
	*memory.Store
	reads atomic.Int64
}

func (c *countingStore) Status(ctx context.Context, id string) (leases.Status, error) {
	c.reads.Add(1)
	return c.Store.Status(ctx, id)
}

func (c *countingStore) TurnByToken(ctx context.Context, h [sha256.Size]byte) (string, error) {
	c.reads.Add(1)
	return c.Store.TurnByToken(ctx, h)
}

// TestRefusalsAreCheap (issue 17, item 12): a source that keeps sending
// made-up tokens spends its refusal budget and is then refused without any
// store read (429 for an uncached turn, 401 without the second lookup on a
// cached one), while the right token on a cached turn still passes.
func TestRefusalsAreCheap(t *testing.T) {
	pod := &fakeClock{t: time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)}
	st := &countingStore{Store: memory.New(memory.WithClock(pod.now))}
	h := mcpserver.NewHandler(mcpserver.Config{
		Store: st, Forwarder: &forward.Forwarder{},
		Edge:           protocol.NewEdge(protocol.EdgeConfig{AllowedHosts: protocol.DefaultAllowedHosts}),
		StatusCacheTTL: time.Hour, Now: pod.now, FailureRate: 0.0001, FailureBurst: 5, // no refill during the test
	})
	l, token := createLease(t, st, pod.now().Add(-time.Minute), pod.now().Add(time.Hour))
	call := func(turnID, tok string) int { return serveList(h, turnID, tok) }
	if code := call(l.TurnID, token); code != 200 { // caches the turn's status
		t.Fatalf("the right token: %d", code)
	}
	unknown := "taaaaaaaaaaaaaaaaaaaaaaaaaa"
	for i := range 5 { // the budget: each costs its lookups
		if code := call(unknown, fmt.Sprintf("made-up-%d", i)); code != http.StatusNotFound {
			t.Fatalf("refusal %d within the budget: %d", i, code)
		}
	}
	before := st.reads.Load()
	for i := range 100 {
		if code := call(unknown, fmt.Sprintf("flood-%d", i)); code != http.StatusTooManyRequests {
			t.Fatalf("flood request %d: %d, want 429", i, code)
		}
		if code := call(l.TurnID, fmt.Sprintf("flood-%d", i)); code != http.StatusUnauthorized {
			t.Fatalf("wrong token on a cached turn: %d, want 401", code)
		}
	}
	if n := st.reads.Load() - before; n != 0 {
		t.Fatalf("200 refused requests past the budget cost %d store reads", n)
	}
	if code := call(l.TurnID, token); code != 200 {
		t.Fatalf("the right token during the flood: %d", code)
	}
}

// TestAHolderOfALiveTurnIsNotRefusedWithItsAddress (attack run of
// 2026-12-07, D3): a client that spends its address's refusal budget with
// made-up turn ids does not lock out another caller at that address (a
// NAT, loopback, an Ingress not trusted) whose turn this pod has served:
// the right token of such a turn passes whenever its status is no longer
// cached (it was 429, and a tool call refused so left no record), while
// made-up turn ids and a wrong token on that turn still cost no store
// read, and a turn closed elsewhere is refused once, then forgotten.
func TestAHolderOfALiveTurnIsNotRefusedWithItsAddress(t *testing.T) {
	for _, ttl := range []time.Duration{500 * time.Millisecond, 0} {
		t.Run(fmt.Sprintf("lease cache TTL %v", ttl), func(t *testing.T) {
			pod := &fakeClock{t: time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)}
			st := &countingStore{Store: memory.New(memory.WithClock(pod.now))}
			h := mcpserver.NewHandler(mcpserver.Config{
				Store: st, Forwarder: &forward.Forwarder{},
				Edge:           protocol.NewEdge(protocol.EdgeConfig{AllowedHosts: protocol.DefaultAllowedHosts}),
				StatusCacheTTL: ttl, Now: pod.now, FailureRate: 0.0001, FailureBurst: 5, // no refill during the test
			})
			l, token := createLease(t, st, pod.now().Add(-time.Minute), pod.now().Add(time.Hour))
			reads := func(f func()) int64 { before := st.reads.Load(); f(); return st.reads.Load() - before }
			if code := serveList(h, l.TurnID, token); code != 200 {
				t.Fatalf("the right token: %d", code)
			}
			for i := range 5 { // the hostile client spends the address's budget
				if code := serveList(h, madeUpTurnID(i), "made-up"); code != http.StatusNotFound {
					t.Fatalf("made-up turn %d within the budget: %d", i, code)
				}
			}
			for i := range 3 {
				pod.t = pod.t.Add(time.Second) // the turn's status is no longer cached
				if code := serveList(h, l.TurnID, token); code != 200 {
					t.Fatalf("the right token %d s after the budget was spent: %d, want 200", i+1, code)
				}
			}
			pod.t = pod.t.Add(time.Second)
			if n := reads(func() {
				for i := range 50 {
					if code := serveList(h, madeUpTurnID(100+i), "made-up"); code != http.StatusTooManyRequests {
						t.Fatalf("made-up turn past the budget: %d, want 429", code)
					}
					if code := serveList(h, l.TurnID, fmt.Sprintf("wrong-%d", i)); code != http.StatusTooManyRequests {
						t.Fatalf("a wrong token on the uncached turn past the budget: %d, want 429", code)
					}
				}
			}); n != 0 {
				t.Fatalf("100 refused requests past the budget cost %d store reads", n)
			}

			// Closed through another pod: the holder's next request reads
			// the status and is refused; the turn is then forgotten, and
			// its token costs no more reads.
			if err := st.Close(context.Background(), l.TurnID); err != nil {
				t.Fatal(err)
			}
			pod.t = pod.t.Add(time.Second)
			if code := serveList(h, l.TurnID, token); code != http.StatusNotFound {
				t.Fatalf("the closed turn: %d, want 404", code)
			}
			pod.t = pod.t.Add(2 * time.Second) // past the negative cache too
			if n := reads(func() {
				if code := serveList(h, l.TurnID, token); code != http.StatusTooManyRequests {
					t.Errorf("the closed turn again: %d, want 429", code)
				}
			}); n != 0 {
				t.Fatalf("the closed turn's token past the budget cost %d store reads", n)
			}
		})
	}
}

// madeUpTurnID is a well-formed turn id no lease has, a different one
// for each i.
func madeUpTurnID(i int) string {
	id := []byte("taaaaaaaaaaaaaaaaaaaaaaaaaa")
	for p := len(id) - 1; i > 0; p-- {
		id[p] = byte('a' + i%26)
		i /= 26
	}
	return string(id)
}

// serveList serves one modern tools/list for turnID with token through h,
// from one fixed source address, and returns the status.
func serveList(h *mcpserver.Handler, turnID, token string) int {
	return serveListFrom(h, "192.0.2.7:5555", turnID, token)
}

// hungStore answers nothing until the caller's context ends, like a
// SIGSTOPped PostgreSQL; then it works again once released.
type hungStore struct {
	*memory.Store
	hung atomic.Bool
}

func (s *hungStore) wait(ctx context.Context) error {
	if !s.hung.Load() {
		return nil
	}
	<-ctx.Done()
	return ctx.Err()
}

func (s *hungStore) Status(ctx context.Context, id string) (leases.Status, error) {
	if err := s.wait(ctx); err != nil {
		return leases.Status{}, err
	}
	return s.Store.Status(ctx, id)
}

func (s *hungStore) Get(ctx context.Context, id string) (*leases.Lease, leases.Status, error) {
	if err := s.wait(ctx); err != nil {
		return nil, leases.Status{}, err
	}
	return s.Store.Get(ctx, id)
}

// TestHungStoreIsA503 (issue 17, item 13): with the lease store hung, a
// request is answered 503 once LeaseTimeout has passed — it is not held
// for as long as the store hangs — and the turn works again once the store
// answers.
func TestHungStoreIsA503(t *testing.T) {
	st := &hungStore{Store: memory.New()}
	h := mcpserver.NewHandler(mcpserver.Config{
		Store: st, Forwarder: &forward.Forwarder{},
		Edge:         protocol.NewEdge(protocol.EdgeConfig{AllowedHosts: protocol.DefaultAllowedHosts}),
		LeaseTimeout: 50 * time.Millisecond,
	})
	l, token := createLease(t, st, time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
	st.hung.Store(true)
	if code := serveList(h, l.TurnID, token); code != http.StatusServiceUnavailable {
		t.Fatalf("hung store: %d, want 503", code)
	}
	st.hung.Store(false)
	if code := serveList(h, l.TurnID, token); code != 200 {
		t.Fatalf("after the store answers again: %d, want 200", code)
	}
}

// TestWrongTokensBudgetedPerTurn (issue 17, item 12): wrong tokens on one
// turn from many sources spend the turn's budget too; past it they are 401
// without the second lookup, and the right token still passes.
func TestWrongTokensBudgetedPerTurn(t *testing.T) {
	pod := &fakeClock{t: time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)}
	st := &countingStore{Store: memory.New(memory.WithClock(pod.now))}
	h := mcpserver.NewHandler(mcpserver.Config{
		Store: st, Forwarder: &forward.Forwarder{},
		Edge:           protocol.NewEdge(protocol.EdgeConfig{AllowedHosts: protocol.DefaultAllowedHosts}),
		StatusCacheTTL: time.Hour, Now: pod.now, FailureRate: 0.0001, FailureBurst: 5,
	})
	l, token := createLease(t, st, pod.now().Add(-time.Minute), pod.now().Add(time.Hour))
	if code := serveListFrom(h, "192.0.2.1:1", l.TurnID, token); code != 200 {
		t.Fatalf("the right token: %d", code)
	}
	reads := func(f func()) int64 { before := st.reads.Load(); f(); return st.reads.Load() - before }
	within := reads(func() {
		for i := range 5 {
			if code := serveListFrom(h, fmt.Sprintf("192.0.2.%d:1", 10+i), l.TurnID, "wrong"); code != http.StatusUnauthorized {
				t.Fatalf("wrong token %d: %d", i, code)
			}
		}
	})
	past := reads(func() {
		for i := range 50 {
			if code := serveListFrom(h, fmt.Sprintf("198.51.100.%d:1", i), l.TurnID, "wrong"); code != http.StatusUnauthorized {
				t.Fatalf("wrong token past the turn's budget %d: %d", i, code)
			}
		}
	})
	if within != 5 || past != 0 {
		t.Fatalf("store reads: %d within the turn's budget (want 5 second lookups), %d past it (want 0)", within, past)
	}
	if code := serveListFrom(h, "203.0.113.1:1", l.TurnID, token); code != 200 {
		t.Fatalf("the right token after the flood: %d", code)
	}
}

// TestGoneTurnsCachedBriefly: a turn id found unknown or closed is answered
// 404 from the pod's negative cache for NegativeCacheTTL, then read again.
func TestGoneTurnsCachedBriefly(t *testing.T) {
	pod := &fakeClock{t: time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)}
	st := &countingStore{Store: memory.New(memory.WithClock(pod.now))}
	h := mcpserver.NewHandler(mcpserver.Config{
		Store: st, Forwarder: &forward.Forwarder{},
		Edge:           protocol.NewEdge(protocol.EdgeConfig{AllowedHosts: protocol.DefaultAllowedHosts}),
		StatusCacheTTL: time.Hour, NegativeCacheTTL: time.Second, Now: pod.now, FailureRate: 1e6, FailureBurst: 1e6,
	})
	l, token := createLease(t, st, pod.now().Add(-time.Minute), pod.now().Add(time.Hour))
	if err := st.Close(context.Background(), l.TurnID); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"taaaaaaaaaaaaaaaaaaaaaaaaaa", l.TurnID} {
		n := func() int64 {
			before := st.reads.Load()
			for range 10 {
				if code := serveList(h, id, token); code != http.StatusNotFound {
					t.Fatalf("%s: %d, want 404", id, code)
				}
			}
			return st.reads.Load() - before
		}
		if got := n(); got != 1 {
			t.Errorf("%s: 10 requests cost %d status reads, want 1", id, got)
		}
		pod.t = pod.t.Add(2 * time.Second)
		if got := n(); got != 1 {
			t.Errorf("%s after the TTL: 10 requests cost %d status reads, want 1", id, got)
		}
	}
}

// serveListFrom is serveList from the source address peer.
func serveListFrom(h *mcpserver.Handler, peer, turnID, token string) int {
	mux := http.NewServeMux()
	mux.Handle(mcpserver.Pattern, h)
	return postFrom(mux, peer, turnID, token,
		`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`,
		map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}).Code
}

// postFrom serves one MCP POST of body for turnID with token, from the
// source address peer, through h (a mux the Handler is mounted on).
func postFrom(h http.Handler, peer, turnID, token, body string, headers map[string]string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1"+leases.MCPPath(turnID), strings.NewReader(body))
	req.RemoteAddr = peer
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

// slowBody runs then before its first read: the client's body arrives
// after the gate let the request in.
type slowBody struct {
	io.Reader
	then func()
}

func (b *slowBody) Read(p []byte) (int, error) {
	if b.then != nil {
		b.then()
		b.then = nil
	}
	return b.Reader.Read(p)
}

// TestTurnEndedWhileTheBodyArrives (invariant 6): a request the gate let
// in before its turn expired, whose body arrives after, is 404 — nothing
// is parsed, forwarded or recorded — on the cached status as on a read.
func TestTurnEndedWhileTheBodyArrives(t *testing.T) {
	pod := &fakeClock{t: time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)}
	store := memory.New(memory.WithClock(pod.now))
	h := mcpserver.NewHandler(mcpserver.Config{
		Store: store, Forwarder: &forward.Forwarder{},
		Edge:           protocol.NewEdge(protocol.EdgeConfig{AllowedHosts: protocol.DefaultAllowedHosts}),
		StatusCacheTTL: time.Hour, Now: pod.now,
	})
	l, token := createLease(t, store, pod.now().Add(-time.Minute), pod.now().Add(time.Minute))
	if code := serveList(h, l.TurnID, token); code != http.StatusOK {
		t.Fatalf("the open turn's list: %d", code) // its status is cached now
	}
	mux := http.NewServeMux()
	mux.Handle(mcpserver.Pattern, h)
	body := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"files.read","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	expire := func() { pod.t = pod.t.Add(2 * time.Minute) }
	req := slowCall(l.TurnID, token, body, expire)
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, req) // a forward would fail on the empty Forwarder: only a 404 passes
	if w.Code != http.StatusNotFound {
		t.Fatalf("a call whose body arrived after the turn expired: %d %s, want 404", w.Code, w.Body)
	}
	// A body past the bound that ends after expiry: 404 too, not the
	// refusal a live turn's request gets recorded with (413).
	l2, token2 := createLease(t, store, pod.now().Add(-time.Minute), pod.now().Add(time.Minute))
	if code := serveList(h, l2.TurnID, token2); code != http.StatusOK {
		t.Fatalf("the second turn's list: %d", code)
	}
	big := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"files.read","arguments":{"pad":"` + strings.Repeat("x", 5<<20) + `"}}}`
	req = slowCall(l2.TurnID, token2, big, expire)
	req.ContentLength = -1 // chunked: the bound is found while reading
	w = httptest.NewRecorder()
	mux.ServeHTTP(w, req) // a record would go to the empty Forwarder and fail: only a 404 passes
	if w.Code != http.StatusNotFound {
		t.Fatalf("a body past the bound that ended after the turn expired: %d %s, want 404", w.Code, w.Body)
	}
}

// TestACallOnAnEndedSessionWhoseBodyArrivedAfterExpiryTouchesNothing
// (invariant 6): a tools/call on a 2025-era session ended with DELETE is
// an attempt, recorded as refused while its turn is open; but one the gate
// let in before the turn expired, whose body arrived after, is 404 with
// nothing recorded, as on a live session.
func TestACallOnAnEndedSessionWhoseBodyArrivedAfterExpiryTouchesNothing(t *testing.T) {
	pod := &fakeClock{t: time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)}
	store := memory.New(memory.WithClock(pod.now))
	k := &entryKernel{answer: func(*sharedosv1.ToolCall) *sharedosv1.ToolResult {
		return outcome.Failed(outcome.InvalidRequest, "refused at the edge")
	}}
	mux := http.NewServeMux()
	mux.Handle(mcpserver.Pattern, mcpserver.NewHandler(mcpserver.Config{
		Store: store, Forwarder: &forward.Forwarder{Invoker: k},
		Edge:           protocol.NewEdge(protocol.EdgeConfig{AllowedHosts: protocol.DefaultAllowedHosts}),
		StatusCacheTTL: time.Hour, Now: pod.now,
	}))
	l, token := createLease(t, store, pod.now().Add(-time.Minute), pod.now().Add(time.Minute))
	init := post(mux, l.TurnID, token, legacyInitialize, nil)
	sid := init.Header().Get("Mcp-Session-Id")
	if init.Code != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %s", init.Code, init.Body)
	}
	// A DELETE naming two sessions ends neither: the bridge would end the
	// first, a proxy may have read the last.
	twice := httptest.NewRequest(http.MethodDelete, "http://127.0.0.1"+leases.MCPPath(l.TurnID), nil)
	twice.Header.Set("Authorization", "Bearer "+token)
	twice.Header["Mcp-Session-Id"] = []string{sid, "another"}
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, twice)
	if w.Code != http.StatusBadRequest {
		t.Fatalf("DELETE naming two sessions: %d %s, want 400", w.Code, w.Body)
	}
	end := httptest.NewRequest(http.MethodDelete, "http://127.0.0.1"+leases.MCPPath(l.TurnID), nil)
	end.Header.Set("Authorization", "Bearer "+token)
	end.Header.Set("Mcp-Session-Id", sid)
	w = httptest.NewRecorder()
	mux.ServeHTTP(w, end)
	if w.Code != http.StatusOK {
		t.Fatalf("DELETE of the session: %d %s", w.Code, w.Body)
	}
	// onEndedSession is slowCall's tools/call sent on the ended session, as
	// a 2025-era client sends it.
	onEndedSession := func(then func()) *httptest.ResponseRecorder {
		req := slowCall(l.TurnID, token, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"files.read","arguments":{}}}`, then)
		req.Header.Del("Mcp-Protocol-Version")
		req.Header.Set("Mcp-Session-Id", sid)
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, req)
		return w
	}
	if w := onEndedSession(func() {}); w.Code != http.StatusNotFound || k.sent() != 1 || k.since(0)[0].GetEdgeRejection() == "" {
		t.Fatalf("a call on the ended session of an open turn: %d, %d kernel calls; want 404 and its refusal recorded", w.Code, k.sent())
	}
	w = onEndedSession(func() { pod.t = pod.t.Add(2 * time.Minute) })
	if w.Code != http.StatusNotFound || k.sent() != 1 {
		t.Fatalf("a call on the ended session whose body arrived after the turn expired: %d %s, %d kernel calls; want 404 and nothing recorded",
			w.Code, w.Body, k.sent())
	}
}

// slowCall is a 2026-07-28 tools/call of files.read on turnID whose body
// runs then before its first read.
func slowCall(turnID, token, body string, then func()) *http.Request {
	req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1"+leases.MCPPath(turnID),
		&slowBody{Reader: strings.NewReader(body), then: then})
	req.RemoteAddr = "192.0.2.7:5555"
	for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"Authorization": "Bearer " + token, "Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "files.read"} {
		req.Header.Set(k, v)
	}
	return req
}

// createLease stores a sample lease open from opened until expires, with
// a fresh token, and returns it and the token.
func createLease(t testing.TB, st interface {
	Create(context.Context, *leases.Lease) error
}, opened, expires time.Time) (*leases.Lease, string) {
	t.Helper()
	l := storetest.Sample(t, opened, expires)
	token, hash, err := leases.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	l.TokenHash = hash
	if err := st.Create(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	return l, token
}
