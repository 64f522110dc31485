package upstream_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/systemtest/launch"

	"github.com/sharedos/toolshare/catalog-svc/internal/upstream"
)

// legacyUpstream is the fixture as a 2025-era upstream "lg" on a manager.
func legacyUpstream(t *testing.T) (sharedosv1.ToolHandlerServiceClient, *upstream.Manager, *fixtureState) {
	t.Helper()
	st := newState()
	hs := httptest.NewServer(launch.LegacyOnly(server.NewStreamableHTTPServer(fixture(st).srv)))
	t.Cleanup(hs.Close)
	c, m, rec := upstreamAt(t, "lg", hs.URL+"/mcp")
	if v := rec.GetStatus().GetProtocolVersion(); v != "2025-11-25" {
		t.Fatalf("negotiated %q, want the 2025 era", v)
	}
	return c, m, st
}

var elicit = []string{"elicitation/create"}

// oneRequest is a round's single input request: its key, method and message.
func oneRequest(t *testing.T, in *sharedosv1.InputRequired) (key, method, message string) {
	t.Helper()
	var m map[string]struct {
		Method string
		Params struct{ Message string }
	}
	if err := json.Unmarshal(in.GetInputRequestsJson(), &m); err != nil || len(m) != 1 {
		t.Fatalf("inputRequests %s: %v", in.GetInputRequestsJson(), err)
	}
	for k, r := range m {
		return k, r.Method, r.Params.Message
	}
	return
}

// A 2025-era upstream's elicitation during a call is the kernel's input
// round: the call stays open across rounds, each answer reaches the
// upstream as its request's result, and a round's state resumes it once.
func TestServerRequestsRelayed(t *testing.T) {
	c, _, _ := legacyUpstream(t)
	req := &sharedosv1.HandleRequest{CallId: "c1", Tool: "lg.ask", ArgumentsJson: []byte(`{"times":2}`), InputMethods: elicit}
	resp, err := c.Handle(t.Context(), req)
	if err != nil || resp.GetInputRequired() == nil {
		t.Fatalf("first round: %v, %v", resp, err)
	}
	in := resp.GetInputRequired()
	key, method, msg := oneRequest(t, in)
	if method != "elicitation/create" || msg != "Your name? (1)" || len(in.GetRequestState()) == 0 {
		t.Fatalf("first round asks %s %q (state %q)", method, msg, in.GetRequestState())
	}
	next := func(in *sharedosv1.InputRequired, key, answer string, round int32) (*sharedosv1.HandleResponse, error) {
		return c.Handle(t.Context(), &sharedosv1.HandleRequest{CallId: "c1", Tool: "lg.ask", ArgumentsJson: []byte(`{"times":2}`), InputMethods: elicit,
			Round: round, RequestState: in.GetRequestState(), InputResponsesJson: []byte(`{"` + key + `":` + answer + `}`)})
	}
	resp, err = next(in, key, `{"action":"accept","content":{"name":"Ada"}}`, 1)
	if err != nil || resp.GetInputRequired() == nil {
		t.Fatalf("second round: %v, %v", resp, err)
	}
	second := resp.GetInputRequired()
	key2, _, msg := oneRequest(t, second)
	if msg != "Your name? (2)" || key2 == key || bytes.Equal(second.GetRequestState(), in.GetRequestState()) {
		t.Fatalf("second round asks %q under %s (state %q)", msg, key2, second.GetRequestState())
	}
	resp, err = next(second, key2, `{"action":"accept","content":{"name":"Bob"}}`, 2)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(resp.GetContentJson()); resp.GetIsError() || !strings.Contains(got, `accept {\"name\":\"Ada\"}; accept {\"name\":\"Bob\"}`) {
		t.Fatalf("result %s (isError %v)", got, resp.GetIsError())
	}
	// A state resumes its call once.
	if _, err := next(second, key2, `{"action":"accept","content":{"name":"Eve"}}`, 2); status.Code(err) != codes.Unavailable {
		t.Errorf("a replayed round: %v, want Unavailable", err)
	}
	if _, err := c.Handle(t.Context(), &sharedosv1.HandleRequest{Tool: "lg.ask", ArgumentsJson: []byte(`{}`), InputMethods: elicit, Round: 1,
		RequestState: []byte("sharedos-upstream-call:00112233445566778899aabbccddeeff")}); status.Code(err) != codes.Unavailable {
		t.Errorf("an invented handle: %v, want Unavailable", err)
	}
}

