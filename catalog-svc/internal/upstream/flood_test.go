package upstream_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"

	"github.com/sharedos/toolshare/catalog-svc/internal/store/memory"
	"github.com/sharedos/toolshare/catalog-svc/internal/upstream"
)

// floodUpstream is a malicious 2025-era Streamable HTTP upstream (attack
// run a1): the stream that answers its tools/list (list set) or its
// tools/call first carries n requests of its own (pings, or elicitations
// with elicit set), then the answer once release is closed. It answers
// none of the POSTs that carry SharedOS's answers to them — or, with
// header set, answers each with that header, and then nothing.
type floodUpstream struct {
	n       int
	elicit  bool
	list    bool
	header  string
	release chan struct{}
	closing chan struct{}

	// replies counts the answer POSTs being served, mostReplies the most
	// at once, repliesOver those over; conns and mostConns the same of
	// the connections open to the upstream.
	replies, mostReplies, repliesOver atomic.Int64
	conns, mostConns                  atomic.Int64
}

// raise makes most at least n.
func raise(most *atomic.Int64, n int64) {
	for old := most.Load(); n > old && !most.CompareAndSwap(old, n); old = most.Load() {
	}
}

func (u *floodUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	const tools = `{"tools":[{"name":"t","description":"Answers after its own requests.","inputSchema":{"type":"object"}}]}`
	answer := fmt.Sprintf(`{"content":[{"type":"text","text":"answered after %d requests"}]}`, u.n)
	switch {
	case m.Method == "":
		u.answerPOST(w, r)
	case m.Method == "initialize":
		w.Header().Set("Mcp-Session-Id", "flood")
		reply(w, m.ID, `{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"flood","version":"1"}}`)
	case strings.HasPrefix(m.Method, "notifications/"):
		w.WriteHeader(http.StatusAccepted)
	case m.Method == "tools/list" && u.list:
		u.flood(w, r, m.ID, tools)
	case m.Method == "tools/list":
		reply(w, m.ID, tools)
	case m.Method == "tools/call" && !u.list:
		u.flood(w, r, m.ID, answer)
	case m.Method == "tools/call":
		reply(w, m.ID, answer)
	default:
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"method not found"}}`, m.ID)
	}
}

func reply(w http.ResponseWriter, id json.RawMessage, result string) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, id, result)
}

// flood answers request id on an event stream: the upstream's own
// requests first, its result once released.
func (u *floodUpstream) flood(w http.ResponseWriter, r *http.Request, id json.RawMessage, result string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	req := `"method":"ping"`
	if u.elicit {
		req = `"method":"elicitation/create","params":{"message":"And?","requestedSchema":{"type":"object"}}`
	}
	for i := range u.n {
		_, _ = fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"r%d\",%s}\n\n", i, req)
	}
	w.(http.Flusher).Flush()
	select {
	case <-u.release:
	case <-r.Context().Done():
		return
	}
	_, _ = fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":%s}\n\n", id, result)
	w.(http.Flusher).Flush()
}

// answerPOST serves a POST of SharedOS's answers: never answered, or
// answered with the large header and then nothing, until SharedOS gives
// it up.
func (u *floodUpstream) answerPOST(w http.ResponseWriter, r *http.Request) {
	raise(&u.mostReplies, u.replies.Add(1))
	defer func() { u.replies.Add(-1); u.repliesOver.Add(1) }()
	if u.header != "" {
		w.Header().Set("X-Large", u.header)
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
	}
	select {
	case <-r.Context().Done():
	case <-u.closing:
	}
}

// start serves u, counting its connections.
func (u *floodUpstream) start(t *testing.T) string {
	t.Helper()
	u.release, u.closing = make(chan struct{}), make(chan struct{})
	hs := httptest.NewUnstartedServer(u)
	hs.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			raise(&u.mostConns, u.conns.Add(1))
		case http.StateClosed, http.StateHijacked:
			u.conns.Add(-1)
		}
	}
	hs.Start()
	t.Cleanup(hs.Close)
	t.Cleanup(func() { close(u.closing) }) // before Close, which waits for the POSTs served
	return hs.URL + "/mcp"
}

// within polls cond until it holds, and reports whether it did within d.
// d is a bound, not a pace: it is shorter than the 30 s mcp-go gives a
// request of the upstream's, past which the old code let its POSTs go
// too.
func within(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond) // polls the condition
	}
	return true
}

// largeHeader is what the header variant answers each POST with (attack
// run a1: 9 MiB).
var largeHeader = strings.Repeat("a", 9<<20)

// An upstream that floods its client with requests during a call or a
// listing — thousands of pings or elicitations, whose answers' POSTs it
// never answers — holds a bounded number of catalog-svc's goroutines and
// connections: at most MaxServerRequests of its requests are handled at
// once (the rest dropped unanswered) and at most MaxReplies answers are on
// their way to it. Each had a goroutine and a connection of its own, 30 s
// long (attack run a1: 20,000 descriptors, catalog-svc's limit; the
// elicitations a call does not hold, "refused at once", as many). With
// each answer's POST answered by a 9 MiB header, a response's headers are
// read to 64 KiB only (each was read whole: 3.3 GB). The call or listing
// then completes with the upstream's answer.
func TestAnUpstreamFloodingItsClientHoldsBoundedResources(t *testing.T) {
	for _, tc := range []struct {
		name   string
		list   bool
		elicit bool
		n      int
		header string
	}{
		{"pings during a call", false, false, 2000, ""},
		{"pings during a listing", true, false, 2000, ""},
		{"elicitations during a call", false, true, 2000, ""},
		{"large headers during a call", false, false, 3 * upstream.MaxReplies, largeHeader},
		{"large headers during a listing", true, false, 3 * upstream.MaxReplies, largeHeader},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := &floodUpstream{n: tc.n, list: tc.list, elicit: tc.elicit, header: tc.header}
			url := u.start(t)
			mem := memory.New()
			m := managerOver(t, mem, nil)
			spec := &sharedosv1.UpstreamProvider{Namespace: "fl", Url: url, AutoApproveNew: true}
			add := func() (*sharedosv1.GetProviderResponse, error) { return m.Add(t.Context(), spec, "op") }

			var alloc0 runtime.MemStats
			g0 := runtime.NumGoroutine()
			runtime.ReadMemStats(&alloc0)
			type outcome struct {
				text string
				err  error
			}
			done := make(chan outcome, 1)
			if tc.list {
				go func() {
					rec, err := add()
					if err == nil && rec.GetStatus().GetError() != "" {
						err = fmt.Errorf("status: %s", rec.GetStatus().GetError())
					}
					var names []string
					for _, tool := range rec.GetStatus().GetTools() {
						names = append(names, tool.GetName())
					}
					done <- outcome{strings.Join(names, ","), err}
				}()
			} else {
				if rec, err := add(); err != nil || rec.GetStatus().GetError() != "" {
					t.Fatalf("add: %v %v", err, rec.GetStatus().GetError())
				}
				c, err := upstream.Handlers{Upstreams: m}.Client(upstream.Target("fl"))
				if err != nil {
					t.Fatal(err)
				}
				g0 = runtime.NumGoroutine()
				runtime.ReadMemStats(&alloc0)
				go func() {
					resp, err := declineEveryRound(t.Context(), c, &sharedosv1.HandleRequest{Tool: "fl.t", ArgumentsJson: []byte(`{}`), InputMethods: elicit}, u.release)
					if err == nil && resp.GetIsError() {
						err = fmt.Errorf("isError: %s", resp.GetContentJson())
					}
					done <- outcome{string(resp.GetContentJson()), err}
				}()
			}

			// Every request of the upstream reached the handler (handled
			// or dropped).
			var received int64
			if !within(20*time.Second, func() bool {
				received, _ = m.ServerRequests("fl")
				return received == int64(tc.n)
			}) {
				t.Fatalf("%d of the upstream's %d requests received", received, tc.n)
			}
			if tc.header == "" {
				// Those handled wait for room for their answers, or for
				// the upstream to answer their POSTs; the rest are gone.
				bound := upstream.MaxServerRequests + 8*upstream.MaxReplies + 64
				var more int
				if !within(15*time.Second, func() bool {
					more = runtime.NumGoroutine() - g0
					return more <= bound
				}) {
					t.Fatalf("%d more goroutines during a flood of %d requests, want at most %d", more, tc.n, bound)
				}
				if _, dropped := m.ServerRequests("fl"); dropped < int64(tc.n-upstream.MaxServerRequests) {
					t.Errorf("%d of %d requests dropped, want at least %d", dropped, tc.n, tc.n-upstream.MaxServerRequests)
				}
				// No POST has ended yet, so the upstream counts what
				// catalog-svc holds (once one is given up, the upstream
				// notices it later than catalog-svc sends the next).
				if most := u.mostReplies.Load(); most > upstream.MaxReplies {
					t.Errorf("%d answers' POSTs at once, want at most %d", most, upstream.MaxReplies)
				}
				if most := u.mostConns.Load(); most > upstream.MaxReplies+8 {
					t.Errorf("%d connections open to the upstream at once, want at most %d", most, upstream.MaxReplies+8)
				}
			} else {
				// Each answer's POST was given up as soon as its header
				// ran past the bound, and the next one sent.
				if !within(15*time.Second, func() bool { return u.repliesOver.Load() == int64(tc.n) }) {
					t.Fatalf("%d of %d answers' POSTs over", u.repliesOver.Load(), tc.n)
				}
				var alloc runtime.MemStats
				runtime.ReadMemStats(&alloc)
				if got := alloc.TotalAlloc - alloc0.TotalAlloc; got > 64<<20 {
					t.Errorf("%d MiB allocated reading %d answers' responses, want at most 64 (their headers read whole: %d MiB each)",
						got>>20, tc.n, len(tc.header)>>20)
				}
			}

			close(u.release)
			select {
			case o := <-done:
				want := fmt.Sprintf("answered after %d requests", tc.n)
				if tc.list {
					want = "fl.t"
				}
				if o.err != nil || !strings.Contains(o.text, want) {
					t.Fatalf("the flooded %s: %q, %v; want %q", map[bool]string{true: "listing", false: "call"}[tc.list], o.text, o.err, want)
				}
			case <-time.After(time.Minute): // a failure's bound, not a pace
				t.Fatal("the flooded request never ended")
			}
		})
	}
}

// declineEveryRound calls req on c and, once after is closed, declines
// every input request of each round; it returns the call's result.
func declineEveryRound(ctx context.Context, c sharedosv1.ToolHandlerServiceClient, req *sharedosv1.HandleRequest, after <-chan struct{}) (*sharedosv1.HandleResponse, error) {
	resp, err := c.Handle(ctx, req)
	for round := int32(1); err == nil && resp.GetInputRequired() != nil; round++ {
		in := resp.GetInputRequired()
		if len(in.GetRequestState()) == 0 {
			return nil, fmt.Errorf("round %d handed out unparked: the kernel refuses it", round)
		}
		var asks map[string]json.RawMessage
		if err := json.Unmarshal(in.GetInputRequestsJson(), &asks); err != nil {
			return nil, err
		}
		answers := map[string]json.RawMessage{}
		for k := range asks {
			answers[k] = json.RawMessage(`{"action":"decline"}`)
		}
		b, _ := json.Marshal(answers)
		next := proto.CloneOf(req)
		next.Round, next.RequestState, next.InputResponsesJson = round, in.GetRequestState(), b
		select {
		case <-after:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		resp, err = c.Handle(ctx, next)
	}
	return resp, err
}
