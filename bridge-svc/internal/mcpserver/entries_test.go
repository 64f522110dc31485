package mcpserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/sharedos/toolshare/bridge-svc/internal/forward"
	"github.com/sharedos/toolshare/bridge-svc/internal/leases"
	"github.com/sharedos/toolshare/bridge-svc/internal/leases/memory"
	"github.com/sharedos/toolshare/bridge-svc/internal/leases/storetest"
	"github.com/sharedos/toolshare/bridge-svc/internal/mcpserver"
	"github.com/sharedos/toolshare/bridge-svc/internal/protocol"
	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/outcome"
	"github.com/sharedos/toolshare/services/contract/resourceuri"
)

// entryKernel is a kernel client that gets prompts and reads resources
// too: it keeps every call it is sent, edge rejections included, and
// answers each with answer.
type entryKernel struct {
	answer func(*sharedosv1.ToolCall) *sharedosv1.ToolResult

	mu    sync.Mutex
	calls []*sharedosv1.ToolCall
}

func (k *entryKernel) note(c *sharedosv1.ToolCall) (*sharedosv1.ToolResult, error) {
	k.mu.Lock()
	k.calls = append(k.calls, c)
	k.mu.Unlock()
	res := k.answer(c)
	res.CallId = c.GetCallId()
	return res, nil
}

func (k *entryKernel) InvokeTool(_ context.Context, c *sharedosv1.ToolCall, _ ...grpc.CallOption) (*sharedosv1.ToolResult, error) {
	return k.note(c)
}

func (k *entryKernel) GetPrompt(_ context.Context, c *sharedosv1.ToolCall, _ ...grpc.CallOption) (*sharedosv1.ToolResult, error) {
	return k.note(c)
}

func (k *entryKernel) ReadResource(_ context.Context, c *sharedosv1.ToolCall, _ ...grpc.CallOption) (*sharedosv1.ToolResult, error) {
	return k.note(c)
}

// since returns the calls sent after the first n.
func (k *entryKernel) since(n int) []*sharedosv1.ToolCall {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]*sharedosv1.ToolCall(nil), k.calls[n:]...)
}

func (k *entryKernel) sent() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.calls)
}