// An upstream that asks a hundred things at once during one call has its
// requests past the bound refused at once, exactly those: a round handed
// out and the next one queued are held, answered, and then the call ends —
// instead of each request holding a goroutine until the call ends.
func TestServerRequestsBounded(t *testing.T) {
	c, _, st := legacyUpstream(t)
	req := &sharedosv1.HandleRequest{CallId: "c1", Tool: "lg.flood", ArgumentsJson: []byte(`{}`), InputMethods: elicit}
	resp, err := c.Handle(t.Context(), req)
	if err != nil || resp.GetInputRequired() == nil {
		t.Fatalf("first round: %v, %v", resp, err)
	}
	// Nothing is answered yet, so every request past the bound is refused
	// and the bound's worth are held.
	want := upstream.FloodAsks - upstream.MaxWaitingAsks
	for i := range want {
		select {
		case err := <-st.floodRefused:
			if !strings.Contains(err.Error(), "wait for the client's answers") {
				t.Fatalf("refused with %v", err)
			}
		case <-time.After(time.Minute): // a failure's bound, not a pace
			t.Fatalf("%d of %d requests past the bound refused", i, want)
		}
	}
	answered := 0
	for round := int32(1); err == nil && resp.GetInputRequired() != nil; round++ {
		in := resp.GetInputRequired()
		var asks map[string]json.RawMessage
		if err := json.Unmarshal(in.GetInputRequestsJson(), &asks); err != nil {
			t.Fatal(err)
		}
		answers := map[string]json.RawMessage{}
		for k := range asks {
			answers[k] = json.RawMessage(`{"action":"decline"}`)
		}
		answered += len(answers)
		b, _ := json.Marshal(answers)
		next := proto.CloneOf(req)
		next.Round, next.RequestState, next.InputResponsesJson = round, in.GetRequestState(), b
		resp, err = c.Handle(t.Context(), next)
	}
	if err != nil || resp.GetIsError() || !strings.Contains(string(resp.GetContentJson()), "done") {
		t.Fatalf("the call's end: %v, %v", resp, err)
	}
	// The tool returned after every one of its requests ended.
	if answered != upstream.MaxWaitingAsks || len(st.floodRefused) != 0 {
		t.Fatalf("%d requests answered and %d more refused, want %d and none", answered, len(st.floodRefused), upstream.MaxWaitingAsks)
	}
}

// A declined answer or none at all reaches the upstream too: the request
// missing from the round's responses gets an error, and the tool decides.
func TestServerRequestUnanswered(t *testing.T) {
	c, _, st := legacyUpstream(t)
	resp, err := c.Handle(t.Context(), &sharedosv1.HandleRequest{Tool: "lg.ask", ArgumentsJson: []byte(`{}`), InputMethods: elicit})
	if err != nil || resp.GetInputRequired() == nil {
		t.Fatalf("first round: %v, %v", resp, err)
	}
	resp, err = c.Handle(t.Context(), &sharedosv1.HandleRequest{Tool: "lg.ask", ArgumentsJson: []byte(`{}`), InputMethods: elicit, Round: 1,
		RequestState: resp.GetInputRequired().GetRequestState(), InputResponsesJson: []byte(`{}`)})
	if err != nil || !resp.GetIsError() || !strings.Contains(string(resp.GetContentJson()), "no answer") {
		t.Fatalf("unanswered: %v, %v", resp, err)
	}
	<-st.askFailed
}

