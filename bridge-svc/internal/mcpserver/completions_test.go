package mcpserver_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/sharedos/toolshare/bridge-svc/internal/protocol"
)

// TestCompletionRefusalsAreInvalidParams: completion/complete of a prompt
// or resource the turn pinned is answered with no values; one that names
// nothing the turn pinned, a ref of an unknown type, no ref or no argument,
// or params that are empty or missing, is invalid params (-32602, as MCP
// answers them; data.uri for a resource), under the status of a -32602 in
// the request's era (200 on 2025 eras, 400 on 2026-07-28). Before,
// mcp-go's own answers: empty values for any name, and -32600
// ("unparsable") for the malformed ones. No completion reaches the kernel.
func TestCompletionRefusalsAreInvalidParams(t *testing.T) {
	k, mux, l, token, sid := legacySession(t)
	const modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	const arg = `"argument":{"name":"arg1","value":"te"}`
	for _, tc := range []struct {
		name   string
		params string // the members of params, "-" for no params at all
		code   int    // 0: a result with no values
		uri    string // data.uri of the refusal
	}{
		{"a pinned prompt", `"ref":{"type":"ref/prompt","name":"test_simple_prompt"},` + arg, 0, ""},
		{"a pinned template", `"ref":{"type":"ref/resource","uri":"test://template/{id}/data"},"argument":{"name":"id","value":"7"}`, 0, ""},
		{"a URI a pinned template serves", `"ref":{"type":"ref/resource","uri":"test://template/7/data"},` + arg, 0, ""},
		{"with its context", `"ref":{"type":"ref/prompt","name":"test_simple_prompt"},` + arg + `,"context":{"arguments":{"a":"b"}}`, 0, ""},
		{"a prompt the turn did not pin", `"ref":{"type":"ref/prompt","name":"code.review"},` + arg, protocol.CodeInvalidParams, ""},
		{"a resource the turn did not pin", `"ref":{"type":"ref/resource","uri":"test://elsewhere/{id}"},` + arg, protocol.CodeInvalidParams, "test://elsewhere/{id}"},
		{"a URI past a resource URI's bound", `"ref":{"type":"ref/resource","uri":"test://template/` + strings.Repeat("7", 2048) + `/data"},` + arg, protocol.CodeInvalidParams, ""},
		{"a ref of an unknown type", `"ref":{"type":"ref/tool","name":"files.read"},` + arg, protocol.CodeInvalidParams, ""},
		{"a ref without its name", `"ref":{"type":"ref/prompt"},` + arg, protocol.CodeInvalidParams, ""},
		{"a ref that is no object", `"ref":"test_simple_prompt",` + arg, protocol.CodeInvalidParams, ""},
		{"no ref", arg, protocol.CodeInvalidParams, ""},
		{"no argument", `"ref":{"type":"ref/prompt","name":"test_simple_prompt"}`, protocol.CodeInvalidParams, ""},
		{"an argument without its value", `"ref":{"type":"ref/prompt","name":"test_simple_prompt"},"argument":{"name":"arg1"}`, protocol.CodeInvalidParams, ""},
		{"context arguments that are no strings", `"ref":{"type":"ref/prompt","name":"test_simple_prompt"},` + arg + `,"context":{"arguments":{"a":1}}`, protocol.CodeInvalidParams, ""},
		{"empty params", ``, protocol.CodeInvalidParams, ""},
		{"no params", `-`, protocol.CodeInvalidParams, ""},
	} {
		for _, modern := range []bool{false, true} {
			era, status := "2025-11-25", http.StatusOK
			if modern {
				era = "2026-07-28"
				if tc.code != 0 {
					status = http.StatusBadRequest
				}
			}
			t.Run(era+" "+tc.name, func(t *testing.T) {
				body := `{"jsonrpc":"2.0","id":9,"method":"completion/complete"`
				headers := map[string]string{"Mcp-Protocol-Version": "2025-11-25", "Mcp-Session-Id": sid}
				params := tc.params
				if modern {
					headers = map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "completion/complete"}
					if params != "-" {
						if params != "" {
							params += ","
						}
						params += modernMeta
					}
				}
				if params != "-" {
					body += `,"params":{` + params + `}`
				}
				before := k.sent()
				w := post(mux, l.TurnID, token, body+`}`, headers)
				var answer struct {
					ID     int `json:"id"`
					Result *struct {
						Completion struct {
							Values []string `json:"values"`
						} `json:"completion"`
					} `json:"result"`
					Error *struct {
						Code int            `json:"code"`
						Data map[string]any `json:"data"`
					} `json:"error"`
				}
				if err := json.Unmarshal(w.Body.Bytes(), &answer); err != nil {
					t.Fatalf("answer %d %q: %v", w.Code, w.Body, err)
				}
				switch {
				case w.Code != status || answer.ID != 9:
					t.Errorf("answered %d %s, want %d", w.Code, w.Body, status)
				case tc.code == 0 && (answer.Result == nil || answer.Result.Completion.Values == nil || len(answer.Result.Completion.Values) != 0):
					t.Errorf("answered %s, want a completion with no values", w.Body)
				case tc.code != 0 && (answer.Error == nil || answer.Error.Code != tc.code):
					t.Errorf("answered %s, want error %d", w.Body, tc.code)
				case tc.uri != "" && answer.Error.Data["uri"] != tc.uri:
					t.Errorf("answered %s, want data.uri %q", w.Body, tc.uri)
				}
				if n := k.sent() - before; n != 0 {
					t.Errorf("%d kernel calls for a completion", n)
				}
			})
		}
	}
}