// TestAPinnedTemplateURIWithReservedCharactersIsRead: a URI the turn's
// pinned template test://template/{id}/data takes by resourceuri.Match (the
// kernel's rule) is read on either era, though mcp-go's own matcher takes
// no ':', '@', '!' or '=' for a {var}: exactly one attempt reaches the
// kernel, not as an edge rejection, and the client gets the contents read;
// the kernel's refusal of such a URI comes back with its outcome and
// data.uri (ADR 0018). mcp-go answered these with its bare "handler not
// found", which the bridge recorded as a protocol error and never read.
func TestAPinnedTemplateURIWithReservedCharactersIsRead(t *testing.T) {
	const refused = "test://template/gone:1/data"
	k := &entryKernel{answer: func(c *sharedosv1.ToolCall) *sharedosv1.ToolResult {
		if c.GetTool() == refused {
			return outcome.Denied(outcome.ToolUnavailable, "no such resource")
		}
		content, _ := json.Marshal([]map[string]string{{"uri": c.GetTool(), "text": "read"}})
		return &sharedosv1.ToolResult{Status: sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED, ContentJson: content}
	}}
	store := memory.New()
	mux := serve(mcpserver.Config{Store: store, Forwarder: &forward.Forwarder{Invoker: k}})
	l, token := createLease(t, store, time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
	init := post(mux, l.TurnID, token, legacyInitialize, nil)
	sid := init.Header().Get("Mcp-Session-Id")
	if init.Code != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %s", init.Code, init.Body)
	}
	eras := []struct {
		name string
		read func(uri string) (status int, body []byte)
	}{
		{"2026-07-28", func(uri string) (int, []byte) {
			w := post(mux, l.TurnID, token, `{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"`+uri+
				`","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`,
				map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "resources/read", "Mcp-Name": uri})
			return w.Code, w.Body.Bytes()
		}},
		{"2025-11-25", func(uri string) (int, []byte) {
			w := post(mux, l.TurnID, token, `{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"`+uri+`"}}`,
				map[string]string{"Mcp-Protocol-Version": "2025-11-25", "Mcp-Session-Id": sid})
			return w.Code, w.Body.Bytes()
		}},
	}
	for _, era := range eras {
		for _, uri := range []string{"test://template/7/data", "test://template/a:b/data", "test://template/a@b/data",
			"test://template/a!b/data", "test://template/a=b/data", refused} {
			t.Run(era.name+" "+uri, func(t *testing.T) {
				before := k.sent()
				status, body := era.read(uri)
				calls := k.since(before)
				if len(calls) != 1 || calls[0].GetTool() != uri || calls[0].GetKind() != sharedosv1.CallKind_CALL_KIND_RESOURCE ||
					calls[0].GetEdgeRejection() != "" {
					t.Fatalf("kernel calls %v, want one read of %s that is no edge rejection (answered %d %s)", calls, uri, status, body)
				}
				var answer struct {
					Result struct {
						Contents []struct{ URI, Text string }
					}
					Error struct {
						Code int
						Data map[string]any
					}
				}
				if err := json.Unmarshal(body, &answer); err != nil {
					t.Fatalf("answer %d %s: %v", status, body, err)
				}
				if uri == refused {
					meta, _ := answer.Error.Data[outcome.MetaKey].(map[string]any)
					if answer.Error.Code != protocol.CodeInvalidParams || answer.Error.Data["uri"] != uri ||
						meta["status"] != "denied" || meta["callId"] != calls[0].GetCallId() {
						t.Fatalf("the kernel's refusal answered %d %s, want -32602 with data.uri and the record's outcome", status, body)
					}
					return
				}
				if status != http.StatusOK || len(answer.Result.Contents) != 1 || answer.Result.Contents[0].URI != uri ||
					!strings.Contains(string(body), `"text":"read"`) {
					t.Fatalf("answered %d %s, want the contents of %s", status, body, uri)
				}
			})
		}
	}
}

// TestAResourceURIOverTheBoundIsInvalidParams (attack run C4: one
// resources/read of a 20,000-character URI cost the bridge 20 s of CPU
// matching it against a turn's 62 long pinned templates): a URI longer
// than a resource URI's bound (resourceuri.MaxURIBytes, the catalogue's) is
// refused -32602 by the bridge's parse, before any template is matched,
// on either era, and recorded as every invalid params of an attempt on a
// live turn is (one edge rejection of kind resource); one at the bound is
// read through the pinned template as before.
func TestAResourceURIOverTheBoundIsInvalidParams(t *testing.T) {
	k, mux, l, token, sid := legacySession(t)
	uriOf := func(n int) string {
		return "test://template/" + strings.Repeat("a", n-len("test://template//data")) + "/data"
	}
	for _, era := range []struct {
		name    string
		headers func(uri string) map[string]string
		meta    string
		status  int // of the refusal
	}{
		{"2025-11-25", func(string) map[string]string {
			return map[string]string{"Mcp-Protocol-Version": "2025-11-25", "Mcp-Session-Id": sid}
		}, ``, http.StatusOK},
		{"2026-07-28", func(uri string) map[string]string {
			return map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "resources/read", "Mcp-Name": uri}
		}, `,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`, http.StatusBadRequest},
	} {
		for _, n := range []int{resourceuri.MaxURIBytes, resourceuri.MaxURIBytes + 1, 20000} {
			t.Run(era.name+" "+strconv.Itoa(n), func(t *testing.T) {
				uri := uriOf(n)
				before := k.sent()
				w := post(mux, l.TurnID, token, `{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"`+uri+`"`+era.meta+`}}`, era.headers(uri))
				calls := k.since(before)
				if n <= resourceuri.MaxURIBytes {
					if w.Code != http.StatusOK || strings.Contains(w.Body.String(), `"error"`) || len(calls) != 1 || calls[0].GetEdgeRejection() != "" {
						t.Fatalf("a URI at the bound: %d %.300s, kernel saw %v; want it read", w.Code, w.Body, calls)
					}
					return
				}
				if w.Code != era.status || !strings.Contains(w.Body.String(), `"code":-32602`) || !strings.Contains(w.Body.String(), "longer than 2048 bytes") {
					t.Errorf("a %d-byte URI answered %d %.300s; want %d, -32602 naming the bound", n, w.Code, w.Body, era.status)
				}
				if len(calls) != 1 || calls[0].GetEdgeRejection() == "" || calls[0].GetKind() != sharedosv1.CallKind_CALL_KIND_RESOURCE || calls[0].GetTool() != uri {
					t.Errorf("kernel saw %d calls %.300v; want one record-only rejection of the read", len(calls), calls)
				}
			})
		}
	}
}