// A client that cannot answer ends the call: the round is handed to the
// kernel unparked (it records missing_capability) and the upstream's
// request ends; so does a round the kernel would refuse.
func TestServerRequestTheClientCannotAnswer(t *testing.T) {
	c, _, st := legacyUpstream(t)
	resp, err := c.Handle(t.Context(), &sharedosv1.HandleRequest{Tool: "lg.ask", ArgumentsJson: []byte(`{}`)})
	if err != nil || resp.GetInputRequired() == nil || len(resp.GetInputRequired().GetRequestState()) != 0 {
		t.Fatalf("no input methods: %v, %v", resp, err)
	}
	if _, method, _ := oneRequest(t, resp.GetInputRequired()); method != "elicitation/create" {
		t.Errorf("method %s", method)
	}
	<-st.askFailed
	// So does a round past the kernel's last.
	resp, err = c.Handle(t.Context(), &sharedosv1.HandleRequest{Tool: "lg.ask", ArgumentsJson: []byte(`{}`), InputMethods: elicit, Round: 16})
	if err != nil || resp.GetInputRequired() == nil || len(resp.GetInputRequired().GetRequestState()) != 0 {
		t.Fatalf("round 16: %v, %v", resp, err)
	}
	<-st.askFailed
}

// A parked call is not kept forever: past its wait, when its turn is
// closed, when its client gave no answer, or when its upstream connection
// closes, the upstream request ends, and its state resumes nothing.
func TestParkedCallsEnd(t *testing.T) {
	t.Run("its wait runs out", func(t *testing.T) {
		defer upstream.SetParkedFor(time.Millisecond)()
		c, _, st := legacyUpstream(t)
		resp, err := c.Handle(t.Context(), &sharedosv1.HandleRequest{Tool: "lg.ask", ArgumentsJson: []byte(`{}`), InputMethods: elicit})
		if err != nil || resp.GetInputRequired() == nil {
			t.Fatalf("first round: %v, %v", resp, err)
		}
		<-st.askFailed
		// Taken by its expiry (which ran before the upstream heard of it).
		if _, err := c.Handle(t.Context(), &sharedosv1.HandleRequest{Tool: "lg.ask", ArgumentsJson: []byte(`{}`), InputMethods: elicit, Round: 1,
			RequestState: resp.GetInputRequired().GetRequestState(), InputResponsesJson: []byte(`{}`)}); status.Code(err) != codes.Unavailable {
			t.Errorf("after the wait ran out: %v", err)
		}
	})
	t.Run("its turn is closed", func(t *testing.T) {
		c, m, st := legacyUpstream(t)
		open := func(turn string) *sharedosv1.InputRequired {
			resp, err := c.Handle(t.Context(), &sharedosv1.HandleRequest{TurnId: turn, Tool: "lg.ask", ArgumentsJson: []byte(`{}`), InputMethods: elicit})
			if err != nil || resp.GetInputRequired() == nil {
				t.Fatalf("first round of %s: %v, %v", turn, resp, err)
			}
			return resp.GetInputRequired()
		}
		closed, kept := open("t-closed"), open("t-kept")
		held := (upstream.Handlers{Upstreams: m}).HeldTurns()
		slices.Sort(held)
		if !slices.Equal(held, []string{"t-closed", "t-kept"}) {
			t.Errorf("held turns %v", held)
		}
		if n := (upstream.Handlers{Upstreams: m}).CancelTurn("t-closed"); n != 1 {
			t.Errorf("CancelTurn ended %d calls, want 1", n)
		}
		<-st.askFailed
		if _, err := c.Handle(t.Context(), &sharedosv1.HandleRequest{TurnId: "t-closed", Tool: "lg.ask", ArgumentsJson: []byte(`{}`), InputMethods: elicit, Round: 1,
			RequestState: closed.GetRequestState(), InputResponsesJson: []byte(`{}`)}); status.Code(err) != codes.Unavailable {
			t.Errorf("a round of the closed turn: %v", err)
		}
		key, _, _ := oneRequest(t, kept)
		resp, err := c.Handle(t.Context(), &sharedosv1.HandleRequest{TurnId: "t-kept", Tool: "lg.ask", ArgumentsJson: []byte(`{}`), InputMethods: elicit, Round: 1,
			RequestState: kept.GetRequestState(), InputResponsesJson: []byte(`{"` + key + `":{"action":"accept","content":{"name":"Ada"}}}`)})
		if err != nil || !strings.Contains(string(resp.GetContentJson()), "Ada") {
			t.Errorf("the other turn's call: %v, %v", resp, err)
		}
	})
	t.Run("its client gave no answer", func(t *testing.T) {
		c, m, st := legacyUpstream(t)
		resp, err := c.Handle(t.Context(), &sharedosv1.HandleRequest{TurnId: "t", Tool: "lg.ask", ArgumentsJson: []byte(`{}`), InputMethods: elicit})
		if err != nil || resp.GetInputRequired() == nil {
			t.Fatalf("first round: %v, %v", resp, err)
		}
		h := upstream.Handlers{Upstreams: m}
		if h.CancelRound("t", []byte("upstream-own-state")) {
			t.Error("a state that names no parked call ended one")
		}
		// A handle names a call for its own turn's rounds only.
		if h.CancelRound("another-turn", resp.GetInputRequired().GetRequestState()) {
			t.Error("another turn ended the parked call")
		}
		if _, err := c.Handle(t.Context(), &sharedosv1.HandleRequest{TurnId: "another-turn", Tool: "lg.ask", ArgumentsJson: []byte(`{}`),
			InputMethods: elicit, Round: 1, RequestState: resp.GetInputRequired().GetRequestState(),
			InputResponsesJson: []byte(`{}`)}); status.Code(err) != codes.Unavailable {
			t.Errorf("another turn's round resumed the parked call: %v", err)
		}
		if !h.CancelRound("t", resp.GetInputRequired().GetRequestState()) {
			t.Fatal("the parked call was not found")
		}
		<-st.askFailed
		if h.CancelRound("t", resp.GetInputRequired().GetRequestState()) {
			t.Error("ended twice")
		}
	})
	t.Run("the upstream is closed", func(t *testing.T) {
		c, m, st := legacyUpstream(t)
		resp, err := c.Handle(t.Context(), &sharedosv1.HandleRequest{Tool: "lg.ask", ArgumentsJson: []byte(`{}`), InputMethods: elicit})
		if err != nil || resp.GetInputRequired() == nil {
			t.Fatalf("first round: %v, %v", resp, err)
		}
		_ = m.Close()
		<-st.askFailed
	})
}

