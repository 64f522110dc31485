package protocol_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sharedos/toolshare/bridge-svc/internal/protocol"
)

func TestParse(t *testing.T) {
	ok := []struct {
		name, body, method, tool, meta string
		notification                   bool
	}{
		{"tools/call", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"files.read","arguments":{"n":12345678901234567890}}}`, "tools/call", "files.read", "", false},
		{"string id", `{"jsonrpc":"2.0","id":"a","method":"tools/list"}`, "tools/list", "", "", false},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, "notifications/initialized", "", "", true},
		{"modern meta", `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, "tools/list", "", "2026-07-28", false},
		{"client response", `{"jsonrpc":"2.0","id":3,"result":{}}`, "", "", "", false},
		{"id 2^53", `{"jsonrpc":"2.0","id":-9007199254740992,"method":"tools/list"}`, "tools/list", "", "", false},
		{"other _meta keys may differ in case", `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":{"x.example/a":1,"X.example/A":2}}}`, "tools/list", "", "", false},
		{"uri at the bound", `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"test://x/` + strings.Repeat("a", 2048-len("test://x/")) + `"}}`, "resources/read", "", "", false},
		{"nested keys may repeat in arguments", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"a":{"Name":1,"name":2}}}}`, "tools/call", "x", "", false},
	}
	for _, tc := range ok {
		t.Run(tc.name, func(t *testing.T) {
			m, err := protocol.Parse([]byte(tc.body))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if m.Method != tc.method || m.ToolName != tc.tool || m.MetaProtocolVersion != tc.meta || m.IsNotification() != tc.notification {
				t.Errorf("Parse = %+v", m)
			}
		})
	}
	bad := []struct {
		name, body string
		code       int
		mentions   string
	}{
		{"invalid utf-8", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\xff\"}", protocol.CodeParseError, "UTF-8"},
		{"empty", ``, protocol.CodeParseError, "empty"},
		{"a byte order mark", "\xEF\xBB\xBF" + `{"jsonrpc":"2.0","id":1,"method":"ping"}`, protocol.CodeParseError, "byte order mark"},
		{"a no-break space is not JSON whitespace", "\u00a0" + `{"jsonrpc":"2.0","id":1,"method":"ping"}`, protocol.CodeInvalidRequest, "object"},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, protocol.CodeInvalidRequest, "batch"},
		{"scalar", `42`, protocol.CodeInvalidRequest, "object"},
		{"trailing garbage", `{"jsonrpc":"2.0","id":1,"method":"ping"}{}`, protocol.CodeParseError, "malformed"},
		{"unbalanced", `{"jsonrpc":"2.0","id":1,"method":"ping"`, protocol.CodeParseError, "malformed"},
		{"10^5 deep: the nesting rule, not encoding/json's own limit", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + `}}`, protocol.CodeInvalidRequest, "64"},
		{"too deep", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}}`, protocol.CodeInvalidRequest, "64"},
		{"wrong version", `{"jsonrpc":"1.0","id":1,"method":"ping"}`, protocol.CodeInvalidRequest, "2.0"},
		{"no version", `{"id":1,"method":"ping"}`, protocol.CodeInvalidRequest, "2.0"},
		{"null id", `{"jsonrpc":"2.0","id":null,"method":"tools/call"}`, protocol.CodeInvalidRequest, "null"},
		{"bool id", `{"jsonrpc":"2.0","id":true,"method":"tools/call"}`, protocol.CodeInvalidRequest, "string or an integer"},
		{"request without id", `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"x"}}`, protocol.CodeInvalidRequest, "only notifications"},
		{"Method", `{"jsonrpc":"2.0","id":1,"Method":"tools/call"}`, protocol.CodeInvalidRequest, "case-folded"},
		{"METHOD beside method", `{"jsonrpc":"2.0","id":1,"method":"ping","METHOD":"tools/call"}`, protocol.CodeInvalidRequest, "differ only in case"},
		{"method and result", `{"jsonrpc":"2.0","id":1,"method":"tools/call","result":{},"params":{"name":"a"}}`, protocol.CodeInvalidRequest, `has no "result"`},
		{"notification and error", `{"jsonrpc":"2.0","method":"notifications/cancelled","error":{"code":1,"message":"x"}}`, protocol.CodeInvalidRequest, `has no "error"`},
		{"paramſ", `{"jsonrpc":"2.0","id":1,"method":"tools/call","paramſ":{}}`, protocol.CodeInvalidRequest, "case-folded"},
		{"duplicate id", `{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}`, protocol.CodeInvalidRequest, "duplicate"},
		{"duplicate name", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","name":"b"}}`, protocol.CodeInvalidRequest, "duplicate"},
		{"Name in params", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"Name":"a"}}`, protocol.CodeInvalidRequest, "case-folded"},
		{"params not object", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[1]}`, protocol.CodeInvalidRequest, "object"},
		// A valid request whose params member has the wrong type: invalid
		// params (it was -32600, "not a valid Request object", before).
		{"name not string", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":1}}`, protocol.CodeInvalidParams, "string"},
		{"prompt name not string", `{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":5}}`, protocol.CodeInvalidParams, "string"},
		{"prompt argument not string", `{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"p","arguments":{"a":1}}}`, protocol.CodeInvalidParams, "object of strings"},
		{"prompt arguments not an object", `{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"p","arguments":["a"]}}`, protocol.CodeInvalidParams, "object of strings"},
		{"uri not string", `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":5}}`, protocol.CodeInvalidParams, "string"},
		// Longer than any resource URI (attack run C4: each pinned template
		// was matched against it, 20 s of CPU for 20,000 characters).
		{"uri over the bound", `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"test://x/` + strings.Repeat("a", 2048-len("test://x/")+1) + `"}}`, protocol.CodeInvalidParams, "longer than 2048 bytes"},
		{"_meta not an object", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","_meta":5}}`, protocol.CodeInvalidParams, "object"},
		{"id past a double", `{"jsonrpc":"2.0","id":1e400,"method":"tools/list"}`, protocol.CodeInvalidRequest, "no exponent"},
		{"id under a double", `{"jsonrpc":"2.0","id":1e-400,"method":"tools/list"}`, protocol.CodeInvalidRequest, "no exponent"},
		{"fractional id a double rounds", `{"jsonrpc":"2.0","id":1.0000000000000001,"method":"tools/list"}`, protocol.CodeInvalidRequest, "no fraction"},
		{"id past 2^53", `{"jsonrpc":"2.0","id":9007199254740993,"method":"tools/list"}`, protocol.CodeInvalidRequest, "±2^53"},
		{"integral exponent id", `{"jsonrpc":"2.0","id":1e3,"method":"tools/list"}`, protocol.CodeInvalidRequest, "no exponent"},
		{"repeated protocol version in _meta", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/protocolVersion":"2025-11-25"}}}`, protocol.CodeInvalidRequest, "duplicate key"},
		{"folded capabilities in _meta", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","_meta":{"io.modelcontextprotocol/clientCapabilities":{"sampling":{},"Sampling":null}}}}`, protocol.CodeInvalidRequest, "differ only in case"},
		{"repeated capability in _meta", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","_meta":{"io.modelcontextprotocol/clientCapabilities":{"elicitation":{},"elicitation":null}}}}`, protocol.CodeInvalidRequest, "duplicate key"},
		{"folded capability alone", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"capabilities":{"Elicitation":{}}}}`, protocol.CodeInvalidRequest, "case-folded"},
		{"repeated capability on initialize", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"capabilities":{"sampling":{},"sampling":null}}}`, protocol.CodeInvalidRequest, "duplicate key"},
		{"response without result", `{"jsonrpc":"2.0","id":1}`, protocol.CodeInvalidRequest, "result"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			m, err := protocol.Parse([]byte(tc.body))
			if err == nil {
				t.Fatalf("Parse accepted %s as %+v", tc.body, m)
			}
			if err.Code != tc.code || !strings.Contains(err.Message, tc.mentions) {
				t.Errorf("error = %d %q, want %d mentioning %q", err.Code, err.Message, tc.code, tc.mentions)
			}
			if b := string(err.Body()); !strings.Contains(b, `"jsonrpc":"2.0"`) || !strings.Contains(b, `"error"`) {
				t.Errorf("body = %s", b)
			}
		})
	}
}

