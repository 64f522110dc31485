package app_test

import (
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
	f.kernel.Dispatch = func(_ context.Context, call *sharedosv1.ToolCall) (*sharedosv1.ToolResult, bool) {
		switch {
		case call.GetTool() != "files.read" || call.GetEdgeRejection() != "":
			return nil, false
		case call.GetResume() != nil:
			return &sharedosv1.ToolResult{Status: sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED,
				ContentJson: []byte(`[{"type":"text","text":"resumed ` + string(call.GetResume().GetRequestState()) + `"}]`)}, true
		case !slices.Contains(call.GetInputMethods(), "elicitation/create"):
			r := outcome.Failed(outcome.MissingCapability, "the tool needs input the client did not declare it can give: elicitation/create")
			r.MissingInputMethods = []string{"elicitation/create"}
			return r, true
		}
		return &sharedosv1.ToolResult{Status: sharedosv1.OperationStatus_OPERATION_STATUS_INPUT_REQUIRED,
			Input: &sharedosv1.InputRound{AttemptId: "attempt-1", Round: 1, ExpiresAt: timestamppb.New(time.Now().Add(time.Minute)),
				Input: &sharedosv1.InputRequired{
					InputRequestsJson: []byte(`{"ok":{"method":"elicitation/create","params":{"message":"Sure?","requestedSchema":{"type":"object","properties":{"ok":{"type":"boolean"}}}}}}`),
					RequestState:      []byte("p1"),
				}}}, true
	}
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
	if done.status != http.StatusOK || !strings.Contains(string(done.body), "resumed p1") {
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
