package protocol_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/sharedos/toolshare/bridge-svc/internal/protocol"
)

func TestNameHeaderMismatch(t *testing.T) {
	modern := func(name ...string) http.Header {
		h := http.Header{}
		h.Set(protocol.HeaderProtocolVersion, protocol.Version20260728)
		for _, n := range name {
			h.Add(protocol.HeaderName, n)
		}
		return h
	}
	call := &protocol.Message{Method: "tools/call", ToolName: "files.read", Target: "files.read"}
	cases := []struct {
		name string
		h    http.Header
		msg  *protocol.Message
		want string // substring; "" = no mismatch
	}{
		{"match", modern("files.read"), call, ""},
		{"base64 match", modern("=?base64?ZmlsZXMucmVhZA==?="), call, ""},
		{"mismatch", modern("admin.delete"), call, `"admin.delete" does not match params.name "files.read"`},
		{"missing", modern(), call, "missing"},
		{"repeated", modern("files.read", "files.read"), call, "repeated"},
		{"bad base64", modern("=?base64?***?="), call, "not a valid"},
		{"legacy era has no such rule", http.Header{}, call, ""},
		{"other methods", modern(), &protocol.Message{Method: "tools/list"}, ""},
		{"repeated Mcp-Method on any method", http.Header{"Mcp-Method": {"tools/list", "tools/call"}}, &protocol.Message{Method: "tools/list"}, "Mcp-Method header repeated"},
		{"modern by _meta only", http.Header{}, &protocol.Message{Method: "tools/call", ToolName: "x", Target: "x", MetaProtocolVersion: protocol.Version20260728}, "missing"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := protocol.NameHeaderMismatch(c.h, c.msg)
			if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
				t.Fatalf("got %q, want containing %q", got, c.want)
			}
		})
	}
}