// A turn that pinned a resource template RFC 6570 does not allow ('|' in a
// literal: pinned before the catalogue refused such templates) is served
// all the same, without it: mcp-go's NewResourceTemplate panics on one,
// which failed every request of the turn, initialize first.
func TestATurnPinningATemplateMCPCannotParseIsServed(t *testing.T) {
	k := &entryKernel{answer: func(*sharedosv1.ToolCall) *sharedosv1.ToolResult {
		return &sharedosv1.ToolResult{Status: sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED, ContentJson: []byte(`[]`)}
	}}
	store := memory.New()
	mux := serve(mcpserver.Config{Store: store, Forwarder: &forward.Forwarder{Invoker: k}})
	l := storetest.Sample(t, time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
	l.Resources = append(l.Resources, &sharedosv1.PublishedResource{Uri: "test://pipe/{id}|raw", Template: true, Name: "pipe"})
	token, hash, err := leases.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	l.TokenHash = hash
	if err := store.Create(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	init := post(mux, l.TurnID, token, legacyInitialize, nil)
	if init.Code != http.StatusOK {
		t.Fatalf("initialize: %d %s", init.Code, init.Body)
	}
	list := post(mux, l.TurnID, token, `{"jsonrpc":"2.0","id":2,"method":"resources/templates/list","params":{}}`,
		map[string]string{"Mcp-Protocol-Version": "2025-11-25", "Mcp-Session-Id": init.Header().Get("Mcp-Session-Id")})
	if list.Code != http.StatusOK || !strings.Contains(list.Body.String(), "test://template/{id}/data") || strings.Contains(list.Body.String(), "pipe") {
		t.Errorf("resources/templates/list: %d %s; want the turn's other templates, not the one MCP cannot parse", list.Code, list.Body)
	}
}

// TestEntryRefusalsReachClientsWithTheirOutcome: a refused prompts/get or
// resources/read is a JSON-RPC error carrying the record's outcome (ADR
// 0018 §5) under the HTTP status mcp-go gives its own errors in the
// request's era: 200 on 2025 eras, where the official TypeScript client
// reads a JSON-RPC error only from a 2xx (any other status reached it as a
// bare StreamableHTTPError, the outcome lost); on 2026-07-28 400 for
// -32602 and 200 for -32001 and -32603. Before, every one was a 400.
func TestEntryRefusalsReachClientsWithTheirOutcome(t *testing.T) {
	k := &entryKernel{answer: func(c *sharedosv1.ToolCall) *sharedosv1.ToolResult {
		var args map[string]string
		_ = json.Unmarshal(c.GetArgumentsJson(), &args)
		switch args["mode"] {
		case "denied":
			return outcome.Denied(outcome.PermissionDenied, "not for this role")
		case "failed":
			return outcome.Failed(outcome.HandlerError, "the provider broke")
		case "bad":
			return outcome.Failed(outcome.InvalidArguments, "mode is not one of the declared")
		}
		return outcome.Denied(outcome.ToolUnavailable, "not in this turn's catalogue")
	}}
	store := memory.New()
	mux := serve(mcpserver.Config{Store: store, Forwarder: &forward.Forwarder{Invoker: k}})
	l, token := createLease(t, store, time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
	init := post(mux, l.TurnID, token, legacyInitialize, nil)
	sid := init.Header().Get("Mcp-Session-Id")
	if init.Code != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %s", init.Code, init.Body)
	}
	const modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	request := func(modern bool, method, target, params string) (int, []byte) {
		member := map[string]string{"prompts/get": "name", "resources/read": "uri"}[method]
		body := `{"jsonrpc":"2.0","id":7,"method":"` + method + `","params":{"` + member + `":"` + target + `"` + params
		headers := map[string]string{"Mcp-Protocol-Version": "2025-11-25", "Mcp-Session-Id": sid}
		if modern {
			body += `,` + modernMeta
			headers = map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": method, "Mcp-Name": target}
		}
		w := post(mux, l.TurnID, token, body+`}}`, headers)
		return w.Code, w.Body.Bytes()
	}
	for _, tc := range []struct {
		name, method, target, params string
		code, modernStatus           int
		status                       string
	}{
		{"a prompt the turn did not pin", "prompts/get", "code.review", ``, protocol.CodeInvalidParams, 400, "denied"},
		{"a resource the turn did not pin", "resources/read", "test://elsewhere", ``, protocol.CodeInvalidParams, 400, "denied"},
		{"a pinned prompt the policy denies", "prompts/get", "test_simple_prompt", `,"arguments":{"mode":"denied"}`, mcpserver.CodeDenied, 200, "denied"},
		{"a pinned prompt that failed", "prompts/get", "test_simple_prompt", `,"arguments":{"mode":"failed"}`, mcpserver.CodeFailed, 200, "failed"},
		{"a pinned prompt's bad arguments", "prompts/get", "test_simple_prompt", `,"arguments":{"mode":"bad"}`, protocol.CodeInvalidParams, 400, "failed"},
		{"a pinned resource that is not there", "resources/read", "test://template/gone/data", ``, protocol.CodeInvalidParams, 400, "denied"},
	} {
		for _, modern := range []bool{false, true} {
			era, want := "2025-11-25", http.StatusOK
			if modern {
				era, want = "2026-07-28", tc.modernStatus
			}
			t.Run(era+" "+tc.name, func(t *testing.T) {
				before := k.sent()
				status, body := request(modern, tc.method, tc.target, tc.params)
				var answer struct {
					ID    int `json:"id"`
					Error struct {
						Code int            `json:"code"`
						Data map[string]any `json:"data"`
					} `json:"error"`
				}
				if err := json.Unmarshal(body, &answer); err != nil {
					t.Fatalf("answer %d %q: %v", status, body, err)
				}
				meta, _ := answer.Error.Data[outcome.MetaKey].(map[string]any)
				calls := k.since(before)
				if status != want || answer.ID != 7 || answer.Error.Code != tc.code || meta["status"] != tc.status ||
					len(calls) != 1 || meta["callId"] != calls[0].GetCallId() {
					t.Errorf("answered %d %s (%d kernel calls), want %d with a %d error carrying its record's %s outcome", status, body, len(calls), want, tc.code, tc.status)
				}
			})
		}
	}
}

// legacySession is a served handler whose kernel answers every attempt
// succeeded, an open turn's lease and token, and a 2025-era session
// initialized on it.
func legacySession(t *testing.T) (k *entryKernel, mux http.Handler, l *leases.Lease, token, sid string) {
	t.Helper()
	k = &entryKernel{answer: func(*sharedosv1.ToolCall) *sharedosv1.ToolResult {
		return &sharedosv1.ToolResult{Status: sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED, ContentJson: []byte(`[]`)}
	}}
	store := memory.New()
	mux = serve(mcpserver.Config{Store: store, Forwarder: &forward.Forwarder{Invoker: k}})
	l, token = createLease(t, store, time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
	init := post(mux, l.TurnID, token, legacyInitialize, nil)
	sid = init.Header().Get("Mcp-Session-Id")
	if init.Code != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %s", init.Code, init.Body)
	}
	return k, mux, l, token, sid
}

// TestWronglyTypedParamsAreInvalidParams: a request whose params member
// has the wrong type — a prompt argument or a name that is not a string,
// a _meta that is not an object — is a valid JSON-RPC request with invalid
// params: -32602, no longer -32600 ("not a valid Request object", mcp-go's
// "unparsable" and the bridge's own parse said so). An attempt so refused
// on a live turn keeps its one record.
func TestWronglyTypedParamsAreInvalidParams(t *testing.T) {
	k, mux, l, token, sid := legacySession(t)
	for _, tc := range []struct {
		name, body string
		kind       sharedosv1.CallKind
	}{
		{"a prompt argument that is a number", `{"jsonrpc":"2.0","id":2,"method":"prompts/get","params":{"name":"test_simple_prompt","arguments":{"n":5}}}`, sharedosv1.CallKind_CALL_KIND_PROMPT},
		{"a prompt name that is a number", `{"jsonrpc":"2.0","id":2,"method":"prompts/get","params":{"name":5}}`, sharedosv1.CallKind_CALL_KIND_PROMPT},
		{"a tool name that is a number", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":5}}`, sharedosv1.CallKind_CALL_KIND_UNSPECIFIED},
		{"a tools/call _meta that is a number", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"files.read","arguments":{},"_meta":5}}`, sharedosv1.CallKind_CALL_KIND_UNSPECIFIED},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := k.sent()
			w := post(mux, l.TurnID, token, tc.body, map[string]string{"Mcp-Protocol-Version": "2025-11-25", "Mcp-Session-Id": sid})
			if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"code":-32602`) {
				t.Errorf("answered %d %s, want -32602 with HTTP 200 (a 2025-era request's error)", w.Code, w.Body)
			}
			if calls := k.since(before); len(calls) != 1 || calls[0].GetEdgeRejection() == "" || calls[0].GetKind() != tc.kind {
				t.Errorf("kernel saw %v, want one record-only rejection of kind %v", calls, tc.kind)
			}
		})
	}
}

