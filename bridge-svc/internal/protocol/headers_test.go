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
		{"repeated Mcp-Protocol-Version", http.Header{"Mcp-Protocol-Version": {"2026-07-28", "1999-01-01"}}, call, "Mcp-Protocol-Version header repeated"},
		{"repeated Mcp-Session-Id", http.Header{"Mcp-Session-Id": {"a", "b"}}, &protocol.Message{Method: "tools/list"}, "Mcp-Session-Id header repeated"},
		{"repeated Mcp-Method on any method", http.Header{"Mcp-Method": {"tools/list", "tools/call"}}, &protocol.Message{Method: "tools/list"}, "Mcp-Method header repeated"},
		{"Mcp-Method naming an attempt the body is not", http.Header{"Mcp-Method": {"tools/call"}}, &protocol.Message{Method: "tools/list"}, `Mcp-Method header "tools/call" does not match method "tools/list"`},
		{"Mcp-Method tools/call on a notification", http.Header{"Mcp-Method": {"tools/call"}}, &protocol.Message{Method: "notifications/initialized"}, `does not match method "notifications/initialized"`},
		{"Mcp-Method tools/call on a case-folded Tools/Call", http.Header{"Mcp-Method": {"tools/call"}}, &protocol.Message{Method: "Tools/Call"}, `does not match method "Tools/Call"`},
		{"a matching Mcp-Method", http.Header{"Mcp-Method": {"tools/list"}}, &protocol.Message{Method: "tools/list"}, ""},
		{"Mcp-Method naming no attempt is mcp-go's to check", http.Header{"Mcp-Method": {"tools/list"}}, &protocol.Message{Method: "resources/list"}, ""},
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

func TestAttemptMethod(t *testing.T) {
	for _, c := range []struct {
		name, method string
		h            http.Header
		want         string
	}{
		{"the body's attempt", "tools/call", http.Header{}, "tools/call"},
		{"the body's attempt over the header's", "prompts/get", http.Header{"Mcp-Method": {"tools/call"}}, "prompts/get"},
		{"the header's attempt", "tools/list", http.Header{"Mcp-Method": {"tools/call"}}, "tools/call"},
		{"any of the header's values", "tools/list", http.Header{"Mcp-Method": {"tools/list", "resources/read"}}, "resources/read"},
		{"a folded method is no attempt", "Tools/Call", http.Header{}, ""},
		{"neither", "tools/list", http.Header{"Mcp-Method": {"tools/list"}}, ""},
	} {
		if got := protocol.AttemptMethod(c.h, c.method); got != c.want {
			t.Errorf("%s: AttemptMethod = %q, want %q", c.name, got, c.want)
		}
	}
}
