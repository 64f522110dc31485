package protocol_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/sharedos/toolshare/bridge-svc/internal/protocol"
)

func TestSniff(t *testing.T) {
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"name":"x","method":"y"},"name":"files.read","arguments":{"name":"z"}}}`
	for _, c := range []struct {
		name, body   string
		header       http.Header
		method, tool string
	}{
		{"whole call", call, nil, "tools/call", "files.read"},
		{"after a byte order mark", "\xEF\xBB\xBF" + call, nil, "tools/call", "files.read"},
		{"truncated", call[:len(call)-20], nil, "tools/call", "files.read"},
		{"cut before the name", call[:60], nil, "tools/call", ""},
		{"invalid UTF-8", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"files` + "\xff" + `.read"}}`, nil, "tools/call", "files\ufffd.read"},
		{"duplicate name: the first", `{"method":"tools/call","params":{"name":"a","name":"b"}}`, nil, "tools/call", "a"},
		{"nested method is not the method", `{"params":{"x":{"method":"tools/call"}},"id":1}`, nil, "", ""},
		{"array", `[` + call + `]`, nil, "", ""},
		{"not JSON", `hello`, nil, "", ""},
		{"headers first", `{}`, http.Header{"Mcp-Method": {"tools/call"}, "Mcp-Name": {"=?base64?ZmlsZXMucmVhZA==?="}}, "tools/call", "files.read"},
		{"body name wins over the header", call, http.Header{"Mcp-Method": {"tools/call"}, "Mcp-Name": {"other"}}, "tools/call", "files.read"},
		{"a body's tools/call wins over the header", call, http.Header{"Mcp-Method": {"tools/list"}}, "tools/call", "files.read"},
		{"the header's tools/call stands beside another body", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, http.Header{"Mcp-Method": {"tools/call"}}, "tools/call", ""},
		{"an Mcp-Method value naming an attempt, not the first", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
			http.Header{"Mcp-Method": {"tools/list", "tools/call"}, "Mcp-Name": {"files.read"}}, "tools/call", "files.read"},
		{"a later method naming an attempt", `{"method":"tools/list","params":{"name":"a"},"method":"tools/call"}`, nil, "tools/call", "a"},
		{"folded keys", `{"METHOD":"prompts/get","Params":{"Name":"fx.greet"}}`, nil, "prompts/get", "fx.greet"},
		{"method after long arguments", `{"jsonrpc":"2.0","id":1,"params":{"name":"files.read","arguments":{"a":[` + strings.Repeat("1,", 500) + `1]}},"method":"tools/call"}`, nil, "tools/call", "files.read"},
		{"a resources/read names its uri", `{"method":"resources/read","params":{"name":"n","uri":"file:///x"}}`, nil, "resources/read", "file:///x"},
		{"a truncated prompts/get under Mcp-Method tools/call", `{"method":"prompts/get","params":{"name":"fx.greet"`, http.Header{"Mcp-Method": {"tools/call"}}, "prompts/get", "fx.greet"},
	} {
		h := c.header
		if h == nil {
			h = http.Header{}
		}
		m, n := protocol.Sniff(h, []byte(c.body))
		if m != c.method || n != c.tool {
			t.Errorf("%s: Sniff = %q, %q; want %q, %q", c.name, m, n, c.method, c.tool)
		}
	}
}

// BenchmarkSniffLargeBody: a refused body at the default cap, its method
// after the arguments — the whole body is scanned.
func BenchmarkSniffLargeBody(b *testing.B) {
	args := `{"a":[` + strings.Repeat(`1,"x\"y",{"k":[]},`, protocol.DefaultMaxBodyBytes/20) + `1]}`
	body := []byte(`{"jsonrpc":"2.0","id":1,"params":{"name":"a","arguments":` + args + `},"method":"tools/call"` + "\xff")
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if m, n := protocol.Sniff(http.Header{}, body); m != "tools/call" || n != "a" {
			b.Fatalf("Sniff = %q, %q", m, n)
		}
	}
}
