package app_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/outcome"
)

// roundCall is a 2026-07-28 tools/call of files.read declaring caps, with
// extra params members (inputResponses, requestState) spliced in.
func roundCall(id int, caps, extra string) string {
	meta := strings.Replace(modernMeta, `"io.modelcontextprotocol/clientCapabilities":{}`,
		`"io.modelcontextprotocol/clientCapabilities":`+caps, 1)
	return `{"jsonrpc":"2.0","id":` + itoa(id) + `,"method":"tools/call","params":{"name":"files.read","arguments":{"path":"/public/a.txt"},` +
		extra + meta + `}}`
}

// TestInputRoundsOverHTTP (the MCP surface, item 3): on 2026-07-28 a tool
// that needs input is answered resultType input_required with a sealed
// requestState; the retry resumes the attempt; a requestState that does
// not open is HTTP 400 / -32602, an undeclared capability HTTP 400 /
// -32021 with data.requiredCapabilities, malformed inputResponses 400 /
// -32602 — each refusal recorded, none resumed.
func TestInputRoundsOverHTTP(t *testing.T) {
	f := newFixture(t)
	f.kernel.Dispatch = askingDispatch
	tr := f.bridge.Open(t)
	send := func(body string) rawResp {
		t.Helper()
		return do(t, rawReq{url: tr.GetMcpUrl(), token: tr.GetToken(), modern: true, body: body})
	}

	resp := send(roundCall(1, `{"elicitation":{}}`, ""))
	var first struct {
		Result struct {
			ResultType    string                     `json:"resultType"`
			InputRequests map[string]json.RawMessage `json:"inputRequests"`
			RequestState  string                     `json:"requestState"`
		} `json:"result"`
	}
	if resp.status != http.StatusOK || json.Unmarshal(resp.body, &first) != nil || first.Result.ResultType != "input_required" ||
		first.Result.InputRequests["ok"] == nil || first.Result.RequestState == "" {
		t.Fatalf("first round: %d %s", resp.status, resp.body)
	}
	state := first.Result.RequestState

	answers := `"inputResponses":{"ok":{"action":"accept","content":{"ok":true}}},`
	done := send(roundCall(2, `{"elicitation":{}}`, answers+`"requestState":`+quoteJSON(state)+`,`))
	if done.status != http.StatusOK || !strings.Contains(string(done.body), "state p1") {
		t.Fatalf("retry: %d %s", done.status, done.body)
	}

	for _, c := range []struct {
		name, body string
		code       int
		data       string
	}{
		{"tampered state", roundCall(3, `{"elicitation":{}}`, answers+`"requestState":`+quoteJSON(state+"-TAMPERED")+`,`), -32602, ""},
		{"state of a number", roundCall(4, `{"elicitation":{}}`, `"requestState":7,`), -32602, ""},
		{"inputResponses member not an object", roundCall(5, `{"elicitation":{}}`, `"inputResponses":{"ok":12345},`), -32602, ""},
		{"inputResponses null", roundCall(6, `{"elicitation":{}}`, `"inputResponses":null,`), -32602, ""},
		{"undeclared capability", roundCall(7, `{}`, ""), -32021, `"requiredCapabilities":{"elicitation":{}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := len(f.kernel.Calls())
			resp := send(c.body)
			code, _ := resp.rpcError()
			if resp.status != http.StatusBadRequest || code != c.code || !strings.Contains(string(resp.body), c.data) {
				t.Fatalf("answered %d %s, want 400 and JSON-RPC %d", resp.status, resp.body, c.code)
			}
			calls := f.kernel.Calls()[before:]
			if len(calls) != 1 || calls[0].GetResume() != nil {
				t.Fatalf("kernel saw %v: want the one attempt recorded and nothing resumed", calls)
			}
			if c.code == -32602 && calls[0].GetEdgeRejection() == "" {
				t.Errorf("refusal not recorded as such: %v", calls[0])
			}
		})
	}
}

// initWith opens a 2025-11-25 session declaring caps and returns its headers.
func initWith(t *testing.T, lease *sharedosv1.TurnLease, caps string) map[string]string {
	t.Helper()
	body := strings.Replace(legacyInit, `"capabilities":{}`, `"capabilities":`+caps, 1)
	init := do(t, rawReq{url: lease.GetMcpUrl(), token: lease.GetToken(), body: body})
	sid := init.header.Get("Mcp-Session-Id")
	if init.status != 200 || sid == "" {
		t.Fatalf("initialize: %d %s", init.status, init.body)
	}
	return map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"}
}

// events reads a POST's event stream one JSON-RPC message at a time.
func events(t *testing.T, lease *sharedosv1.TurnLease, headers map[string]string, body string) (<-chan map[string]json.RawMessage, func()) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, lease.GetMcpUrl(), strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+lease.GetToken())
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan map[string]json.RawMessage, 8)
	go func() {
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var m map[string]json.RawMessage
			if json.Unmarshal([]byte(line), &m) == nil {
				out <- m
			}
		}
	}()
	return out, func() { resp.Body.Close() }
}

func next(t *testing.T, ch <-chan map[string]json.RawMessage) map[string]json.RawMessage {
	t.Helper()
	select {
	case m, ok := <-ch:
		if !ok {
			t.Fatal("the stream ended")
		}
		return m
	case <-time.After(30 * time.Second):
		t.Fatal("no event")
	}
	return nil
}

// askingDispatch is a kernel whose files.read needs an elicitation answer
// first (INPUT_REQUIRED, then the resumption echoes the answers).
func askingDispatch(_ context.Context, call *sharedosv1.ToolCall) (*sharedosv1.ToolResult, bool) {
	switch {
	case call.GetEdgeRejection() != "":
		return outcome.Failed(outcome.InvalidRequest, call.GetEdgeRejection()), true
	case call.GetTool() != "files.read":
		return nil, false
	case call.GetResume() != nil:
		return &sharedosv1.ToolResult{Status: sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED,
			ContentJson: []byte(`[{"type":"text","text":` + quoteJSON("answered "+string(call.GetInputResponsesJson())+
				" state "+string(call.GetResume().GetRequestState())) + `}]`)}, true
	case !slices.Contains(call.GetInputMethods(), "elicitation/create"):
		r := outcome.Failed(outcome.MissingCapability, "the tool needs input the client did not declare it can give: elicitation/create")
		r.MissingInputMethods = []string{"elicitation/create"}
		return r, true
	}
	return &sharedosv1.ToolResult{Status: sharedosv1.OperationStatus_OPERATION_STATUS_INPUT_REQUIRED,
		Input: &sharedosv1.InputRound{AttemptId: "attempt-1", Round: 1, ExpiresAt: timestamppb.New(time.Now().Add(time.Minute)),
			Input: &sharedosv1.InputRequired{RequestState: []byte("p1"),
				InputRequestsJson: []byte(`{"ok":{"method":"elicitation/create","params":{"message":"Sure?","requestedSchema":{"type":"object","properties":{"ok":{"type":"boolean","default":true}}}}}}`)}}}, true
}

// askedOnALegacySession calls files.read on a 2025-era session that
// declared elicitation, over a kernel that asks for input first, and
// returns once the bridge asked: the call's event stream, the function
// that leaves it, and how many calls the kernel had seen before.
func askedOnALegacySession(t *testing.T) (*fixture, <-chan map[string]json.RawMessage, func(), int) {
	t.Helper()
	f := newFixture(t)
	f.kernel.Dispatch = askingDispatch
	tr := f.bridge.Open(t)
	session := initWith(t, tr, `{"elicitation":{}}`)
	before := len(f.kernel.Calls())
	stream, stop := events(t, tr, session, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"files.read","arguments":{"path":"/public/a.txt"}}}`)
	if asked := next(t, stream); string(asked["method"]) != `"elicitation/create"` {
		stop()
		t.Fatalf("asked %v", asked)
	}
	return f, stream, stop, before
}

// A 2025-era client that leaves (or cancels) while the bridge asks it
// for a round's input ends the attempt cancelled — the round's notice,
// abandoned on the resumption — as any call its client gave up; it was
// recorded failed/invalid_request ("did not answer … context canceled").
func TestALegacyClientLeavingARoundIsCancelled(t *testing.T) {
	f, _, stop, before := askedOnALegacySession(t)
	stop() // the client leaves while asked
	deadline := time.Now().Add(30 * time.Second)
	for {
		calls := f.kernel.Calls()[before:]
		if len(calls) == 2 {
			n := calls[1]
			if !n.GetAbandoned() || n.GetAbandonedCode() != "" || n.GetResume().GetAttemptId() != "attempt-1" || n.GetEdgeRejection() != "" {
				t.Fatalf("the kernel was told %v: want the round's resumption abandoned by its client (cancelled)", n)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the kernel saw %v: want the call and the round's notice", calls)
		}
		time.Sleep(time.Millisecond) // polls the condition
	}
}

// A 2025-era client that ends its session with DELETE while the bridge asks
// it for a round's input ends the attempt cancelled, as a client that
// leaves does (the round's resumption abandoned by its client), and the
// call's stream ends without a result: no answer of the session is taken
// after the DELETE, whatever protocol version it claims. A client-to-server
// response under a 2026-07-28 header is refused as mcp-go refuses one
// (400, -32600), on a live session as on an ended one. Before, the call
// waited for the round to expire (10 minutes) while its answer was refused
// 404, and the same answer sent with a 2026-07-28 header was taken (202)
// and completed it.
func TestDeletingALegacySessionEndsItsAskedRounds(t *testing.T) {
	f := newFixture(t)
	f.kernel.Dispatch = askingDispatch
	tr := f.bridge.Open(t)
	session := initWith(t, tr, `{"elicitation":{}}`)
	before := len(f.kernel.Calls())
	stream, stop := events(t, tr, session, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"files.read","arguments":{"path":"/public/a.txt"}}}`)
	defer stop()
	asked := next(t, stream)
	if string(asked["method"]) != `"elicitation/create"` {
		t.Fatalf("asked %v", asked)
	}
	answer := `{"jsonrpc":"2.0","id":` + string(asked["id"]) + `,"result":{"action":"accept","content":{"ok":true}}}`
	modern := map[string]string{"Mcp-Session-Id": session["Mcp-Session-Id"], "Mcp-Protocol-Version": "2026-07-28"}
	refusedModern := func(when string) {
		t.Helper()
		r := do(t, rawReq{url: tr.GetMcpUrl(), token: tr.GetToken(), headers: modern, body: answer})
		if code, _ := r.rpcError(); r.status != http.StatusBadRequest || code != -32600 {
			t.Errorf("the answer under a 2026-07-28 header %s: %d %s, want 400 and -32600", when, r.status, r.body)
		}
	}
	refusedModern("on the live session")

	if r := do(t, rawReq{method: http.MethodDelete, url: tr.GetMcpUrl(), token: tr.GetToken(), headers: session}); r.status != http.StatusOK {
		t.Fatalf("DELETE: %d %s", r.status, r.body)
	}
	select {
	case m, ok := <-stream:
		if ok {
			t.Fatalf("the call's stream carried %v after the DELETE, want it ended without a result", m)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the call's stream did not end after the DELETE")
	}
	calls := f.kernel.Calls()[before:]
	if len(calls) != 2 {
		t.Fatalf("the kernel saw %v: want the call and the round's notice", calls)
	}
	if n := calls[1]; !n.GetAbandoned() || n.GetAbandonedCode() != "" || n.GetResume().GetAttemptId() != "attempt-1" || n.GetEdgeRejection() != "" {
		t.Fatalf("the kernel was told %v: want the round's resumption abandoned by its client (cancelled)", n)
	}

	refusedModern("on the ended session")
	if r := do(t, rawReq{url: tr.GetMcpUrl(), token: tr.GetToken(), headers: session, body: answer}); r.status != http.StatusNotFound {
		t.Errorf("the answer on the ended session: %d %s, want 404", r.status, r.body)
	}
	if got := len(f.kernel.Calls()) - before; got != 2 {
		t.Errorf("the kernel saw %d calls, want still the 2: no answer continued the attempt", got)
	}
}

// A bridge that begins to shut down while a 2025-era client is asked for a
// round's input (it takes no new answer POSTs then) ends the round at
// once: the client is answered failed/internal and the kernel told the
// same, abandoned with that code on the resumption. It used to wait out
// its drain until the connection was cut and record the attempt cancelled,
// as if the client had left.
func TestABridgeShuttingDownEndsItsAskedRounds(t *testing.T) {
	f, stream, stop, before := askedOnALegacySession(t)
	defer stop()
	f.bridge.Stop()
	answer := next(t, stream)
	var res struct {
		IsError bool `json:"isError"`
		Meta    map[string]struct {
			Code string `json:"code"`
		} `json:"_meta"`
	}
	if err := json.Unmarshal(answer["result"], &res); err != nil || !res.IsError || res.Meta[outcome.MetaKey].Code != outcome.Internal {
		t.Fatalf("the client was answered %s: want a failed/internal result", answer["result"])
	}
	calls := f.kernel.Calls()[before:]
	if len(calls) != 2 {
		t.Fatalf("the kernel saw %v: want the call and the round's notice", calls)
	}
	if n := calls[1]; !n.GetAbandoned() || n.GetAbandonedCode() != outcome.Internal || n.GetResume().GetAttemptId() != "attempt-1" {
		t.Fatalf("the kernel was told %v: want the round's resumption abandoned failed/internal", n)
	}
}

// TestInputRoundsOnALegacySession (the MCP surface, item 3, 2025 eras): a
// session that declared elicitation gets the tool's input request as an
// elicitation/create request on the call's own stream; its answer, POSTed
// with the session id, continues the same attempt and the result follows
// on that stream. A client that answers with an error ends the attempt
// failed, recorded on it; a session that declared nothing gets a failed
// result and is never asked.
func TestInputRoundsOnALegacySession(t *testing.T) {
	f := newFixture(t)
	f.kernel.Dispatch = askingDispatch
	tr := f.bridge.Open(t)
	session := initWith(t, tr, `{"elicitation":{}}`)
	call := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"files.read","arguments":{"path":"/public/a.txt"}}}`

	answer := func(reply func(id json.RawMessage) string) (map[string]json.RawMessage, []*sharedosv1.ToolCall) {
		before := len(f.kernel.Calls())
		stream, stop := events(t, tr, session, call)
		defer stop()
		asked := next(t, stream)
		var params struct {
			Message         string `json:"message"`
			RequestedSchema struct {
				Properties map[string]map[string]any `json:"properties"`
			} `json:"requestedSchema"`
		}
		if string(asked["method"]) != `"elicitation/create"` || json.Unmarshal(asked["params"], &params) != nil ||
			params.Message != "Sure?" || params.RequestedSchema.Properties["ok"]["default"] != true {
			t.Fatalf("asked %v: want the provider's elicitation/create, params verbatim", asked)
		}
		resp := do(t, rawReq{url: tr.GetMcpUrl(), token: tr.GetToken(), headers: session, body: reply(asked["id"])})
		if resp.status != http.StatusAccepted {
			t.Fatalf("the answer POST: %d %s", resp.status, resp.body)
		}
		return next(t, stream), f.kernel.Calls()[before:]
	}

	final, calls := answer(func(id json.RawMessage) string {
		return `{"jsonrpc":"2.0","id":` + string(id) + `,"result":{"action":"accept","content":{"ok":true}}}`
	})
	if string(final["id"]) != "9" || !strings.Contains(string(final["result"]), `answered {\"ok\":{\"action\":\"accept\",\"content\":{\"ok\":true}}}`) {
		t.Fatalf("final %v", final)
	}
	if len(calls) != 2 || calls[1].GetResume().GetAttemptId() != "attempt-1" || !calls[0].GetInputRounds() {
		t.Fatalf("kernel saw %v: want the call, then its resumption", calls)
	}

	final, calls = answer(func(id json.RawMessage) string {
		return `{"jsonrpc":"2.0","id":` + string(id) + `,"error":{"code":-1,"message":"user declined to say"}}`
	})
	if !strings.Contains(string(final["result"]), "failed: ") || len(calls) != 2 || calls[1].GetResume() == nil ||
		!strings.Contains(calls[1].GetEdgeRejection(), "did not answer") {
		t.Fatalf("an error answer: final %v, kernel saw %v", final, calls)
	}

	// An answer under a session id this turn never minted is refused.
	forged := map[string]string{"Mcp-Session-Id": "mcp-s2-x.e.forged", "Mcp-Protocol-Version": "2025-11-25"}
	if r := do(t, rawReq{url: tr.GetMcpUrl(), token: tr.GetToken(), headers: forged,
		body: `{"jsonrpc":"2.0","id":"sharedos-ask-0000","result":{"action":"accept"}}`}); r.status != http.StatusNotFound {
		t.Errorf("an answer on a forged session: %d %s, want 404", r.status, r.body)
	}
	// An answer nobody waits for (another session's id, a guess) is not taken.
	stray := do(t, rawReq{url: tr.GetMcpUrl(), token: tr.GetToken(), headers: session,
		body: `{"jsonrpc":"2.0","id":"sharedos-ask-0000","result":{"action":"accept"}}`})
	if stray.status < 400 {
		t.Errorf("a stray answer was taken: %d %s", stray.status, stray.body)
	}

	plain := initWith(t, tr, `{}`)
	resp := do(t, rawReq{url: tr.GetMcpUrl(), token: tr.GetToken(), headers: plain, body: call})
	if resp.status != http.StatusOK || !strings.Contains(string(resp.body), "failed: the tool needs input") {
		t.Fatalf("a session without capabilities: %d %s", resp.status, resp.body)
	}
}