// One turn cannot hold every parked slot of an upstream: past its bound a
// turn's next call that asks for input is refused, its upstream request
// ended, while another turn's call still parks.
func TestParkedCallsPerTurn(t *testing.T) {
	defer upstream.SetMaxParkedPerTurn(2)()
	c, m, st := legacyUpstream(t)
	ask := func(turn string) (*sharedosv1.HandleResponse, error) {
		return c.Handle(t.Context(), &sharedosv1.HandleRequest{TurnId: turn, Tool: "lg.ask", ArgumentsJson: []byte(`{}`), InputMethods: elicit})
	}
	for i := range 2 {
		if resp, err := ask("t-busy"); err != nil || resp.GetInputRequired() == nil {
			t.Fatalf("waiting call %d of the turn: %v, %v", i+1, resp, err)
		}
	}
	h := upstream.Handlers{Upstreams: m}
	// end lets the parked asks of turn fail, one at a time as the fixture
	// reports them, so that the upstream can close.
	end := func(turn string) int {
		n := h.CancelTurn(turn)
		for range n {
			<-st.askFailed
		}
		return n
	}
	if resp, err := ask("t-busy"); status.Code(err) != codes.ResourceExhausted {
		end("t-busy")
		t.Fatalf("a third waiting call of the turn: %v, %v; want ResourceExhausted", resp, err)
	}
	<-st.askFailed // the refused call's upstream request ended
	if resp, err := ask("t-other"); err != nil || resp.GetInputRequired() == nil {
		end("t-busy")
		t.Fatalf("another turn's call: %v, %v", resp, err)
	}
	for _, turn := range []struct {
		id     string
		parked int
	}{{"t-busy", 2}, {"t-other", 1}} {
		if n := end(turn.id); n != turn.parked {
			t.Errorf("turn %s had %d parked calls, want %d", turn.id, n, turn.parked)
		}
	}
}

