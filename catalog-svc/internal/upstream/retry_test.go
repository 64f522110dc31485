package upstream_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sharedos/toolshare/services/systemtest/launch"
)

// A 2025-era upstream takes the tools/call (runs it, sends an event with
// an id and ends the stream, SEP-1699), then restarts: mcp-go's resumption
// of the stream gets 404, the error a session refused unrun gets too. The
// call ran: it is Unavailable, never sent again on a new session — also
// when the upstream asked something on the call's stream first (a ping)
// whose answer, a POST of its own in the call's context, got the 404.
func TestACallWhoseStreamBrokeIsNeverSentAgain(t *testing.T) {
	for _, ping := range []bool{false, true} {
		t.Run(fmt.Sprintf("ping=%v", ping), func(t *testing.T) { brokenStream(t, ping) })
	}
}

// brokenStream is one case of TestACallWhoseStreamBrokeIsNeverSentAgain.
func brokenStream(t *testing.T, ping bool) {
	var mu sync.Mutex
	known := map[string]bool{}
	armed := false
	answered := make(chan struct{}, 1)
	st := newState()
	url, _ := counting(t, st, func(h http.Handler) http.Handler {
		h = launch.LegacyOnly(h)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(b))
			mu.Lock()
			ok := r.Header.Get("Mcp-Session-Id") == "" || known[r.Header.Get("Mcp-Session-Id")]
			crash := armed && bytes.Contains(b, []byte(`"method":"tools/call"`))
			if crash {
				armed = false
			}
			mu.Unlock()
			if bytes.Contains(b, []byte(`"id":"ping-1"`)) {
				answered <- struct{}{}
			}
			if !ok {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusNotFound)
				_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"Session not found"}}`))
				return
			}
			if crash { // run the tool, send a priming event, then "restart"
				h.ServeHTTP(httptest.NewRecorder(), r)
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(http.StatusOK)
				if ping {
					mu.Lock()
					clear(known)
					mu.Unlock()
					_, _ = w.Write([]byte("id: ev0\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"ping-1\",\"method\":\"ping\"}\n\n"))
					w.(http.Flusher).Flush()
					select { // its answer has been refused 404 before the stream ends
					case <-answered:
					case <-r.Context().Done():
						return
					}
				}
				_, _ = w.Write([]byte("id: ev1\nretry: 10\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"x\"}}\n\n"))
				mu.Lock()
				clear(known)
				mu.Unlock()
				return
			}
			h.ServeHTTP(sessionsOf{w, func(id string) { mu.Lock(); known[id] = true; mu.Unlock() }}, r)
		})
	})
	ranOnce(t, url, st, func() { mu.Lock(); armed = true; mu.Unlock() })
}

// ranOnce calls echo on the upstream at url once, arms its failure, calls
// again: that call must have run once (st counts runs) and be Unavailable,
// never sent again on a new session.
func ranOnce(t *testing.T, url string, st *fixtureState, arm func()) {
	t.Helper()
	c, _, _ := upstreamAt(t, "lg", url)
	if err := echo(t, c, "lg", "x"); err != nil {
		t.Fatal(err)
	}
	arm()
	err := echo(t, c, "lg", "once")
	st.mu.Lock()
	n := len(st.args)
	st.mu.Unlock()
	if n != 2 || status.Code(err) != codes.Unavailable {
		t.Errorf("the call ran %d times in all (want 2: once before, once now) and answered %v (want Unavailable)", n, err)
	}
}

// The upstream (or an MCP-aware proxy before it) runs the call, then fails
// it with a 500 whose JSON-RPC error has no id (the TypeScript SDK's
// examples' catch-all): the call may have run, so it is not sent again.
func TestACallAnswered5xxIsNeverSentAgain(t *testing.T) {
	var mu sync.Mutex
	armed := false
	st := newState()
	url, _ := counting(t, st, func(h http.Handler) http.Handler {
		h = launch.LegacyOnly(h)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(b))
			mu.Lock()
			fail := armed && bytes.Contains(b, []byte(`"method":"tools/call"`))
			armed = armed && !fail
			mu.Unlock()
			if fail {
				h.ServeHTTP(httptest.NewRecorder(), r) // the tool runs
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusInternalServerError)
				_, _ = w.Write([]byte(`{"jsonrpc":"2.0","error":{"code":-32603,"message":"Internal server error"},"id":null}`))
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	ranOnce(t, url, st, func() { mu.Lock(); armed = true; mu.Unlock() })
}

// A listing that finds its HTTP session gone (the upstream restarted) is
// listed again on a new session: a refresh after a restart succeeds, where
// it failed once and waited for the next.
func TestARefreshAfterARestartListsAgain(t *testing.T) {
	var mu sync.Mutex
	known := map[string]bool{}
	st := newState()
	url, opened := counting(t, st, func(h http.Handler) http.Handler {
		h = launch.LegacyOnly(h)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			ok := r.Header.Get("Mcp-Session-Id") == "" || known[r.Header.Get("Mcp-Session-Id")]
			mu.Unlock()
			if !ok {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusNotFound)
				_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"Session not found"}}`))
				return
			}
			h.ServeHTTP(sessionsOf{w, func(id string) { mu.Lock(); known[id] = true; mu.Unlock() }}, r)
		})
	})
	_, m, _ := upstreamAt(t, "lg", url)
	once := opened.Load()
	mu.Lock()
	clear(known) // restarted
	mu.Unlock()
	rec, err := m.Refresh(t.Context(), "lg", "op")
	if err != nil || rec.GetStatus().GetError() != "" {
		t.Fatalf("refresh after the restart: %v, %q", err, rec.GetStatus().GetError())
	}
	if n := opened.Load(); n != 2*once {
		t.Errorf("%d handshake requests, want %d: one more connection", n, 2*once)
	}
}
