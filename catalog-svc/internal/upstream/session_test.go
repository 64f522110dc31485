package upstream_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"

	"github.com/sharedos/toolshare/services/systemtest/launch"

	"github.com/sharedos/toolshare/catalog-svc/internal/store/memory"
	"github.com/sharedos/toolshare/catalog-svc/internal/upstream"
)

// A handshake that hangs holds up no other caller past its own end, and
// closing the connection ends it: a caller waiting to connect leaves when
// its context does, while the handshake still hangs; closing the manager
// ends the handshake (cancelled, not timed out) and the call with it.
func TestHangingHandshakeHoldsNoOneElse(t *testing.T) {
	inner := server.NewStreamableHTTPServer(fixture(newState()).srv)
	var hang atomic.Bool
	entered, release := make(chan struct{}, 1), make(chan struct{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if hang.Load() && (bytes.Contains(b, []byte(`"initialize"`)) || bytes.Contains(b, []byte(`"server/discover"`))) {
			select {
			case entered <- struct{}{}:
			default:
			}
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	t.Cleanup(func() { close(release) })
	mem := memory.New()
	m := managerOver(t, mem, nil)
	if _, err := m.Add(t.Context(), &sharedosv1.UpstreamProvider{Namespace: "fx", Url: hs.URL + "/mcp", AutoApproveNew: true}, "op"); err != nil {
		t.Fatal(err)
	}
	// Another replica (a manager with no session yet) connects, and its
	// handshake hangs.
	hang.Store(true)
	other := upstream.New(upstream.Config{Store: mem, Registry: newCatalog(t, mem)})
	c, err := upstream.Handlers{Upstreams: other}.Client(upstream.Target("fx"))
	if err != nil {
		t.Fatal(err)
	}
	first := make(chan error, 1)
	go func() {
		_, err := c.Handle(context.Background(), &sharedosv1.HandleRequest{Tool: "fx.echo", ArgumentsJson: []byte(`{"text":"a"}`)})
		first <- err
	}()
	<-entered
	ctx, cancel := context.WithCancel(t.Context())
	second := make(chan error, 1)
	go func() {
		_, err := c.Handle(ctx, &sharedosv1.HandleRequest{Tool: "fx.echo", ArgumentsJson: []byte(`{"text":"b"}`)})
		second <- err
	}()
	cancel()
	if err := <-second; status.Code(err) != codes.Canceled {
		t.Errorf("the waiting call: %v, want Canceled", err)
	}
	select {
	case err := <-first:
		t.Fatalf("the handshake ended before the waiting call could leave: %v", err)
	default:
	}
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	err = <-first
	if status.Code(err) != codes.Canceled || !strings.Contains(err.Error(), "initialize") {
		t.Errorf("the call whose handshake the close ended: %v, want its initialize Canceled", err)
	}
}

// counting is the fixture upstream behind a handler that counts the
// handshake requests it gets (initialize or server/discover) and answers a
// request for the text "proxy-fails" 502, as a proxy in front of it would.
func counting(t *testing.T, st *fixtureState, wrap func(http.Handler) http.Handler) (string, *atomic.Int32) {
	inner := wrap(server.NewStreamableHTTPServer(fixture(st).srv))
	opened := &atomic.Int32{}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if bytes.Contains(b, []byte(`"text":"proxy-fails"`)) {
			http.Error(w, "bad gateway", http.StatusBadGateway)
			return
		}
		if bytes.Contains(b, []byte(`"method":"initialize"`)) || bytes.Contains(b, []byte(`"method":"server/discover"`)) {
			opened.Add(1)
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs.URL + "/mcp", opened
}

func echo(t *testing.T, c sharedosv1.ToolHandlerServiceClient, ns, text string) error {
	_, err := c.Handle(t.Context(), &sharedosv1.HandleRequest{Tool: ns + ".echo", ArgumentsJson: []byte(`{"text":"` + text + `"}`)})
	return err
}

// Over HTTP a request that fails on its own (a proxy's 502) or a listing
// its caller gave up on ends no session: the calls running on it go on and
// the next request uses it. The 502 is the call's Unavailable.
func TestAFailedRequestEndsNoSession(t *testing.T) {
	st := newState()
	url, opened := counting(t, st, func(h http.Handler) http.Handler { return h })
	c, m, _ := upstreamAt(t, "fx", url)
	running, stop := context.WithCancel(t.Context())
	blocked := make(chan error, 1)
	go func() {
		_, err := c.Handle(running, &sharedosv1.HandleRequest{Tool: "fx.block", ArgumentsJson: []byte(`{}`)})
		blocked <- err
	}()
	<-st.blockStarted
	if err := echo(t, c, "fx", "proxy-fails"); status.Code(err) != codes.Unavailable {
		t.Errorf("the 502: %v, want Unavailable", err)
	}
	st.mu.Lock()
	st.listing, st.listGate = make(chan struct{}, 1), make(chan struct{})
	st.mu.Unlock()
	ctx, cancel := context.WithCancel(t.Context())
	refreshed := make(chan error, 1)
	go func() { _, err := m.Refresh(ctx, "fx", "op"); refreshed <- err }()
	<-st.listing
	cancel() // the operator gives up on the refresh
	if err := <-refreshed; err == nil {
		t.Error("a refresh cancelled while listing succeeded")
	}
	close(st.listGate)
	if err := echo(t, c, "fx", "after"); err != nil {
		t.Fatal(err)
	}
	if n := opened.Load(); n != 1 {
		t.Errorf("%d sessions opened, want the one", n)
	}
	stop()
	if err := <-blocked; status.Code(err) != codes.Canceled {
		t.Errorf("the running call: %v, want Canceled by its own caller", err)
	}
}

// A 2025-era upstream that restarted no longer knows the session: it
// answers 404, or 400 with an error of no id (the TypeScript SDK's
// servers), and never ran the request. The call that finds out is sent
// again on a new session and runs once; the next ones use that session.
// A call refused so on its new session too fails after that one more
// attempt.
func TestARestartedUpstreamIsConnectedAgain(t *testing.T) {
	for name, refusal := range map[string]struct {
		code int
		body string
	}{
		"404": {http.StatusNotFound, `{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"Session not found"}}`},
		"400": {http.StatusBadRequest, `{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"},"id":null}`},
	} {
		t.Run(name, func(t *testing.T) {
			var mu sync.Mutex
			refuseCalls := false // it refuses every tools/call as of no session it knows
			up := newRestartable()
			st := newState()
			url, opened := counting(t, st, func(h http.Handler) http.Handler {
				h = launch.LegacyOnly(h)
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					b := body(r)
					mu.Lock()
					ok := !(refuseCalls && bytes.Contains(b, []byte(`"method":"tools/call"`)))
					mu.Unlock()
					if !ok || !up.knows(r) {
						refuse(w, refusal.code, refusal.body)
						return
					}
					up.serve(h, w, r)
				})
			})
			ran := func() int { // how many echo calls the upstream ran
				st.mu.Lock()
				defer st.mu.Unlock()
				return len(st.args)
			}
			c, _, _ := upstreamAt(t, "lg", url)
			if err := echo(t, c, "lg", "x"); err != nil {
				t.Fatal(err)
			}
			once := opened.Load() // what one connection sends (a legacy one: server/discover, then initialize)
			up.restart()
			for i := range 3 {
				if err := echo(t, c, "lg", "x"); err != nil {
					t.Errorf("call %d after the restart: %v", i+1, err)
				}
			}
			if n := ran(); n != 4 {
				t.Errorf("the upstream ran %d calls, want 4: each once", n)
			}
			if n := opened.Load(); n != 2*once {
				t.Errorf("%d handshake requests, want %d: two connections", n, 2*once)
			}
			mu.Lock()
			refuseCalls = true
			mu.Unlock()
			if err := echo(t, c, "lg", "x"); status.Code(err) != codes.Unavailable {
				t.Errorf("a call refused on its new session too: %v, want Unavailable", err)
			}
			if n := opened.Load(); n != 3*once {
				t.Errorf("%d handshake requests, want %d: one more connection, not two", n, 3*once)
			}
			if n := ran(); n != 4 {
				t.Errorf("the upstream ran %d calls, want 4", n)
			}
		})
	}
}

// sessionsOf hears the session id of each response written through it.
type sessionsOf struct {
	http.ResponseWriter
	opened func(id string)
}

func (w sessionsOf) WriteHeader(code int) {
	if id := w.Header().Get("Mcp-Session-Id"); id != "" {
		w.opened(id)
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w sessionsOf) Write(b []byte) (int, error) {
	if id := w.Header().Get("Mcp-Session-Id"); id != "" {
		w.opened(id)
	}
	return w.ResponseWriter.Write(b)
}

func (w sessionsOf) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// A listing gets the upstream's timeout: a tools/list that never answers
// ends the refresh (reported in the provider's status), rather than
// holding up every refresh after it.
func TestAListingHasTheUpstreamsTimeout(t *testing.T) {
	h := newHarness(t, upstream.Guard{})
	if _, err := h.m.Add(t.Context(), &sharedosv1.UpstreamProvider{Namespace: "fx", Url: h.url, AutoApproveNew: true,
		Timeout: durationpb.New(time.Second)}, "op"); err != nil {
		t.Fatal(err)
	}
	h.st.mu.Lock()
	h.st.listing, h.st.listGate = make(chan struct{}, 1), make(chan struct{})
	h.st.mu.Unlock()
	defer close(h.st.listGate)
	rec, err := h.m.Refresh(context.Background(), "fx", "refresh")
	if err != nil {
		t.Fatal(err)
	}
	if got := rec.GetStatus().GetError(); !strings.Contains(got, "deadline exceeded") {
		t.Errorf("the status after a listing that never answered: %q", got)
	}
}

// Closing a removed upstream's connection waits on the upstream (a
// 2025-era session's DELETE) outside the records lock: while the DELETE
// hangs, another provider is added.
func TestClosingWaitsOutsideTheRecordsLock(t *testing.T) {
	deleting := make(chan context.Context, 1)
	release := make(chan struct{})
	url, _ := counting(t, newState(), func(h http.Handler) http.Handler {
		h = launch.LegacyOnly(h)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodDelete {
				select {
				case deleting <- r.Context():
				default:
				}
				select {
				case <-release:
				case <-r.Context().Done():
				}
			}
			h.ServeHTTP(w, r)
		})
	})
	c, m, _ := upstreamAt(t, "lg", url)
	if err := echo(t, c, "lg", "x"); err != nil {
		t.Fatal(err)
	}
	removed := make(chan error, 1)
	go func() { removed <- m.Remove(t.Context(), "lg") }()
	del := <-deleting
	rec, err := m.Add(t.Context(), &sharedosv1.UpstreamProvider{Namespace: "other", Url: url, AutoApproveNew: true}, "op")
	if err != nil || rec.GetStatus().GetError() != "" {
		t.Fatalf("add while the DELETE hangs: %v %v", err, rec.GetStatus().GetError())
	}
	if del.Err() != nil {
		t.Error("the add waited until the DELETE was given up")
	}
	close(release)
	if err := <-removed; err != nil {
		t.Errorf("remove: %v", err)
	}
}
