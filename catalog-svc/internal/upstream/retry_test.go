package upstream_test

import (
	"bytes"
	"encoding/json"
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
	var next nextCall
	answered := make(chan struct{}, 1)
	up := newRestartable()
	st := newState()
	url, _ := counting(t, st, func(h http.Handler) http.Handler {
		h = launch.LegacyOnly(h)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b := body(r)
			crash := next.is(b)
			if bytes.Contains(b, []byte(`"id":"ping-1"`)) {
				answered <- struct{}{}
			}
			if !up.knows(r) {
				refuse(w, http.StatusNotFound, sessionNotFound)
				return
			}
			if crash { // run the tool, send a priming event, then "restart"
				h.ServeHTTP(httptest.NewRecorder(), r)
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(http.StatusOK)
				if ping {
					up.restart()
					_, _ = w.Write([]byte("id: ev0\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"ping-1\",\"method\":\"ping\"}\n\n"))
					w.(http.Flusher).Flush()
					select { // its answer has been refused 404 before the stream ends
					case <-answered:
					case <-r.Context().Done():
						return
					}
				}
				_, _ = w.Write([]byte("id: ev1\nretry: 10\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"x\"}}\n\n"))
				up.restart()
				return
			}
			up.serve(h, w, r)
		})
	})
	ranOnce(t, url, st, next.arm)
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
	var next nextCall
	st := newState()
	url, _ := counting(t, st, func(h http.Handler) http.Handler {
		h = launch.LegacyOnly(h)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if next.is(body(r)) {
				h.ServeHTTP(httptest.NewRecorder(), r) // the tool runs
				refuse(w, http.StatusInternalServerError, `{"jsonrpc":"2.0","error":{"code":-32603,"message":"Internal server error"},"id":null}`)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	ranOnce(t, url, st, next.arm)
}

// The upstream runs the call and answers it under another request's id
// (here the id plus 1000, on the call's own stream): that answer is no
// answer to the call, which is Unavailable — never the other request's
// result recorded as the call's success (attack run: mcp-go's HTTP
// transport takes the first response on the stream, whatever its id) —
// and is not sent again.
func TestAnAnswerUnderAnotherIDIsNoAnswer(t *testing.T) {
	var next nextCall
	st := newState()
	url, _ := counting(t, st, func(h http.Handler) http.Handler {
		h = launch.LegacyOnly(h)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b := body(r)
			if next.is(b) {
				h.ServeHTTP(httptest.NewRecorder(), r) // the tool runs
				var req struct {
					ID int64 `json:"id"`
				}
				if err := json.Unmarshal(b, &req); err != nil {
					t.Error(err)
				}
				refuse(w, http.StatusOK, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"content":[{"type":"text","text":"WRONG-ID RESULT"}]}}`, req.ID+1000))
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	ranOnce(t, url, st, next.arm)
}

// A listing that finds its HTTP session gone (the upstream restarted) is
// listed again on a new session: a refresh after a restart succeeds, where
// it failed once and waited for the next.
func TestARefreshAfterARestartListsAgain(t *testing.T) {
	up := newRestartable()
	st := newState()
	url, opened := counting(t, st, func(h http.Handler) http.Handler {
		h = launch.LegacyOnly(h)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !up.knows(r) {
				refuse(w, http.StatusNotFound, sessionNotFound)
				return
			}
			up.serve(h, w, r)
		})
	})
	_, m, _ := upstreamAt(t, "lg", url)
	once := opened.Load()
	up.restart()
	rec, err := m.Refresh(t.Context(), "lg", "op")
	if err != nil || rec.GetStatus().GetError() != "" {
		t.Fatalf("refresh after the restart: %v, %q", err, rec.GetStatus().GetError())
	}
	if n := opened.Load(); n != 2*once {
		t.Errorf("%d handshake requests, want %d: one more connection", n, 2*once)
	}
}

// restartable is an HTTP upstream's sessions as tests restart it: it knows
// the sessions it opened since it (re)started.
type restartable struct {
	mu    sync.Mutex
	known map[string]bool
}

func newRestartable() *restartable { return &restartable{known: map[string]bool{}} }

// restart forgets every session.
func (u *restartable) restart() {
	u.mu.Lock()
	defer u.mu.Unlock()
	clear(u.known)
}

// knows tells whether r comes on a session the upstream knows, or opens one.
func (u *restartable) knows(r *http.Request) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	id := r.Header.Get("Mcp-Session-Id")
	return id == "" || u.known[id]
}

// serve runs r on h, hearing the sessions it opens.
func (u *restartable) serve(h http.Handler, w http.ResponseWriter, r *http.Request) {
	h.ServeHTTP(sessionsOf{w, func(id string) { u.mu.Lock(); u.known[id] = true; u.mu.Unlock() }}, r)
}

// sessionNotFound is how an upstream refuses a session it does not know.
const sessionNotFound = `{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"Session not found"}}`

// refuse answers code with the JSON body.
func refuse(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(body))
}

// body reads r's body, leaving it to be read again.
func body(r *http.Request) []byte {
	b, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(b))
	return b
}

// nextCall picks the next tools/call once armed.
type nextCall struct {
	mu    sync.Mutex
	armed bool
}

func (n *nextCall) arm() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.armed = true
}

// is tells whether the request body b is the tools/call picked (and
// disarms).
func (n *nextCall) is(b []byte) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	picked := n.armed && bytes.Contains(b, []byte(`"method":"tools/call"`))
	n.armed = n.armed && !picked
	return picked
}
