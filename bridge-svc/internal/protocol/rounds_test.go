package protocol_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/sharedos/toolshare/bridge-svc/internal/protocol"
)

// TestParseInputRoundParams: a request's inputResponses, requestState and
// declared capabilities are read as sent (a null one is none, as mcp-go
// reads it); a shape SEP-2322 does not allow
// is -32602 before anything runs.
func TestParseInputRoundParams(t *testing.T) {
	msg, rerr := protocol.Parse([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x",` +
		`"inputResponses":{"a":{"action":"accept"}},"requestState":"s1.abc",` +
		`"_meta":{"io.modelcontextprotocol/clientCapabilities":{"sampling":{},"roots":{"listChanged":true},"elicitation":null}}}}`))
	if rerr != nil {
		t.Fatal(rerr)
	}
	if string(msg.InputResponses) != `{"a":{"action":"accept"}}` || msg.RequestState != "s1.abc" || !msg.HasRequestState {
		t.Errorf("parsed %+v", msg)
	}
	if got := protocol.InputMethods(msg.ClientCapabilities); !slices.Equal(got, []string{"roots/list", "sampling/createMessage"}) {
		t.Errorf("input methods %v", got)
	}
	for name, params := range map[string]string{
		"responses null":      `"inputResponses":null`,
		"responses array":     `"inputResponses":[]`,
		"member a number":     `"inputResponses":{"a":12345}`,
		"duplicate member":    `"inputResponses":{"a":{},"a":{}}`,
		"state not a string":  `"requestState":{"s":1}`,
		"case-folded members": `"inputresponses":{}`,
	} {
		_, rerr := protocol.Parse([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x",` + params + `}}`))
		if rerr == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if name != "case-folded members" && rerr.Code != protocol.CodeInvalidParams {
			t.Errorf("%s: code %d, want -32602", name, rerr.Code)
		}
		if !strings.Contains(string(rerr.Body()), `"id":1`) {
			t.Errorf("%s: error body %s does not carry the id", name, rerr.Body())
		}
	}
	e := protocol.MissingCapability([]string{"sampling/createMessage", "elicitation/create"})
	if e.Code != -32021 || !strings.Contains(string(e.Body()), `"requiredCapabilities":{"elicitation":{},"sampling":{}}`) {
		t.Errorf("missing capability %s", e.Body())
	}
}
