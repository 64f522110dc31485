package upstream

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// marshalChanges is true exactly when json.Marshal writes the arguments
// otherwise (then the call registers its exact request).
func TestMarshalChanges(t *testing.T) {
	for _, args := range []string{
		`{}`, `{"a":1}`, `{"text":"hello world"}`, `{"a":"\" \\"}`, `{"a":"\\\" "}`, `[1,2,{"b":null}]`,
		`{"a": 1}`, "{\"a\":1}\n", "{\n\"a\":1}", `{"a":"<b>"}`, `{"a":"x&y"}`, "{\"a\":\"\u2028\"}", "{\"a\":\"\u2029\"}",
		"{\"a\":\"\u2027\u202a\"}", `{"a":"\" ","b" :2}`, `{"n":12345678901234567890}`, `{"n":1.50e+01}`, `{"\\u003c":"\t"}`,
	} {
		b, err := json.Marshal(json.RawMessage(args))
		if err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		if want := !bytes.Equal(b, []byte(args)); marshalChanges([]byte(args)) != want {
			t.Errorf("marshalChanges(%q) = %v, json.Marshal writes %q", args, !want, b)
		}
	}
}

// The exact request is the one mcp-go writes, but for the arguments' own
// bytes: json.Marshal of it (compacted, escaped) is mcp-go's, byte for
// byte, and it carries the arguments as they came — a resumed round's
// with its answers and state.
func FuzzExactRequest(f *testing.F) {
	for _, s := range []string{`{}`, `{"a": "<b>&"}`, "{\n\"x\" : [1, 2.50, null]\t}", "{\"u\":\"\u2028\"}", `{"s":"a b"}`} {
		f.Add(s, "", "", "")
		f.Add(s, "tok", "", "")
		f.Add(s, "tok", `{"k": {"action":"accept","content":{"n":"<&>"}}}`, "state <1>")
		f.Add(s, "", "", "state")
	}
	f.Fuzz(func(t *testing.T, args, token, responses, state string) {
		if !json.Valid([]byte(args)) || args == "" || responses != "" && !json.Valid([]byte(responses)) {
			return
		}
		s := session{}
		meta, err := s.metaWith(token, nil)
		if err != nil {
			t.Fatal(err)
		}
		cp := callParams{Name: "echo", Arguments: json.RawMessage(args), Meta: meta, InputResponses: json.RawMessage(responses), RequestState: state}
		params, err := json.Marshal(cp)
		if err != nil {
			t.Fatal(err)
		}
		req := transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(int64(directIDs + 7)),
			Method: string(mcp.MethodToolsCall), Params: json.RawMessage(params)}
		exactP, err := exactParams(cp)
		if err != nil {
			t.Fatal(err)
		}
		wire, exact, ok := exactRequest(req, params, exactP)
		if changes := marshalChanges([]byte(args)); ok != changes {
			t.Fatalf("exactRequest ok = %v, marshalChanges = %v for %q", ok, changes, args)
		}
		if !ok {
			return
		}
		again, err := json.Marshal(json.RawMessage(exact))
		if err != nil || !bytes.Equal(again, wire) {
			t.Fatalf("json.Marshal(exact) = %s (%v), mcp-go writes %s", again, err, wire)
		}
		if !bytes.Contains(exact, []byte(`"arguments":`+args)) {
			t.Fatalf("exact %s does not carry the arguments %q as they came", exact, args)
		}
	})
}
