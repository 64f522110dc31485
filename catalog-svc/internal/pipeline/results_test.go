package pipeline_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/outcome"
	"github.com/sharedos/toolshare/services/contract/pinproof"

	"github.com/sharedos/toolshare/catalog-svc/internal/server"
)

// countSchema is an output schema: {n: number} and nothing else.
const countSchema = `{"type":"object","properties":{"n":{"type":"number"}},"required":["n"],"additionalProperties":false}`

// A tool that declares an output schema is held to it (MCP 2025-06-18 on:
// clients refuse a result whose structuredContent is missing or does not
// conform; attack run a1 saw both passed on and recorded succeeded): its
// provider's result otherwise ends the attempt failed/handler_error,
// recorded so, and the harness gets that failure, not the content. An
// isError result, and any result of a tool without an output schema, pass
// as before.
func TestOutputSchemaHoldsResults(t *testing.T) {
	forEachStore(t, options{}, func(t *testing.T, h *harness) {
		ctx := context.Background()
		cat := realCatalogue(t, h)
		fake, _ := h.resolver.Resolve(ctx, "files.read")
		for _, name := range []string{"count.typed", "count.untyped"} {
			reg := &sharedosv1.ToolRegistration{
				Name: name, Description: "Counts things.", InputSchemaJson: []byte(`{"type":"object"}`),
				Metadata:    &sharedosv1.ToolMetadata{Namespace: "count", Source: "provider:count"},
				Class:       sharedosv1.ToolClass_TOOL_CLASS_MANAGED,
				Requirement: &sharedosv1.Requirement{Action: "read", Resource: "file:/public/count"},
				Handler:     &sharedosv1.HandlerRef{Target: fake.Registration.GetHandler().GetTarget()},
			}
			if name == "count.typed" {
				reg.OutputSchemaJson = []byte(countSchema)
			}
			if _, _, err := cat.Register(ctx, reg); err != nil {
				t.Fatal(err)
			}
		}
		k := newKernelWith(t, h, cat)
		granted, err := k.GrantTurn(ctx, &sharedosv1.GrantTurnRequest{TurnId: "out", Context: alice(), ExpiresAt: timestamppb.New(time.Now().Add(time.Hour))})
		if err != nil {
			t.Fatal(err)
		}
		tree := pinTree(t, granted)
		call := func(tool string, answer *sharedosv1.HandleResponse) *sharedosv1.ToolResult {
			t.Helper()
			h.handler.mu.Lock()
			h.handler.answer = answer
			h.handler.mu.Unlock()
			c := h.newCall("out", tool, `{}`)
			c.Grant, c.PinProof = granted.GetGrant(), nil
			c.PinProof, _ = tree.Prove(pinproof.Tool, tool)
			res, err := k.InvokeTool(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			h.mu.Lock()
			h.attempts["out"]++
			h.mu.Unlock()
			return res
		}
		content := []byte(`[{"type":"text","text":"counted"}]`)
		answer := func(structured string, isError bool) *sharedosv1.HandleResponse {
			r := &sharedosv1.HandleResponse{ContentJson: content, IsError: isError}
			if structured != "" {
				r.StructuredContentJson = []byte(structured)
			}
			return r
		}
		for _, c := range []struct {
			name, tool, structured string
			isError                bool
			code, reason           string
		}{
			{"conforms", "count.typed", `{"n":3}`, false, "", ""},
			{"a number as written", "count.typed", `{"n":12345678901234567890.5}`, false, "", ""},
			{"wrong type and an undeclared key", "count.typed", `{"n":"lots","evil":1}`, false, outcome.HandlerError, "does not match the tool's output schema"},
			{"wrong type", "count.typed", `{"n":"lots"}`, false, outcome.HandlerError, "at /n: the value does not satisfy type"},
			{"required missing", "count.typed", `{}`, false, outcome.HandlerError, "does not match the tool's output schema"},
			{"none", "count.typed", ``, false, outcome.HandlerError, "the tool declares an output schema and its result has no structuredContent"},
			{"isError need not conform", "count.typed", ``, true, outcome.HandlerError, "the tool reported an error"},
			{"isError with content", "count.typed", `{"why":"x"}`, true, outcome.HandlerError, "the tool reported an error"},
			{"no schema: anything", "count.untyped", `{"n":"lots","evil":1}`, false, "", ""},
			{"no schema: none", "count.untyped", ``, false, "", ""},
		} {
			res := call(c.tool, answer(c.structured, c.isError))
			if c.code == "" {
				expect(t, res, succeeded, "")
				if string(res.GetStructuredContentJson()) != c.structured || text(res) != string(content) {
					t.Errorf("%s: passed on %s / %s", c.name, res.GetStructuredContentJson(), text(res))
				}
				continue
			}
			expect(t, res, failed, c.code)
			if !strings.Contains(res.GetReason(), c.reason) {
				t.Errorf("%s: reason %q, want %q", c.name, res.GetReason(), c.reason)
			}
			if c.isError != res.GetHandlerIsError() || !c.isError && (res.GetContentJson() != nil || res.GetStructuredContentJson() != nil) {
				t.Errorf("%s: the harness got the content %s / %s", c.name, text(res), res.GetStructuredContentJson())
			}
			if strings.Contains(res.GetReason(), "lots") || strings.Contains(res.GetReason(), "evil") {
				t.Errorf("%s: the reason quotes the content: %q", c.name, res.GetReason())
			}
		}
		// Each record says what its answer said.
		rows := h.records("out")
		if len(rows) != 10 {
			t.Fatalf("%d records for 10 attempts", len(rows))
		}
		for _, r := range rows[2:6] {
			if r.Status != failed || r.Code != outcome.HandlerError || !strings.Contains(r.Reason, "outside the protocol") {
				t.Errorf("record %s: %v/%s %q", r.CallID, r.Status, r.Code, r.Reason)
			}
		}
	})
}

// A read's contents are what the bridge can serve (each a uri and a text,
// or a blob that is base64) and name the resource read, or one its
// registration serves: otherwise the attempt ends failed/handler_error,
// recorded so (attack run a1: an upstream's read of evil://other answered
// as file:///etc/passwd, and a 50 MB blob of "!*@#", were passed on and
// recorded succeeded).
func TestReadContentsAreChecked(t *testing.T) {
	forEachStore(t, options{}, func(t *testing.T, h *harness) {
		ctx := context.Background()
		cat := realCatalogue(t, h)
		fake, _ := h.resolver.Resolve(ctx, "files.read")
		target := &sharedosv1.HandlerRef{Target: fake.Registration.GetHandler().GetTarget()}
		for _, u := range []string{"test://static", "test://dir/{name}"} {
			if _, _, err := cat.RegisterResource(ctx, &sharedosv1.ResourceRegistration{Uri: u, Name: "r", Handler: target}); err != nil {
				t.Fatal(err)
			}
		}
		k := newKernelWith(t, h, cat)
		rpc := server.NewRuntimeServer(k)
		granted, err := k.GrantTurn(ctx, &sharedosv1.GrantTurnRequest{TurnId: "rc", Context: alice(), ExpiresAt: timestamppb.New(time.Now().Add(time.Hour))})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		read := func(uri, contents string) *sharedosv1.ToolResult {
			t.Helper()
			h.handler.mu.Lock()
			h.handler.contents = []byte(contents)
			h.handler.mu.Unlock()
			n++
			res, err := rpc.ReadResource(ctx, &sharedosv1.ToolCall{CallId: "call-" + itoa(n), TurnId: "rc", Tool: uri,
				Grant: granted.GetGrant(), PinProof: resourceProof(t, granted, uri), Harness: "test"})
			if err != nil {
				t.Fatal(err)
			}
			h.mu.Lock()
			h.attempts["rc"]++
			h.mu.Unlock()
			return res
		}
		blob := `"` + strings.Repeat("!*@#", 1<<20) + `"`
		for _, c := range []struct {
			name, uri, contents, reason string
		}{
			{"the uri read", "test://static", `[{"uri":"test://static","text":"hi"}]`, ""},
			{"another spelling of it", "test://static", `[{"uri":"TEST://static","blob":"AAAA"}]`, ""},
			{"children the template serves", "test://dir/a", `[{"uri":"test://dir/a","text":"a"},{"uri":"test://dir/b","blob":"QUJD\nRA=="}]`, ""},
			{"another resource", "test://static", `[{"uri":"file:///etc/passwd","text":"root:x:0:0"}]`, "contents naming another resource (contents[0]"},
			{"another after the one read", "test://static", `[{"uri":"test://static","text":"hi"},{"uri":"test://dir/a","text":"a"}]`, "contents naming another resource (contents[1]"},
			{"outside the template", "test://dir/a", `[{"uri":"test://dir/a/..%2F..%2Fstatic","text":"x"}]`, "contents naming another resource (contents[0]"},
			{"a blob that is not base64", "test://static", `[{"uri":"test://static","mimeType":"application/octet-stream","blob":` + blob + `}]`, "contents[0]: blob: not base64"},
			{"no contents item", "test://static", `[{"evil":true},42,"str"]`, "resource uri is missing"},
			{"no text or blob", "test://static", `[{"uri":"test://static"}]`, "neither a text nor a blob"},
			{"none", "test://static", `[]`, "no resource contents"},
			{"not an array", "test://static", `{"uri":"test://static","text":"hi"}`, "no resource contents"},
		} {
			res := read(c.uri, c.contents)
			if c.reason == "" {
				expect(t, res, succeeded, "")
				if text(res) != c.contents {
					t.Errorf("%s: passed on %.80s", c.name, text(res))
				}
				continue
			}
			expect(t, res, failed, outcome.HandlerError)
			if !strings.Contains(res.GetReason(), c.reason) || res.GetContentJson() != nil {
				t.Errorf("%s: reason %q (want %q), content %.40s", c.name, res.GetReason(), c.reason, text(res))
			}
		}
		rows := h.records("rc")
		if len(rows) != n {
			t.Fatalf("%d records for %d attempts", len(rows), n)
		}
		for _, r := range rows[3:] {
			if r.Status != failed || r.Code != outcome.HandlerError {
				t.Errorf("record %s: %v/%s %q", r.CallID, r.Status, r.Code, r.Reason)
			}
		}
	})
}

// A prompt's messages are what the bridge can serve: each a role "user" or
// "assistant" and MCP content (mcpcontent.CheckMessage); otherwise the
// attempt ends failed/handler_error, recorded so, and the harness gets that
// failure (attack run C2: messages mcp-go's client takes and the bridge's
// strict parse does not were recorded succeeded, while the client got a
// JSON-RPC -32603 naming Go types and no outcome). The reason says where,
// never what the messages hold.
func TestPromptMessagesAreChecked(t *testing.T) {
	forEachStore(t, options{}, func(t *testing.T, h *harness) {
		ctx := context.Background()
		rpc, granted, proof := promptTurn(t, h, "pm", &sharedosv1.PromptRegistration{Name: "simple"})
		n := 0
		get := func(messages string) *sharedosv1.ToolResult {
			t.Helper()
			h.handler.mu.Lock()
			h.handler.messages = []byte(messages)
			h.handler.mu.Unlock()
			n++
			res, err := rpc.GetPrompt(ctx, &sharedosv1.ToolCall{CallId: "pm-" + itoa(n), TurnId: "pm", Tool: "simple", ArgumentsJson: []byte(`{}`),
				Grant: granted.GetGrant(), PinProof: proof, Harness: "test", Kind: sharedosv1.CallKind_CALL_KIND_PROMPT})
			if err != nil {
				t.Fatal(err)
			}
			h.mu.Lock()
			h.attempts["pm"]++
			h.mu.Unlock()
			return res
		}
		msg := func(role, content string) string { return `{"role":"` + role + `","content":` + content + `}` }
		for _, c := range []struct {
			name, messages, reason string
		}{
			{"text", `[` + msg("user", `{"type":"text","text":"hi"}`) + `,` + msg("assistant", `{"type":"image","data":"AAAA","mimeType":"image/png"}`) + `]`, ""},
			{"none", `[]`, ""},
			{"a number as text", `[` + msg("user", `{"type":"text","text":123}`) + `]`, "(messages[0]: a role and MCP content)"},
			{"an audience that is no array", `[` + msg("user", `{"type":"text","text":"SECRET","annotations":{"audience":"user"}}`) + `]`, "(messages[0]"},
			{"a link's size that is no number", `[` + msg("user", `{"type":"text","text":"hi"}`) + `,` +
				msg("user", `{"type":"resource_link","uri":"file:///x","name":"x","size":"big"}`) + `]`, "(messages[1]"},
			{"a _meta that is no object", `[` + msg("user", `{"type":"text","text":"SECRET","_meta":"notanobject"}`) + `]`, "(messages[0]"},
			{"data that is no base64", `[` + msg("user", `{"type":"image","data":"!*@#","mimeType":"image/png"}`) + `]`, "(messages[0]"},
			{"another role", `[` + msg("system", `{"type":"text","text":"hi"}`) + `]`, "role is neither user nor assistant (messages[0])"},
			{"no role", `[{"content":{"type":"text","text":"hi"}}]`, "role is neither user nor assistant (messages[0])"},
			{"no content", `[{"role":"user"}]`, "(messages[0]"},
			{"no message", `[null]`, "(messages[0]"},
			{"not an array", msg("user", `{"type":"text","text":"hi"}`), "prompt messages that are not a JSON array"},
		} {
			res := get(c.messages)
			if c.reason == "" {
				expect(t, res, succeeded, "")
				if text(res) != c.messages {
					t.Errorf("%s: passed on %s", c.name, text(res))
				}
				continue
			}
			expect(t, res, failed, outcome.HandlerError)
			if !strings.Contains(res.GetReason(), c.reason) || res.GetContentJson() != nil {
				t.Errorf("%s: reason %q (want %q), content %.40s", c.name, res.GetReason(), c.reason, text(res))
			}
			if strings.Contains(res.GetReason(), "SECRET") || strings.Contains(res.GetReason(), "Go ") {
				t.Errorf("%s: the reason quotes the messages or Go: %q", c.name, res.GetReason())
			}
		}
		rows := h.records("pm")
		if len(rows) != n {
			t.Fatalf("%d records for %d attempts", len(rows), n)
		}
		for i, r := range rows {
			want := failed
			if i < 2 {
				want = succeeded
			}
			if r.Status != want || (want == failed && r.Code != outcome.HandlerError) {
				t.Errorf("record %s: %v/%s %q, want what its answer said", r.CallID, r.Status, r.Code, r.Reason)
			}
		}
	})
}

// Every provider's content is what the bridge can serve (mcpcontent.Check):
// otherwise the attempt ends failed/handler_error, recorded so, and the
// harness gets that failure (attack run S1: a native provider's content
// was held only to be a JSON array, so the bridge answered failed/
// handler_error — "not MCP content" — while the record said succeeded).
// An isError result's content is held to it too: the harness reads it
// after "failed:". The reason says where, never what the content holds.
func TestToolContentIsChecked(t *testing.T) {
	forEachStore(t, options{}, func(t *testing.T, h *harness) {
		answer := func(content string, isError bool) *sharedosv1.ToolResult {
			t.Helper()
			h.handler.mu.Lock()
			h.handler.answer = &sharedosv1.HandleResponse{ContentJson: []byte(content), IsError: isError}
			h.handler.mu.Unlock()
			return h.call("tc", "files.read", `{"path":"/public/a.txt"}`)
		}
		for _, c := range []struct {
			name, content string
			isError       bool
			reason        string
		}{
			{"text and a link", `[{"type":"text","text":"hi"},{"type":"resource_link","uri":"file:///a","name":"a","size":3}]`, false, ""},
			{"none", `[]`, false, ""},
			{"a number as text", `[{"type":"text","text":123}]`, false, "content that is not MCP content (content[0])"},
			{"an audience that is no array", `[{"type":"text","text":"hi"},{"type":"text","text":"SECRET","annotations":{"audience":"user"}}]`, false, "(content[1])"},
			{"a link's size that is no number", `[{"type":"resource_link","uri":"file:///a","name":"a","size":"big"}]`, false, "(content[0])"},
			{"a _meta that is no object", `[{"type":"text","text":"SECRET","_meta":"notanobject"}]`, false, "(content[0])"},
			{"data that is no base64", `[{"type":"image","data":"!*@#","mimeType":"image/png"}]`, false, "(content[0])"},
			{"no MCP type", `[{"type":"hologram"}]`, false, "(content[0])"},
			{"an error's content", `[{"type":"text","text":123}]`, true, "(content[0])"},
			{"not an array", `{"type":"text","text":"hi"}`, false, "content that is not a JSON array"},
		} {
			res := answer(c.content, c.isError)
			if c.reason == "" {
				expect(t, res, succeeded, "")
				if text(res) != c.content {
					t.Errorf("%s: passed on %s", c.name, text(res))
				}
				continue
			}
			expect(t, res, failed, outcome.HandlerError)
			if !strings.Contains(res.GetReason(), c.reason) || res.GetContentJson() != nil || res.GetHandlerIsError() {
				t.Errorf("%s: reason %q (want %q), content %.40s", c.name, res.GetReason(), c.reason, text(res))
			}
			if strings.Contains(res.GetReason(), "SECRET") || strings.Contains(res.GetReason(), "Go ") {
				t.Errorf("%s: the reason quotes the content or Go: %q", c.name, res.GetReason())
			}
		}
		rows := h.records("tc")
		if len(rows) != 10 {
			t.Fatalf("%d records for 10 attempts", len(rows))
		}
		for i, r := range rows {
			want, code := failed, outcome.HandlerError
			if i < 2 {
				want, code = succeeded, ""
			}
			if r.Status != want || r.Code != code {
				t.Errorf("record %s: %v/%s %q, want what its answer said", r.CallID, r.Status, r.Code, r.Reason)
			}
		}
	})
}