// A prompt the kernel answers succeeded with messages the bridge cannot
// serve (a kernel that did not check them: they are checked there since
// attack run C2) is answered as a failure carrying the outcome, -32603 with
// "failed:" and data["io.sharedos/outcome"], as a tools/call's content that
// is not MCP content is; before, the client got mcp-go's -32603 with the
// decoder's error ("cannot unmarshal number into Go struct field
// TextContent.text of type string") and no outcome.
func TestPromptMessagesTheBridgeCannotServeAreAFailure(t *testing.T) {
	k, mux, l, token, sid := legacySession(t)
	for _, messages := range []string{
		`[{"role":"user","content":{"type":"text","text":123}}]`,
		`[{"role":"user","content":{"type":"text","text":"x","annotations":{"audience":"user"}}}]`,
		`[{"role":"user","content":{"type":"resource_link","uri":"test://x","name":"x","size":"big"}}]`,
		`[{"role":"user","content":{"type":"text","text":"x","_meta":"notanobject"}}]`,
		`{"role":"user"}`,
	} {
		k.answer = func(*sharedosv1.ToolCall) *sharedosv1.ToolResult {
			return &sharedosv1.ToolResult{Status: sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED, ContentJson: []byte(messages)}
		}
		before := k.sent()
		w := post(mux, l.TurnID, token, `{"jsonrpc":"2.0","id":4,"method":"prompts/get","params":{"name":"test_simple_prompt"}}`,
			map[string]string{"Mcp-Protocol-Version": "2025-11-25", "Mcp-Session-Id": sid})
		var answer struct {
			ID    int `json:"id"`
			Error struct {
				Code    int            `json:"code"`
				Message string         `json:"message"`
				Data    map[string]any `json:"data"`
			} `json:"error"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &answer); err != nil {
			t.Fatalf("%s: answer %d %q: %v", messages, w.Code, w.Body, err)
		}
		meta, _ := answer.Error.Data[outcome.MetaKey].(map[string]any)
		calls := k.since(before)
		if w.Code != http.StatusOK || answer.ID != 4 || answer.Error.Code != mcpserver.CodeFailed || meta["status"] != "failed" ||
			meta["code"] != outcome.HandlerError || len(calls) != 1 || meta["callId"] != calls[0].GetCallId() ||
			!strings.HasPrefix(answer.Error.Message, outcome.FailedPrefix) || strings.Contains(answer.Error.Message, "Go ") {
			t.Errorf("%s: answered %d %s, want -32603 \"failed: …\" carrying a failed/handler_error outcome of the call", messages, w.Code, w.Body)
		}
	}
}
