package pipeline_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/outcome"
	"github.com/sharedos/toolshare/services/contract/pinproof"
	"github.com/sharedos/toolshare/services/contract/projection"
	"github.com/sharedos/toolshare/services/contract/systemidentity"
	"github.com/sharedos/toolshare/services/platform/grpcx"

	"github.com/sharedos/toolshare/catalog-svc/internal/catalog"
	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline"
	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline/records/memory"
	"github.com/sharedos/toolshare/catalog-svc/internal/server"
	storememory "github.com/sharedos/toolshare/catalog-svc/internal/store/memory"
)

// TestWithRealCatalogue drives the kernel from the real catalogue service:
// the pin is what ListTools published, so a digest mismatch between the two
// packages would refuse every call. Then the tool drifts and is deregistered.
func TestWithRealCatalogue(t *testing.T) {
	forEachStore(t, options{}, func(t *testing.T, h *harness) {
		ctx := context.Background()
		cat := realCatalogue(t, h)
		fake, _ := h.resolver.Resolve(ctx, "files.read")
		reg := &sharedosv1.ToolRegistration{
			Name:            "files.read",
			Description:     "Read a UTF-8 text file by absolute path.",
			InputSchemaJson: []byte(pathSchema),
			AnnotationsJson: []byte(`{"readOnlyHint":true}`),
			Metadata:        &sharedosv1.ToolMetadata{Namespace: "files", Source: "provider:files"},
			Class:           sharedosv1.ToolClass_TOOL_CLASS_MANAGED,
			Requirement:     &sharedosv1.Requirement{Action: "read", Resource: "file:{path}"},
			Handler:         &sharedosv1.HandlerRef{Target: fake.Registration.GetHandler().GetTarget(), Timeout: durationpb.New(5 * time.Second)},
		}
		if _, _, err := cat.Register(ctx, reg); err != nil {
			t.Fatalf("Register: %v", err)
		}
		if _, _, err := cat.RegisterPrompt(ctx, &sharedosv1.PromptRegistration{Name: "test_simple_prompt",
			Handler: &sharedosv1.HandlerRef{Target: "127.0.0.1:1"}}); err != nil {
			t.Fatalf("RegisterPrompt: %v", err)
		}
		listing, err := cat.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		k := newKernelWith(t, h, cat)
		policy := &sharedosv1.ToolPolicy{Mode: sharedosv1.PolicyMode_POLICY_MODE_STRICT, HarnessLocal: []string{"patch"}}
		harness := &sharedosv1.HarnessIdentity{Name: "pi", Version: "0.74.2",
			McpSupport: sharedosv1.McpSupport_MCP_SUPPORT_EXTENSION, ExtensionName: "pi-mcp-adapter"}
		granted, err := k.GrantTurn(ctx, &sharedosv1.GrantTurnRequest{TurnId: "cat", Context: alice(), ExpiresAt: timestamppb.New(time.Now().Add(time.Hour)),
			Harness: harness, DeclaredModel: "fake-model", Policy: policy})
		if err != nil {
			t.Fatalf("GrantTurn: %v", err)
		}
		if granted.GetCatalogHash() != listing.CatalogHash || len(granted.GetTools()) != 1 ||
			granted.GetTools()[0].GetDigest() != projection.Digest(granted.GetTools()[0].GetCanonicalJson()) {
			t.Fatalf("GrantTurn pinned %v", granted)
		}
		// The prompts and resources the context may list are pinned too,
		// with their own hash (ADR 0018).
		pr, err := cat.ListPromptsResources(ctx, alice())
		if err != nil {
			t.Fatal(err)
		}
		g, err := testKeys.Verify(granted.GetGrant(), "cat", time.Now())
		if err != nil || len(granted.GetPrompts()) != 1 || granted.GetPromptsResourcesHash() != pr.Hash || g.PromptsResourcesHash != pr.Hash {
			t.Fatalf("GrantTurn pinned prompts %v (grant %+v, %v)", granted.GetPrompts(), g, err)
		}
		if p, ok := pinTree(t, granted).Prove(pinproof.Prompt, "test_simple_prompt"); !ok ||
			p.GetDigest() != granted.GetPrompts()[0].GetDigest() {
			t.Fatalf("the pinned prompt's proof: %v", p)
		}
		// The grant signs the pin's Merkle root, not the pin; each call
		// proves its one tool (as the bridge does).
		tree := pinTree(t, granted)
		if g.Tools != nil || g.Prompts != nil || g.PinRoot != tree.Root() || g.PinSize != 2 {
			t.Fatalf("grant pin: maps %v %v, root %q size %d; want no maps, root %q size 2 (a tool and a prompt)",
				g.Tools, g.Prompts, g.PinRoot, g.PinSize, tree.Root())
		}
		proof, _ := tree.Prove(pinproof.Tool, "files.read")
		invokeWith := func(proof *sharedosv1.PinProof, args string) *sharedosv1.ToolResult {
			c := h.newCall("cat", "files.read", args)
			c.Grant, c.PinProof = granted.GetGrant(), proof
			res, err := k.InvokeTool(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			h.mu.Lock()
			h.attempts["cat"]++
			h.mu.Unlock()
			return res
		}
		invoke := func(args string) *sharedosv1.ToolResult { return invokeWith(proof, args) }
		expect(t, invoke(`{"path":"/public/a.txt"}`), succeeded, "")
		expect(t, invoke(`{"path":"/public/../private/a.txt"}`), denied, outcome.PermissionDenied)
		expect(t, invoke(`{"path":1}`), failed, outcome.InvalidArguments)
		// Without its proof, or with one for another digest, the tool is not
		// in the turn's catalogue.
		for _, bad := range []*sharedosv1.PinProof{nil, {Index: proof.GetIndex(), Digest: strings.Repeat("0", 64), Hashes: proof.GetHashes()}} {
			expect(t, invokeWith(bad, `{"path":"/public/a.txt"}`), denied, outcome.ToolUnavailable)
		}

		reg.Description = "Read a file (changed after the turn pinned it)."
		if _, _, err := cat.Update(ctx, reg, 0); err != nil {
			t.Fatalf("Update: %v", err)
		}
		expect(t, invoke(`{"path":"/public/a.txt"}`), denied, outcome.ToolUnavailable)
		if err := cat.Deregister(ctx, "files.read"); err != nil {
			t.Fatal(err)
		}
		expect(t, invoke(`{"path":"/public/a.txt"}`), denied, outcome.ToolUnavailable)
		rows := h.records("cat")
		if len(rows) != 7 || rows[0].RequestedTool != "files.read" || rows[0].CatalogHash != listing.CatalogHash {
			t.Fatalf("rows = %+v", rows)
		}
		// Every record carries the run's SystemIdentity from the grant
		// (ADR 0014), whatever the call itself names as its harness.
		for _, r := range rows {
			if r.Harness != "pi" || r.HarnessVersion != "0.74.2" || r.MCPSupport != "extension" || r.Extension != "pi-mcp-adapter" ||
				r.DeclaredModel != "fake-model" || r.ToolPolicyDigest != systemidentity.PolicyDigest(policy) || r.ToolPolicyDigest == "" {
				t.Errorf("record identity = %+v", r)
			}
		}
	})
}

// realCatalogue is a started catalogue service on a memory store, filtered
// by h's policy decision point.
func realCatalogue(t *testing.T, h *harness) *catalog.Service {
	t.Helper()
	cat, err := catalog.New(catalog.Config{Store: storememory.New(), Filter: h.authzClient, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := cat.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	return cat
}

// pinTree is the Merkle tree over a granted turn's tools and prompts, as
// the bridge builds it from the lease to prove each call's entry.
func pinTree(t *testing.T, granted *sharedosv1.GrantTurnResponse) *pinproof.Tree {
	t.Helper()
	tools, prompts := map[string]string{}, map[string]string{}
	for _, tl := range granted.GetTools() {
		tools[tl.GetName()] = tl.GetDigest()
	}
	for _, p := range granted.GetPrompts() {
		prompts[p.GetName()] = p.GetDigest()
	}
	tree, err := pinproof.Build(tools, prompts)
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

// resourceProof is the pin proof the bridge sends with a read of uri: its
// inclusion among the granted concrete URIs, else its absence from them.
func resourceProof(t *testing.T, granted *sharedosv1.GrantTurnResponse, uri string) *sharedosv1.PinProof {
	t.Helper()
	resources := map[string]string{}
	for _, r := range granted.GetResources() {
		resources[r.GetUri()] = r.GetDigest()
	}
	tree, err := pinproof.BuildResources(resources)
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := tree.Prove(pinproof.Resource, uri); ok {
		return p
	}
	p, _ := tree.ProveAbsent(pinproof.Resource, uri)
	return p
}

// A context that sees more than one turn carries (here 70 tools of two
// 250 KiB schemas each, every one within its own bounds) is refused
// CATALOGUE_TOO_LARGE, saying how much it sees, where the bridge used to
// fail to receive the grant (ResourceExhausted, an OpenTurn failing with
// no reason; review finding). The records store plays no part: the
// embedded one.
func TestGrantTurnRefusesACatalogueTooLargeForATurn(t *testing.T) {
	store := memory.New()
	h := newHarness(t, store, store.Len, options{})
	ctx := context.Background()
	cat := realCatalogue(t, h)
	fake, _ := h.resolver.Resolve(ctx, "files.read")
	schema := []byte(`{"type":"object","default":{"x":"` + strings.Repeat("a", 250<<10) + `"}}`)
	var regs []*sharedosv1.ToolRegistration
	for i := range 70 {
		regs = append(regs, &sharedosv1.ToolRegistration{
			Name: fmt.Sprintf("big.t%02d", i), Description: "A tool with a large schema.",
			InputSchemaJson: schema, OutputSchemaJson: schema,
			Metadata:    &sharedosv1.ToolMetadata{Namespace: "big", Source: "provider:big"},
			Class:       sharedosv1.ToolClass_TOOL_CLASS_MANAGED,
			Requirement: &sharedosv1.Requirement{Action: "call", Resource: "tool:big"},
			Handler:     &sharedosv1.HandlerRef{Target: fake.Registration.GetHandler().GetTarget()},
		})
	}
	if _, err := cat.RegisterBatch(ctx, regs); err != nil {
		t.Fatal(err)
	}
	rpc := server.NewRuntimeServer(newKernelWith(t, h, cat))
	_, err := rpc.GrantTurn(ctx, &sharedosv1.GrantTurnRequest{TurnId: "big", Context: alice(), ExpiresAt: timestamppb.New(time.Now().Add(time.Hour))})
	if _, reason := grpcx.ErrorReason(err); status.Code(err) != codes.FailedPrecondition || reason != "CATALOGUE_TOO_LARGE" ||
		!strings.Contains(err.Error(), "70 tools") {
		t.Fatalf("GrantTurn of a context seeing 70 MB = %v, want FailedPrecondition CATALOGUE_TOO_LARGE naming 70 tools", err)
	}
}

// revisionLister lists no tools, prompts or resources, each listing under
// the revision revs gives its n-th listing (tools and prompts/resources
// alternate).
type revisionLister struct {
	pipeline.ToolResolver
	n    int
	revs func(n int) string
}

func (l *revisionLister) ListTools(context.Context, *sharedosv1.AccessContext) (catalog.Listing, error) {
	l.n++
	return catalog.Listing{Tools: []*sharedosv1.PublishedTool{}, PolicyRevision: l.revs(l.n - 1)}, nil
}

func (l *revisionLister) ListPromptsResources(context.Context, *sharedosv1.AccessContext) (catalog.PromptsResources, error) {
	l.n++
	return catalog.PromptsResources{PolicyRevision: l.revs(l.n - 1)}, nil
}

// A turn's tools and its prompts and resources are listed under one policy
// revision (review: a reload between the two listings pinned a catalogue no
// one policy gives): listed again once, then the grant fails closed.
func TestGrantTurnListsUnderOneRevision(t *testing.T) {
	forEachStore(t, options{}, func(t *testing.T, h *harness) {
		grant := func(revs func(int) string) (*sharedosv1.GrantTurnResponse, int, error) {
			l := &revisionLister{ToolResolver: h.resolver, revs: revs}
			k := newKernelWith(t, h, l)
			g, err := k.GrantTurn(t.Context(), &sharedosv1.GrantTurnRequest{TurnId: fmt.Sprintf("rev-%p", l), Context: alice(),
				ExpiresAt: timestamppb.New(time.Now().Add(time.Hour))})
			return g, l.n, err
		}
		if _, n, err := grant(func(n int) string { return map[bool]string{true: "r1", false: "r2"}[n == 0] }); err != nil || n != 4 {
			t.Fatalf("a reload between the listings: %v after %d listings, want a grant after 4", err, n)
		}
		g, _, err := grant(func(n int) string { return fmt.Sprint("r", n%2) })
		if err == nil || g != nil || !strings.Contains(err.Error(), "policy changed") {
			t.Fatalf("listings under two revisions: %v, %v; want no grant", g, err)
		}
	})
}
