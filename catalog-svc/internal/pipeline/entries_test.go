package pipeline_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/inputround"
	"github.com/sharedos/toolshare/services/contract/outcome"
	"github.com/sharedos/toolshare/services/contract/pinproof"

	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline/grants"
	"github.com/sharedos/toolshare/catalog-svc/internal/server"
)

// TestPromptsAndResources (ADR 0018): a prompts/get or resources/read is an
// attempt like a tools/call — recorded with its kind, resolved within the
// turn's pin (a resource's concrete URI against its template), its
// arguments checked, authorized, dispatched — and refused (recorded) when
// it is not pinned, changed, denied, malformed or missing; a prompt may
// need the client's input first.
func TestPromptsAndResources(t *testing.T) {
	forEachStore(t, options{}, func(t *testing.T, h *harness) {
		ctx := context.Background()
		cat := realCatalogue(t, h)
		fake, _ := h.resolver.Resolve(ctx, "files.read")
		target := &sharedosv1.HandlerRef{Target: fake.Registration.GetHandler().GetTarget()}
		for _, p := range []*sharedosv1.PromptRegistration{
			{Name: "simple", Handler: target},
			{Name: "with_args", Arguments: []*sharedosv1.PromptArgument{{Name: "a", Required: true}, {Name: "b"}}, Handler: target},
			{Name: "review", Handler: target},
			{Name: "secret", Handler: target},
		} {
			if _, _, err := cat.RegisterPrompt(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
		for _, u := range []string{"test://static-text", "test://template/{id}/data", "test://{host}/h", "file:///srv/{name}"} {
			if _, _, err := cat.RegisterResource(ctx, &sharedosv1.ResourceRegistration{Uri: u, Name: "r", Handler: target}); err != nil {
				t.Fatal(err)
			}
		}
		k := newKernelWith(t, h, cat)
		rpc := server.NewRuntimeServer(k)
		granted, err := k.GrantTurn(ctx, &sharedosv1.GrantTurnRequest{TurnId: "pr", Context: alice(), ExpiresAt: timestamppb.New(time.Now().Add(time.Hour))})
		if err != nil || len(granted.GetPrompts()) != 4 || len(granted.GetResources()) != 4 {
			t.Fatalf("GrantTurn: %v, %v", granted, err)
		}
		n := 0
		tree := pinTree(t, granted)
		call := func(kind sharedosv1.CallKind, name, args string) *sharedosv1.ToolResult {
			t.Helper()
			n++
			c := &sharedosv1.ToolCall{CallId: "call-" + itoa(n), TurnId: "pr", Tool: name, ArgumentsJson: []byte(args), Grant: granted.GetGrant(),
				Harness: "test", InputRounds: true, InputMethods: inputround.Names()}
			if kind == sharedosv1.CallKind_CALL_KIND_PROMPT {
				c.PinProof, _ = tree.Prove(pinproof.Prompt, name) // as the bridge does
			} else {
				c.PinProof = resourceProof(t, granted, name)
			}
			var res *sharedosv1.ToolResult
			var err error
			if kind == sharedosv1.CallKind_CALL_KIND_PROMPT {
				res, err = rpc.GetPrompt(ctx, c)
			} else {
				res, err = rpc.ReadResource(ctx, c)
			}
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return res
		}
		prompt, resource := sharedosv1.CallKind_CALL_KIND_PROMPT, sharedosv1.CallKind_CALL_KIND_RESOURCE

		got := call(prompt, "with_args", `{"a":"x"}`)
		expect(t, got, succeeded, "")
		if !strings.Contains(text(got), `prompt with_args {\"a\":\"x\"}`) || got.GetDescription() != "a prompt" {
			t.Errorf("prompt answer %s / %q", text(got), got.GetDescription())
		}
		got = call(resource, "test://template/7/data", ``)
		expect(t, got, succeeded, "")
		if !strings.Contains(text(got), `"uri":"test://template/7/data"`) || !strings.Contains(text(got), "read test://template/{id}/data") {
			t.Errorf("resource answer %s: want the concrete URI read under its template", text(got))
		}
		expect(t, call(resource, "test://static-text", `{}`), succeeded, "")

		// A URI registered on its own after the turn opened (or hidden from
		// it) is not read through a template it also matches.
		hidden := []string{"test://template/hidden/data", "test://template/caf%C3%A9!/data", "test://internal/h", "test://xn--caf-dma/h", "test://template/a%2Bb/data", "file://localhost/srv/hidden"}
		for _, u := range hidden {
			if _, _, err := cat.RegisterResource(ctx, &sharedosv1.ResourceRegistration{Uri: u, Name: "s", Handler: target}); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range []struct {
			kind         sharedosv1.CallKind
			name, args   string
			status       sharedosv1.OperationStatus
			code, reason string
		}{
			{resource, "test://template/hidden/data", ``, denied, outcome.ToolUnavailable, "is not in this turn's catalogue"},
			// ... nor in another spelling (found by review: it was), and the
			// refusal does not name the spelling registered (attack run S3:
			// it told the reader the exact URI a policy hides).
			{resource, "test://template/%68idden/data", ``, denied, outcome.ToolUnavailable, "is not in this turn's catalogue"},
			{resource, "test://template/..%2Fhidden/data", ``, denied, outcome.ToolUnavailable, "no resource of this turn"},
			// ... nor in any other spelling a reader may take for it:
			// non-ASCII raw or decomposed, an escaped sub-delim, the host's
			// case, a trailing dot, file://localhost (found by review).
			{resource, "test://template/cafe\u0301%21/data", ``, denied, outcome.ToolUnavailable, "is not in this turn's catalogue"},
			{resource, "test://template/caf%c3%a9%21/data", ``, denied, outcome.ToolUnavailable, "is not in this turn's catalogue"},
			{resource, "test://INTERNAL/h", ``, denied, outcome.ToolUnavailable, "is not in this turn's catalogue"},
			{resource, "file:///srv/hidden", ``, denied, outcome.ToolUnavailable, "is not in this turn's catalogue"},
			{resource, "test://template/caf%65%CC%81!/data", ``, denied, outcome.ToolUnavailable, "is not in this turn's catalogue"},
			{resource, "test://CAF%C3%89/h", ``, denied, outcome.ToolUnavailable, "is not in this turn's catalogue"},
			{resource, "test://template/hid\tden/data", ``, denied, outcome.ToolUnavailable, "no resource of this turn"},
			// A provider's own spelling (Python's quote) is registered as it is.
			{resource, "test://template/a+b/data", ``, denied, outcome.ToolUnavailable, "is not in this turn's catalogue"},
			{resource, "test://internal./h", ``, denied, outcome.ToolUnavailable, "is not in this turn's catalogue"},
			{resource, "test://elsewhere/h", ``, succeeded, "", ""},
			// At a resource URI's bound, and past it: refused before any
			// template is matched (attack run C4; the bridge refuses it
			// first, as invalid params).
			{resource, "test://template/" + strings.Repeat("a", 2048-len("test://template//data")) + "/data", ``, succeeded, "", ""},
			{resource, "test://template/" + strings.Repeat("a", 2049-len("test://template//data")) + "/data", ``, failed, outcome.InvalidRequest, "a resource URI is at most 2048"},
			{prompt, "unpinned", `{}`, denied, outcome.ToolUnavailable, "not in this turn's catalogue"},
			{prompt, "with_args", `{}`, failed, outcome.InvalidArguments, `"a" is required`},
			{prompt, "with_args", `{"a":"x","c":"y"}`, failed, outcome.InvalidArguments, `no argument "c"`},
			{prompt, "with_args", `{"a":1}`, failed, outcome.InvalidArguments, "must be a string"},
			{prompt, "secret", `{}`, denied, outcome.PermissionDenied, ""},
			{resource, "test://nonexistent", ``, denied, outcome.ToolUnavailable, "no resource of this turn"},
			{resource, "test://template/404/data", ``, denied, outcome.ToolUnavailable, "no resource has URI"},
			{resource, "test://template/{id}/data", ``, denied, outcome.ToolUnavailable, "no resource of this turn"},
		} {
			res := call(c.kind, c.name, c.args)
			if res.GetStatus() != c.status || res.GetCode() != c.code || !strings.Contains(res.GetReason(), c.reason) {
				t.Errorf("%s %s: %v/%s %q, want %v/%s %q", c.kind, c.name, res.GetStatus(), res.GetCode(), res.GetReason(), c.status, c.code, c.reason)
			}
			for _, u := range hidden {
				if u != c.name && strings.Contains(res.GetReason(), u) {
					t.Errorf("%s %s: the refusal %q names %s, a URI the turn does not pin", c.kind, c.name, res.GetReason(), u)
				}
			}
		}

		// A read proves its URI pinned, or not pinned (then a template reads
		// it): without that proof, or with another URI's, it is refused.
		read := func(uri string, proof *sharedosv1.PinProof) *sharedosv1.ToolResult {
			t.Helper()
			n++
			res, err := rpc.ReadResource(ctx, &sharedosv1.ToolCall{CallId: "call-" + itoa(n), TurnId: "pr", Tool: uri,
				Grant: granted.GetGrant(), PinProof: proof, Harness: "test", Kind: resource})
			if err != nil {
				t.Fatal(err)
			}
			return res
		}
		static := resourceProof(t, granted, "test://static-text")
		for what, res := range map[string]*sharedosv1.ToolResult{
			"a template's URI without a proof":           read("test://template/8/data", nil),
			"a template's URI with a pinned URI's proof": read("test://template/9/data", static),
			"the pinned URI with a proof of absence":     read("test://static-text", resourceProof(t, granted, "test://template/8/data")),
			"the pinned URI without a proof":             read("test://static-text", nil),
		} {
			if res.GetStatus() != denied || res.GetCode() != outcome.ToolUnavailable || !strings.Contains(res.GetReason(), "no resource of this turn") {
				t.Errorf("%s: %v/%s %q, want denied/tool_unavailable", what, res.GetStatus(), res.GetCode(), res.GetReason())
			}
		}

		// A grant issued before the resource tree carries every pinned URI
		// and template in a map, and a read needs no proof.
		pinned := map[string]string{}
		for _, r := range granted.GetResources() {
			pinned[r.GetUri()] = r.GetDigest()
		}
		older, err := testKeys.Issue(grants.Grant{TurnID: "pr", Context: alice(), CatalogHash: granted.GetCatalogHash(),
			Tools: map[string]string{}, Resources: pinned, ExpiresAt: time.Now().Add(time.Hour)}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		for _, uri := range []string{"test://static-text", "test://template/5/data"} {
			n++
			res, err := rpc.ReadResource(ctx, &sharedosv1.ToolCall{CallId: "call-" + itoa(n), TurnId: "pr", Tool: uri,
				Grant: older, Harness: "test", Kind: resource})
			if err != nil {
				t.Fatal(err)
			}
			expect(t, res, succeeded, "")
		}

		// A prompt that needs input: INPUT_REQUIRED, then the same attempt.
		first := call(prompt, "review", `{}`)
		expect(t, first, inputRequired, "")
		n++
		reviewProof, _ := tree.Prove(pinproof.Prompt, "review")
		retry := &sharedosv1.ToolCall{CallId: "call-" + itoa(n), TurnId: "pr", Tool: "review", ArgumentsJson: []byte(`{}`), Grant: granted.GetGrant(),
			PinProof: reviewProof, InputRounds: true, InputMethods: inputround.Names(), InputResponsesJson: []byte(`{"who":{"action":"accept"}}`),
			Resume: &sharedosv1.Resume{AttemptId: first.GetInput().GetAttemptId(), Round: first.GetInput().GetRound()}}
		done, err := rpc.GetPrompt(ctx, retry)
		if err != nil {
			t.Fatal(err)
		}
		expect(t, done, succeeded, "")

		// A prompt changed since the turn started is refused.
		if _, _, err := cat.RegisterPrompt(ctx, &sharedosv1.PromptRegistration{Name: "simple", Description: "v2", Handler: target}); err != nil {
			t.Fatal(err)
		}
		res := call(prompt, "simple", `{}`)
		if res.GetCode() != outcome.ToolUnavailable || !strings.Contains(res.GetReason(), "changed since this turn started") {
			t.Errorf("a changed prompt: %v %q", res.GetCode(), res.GetReason())
		}

		rows := h.records("pr")
		if len(rows) != 34 { // the retry of review is its first attempt's
			t.Fatalf("%d records for 34 attempts", len(rows))
		}
		kinds := map[sharedosv1.CallKind]int{}
		for _, r := range rows {
			kinds[r.Kind]++
			if r.Status == pending {
				t.Errorf("record %s still pending", r.CallID)
			}
		}
		if kinds[prompt] != 8 || kinds[resource] != 26 || rows[0].ResolvedTool != "with_args" || rows[1].ResolvedTool != "test://template/{id}/data" ||
			rows[1].RequestedTool != "test://template/7/data" {
			t.Errorf("kinds %v, first rows %+v %+v", kinds, rows[0], rows[1])
		}
		h.mu.Lock()
		h.attempts["pr"] = 34
		h.mu.Unlock()
	})
}

// TestAHiddenTemplateIsNotReadThroughAPinnedOne (attack run C1: a turn
// that pinned test://template/{id}/data read test://template/admin-1/data,
// which the registry reads through test://template/admin-{n}/data, a
// template of the same source the policy hid, and got its data, recorded
// succeeded): a URI is read through a pinned template only when the
// registry would read it through that one too — the first template in
// byte order it matches, in its spelling and a reader's (resourceuri.Key)
// — else it is denied/tool_unavailable, recorded, nothing run, the refusal
// naming no hidden registration. A template not pinned that the registry
// takes after the pinned one takes nothing from it.
func TestAHiddenTemplateIsNotReadThroughAPinnedOne(t *testing.T) {
	forEachStore(t, options{}, func(t *testing.T, h *harness) {
		ctx := context.Background()
		cat := realCatalogue(t, h)
		fake, _ := h.resolver.Resolve(ctx, "files.read")
		target := &sharedosv1.HandlerRef{Target: fake.Registration.GetHandler().GetTarget()}
		register := func(uris ...string) {
			t.Helper()
			for _, u := range uris {
				if _, _, err := cat.RegisterResource(ctx, &sharedosv1.ResourceRegistration{Uri: u, Name: "r", Handler: target}); err != nil {
					t.Fatal(err)
				}
			}
		}
		register("test://template/{id}/data", "{s}://spelled/{p}")
		k := newKernelWith(t, h, cat)
		rpc := server.NewRuntimeServer(k)
		granted, err := k.GrantTurn(ctx, &sharedosv1.GrantTurnRequest{TurnId: "hidden", Context: alice(), ExpiresAt: timestamppb.New(time.Now().Add(time.Hour))})
		if err != nil || len(granted.GetResources()) != 2 {
			t.Fatalf("GrantTurn: %v, %v", granted, err)
		}
		// Not in the turn's pin, as a policy hiding them would leave them.
		unpinned := []string{"test://template/admin-{n}/data", "test://spelled/{q}", "test://template/{id}/dat{a}"}
		register(unpinned...)
		n := 0
		for _, c := range []struct {
			uri  string
			read bool
		}{
			{"test://template/admin-1/data", false},   // admin-{n} comes first
			{"test://template/admin-%31/data", false}, // in any spelling it takes
			{"test://spelled/x", false},               // test://spelled/{q} before {s}://spelled/{p}
			{"TEST://spelled/x", false},               // read as test://spelled/x
			{"test://template/7/data", false},         // {id}/dat{a} matches too, though after: a provider may pick it
			{"test://template/admin-/data", false},    // admin-{n} takes no empty value, but {id}/dat{a} matches
			{"other://spelled/x", true},
		} {
			n++
			ran := h.handler.calls.Load()
			res, err := rpc.ReadResource(ctx, &sharedosv1.ToolCall{CallId: "call-" + itoa(n), TurnId: "hidden", Tool: c.uri, Grant: granted.GetGrant(),
				PinProof: resourceProof(t, granted, c.uri), Harness: "test", Kind: sharedosv1.CallKind_CALL_KIND_RESOURCE})
			if err != nil {
				t.Fatal(err)
			}
			if c.read {
				expect(t, res, succeeded, "")
				continue
			}
			if res.GetStatus() != denied || res.GetCode() != outcome.ToolUnavailable || !strings.Contains(res.GetReason(), "is not in this turn's catalogue") {
				t.Errorf("%s: %v/%s %q, want denied/tool_unavailable", c.uri, res.GetStatus(), res.GetCode(), res.GetReason())
			}
			for _, u := range unpinned {
				if strings.Contains(res.GetReason(), u) {
					t.Errorf("%s: the refusal %q names %s, which the turn does not pin", c.uri, res.GetReason(), u)
				}
			}
			if h.handler.calls.Load() != ran {
				t.Errorf("%s: the provider was asked", c.uri)
			}
		}
		rows := h.records("hidden")
		if len(rows) != n {
			t.Fatalf("%d records for %d reads", len(rows), n)
		}
		h.mu.Lock()
		h.attempts["hidden"] = n
		h.mu.Unlock()
	})
}

// promptTurn is a kernel serving the prompt p (its handler the fake
// provider's) over h, a turn turnID of alice's granted by it, and the
// proof that the turn pins p.
func promptTurn(t *testing.T, h *harness, turnID string, p *sharedosv1.PromptRegistration) (*server.RuntimeServer, *sharedosv1.GrantTurnResponse, *sharedosv1.PinProof) {
	t.Helper()
	ctx := context.Background()
	cat := realCatalogue(t, h)
	fake, _ := h.resolver.Resolve(ctx, "files.read")
	p.Handler = &sharedosv1.HandlerRef{Target: fake.Registration.GetHandler().GetTarget()}
	if _, _, err := cat.RegisterPrompt(ctx, p); err != nil {
		t.Fatal(err)
	}
	k := newKernelWith(t, h, cat)
	granted, err := k.GrantTurn(ctx, &sharedosv1.GrantTurnRequest{TurnId: turnID, Context: alice(), ExpiresAt: timestamppb.New(time.Now().Add(time.Hour))})
	if err != nil {
		t.Fatal(err)
	}
	proof, _ := pinTree(t, granted).Prove(pinproof.Prompt, p.GetName())
	return server.NewRuntimeServer(k), granted, proof
}

// TestPromptArgumentsParsedAsAToolsAre: a prompt's arguments go through
// the kernel's one parse of a tool's (one JSON object of valid UTF-8, no
// duplicate or case-folded keys). The policy decides on these bytes and
// the provider parses them again, so a duplicate key one reads first and
// the other last ("/public/x" for the policy, "/private/y" for the
// provider), or bytes two decoders repair differently, must be refused
// failed/invalid_arguments, recorded, before anything is authorized.
func TestPromptArgumentsParsedAsAToolsAre(t *testing.T) {
	forEachStore(t, options{}, func(t *testing.T, h *harness) {
		ctx := context.Background()
		rpc, granted, proof := promptTurn(t, h, "pa", &sharedosv1.PromptRegistration{Name: "with_args",
			Arguments: []*sharedosv1.PromptArgument{{Name: "a"}, {Name: "b"}}})
		authz := h.authz.calls.Load()
		cases := []struct{ args, reason string }{
			{`{"a":"/public/x","a":"/private/y"}`, `the key "a" appears twice`},
			{`{"a":"/public/x","A":"/private/y"}`, "differ only in case"},
			{"{\"a\":\"\xff\"}", "not valid UTF-8"},
			{`null`, "not a JSON object"},
			{`["a"]`, "not a JSON object"},
			{`{"a":"x"} {"a":"y"}`, "more than one JSON value"},
		}
		for i, c := range cases {
			res, err := rpc.GetPrompt(ctx, &sharedosv1.ToolCall{CallId: "pa-" + itoa(i), TurnId: "pa", Tool: "with_args", ArgumentsJson: []byte(c.args),
				Grant: granted.GetGrant(), PinProof: proof, Harness: "test", Kind: sharedosv1.CallKind_CALL_KIND_PROMPT})
			if err != nil {
				t.Fatal(err)
			}
			if res.GetStatus() != failed || res.GetCode() != outcome.InvalidArguments || !strings.Contains(res.GetReason(), c.reason) {
				t.Errorf("prompt arguments %q: %v/%s %q, want failed/invalid_arguments saying %q", c.args, res.GetStatus(), res.GetCode(), res.GetReason(), c.reason)
			}
		}
		h.mu.Lock()
		h.attempts["pa"] = len(cases)
		h.mu.Unlock()
		if n := h.authz.calls.Load() - authz; n != 0 {
			t.Errorf("authorized %d times: arguments that do not parse must be refused before the policy reads them", n)
		}
		for _, r := range h.records("pa") {
			if r.Status != failed || r.Code != outcome.InvalidArguments || r.Kind != sharedosv1.CallKind_CALL_KIND_PROMPT {
				t.Errorf("record %+v: want each refusal recorded failed/invalid_arguments, a prompt's", r)
			}
		}
	})
}