// A panic in an upstream request (the client library's) is that call's
// Internal error, not catalog-svc's end.
func TestUpstreamRequestPanicIsAnError(t *testing.T) {
	err := upstream.RunOnWorker(func() error { panic("client bug") })
	if status.Code(err) != codes.Internal {
		t.Fatalf("a panicking request: %v", err)
	}
	if err := upstream.RunOnWorker(func() error { return nil }); err != nil {
		t.Fatalf("a request that returns: %v", err)
	}
}

// Progress of a call that spans rounds reaches the round waiting for it:
// the first step the first round's stream, the step after the answer the
// second's.
func TestProgressAcrossRounds(t *testing.T) {
	c, _, st := legacyUpstream(t)
	round := func(req *sharedosv1.HandleRequest) (progress []string, res *sharedosv1.HandleResponse) {
		t.Helper()
		s, err := c.Invoke(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		for {
			ev, err := s.Recv()
			if err != nil {
				t.Fatalf("stream ended before the result: %v (saw %v)", err, progress)
			}
			if p := ev.GetProgress(); p != nil {
				progress = append(progress, p.GetMessage())
				st.stepSeen <- struct{}{}
				continue
			}
			return progress, ev.GetResult()
		}
	}
	got, res := round(&sharedosv1.HandleRequest{CallId: "p1", TurnId: "t", Tool: "lg.askprogress", ArgumentsJson: []byte(`{}`), InputMethods: elicit})
	if strings.Join(got, ",") != "step 1" || res.GetInputRequired() == nil {
		t.Fatalf("first round: progress %v, result %v", got, res)
	}
	key, _, _ := oneRequest(t, res.GetInputRequired())
	got, res = round(&sharedosv1.HandleRequest{CallId: "p2", TurnId: "t", Tool: "lg.askprogress", ArgumentsJson: []byte(`{}`), InputMethods: elicit,
		Round: 1, RequestState: res.GetInputRequired().GetRequestState(), InputResponsesJson: []byte(`{"` + key + `":{"action":"accept","content":{}}}`)})
	if strings.Join(got, ",") != "step 2" || !strings.Contains(string(res.GetContentJson()), "answered accept") {
		t.Fatalf("second round: progress %v, result %v", got, res)
	}
}

// outcome is a call's response and error.
type outcome struct {
	resp *sharedosv1.HandleResponse
	err  error
}

// callInBackground calls tool of turn with args on c, its harness able to
// answer elicitations, and sends its outcome on the channel returned.
func callInBackground(ctx context.Context, c sharedosv1.ToolHandlerServiceClient, turn, tool, args string) <-chan outcome {
	done := make(chan outcome, 1)
	go func() {
		resp, err := c.Handle(ctx, &sharedosv1.HandleRequest{TurnId: turn, CallId: turn, Tool: tool, ArgumentsJson: []byte(args), InputMethods: elicit})
		done <- outcome{resp, err}
	}()
	return done
}

// exists reports whether path exists.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// A stdio server's request of a call its caller left (a timeout, a
// cancellation: the server heeds no notifications/cancelled and goes on)
// goes to no other call: over stdio nothing in the request names its call,
// and until the server answers the left call it may be that call's, so
// beside another call it is refused — never handed to the other turn's
// harness, whose answer would reach the first turn's tool. Once the server
// answered both, the next call's request is that call's again.
func TestALeftCallsRequestGoesToNoOtherCall(t *testing.T) {
	defer upstream.SetLeftCallGrace(time.Hour)() // B's tool asks within it, whatever the machine's pace
	h, marks := stdioUpstream(t, 0)
	c, err := h.h.Client(upstream.Target("sx"))
	if err != nil {
		t.Fatal(err)
	}
	bctx, leave := context.WithCancel(t.Context())
	b := callInBackground(bctx, c, "t-b", "sx.late", `{"secret":"B's secret: wire $9,000"}`)
	waitFile(t, filepath.Join(marks, "late-started"))
	leave()
	if o := <-b; status.Code(o.err) != codes.Canceled {
		t.Fatalf("turn B's call, left: %v, %v", o.resp, o.err)
	}
	actx, cancelA := context.WithCancel(t.Context())
	defer cancelA()
	a := callInBackground(actx, c, "t-a", "sx.block", `{}`)
	waitFile(t, filepath.Join(marks, "started")) // A's call runs on the server
	if err := os.WriteFile(filepath.Join(marks, "late-go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// B's tool asks now; A's call, which asks nothing, must not end with
	// that question before the tool hears its request refused.
	for !exists(filepath.Join(marks, "late-refused")) {
		if exists(filepath.Join(marks, "late-answered")) {
			t.Fatal("turn B's tool had its question answered, by turn A's harness")
		}
		select {
		case o := <-a:
			t.Fatalf("turn A's call ended with %v, %v: the server's request of turn B's call went to it", o.resp, o.err)
		case <-t.Context().Done():
			t.Fatal("turn B's tool never heard its request refused")
		case <-time.After(10 * time.Millisecond): // polls the condition
		}
	}
	cancelA()
	if o := <-a; status.Code(o.err) != codes.Canceled {
		t.Errorf("turn A's call, cancelled: %v, %v", o.resp, o.err)
	}
	waitFile(t, filepath.Join(marks, "ended"))
	for h.m.Unanswered("sx") != 0 { // the server answered both calls
		select {
		case <-t.Context().Done():
			t.Fatalf("%d calls still unanswered", h.m.Unanswered("sx"))
		case <-time.After(10 * time.Millisecond): // polls the condition
		}
	}
	resp, err := c.Handle(t.Context(), &sharedosv1.HandleRequest{TurnId: "t-c", Tool: "sx.ask", ArgumentsJson: []byte(`{}`), InputMethods: elicit})
	if err != nil || resp.GetInputRequired() == nil {
		t.Fatalf("the next call's own request: %v, %v", resp, err)
	}
	key, _, msg := oneRequest(t, resp.GetInputRequired())
	if msg != "Your name? (1)" {
		t.Errorf("the next call was asked %q", msg)
	}
	resp, err = c.Handle(t.Context(), &sharedosv1.HandleRequest{TurnId: "t-c", Tool: "sx.ask", ArgumentsJson: []byte(`{}`), InputMethods: elicit, Round: 1,
		RequestState: resp.GetInputRequired().GetRequestState(), InputResponsesJson: []byte(`{"` + key + `":{"action":"decline"}}`)})
	if err != nil || !strings.Contains(string(resp.GetContentJson()), "decline") {
		t.Errorf("the next call's answer: %v, %v", resp, err)
	}
}

// A call whose caller left, and which its stdio server never answers (a
// server that heeds notifications/cancelled sends no answer), stops being
// the server's candidate once leftCallGrace passed: its wait ends, and
// another turn's call is then the one its server's next request goes to
// (review: from the first cancellation on, every other call's request was
// refused, and each left call kept a goroutine until the session ended).
func TestALeftCallUnansweredStopsBeingACandidate(t *testing.T) {
	defer upstream.SetLeftCallGrace(50 * time.Millisecond)()
	h, marks := stdioUpstream(t, 0)
	c, err := h.h.Client(upstream.Target("sx"))
	if err != nil {
		t.Fatal(err)
	}
	bctx, leave := context.WithCancel(t.Context())
	b := callInBackground(bctx, c, "t-b", "sx.late", `{"secret":"x"}`) // never answered: late-go never comes
	waitFile(t, filepath.Join(marks, "late-started"))
	leave()
	if o := <-b; status.Code(o.err) != codes.Canceled {
		t.Fatalf("turn B's call, left: %v, %v", o.resp, o.err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for h.m.Unanswered("sx") != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d calls still the server's, their callers gone past the grace", h.m.Unanswered("sx"))
		}
		time.Sleep(time.Millisecond) // polls the condition
	}
	resp, err := c.Handle(t.Context(), &sharedosv1.HandleRequest{TurnId: "t-c", Tool: "sx.ask", ArgumentsJson: []byte(`{}`), InputMethods: elicit})
	if err != nil || resp.GetInputRequired() == nil {
		t.Fatalf("the next call's own request: %v, %v (refused as ambiguous)", resp, err)
	}
}

// A call parked on its stdio server's request, whose harness never comes
// back (a 2026-07-28 harness that never retries), holds its own call, not
// every other turn's requests to that server: once it has been parked the
// quiet period, another turn's call is the one candidate for the server's
// next request. Within the quiet period both are, and the request is
// refused.
func TestAParkedCallHoldsNoOtherTurnsRequests(t *testing.T) {
	h, _ := stdioUpstream(t, 0)
	c, err := h.h.Client(upstream.Target("sx"))
	if err != nil {
		t.Fatal(err)
	}
	ask := func(turn string) (*sharedosv1.HandleResponse, error) {
		return c.Handle(t.Context(), &sharedosv1.HandleRequest{TurnId: turn, Tool: "sx.ask", ArgumentsJson: []byte(`{}`), InputMethods: elicit})
	}
	if resp, err := ask("t-idle"); err != nil || resp.GetInputRequired() == nil {
		t.Fatalf("the idle turn's call: %v, %v", resp, err)
	}
	t.Run("within the quiet period", func(t *testing.T) {
		defer upstream.SetParkedQuiet(time.Hour)()
		resp, err := ask("t-early")
		if err != nil || !resp.GetIsError() || !strings.Contains(string(resp.GetContentJson()), "no answer") {
			t.Errorf("a request beside a call just parked: %v, %v; want it refused", resp, err)
		}
	})
	defer upstream.SetParkedQuiet(0)()
	resp, err := ask("t-other")
	if err != nil || resp.GetInputRequired() == nil {
		t.Fatalf("another turn's call beside the parked one: %v, %v; want its own round", resp, err)
	}
	key, _, msg := oneRequest(t, resp.GetInputRequired())
	if msg != "Your name? (1)" {
		t.Errorf("asked %q", msg)
	}
	resp, err = c.Handle(t.Context(), &sharedosv1.HandleRequest{TurnId: "t-other", Tool: "sx.ask", ArgumentsJson: []byte(`{}`), InputMethods: elicit, Round: 1,
		RequestState: resp.GetInputRequired().GetRequestState(), InputResponsesJson: []byte(`{"` + key + `":{"action":"accept","content":{"name":"Ada"}}}`)})
	if err != nil || !strings.Contains(string(resp.GetContentJson()), "Ada") {
		t.Errorf("the other turn's answer: %v, %v", resp, err)
	}
	if n := (upstream.Handlers{Upstreams: h.m}).CancelTurn("t-idle"); n != 1 {
		t.Errorf("the idle turn had %d parked calls, want 1", n)
	}
}