// FuzzParse: Parse never panics, and for every message it accepts,
// encoding/json's case-insensitive struct decoding (what mcp-go does) finds
// the same method and tool name the pre-parse saw: no parser differential.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"files.read"}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"Method":"x"}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","paramſ":{"name":"a"},"params":{"name":"b"}}`))
	f.Add([]byte(`[{}]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		m, err := protocol.Parse(body)
		if err != nil {
			return
		}
		var folded struct {
			Method string `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		if json.Unmarshal(body, &folded) != nil {
			return // not an object mcp-go could decode either
		}
		if folded.Method != m.Method {
			t.Errorf("method: pre-parse %q, encoding/json %q: %s", m.Method, folded.Method, body)
		}
		if m.Method == "tools/call" && folded.Params.Name != m.ToolName {
			t.Errorf("tool: pre-parse %q, encoding/json %q: %s", m.ToolName, folded.Params.Name, body)
		}
	})
}

func BenchmarkParse(b *testing.B) {
	body := []byte(`{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"files.read","arguments":{"path":"/public/a.txt"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"progressToken":"p1"}}}`)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := protocol.Parse(body); err != nil {
			b.Fatal(err)
		}
	}
}

// TestParseTraceMeta: params._meta's traceparent (SEP-414) is picked up as
// a string; other members (tracestate and baggage too: not taken from a
// harness) and non-string values are not.
func TestParseTraceMeta(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	m, err := protocol.Parse([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"traceparent":"` + tp + `","tracestate":"k=v","baggage":5,"other":"y"}}}`))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	want := map[string]string{"traceparent": tp}
	if len(m.TraceMeta) != len(want) || m.TraceMeta["traceparent"] != tp {
		t.Errorf("TraceMeta = %v, want %v", m.TraceMeta, want)
	}
	m, err = protocol.Parse([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if m.TraceMeta != nil {
		t.Errorf("TraceMeta = %v without _meta, want nil", m.TraceMeta)
	}
}

// many is n copies of elem, comma-separated.
func many(elem string, n int) string {
	return strings.TrimSuffix(strings.Repeat(elem+",", n), ",")
}

// TestParseBoundsWhatDecodingCosts: params._meta is at most MaxMetaBytes,
// and a request's params hold at most MaxValues JSON values, MaxContainers
// of them objects or arrays — what mcp-go's decoding into map[string]any
// costs (a 4 MiB _meta of empty objects: 830 MB) — refused -32602 under the
// request's id; a response's whole message -32600. A long string, or a
// long array of numbers under the bound, passes.
func TestParseBoundsWhatDecodingCosts(t *testing.T) {
	call := func(args, meta string) string {
		return `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"files.read","arguments":` + args + `,"_meta":` + meta + `}}`
	}
	padding := strings.Repeat("x", protocol.MaxMetaBytes)
	for _, tc := range []struct {
		name, body string
		code       int
		mentions   string
	}{
		{"_meta past its bytes", call(`{}`, `{"a":"`+padding+`"}`), protocol.CodeInvalidParams, "_meta"},
		{"a ping's _meta of empty objects", `{"jsonrpc":"2.0","id":7,"method":"ping","params":{"_meta":{"a":[` + many(`{}`, 40000) + `]}}}`, protocol.CodeInvalidParams, "_meta"},
		{"a notification's _meta", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"_meta":{"a":"` + padding + `"}}}`, protocol.CodeInvalidParams, "_meta"},
		{"arguments of objects", call(`{"a":[`+many(`{}`, protocol.MaxContainers)+`]}`, `{}`), protocol.CodeInvalidParams, "objects and arrays"},
		// params, arguments, _meta and the arrays: one past.
		{"arguments of arrays", call(`[`+many(`[]`, protocol.MaxContainers-2)+`]`, `{}`), protocol.CodeInvalidParams, "objects and arrays"},
		// params, name, arguments, a, _meta and the numbers: one past.
		{"arguments of numbers", call(`{"a":[`+many(`1`, protocol.MaxValues-4)+`]}`, `{}`), protocol.CodeInvalidParams, "JSON values"},
		{"arguments of members", call(`{"a":{`+many(`"k":null`, protocol.MaxValues)+`}}`, `{}`), protocol.CodeInvalidParams, "JSON values"},
		{"a response's result", `{"jsonrpc":"2.0","id":7,"result":{"a":[` + many(`{}`, protocol.MaxContainers) + `]}}`, protocol.CodeInvalidRequest, "objects and arrays"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := protocol.Parse([]byte(tc.body))
			if err == nil {
				t.Fatalf("Parse accepted it as %+v", m)
			}
			if err.Code != tc.code || !strings.Contains(err.Message, tc.mentions) {
				t.Errorf("error = %d %q, want %d mentioning %q", err.Code, err.Message, tc.code, tc.mentions)
			}
			if !strings.Contains(tc.name, "notification") && string(err.ID) != "7" {
				t.Errorf("answered under id %s, want the request's 7", err.ID)
			}
		})
	}
	for _, tc := range []struct{ name, body string }{
		{"_meta at its bytes", call(`{}`, `{"a":"`+padding[:protocol.MaxMetaBytes-8]+`"}`)},
		{"a 3 MiB string", call(`{"text":"`+strings.Repeat("x", 3<<20)+`"}`, `{"progressToken":"p"}`)},
		{"numbers up to the bound", call(`{"a":[`+many(`1`, protocol.MaxValues-5)+`]}`, `{}`)},
		{"arrays up to the bound", call(`[`+many(`[]`, protocol.MaxContainers-3)+`]`, `{ }`)},
		{"brackets, commas and escapes in strings are no values", call(`{"a":"[{,}],\"[{,}]\\\\"}`, `{}`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := protocol.Parse([]byte(tc.body)); err != nil {
				t.Fatalf("Parse: %d %s", err.Code, err.Message)
			}
		})
	}
}
