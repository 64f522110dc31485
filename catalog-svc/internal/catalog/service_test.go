package catalog_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/accesscontext"
	"github.com/sharedos/toolshare/services/contract/accesscontext/accesscontexttest"
	"github.com/sharedos/toolshare/services/contract/cataloghash"
	"github.com/sharedos/toolshare/services/contract/outcome"
	"github.com/sharedos/toolshare/services/contract/projection"
	"github.com/sharedos/toolshare/services/platform/grpcx"

	"github.com/sharedos/toolshare/catalog-svc/internal/catalog"
	"github.com/sharedos/toolshare/catalog-svc/internal/store"
	"github.com/sharedos/toolshare/catalog-svc/internal/store/memory"
	"github.com/sharedos/toolshare/catalog-svc/internal/store/storetest"
)

func TestRegisterGetUpdateDeregister(t *testing.T) {
	svc := newService(t, nil, nil)
	ctx := testCtx(t)
	in := reg("files.read")
	stored, pub, err := svc.Register(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if stored.GetRevision() != 1 || stored.GetCreatedAt() == nil {
		t.Errorf("stored revision %d created %v", stored.GetRevision(), stored.GetCreatedAt())
	}
	want, err := projection.Publish(projection.FromPublished(&sharedosv1.PublishedTool{
		Name: in.Name, Description: in.Description, InputSchemaJson: in.InputSchemaJson,
		OutputSchemaJson: in.OutputSchemaJson, AnnotationsJson: in.AnnotationsJson, Metadata: in.Metadata,
	}))
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(pub, want) {
		t.Errorf("published\n got %v\nwant %v", pub, want)
	}
	// The published tool has no authority.
	if strings.Contains(string(pub.GetCanonicalJson()), "7404") || strings.Contains(string(pub.GetCanonicalJson()), "file:{path}") {
		t.Errorf("authority leaked into the projection: %s", pub.GetCanonicalJson())
	}
	// Get (from the store) and Resolve (from the cache) agree with Register.
	gotReg, gotPub, err := svc.Get(ctx, "files.read")
	if err != nil || !proto.Equal(gotReg, stored) || !proto.Equal(gotPub, want) {
		t.Fatalf("Get = %v / %v, %v", gotReg, gotPub, err)
	}
	res, err := svc.Resolve(ctx, "files.read")
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(res.Published, want) || res.Digest != projection.Digest(want.GetCanonicalJson()) || res.InputSchema == nil || !proto.Equal(res.Registration, stored) {
		t.Errorf("Resolve = %+v", res)
	}
	if err := res.InputSchema.Validate(map[string]any{"path": "/a"}); err != nil {
		t.Errorf("compiled input schema rejects valid args: %v", err)
	}
	if err := res.InputSchema.Validate(map[string]any{}); err == nil {
		t.Error("compiled input schema accepts args without the required path")
	}

	// Duplicate name.
	if _, _, err := svc.Register(ctx, reg("files.read")); !errors.Is(err, catalog.ErrAlreadyExists) {
		t.Errorf("duplicate Register error = %v, want ErrAlreadyExists", err)
	}
	// Collisions are InvalidArgument naming the rule and the existing tool.
	for name, rule := range map[string]string{"files_read": catalog.RuleCollisionKey, "Files.Read": catalog.RuleCaseInsensitive} {
		r := reg(name)
		if !strings.Contains(name, ".") {
			// An unqualified name can only be a harness-local tool.
			r.Class, r.Metadata.Namespace = sharedosv1.ToolClass_TOOL_CLASS_HARNESS_LOCAL, ""
		}
		_, _, err := svc.Register(ctx, r)
		var ve *catalog.ValidationError
		if !errors.As(err, &ve) || ve.Field != "name" || ve.Rule != rule || !strings.Contains(ve.Detail, `"files.read"`) {
			t.Errorf("Register(%q) error = %v, want %s naming files.read", name, err, rule)
		}
	}

	// Update: revision increments; the cache follows.
	up := reg("files.read")
	up.Description = "Reads a file, v2."
	upd, upPub, err := svc.Update(ctx, up, 1)
	if err != nil || upd.GetRevision() != 2 || upPub.GetDescription() != up.Description {
		t.Fatalf("Update = %v, %v", upd, err)
	}
	if res, _ := svc.Resolve(ctx, "files.read"); res.Published.GetDescription() != up.Description || res.Registration.GetRevision() != 2 {
		t.Errorf("cache not updated: %v", res.Registration)
	}
	if _, _, err := svc.Update(ctx, up, 1); !errors.Is(err, catalog.ErrRevisionMismatch) {
		t.Errorf("stale Update error = %v, want ErrRevisionMismatch", err)
	}
	if _, _, err := svc.Update(ctx, reg("files.write"), 0); !errors.Is(err, catalog.ErrNotFound) {
		t.Errorf("Update of missing tool error = %v, want ErrNotFound", err)
	}
	bad := reg("files.read")
	bad.Description = "\u202e"
	if _, _, err := svc.Update(ctx, bad, 0); !errors.Is(err, catalog.ErrInvalid) {
		t.Errorf("Update with poisoned description error = %v, want ErrInvalid", err)
	}

	// Deregister.
	if err := svc.Deregister(ctx, "files.read"); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Resolve(ctx, "files.read"); !errors.Is(err, catalog.ErrNotFound) {
		t.Errorf("Resolve after Deregister error = %v, want ErrNotFound", err)
	}
	for _, name := range []string{"files.read", "bad name", ""} {
		if err := svc.Deregister(ctx, name); !errors.Is(err, catalog.ErrNotFound) {
			t.Errorf("Deregister(%q) error = %v, want ErrNotFound", name, err)
		}
		if _, _, err := svc.Get(ctx, name); !errors.Is(err, catalog.ErrNotFound) {
			t.Errorf("Get(%q) error = %v, want ErrNotFound", name, err)
		}
	}
}

// Resolve takes any bytes and matches exactly.
func TestResolveExactMatchOnly(t *testing.T) {
	svc := newService(t, nil, nil)
	if _, _, err := svc.Register(testCtx(t), reg("files.read")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"files_read", "FILES.READ", "files.read ", " files.read", "files.read\x00", "\xff\xfe", "", strings.Repeat("x", 1<<16), "files.rea"} {
		if _, err := svc.Resolve(testCtx(t), name); !errors.Is(err, catalog.ErrNotFound) {
			t.Errorf("Resolve(%q) error = %v, want ErrNotFound", name, err)
		}
	}
}

func TestResolveBeforeStart(t *testing.T) {
	svc, err := catalog.New(catalog.Config{Store: memory.New()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Resolve(testCtx(t), "files.read"); !errors.Is(err, catalog.ErrNotReady) {
		t.Errorf("Resolve before Start error = %v, want ErrNotReady", err)
	}
	if _, err := svc.ListTools(testCtx(t), nil); !errors.Is(err, catalog.ErrNotReady) {
		t.Errorf("ListTools before Start error = %v, want ErrNotReady", err)
	}
}

// registerAll registers a mixed catalogue for listing tests.
func registerAll(t *testing.T, svc *catalog.Service, names ...string) {
	t.Helper()
	for _, n := range names {
		r := reg(n)
		if _, _, err := svc.Register(testCtx(t), r); err != nil {
			t.Fatalf("Register(%q): %v", n, err)
		}
	}
}

func names(tools []*sharedosv1.PublishedTool) []string {
	out := make([]string, len(tools))
	for i, t := range tools {
		out[i] = t.GetName()
	}
	return out
}

// hashOf is the spec's catalogHash computed independently from the tools.
func hashOf(tools []*sharedosv1.PublishedTool) string {
	es := make([]cataloghash.Entry, len(tools))
	for i, t := range tools {
		c, err := projection.Canonical(projection.FromPublished(t))
		if err != nil {
			panic(err)
		}
		es[i] = cataloghash.Entry{Name: t.GetName(), Canonical: c}
	}
	return cataloghash.Sum(es)
}

// Two contexts get two answers: never a global union.
func TestListToolsPerContext(t *testing.T) {
	f := &fakeFilter{allow: func(actx *sharedosv1.AccessContext, tool *sharedosv1.ToolFacts) bool {
		switch actx.GetPrincipal() {
		case "alice":
			return tool.GetNamespace() == "files"
		case "bob":
			return tool.GetNamespace() == "github" || tool.GetName() == "files.read"
		}
		return false
	}}
	svc := newService(t, nil, f)
	registerAll(t, svc, "github.search", "files.write", "files.read", "github.issue", "notion.page")

	alice, err := svc.ListTools(testCtx(t), &sharedosv1.AccessContext{Principal: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	bob, err := svc.ListTools(testCtx(t), &sharedosv1.AccessContext{Principal: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	nobody, err := svc.ListTools(testCtx(t), &sharedosv1.AccessContext{Principal: "mallory"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := names(alice.Tools), []string{"files.read", "files.write"}; !slices.Equal(got, want) {
		t.Errorf("alice sees %v, want %v", got, want)
	}
	if got, want := names(bob.Tools), []string{"files.read", "github.issue", "github.search"}; !slices.Equal(got, want) {
		t.Errorf("bob sees %v, want %v", got, want)
	}
	if len(nobody.Tools) != 0 {
		t.Errorf("mallory sees %v, want nothing", names(nobody.Tools))
	}
	for who, l := range map[string]catalog.Listing{"alice": alice, "bob": bob, "mallory": nobody} {
		if l.CatalogHash != hashOf(l.Tools) {
			t.Errorf("%s: catalogHash %s, want %s", who, l.CatalogHash, hashOf(l.Tools))
		}
	}
	if alice.CatalogHash == bob.CatalogHash {
		t.Error("two contexts with different tools got the same catalogHash")
	}
	if nobody.CatalogHash != cataloghash.Sum(nil) {
		t.Errorf("empty catalogue hash %s, want %s", nobody.CatalogHash, cataloghash.Sum(nil))
	}
	if f.calls != 3 {
		t.Errorf("FilterTools called %d times for 3 listings, want one call each", f.calls)
	}

	// The admin listing (no context) is every published tool, unfiltered.
	all, err := svc.ListTools(testCtx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(all.Tools); !slices.Equal(got, []string{"files.read", "files.write", "github.issue", "github.search", "notion.page"}) {
		t.Errorf("admin listing %v", got)
	}
	if all.CatalogHash != hashOf(all.Tools) {
		t.Errorf("admin catalogHash %s, want %s", all.CatalogHash, hashOf(all.Tools))
	}
	if f.calls != 3 {
		t.Error("the admin listing called the filter")
	}
}

// Authz answers out of order, with duplicates and with unknown names: the
// listing is still sorted, deduplicated, and never grows.
func TestListToolsToleratesOddFilterAnswers(t *testing.T) {
	svc := newService(t, nil, filterFunc(func(*sharedosv1.FilterToolsRequest) []string {
		return []string{"github.search", "files.read", "ghost.tool", "files.read"}
	}))
	registerAll(t, svc, "files.read", "github.search", "notion.page")
	l, err := svc.ListTools(testCtx(t), &sharedosv1.AccessContext{Principal: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(l.Tools); !slices.Equal(got, []string{"files.read", "github.search"}) {
		t.Errorf("listing %v", got)
	}
	if l.CatalogHash != hashOf(l.Tools) {
		t.Error("catalogHash does not match the listed tools")
	}
}

// If authz-svc fails, ListTools fails: it never falls back to an unfiltered
// catalogue.
func TestListToolsAuthzDown(t *testing.T) {
	f := &fakeFilter{err: status.Error(codes.Unavailable, "connection refused"), allow: func(*sharedosv1.AccessContext, *sharedosv1.ToolFacts) bool { return true }}
	svc := newService(t, nil, f)
	registerAll(t, svc, "files.read")
	l, err := svc.ListTools(testCtx(t), &sharedosv1.AccessContext{Principal: "alice"})
	if !errors.Is(err, catalog.ErrAuthzUnavailable) || l.Tools != nil || l.CatalogHash != "" {
		t.Fatalf("ListTools with authz down = %v, %v; want ErrAuthzUnavailable and nothing", l, err)
	}
	noFilter := newService(t, nil, nil)
	registerAll(t, noFilter, "files.read")
	if _, err := noFilter.ListTools(testCtx(t), &sharedosv1.AccessContext{Principal: "alice"}); !errors.Is(err, catalog.ErrAuthzUnavailable) {
		t.Fatalf("ListTools without a filter error = %v, want ErrAuthzUnavailable", err)
	}
}

type filterFunc func(*sharedosv1.FilterToolsRequest) []string

func (f filterFunc) FilterTools(_ context.Context, in *sharedosv1.FilterToolsRequest, _ ...grpc.CallOption) (*sharedosv1.FilterToolsResponse, error) {
	return &sharedosv1.FilterToolsResponse{AllowedTools: f(in)}, nil
}

// The filter sees the facts policies key on.
func TestListToolsSendsToolFacts(t *testing.T) {
	var got *sharedosv1.FilterToolsRequest
	svc := newService(t, nil, filterFunc(func(in *sharedosv1.FilterToolsRequest) []string { got = in; return nil }))
	registerAll(t, svc, "files.read")
	actx := &sharedosv1.AccessContext{Principal: "alice", Tenant: "acme", Roles: []string{"engineer"}}
	if _, err := svc.ListTools(testCtx(t), actx); err != nil {
		t.Fatal(err)
	}
	want := &sharedosv1.FilterToolsRequest{
		Context: actx,
		Action:  "list",
		Tools: []*sharedosv1.ToolFacts{{
			Name: "files.read", Namespace: "files", Class: "managed", Source: "provider:files",
			AnnotationsJson: []byte(`{"title":"Read file","readOnlyHint":true}`),
		}},
	}
	if !proto.Equal(got, want) {
		t.Errorf("FilterTools request\n got %v\nwant %v", got, want)
	}
}

func TestRegisterBatch(t *testing.T) {
	svc := newService(t, nil, nil)
	var regs []*sharedosv1.ToolRegistration
	for i := range 20 {
		regs = append(regs, reg(fmt.Sprintf("bulk.t%02d", i)))
	}
	stored, err := svc.RegisterBatch(testCtx(t), regs)
	if err != nil || len(stored) != 20 || stored[3].GetName() != "bulk.t03" || stored[3].GetRevision() != 1 {
		t.Fatalf("RegisterBatch = %v, %v", stored, err)
	}
	l, _ := svc.ListTools(testCtx(t), nil)
	if len(l.Tools) != 20 {
		t.Errorf("cache holds %d tools after the batch, want 20", len(l.Tools))
	}
	// A batch's input schemas compile on first Resolve (not handed over).
	res, err := svc.Resolve(testCtx(t), "bulk.t03")
	if err != nil || res.InputSchema == nil {
		t.Fatalf("Resolve(bulk.t03) = %v, %v; want its compiled input schema", res, err)
	}
	if err := res.InputSchema.Validate(map[string]any{"path": "/a"}); err != nil {
		t.Errorf("valid arguments refused: %v", err)
	}
	if err := res.InputSchema.Validate(map[string]any{}); err == nil {
		t.Error("arguments without the required path accepted")
	}
	// One bad registration rejects the batch, naming its index.
	bad := []*sharedosv1.ToolRegistration{reg("more.a"), reg("more.b")}
	bad[1].Description = "x\u200b"
	_, err = svc.RegisterBatch(testCtx(t), bad)
	var ve *catalog.ValidationError
	if !errors.As(err, &ve) || ve.Field != "registrations[1].description" {
		t.Fatalf("bad batch error = %v, want registrations[1].description", err)
	}
	// Two registrations one store key holds (toolname.FoldedKey) are
	// refused before the store, naming the later and the earlier.
	for _, c := range []struct {
		names []string
		rule  string
		field string
	}{
		{[]string{"more.a", "more.a"}, catalog.RuleUniqueInBatch, "registrations[1].name"},
		{[]string{"more.a", "More.a"}, catalog.RuleCaseInsensitive, "registrations[1].name"},
		{[]string{"more.a", "more_a"}, catalog.RuleCollisionKey, "registrations[1].name"},
		{[]string{"files.read", "other.b", "Files_Read"}, catalog.RuleCollisionKey, "registrations[2].name"},
		{[]string{"more-a", "other.b", "MORE.A"}, catalog.RuleCollisionKey, "registrations[2].name"},
	} {
		var rs []*sharedosv1.ToolRegistration
		for _, n := range c.names {
			r := reg("more.x")
			r.Name = n
			r.Metadata.Namespace, _, _ = strings.Cut(n, ".")
			if !strings.Contains(n, ".") {
				r.Class, r.Metadata.Namespace = sharedosv1.ToolClass_TOOL_CLASS_HARNESS_LOCAL, ""
			}
			rs = append(rs, r)
		}
		_, err := svc.RegisterBatch(testCtx(t), rs)
		if !errors.As(err, &ve) || ve.Rule != c.rule || ve.Field != c.field {
			t.Errorf("batch %v error = %v, want %s violating %s", c.names, err, c.field, c.rule)
		} else if c.rule != catalog.RuleUniqueInBatch && (!strings.Contains(ve.Detail, "same batch") || !strings.Contains(ve.Detail, "registrations[0]")) {
			t.Errorf("batch %v detail %q does not name the other registration of the batch", c.names, ve.Detail)
		}
	}
	if _, err := svc.RegisterBatch(testCtx(t), []*sharedosv1.ToolRegistration{reg("bulk.t03")}); !errors.Is(err, catalog.ErrAlreadyExists) {
		t.Errorf("batch with an existing name error = %v, want ErrAlreadyExists", err)
	}
	l, _ = svc.ListTools(testCtx(t), nil)
	if len(l.Tools) != 20 {
		t.Errorf("failed batches changed the catalogue: %d tools", len(l.Tools))
	}
}

// A batch returns its tools as stored, in order: a name registered and
// deregistered before continues its revision (no revision of a name
// repeats), which RegisterTools answers and sharedosctl prints.
func TestRegisterBatchReturnsTheRevisionsStored(t *testing.T) {
	svc := newService(t, nil, nil)
	ctx := testCtx(t)
	if _, err := svc.RegisterBatch(ctx, []*sharedosv1.ToolRegistration{reg("a.x"), reg("b.x")}); err != nil {
		t.Fatal(err)
	}
	if err := svc.Deregister(ctx, "a.x"); err != nil {
		t.Fatal(err)
	}
	stored, err := svc.RegisterBatch(ctx, []*sharedosv1.ToolRegistration{reg("c.x"), reg("a.x")})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range stored {
		got = append(got, fmt.Sprintf("%s@%d", r.GetName(), r.GetRevision()))
	}
	if strings.Join(got, " ") != "c.x@1 a.x@2" {
		t.Errorf("RegisterBatch returned %v, want c.x@1 a.x@2", got)
	}
	if r, _, err := svc.Get(ctx, "a.x"); err != nil || r.GetRevision() != 2 {
		t.Errorf("a.x is stored at revision %d (%v), want 2 as returned", r.GetRevision(), err)
	}
}

func TestListRegistrationsPaging(t *testing.T) {
	svc := newService(t, nil, nil)
	registerAll(t, svc, "c.c", "a.a", "b.b", "d.d", "e.e")
	var got []string
	token := ""
	for range 10 {
		regs, next, err := svc.ListRegistrations(testCtx(t), 2, token)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range regs {
			got = append(got, r.GetName())
			if r.GetHandler().GetTarget() == "" {
				t.Error("admin view lost the handler")
			}
		}
		if next == "" {
			break
		}
		token = next
	}
	if !slices.Equal(got, []string{"a.a", "b.b", "c.c", "d.d", "e.e"}) {
		t.Errorf("paged %v", got)
	}
	if _, _, err := svc.ListRegistrations(testCtx(t), 2, "!!garbage"); !errors.Is(err, catalog.ErrInvalid) {
		t.Errorf("bad page token error = %v, want ErrInvalid", err)
	}
	if _, _, err := svc.ListRegistrations(testCtx(t), -1, ""); !errors.Is(err, catalog.ErrInvalid) {
		t.Errorf("negative page size error = %v, want ErrInvalid", err)
	}
}

// Two services over one store stand for two replicas: a change made through
// one is visible in the other's cache through the change feed.
func TestChangeFeedAcrossServicesMemory(t *testing.T) {
	st := memory.New()
	a, b := newService(t, st, nil), newService(t, st, nil)
	testReplicas(t, a, b)
}

// A stored row that bypassed validation (older binary, manual edit) and
// whose input schema does not compile is withheld from calls.
func TestResolveWithholdsUncompilableStoredSchema(t *testing.T) {
	st := memory.New()
	rec := storetest.Record("files.read")
	rec.Registration.InputSchemaJson = []byte(`{"type":"object","properties":{"p":{"type":"strin"}}}`)
	if _, err := st.Create(testCtx(t), rec); err != nil {
		t.Fatal(err)
	}
	svc := newService(t, st, nil)
	_, err := svc.Resolve(testCtx(t), "files.read")
	if !errors.Is(err, catalog.ErrNotFound) || !strings.Contains(err.Error(), "withheld") {
		t.Fatalf("Resolve = %v, want a withheld ErrNotFound", err)
	}
}

// A stored tool whose input schema repeats a key or holds a $ref cycle
// (registered before registration refused them: unique_keys,
// no_ref_cycle) is still served, as is one with an integer past a
// double's precision: refusing it now would withhold a listed tool from
// every call.
func TestResolveServesStoredSchemaThatRepeatsAKey(t *testing.T) {
	for _, schema := range []string{
		`{"type":"object","additionalProperties":true,"additionalProperties":true}`,
		`{"type":"object","properties":{"id":{"type":"integer","maximum":9007199254740993}}}`,
		`{"type":"object","$defs":{"a":{"$ref":"#/$defs/a"}},"properties":{"x":{"$ref":"#/$defs/a"}}}`,
		// Hidden characters where only registration refuses them since
		// 2026-12-07 (review: a stored tool was listed but every call to
		// it failed not found).
		`{"type":"object","properties":{"line":{"type":"string","pattern":"^[^\r\n]*$"}}}`,
		`{"type":"object","properties":{"e":{"enum":["\u200d"]}},"x-note":"a\u202eb"}`,
		// A "$schema" below the top, refused since 2026-12-07.
		`{"type":"object","$defs":{"x":{"$id":"urn:x","$schema":"http://json-schema.org/draft-07/schema#","format":"regex"}},"properties":{"x":{"$ref":"#/$defs/x"}}}`,
	} {
		st := memory.New()
		rec := storetest.Record("files.read")
		rec.Registration.InputSchemaJson = []byte(schema)
		if _, err := st.Create(testCtx(t), rec); err != nil {
			t.Fatal(err)
		}
		svc := newService(t, st, nil)
		if _, err := svc.Resolve(testCtx(t), "files.read"); err != nil {
			t.Fatalf("%s: Resolve = %v, want the stored tool served", schema, err)
		}
	}
}

// Resolve accepts any bytes, never panics, and matches exactly one name.
func FuzzResolve(f *testing.F) {
	svc := newService(f, nil, nil)
	if _, _, err := svc.Register(testCtx(f), reg("files.read")); err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{"files.read", "files_read", "FILES.READ", "", "\x00", "files.read\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		res, err := svc.Resolve(context.Background(), name)
		if name == "files.read" {
			if err != nil || res.Registration.GetName() != name {
				t.Fatalf("Resolve(%q) = %v, %v", name, res, err)
			}
			return
		}
		if !errors.Is(err, catalog.ErrNotFound) || res != nil {
			t.Fatalf("Resolve(%q) = %v, %v; want ErrNotFound", name, res, err)
		}
	})
}

// TestOnlyManagedToolsAreListed: a harness-local or external-direct
// registration is never published (ListTools, with or without a context, and
// the catalogHash leave it out), while Resolve still finds it so the kernel
// can refuse a call to it by name (issue 17, item 4).
func TestOnlyManagedToolsAreListed(t *testing.T) {
	var asked []string
	svc := newService(t, nil, filterFunc(func(in *sharedosv1.FilterToolsRequest) []string {
		asked = asked[:0]
		for _, f := range in.GetTools() {
			asked = append(asked, f.GetName())
		}
		return asked
	}))
	registerAll(t, svc, "files.read")
	local := reg("patch")
	local.Metadata.Namespace, local.Class, local.Requirement, local.Handler = "", sharedosv1.ToolClass_TOOL_CLASS_HARNESS_LOCAL, nil, nil
	direct := reg("jira.create")
	direct.Metadata.Namespace, direct.Class, direct.Requirement, direct.Handler = "jira", sharedosv1.ToolClass_TOOL_CLASS_EXTERNAL_DIRECT, nil, nil
	for _, r := range []*sharedosv1.ToolRegistration{local, direct} {
		if _, _, err := svc.Register(testCtx(t), r); err != nil {
			t.Fatalf("Register(%s): %v", r.GetName(), err)
		}
	}
	managedOnly, _ := svc.ListTools(testCtx(t), nil)
	for _, actx := range []*sharedosv1.AccessContext{nil, {Principal: "alice", Roles: []string{"engineer"}}} {
		l, err := svc.ListTools(testCtx(t), actx)
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Tools) != 1 || l.Tools[0].GetName() != "files.read" || l.CatalogHash != managedOnly.CatalogHash {
			t.Errorf("ListTools(%v) = %v", actx, l.Tools)
		}
	}
	if len(asked) != 1 || asked[0] != "files.read" {
		t.Errorf("FilterTools was asked about %v, want the managed tool only", asked)
	}
	for _, name := range []string{"patch", "jira.create"} {
		if r, err := svc.Resolve(testCtx(t), name); err != nil || r.Registration.GetName() != name {
			t.Errorf("Resolve(%s) = %v, %v: the kernel must still find it to refuse it", name, r, err)
		}
	}
}

// pagedListing is alice's listing of the twelve tools page.t00…page.t11
// on a catalogue that asks f about them five at a time.
func pagedListing(t *testing.T, f catalog.ToolFilter) (catalog.Listing, error) {
	t.Helper()
	svc, err := catalog.New(catalog.Config{Store: memory.New(), Filter: f, FilterPage: 5})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	var regs []*sharedosv1.ToolRegistration
	for i := range 12 {
		r := reg(fmt.Sprintf("page.t%02d", i))
		r.Metadata.Namespace = "page"
		regs = append(regs, r)
	}
	if _, err := svc.RegisterBatch(testCtx(t), regs); err != nil {
		t.Fatal(err)
	}
	return svc.ListTools(testCtx(t), &sharedosv1.AccessContext{Principal: "alice"})
}

// TestListToolsPagesFilterTools (issue 17, item 5): a catalogue larger than
// one FilterTools page is asked about page by page (authz-svc caps one call
// at 10,000 tools), and the answers join into one name-ordered listing.
func TestListToolsPagesFilterTools(t *testing.T) {
	var sizes []int
	var mu sync.Mutex
	f := filterFunc(func(in *sharedosv1.FilterToolsRequest) []string {
		mu.Lock()
		sizes = append(sizes, len(in.GetTools()))
		mu.Unlock()
		var out []string
		for i, tl := range in.GetTools() {
			if i%2 == 0 { // every other tool of each page
				out = append(out, tl.GetName())
			}
		}
		return out
	})
	l, err := pagedListing(t, f)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sizes, []int{5, 5, 2}) {
		t.Errorf("FilterTools pages = %v, want [5 5 2]", sizes)
	}
	var names []string
	for _, tl := range l.Tools {
		names = append(names, tl.GetName())
	}
	want := []string{"page.t00", "page.t02", "page.t04", "page.t05", "page.t07", "page.t09", "page.t10"}
	if !slices.Equal(names, want) {
		t.Errorf("listing = %v, want %v", names, want)
	}
}

// revisionFilter answers each FilterTools call by the revision rev(n) of
// its n-th call: revision "all" allows every tool, any other the tools
// ending in an even digit.
type revisionFilter struct {
	mu  sync.Mutex
	n   int
	rev func(n int) string
}

func (f *revisionFilter) FilterTools(_ context.Context, in *sharedosv1.FilterToolsRequest, _ ...grpc.CallOption) (*sharedosv1.FilterToolsResponse, error) {
	f.mu.Lock()
	rev := f.rev(f.n)
	f.n++
	f.mu.Unlock()
	var out []string
	for _, tl := range in.GetTools() {
		if n := tl.GetName(); rev == "all" || strings.ContainsAny(n[len(n)-1:], "02468") {
			out = append(out, n)
		}
	}
	return &sharedosv1.FilterToolsResponse{AllowedTools: out, PolicyRevision: rev}, nil
}

// A listing's pages are decided by one policy revision (review: a reload
// between pages, or two authz-svc replicas on two revisions, listed a set
// no one policy gives): pages that disagree are asked again once, and a
// second disagreement fails the listing closed.
func TestListToolsPagesAgreeOnOneRevision(t *testing.T) {
	listing := func(rev func(int) string) (catalog.Listing, error) {
		return pagedListing(t, &revisionFilter{rev: rev})
	}
	// Reloaded after the first page: listed again, all under the new one.
	l, err := listing(func(n int) string { return map[bool]string{true: "all", false: "even"}[n == 0] })
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Tools) != 6 || l.PolicyRevision != "even" {
		t.Errorf("listing after a reload between pages: %d tools under %q, want the 6 of revision even", len(l.Tools), l.PolicyRevision)
	}
	// Replicas that keep disagreeing: no listing.
	l, err = listing(func(n int) string { return map[bool]string{true: "all", false: "even"}[n%2 == 0] })
	if !errors.Is(err, catalog.ErrAuthzUnavailable) || len(l.Tools) != 0 {
		t.Fatalf("listing under two revisions: %d tools, %v; want ErrAuthzUnavailable", len(l.Tools), err)
	}
}

// A FilterTools page is bounded in bytes too: tools with large annotations
// (each may be 64 KiB) are asked about in pages of at most
// MaxFilterPageBytes, where one page of them by count would pass the
// 64 MiB a message may be and fail every listing (review finding). Here
// 300 tools of ~60 KiB facts: two pages, not one of 18 MB.
func TestFilterToolsPagesAreBoundedInBytes(t *testing.T) {
	var pages []int
	var mu sync.Mutex
	f := filterFunc(func(in *sharedosv1.FilterToolsRequest) []string {
		var out []string
		size := 0
		for _, tl := range in.GetTools() {
			out = append(out, tl.GetName())
			size += proto.Size(tl)
		}
		mu.Lock()
		pages = append(pages, size)
		mu.Unlock()
		return out
	})
	svc := newService(t, memory.New(), f)
	pad := strings.Repeat("a", 60<<10)
	var regs []*sharedosv1.ToolRegistration
	for i := range 300 {
		r := reg(fmt.Sprintf("big.t%03d", i))
		r.Metadata.Namespace = "big"
		r.AnnotationsJson = []byte(`{"title":"` + pad + `"}`)
		regs = append(regs, r)
	}
	if _, err := svc.RegisterBatch(testCtx(t), regs); err != nil {
		t.Fatal(err)
	}
	l, err := svc.ListTools(testCtx(t), &sharedosv1.AccessContext{Principal: "alice"})
	if err != nil || len(l.Tools) != 300 {
		t.Fatalf("listing: %d tools, %v", len(l.Tools), err)
	}
	if len(pages) < 2 {
		t.Errorf("FilterTools pages of %v bytes: want them cut at %d", pages, catalog.MaxFilterPageBytes)
	}
	for _, n := range pages {
		if n > catalog.MaxFilterPageBytes {
			t.Errorf("a FilterTools page of %d bytes of facts, over %d", n, catalog.MaxFilterPageBytes)
		}
	}
}

// TestUnservableStoredToolIsLeftOut (issue 17, item 2): a tool stored before
// the catalogue checked what the bridge can serve ({"readOnlyHint":"yes"})
// is left out of every listing — it no longer fails every OpenTurn of a
// context that can see it — and the rest of the catalogue is listed.
func TestUnservableStoredToolIsLeftOut(t *testing.T) {
	st := memory.New()
	svc := newService(t, st, filterFunc(func(in *sharedosv1.FilterToolsRequest) []string {
		var out []string
		for _, f := range in.GetTools() {
			out = append(out, f.GetName())
		}
		return out
	}))
	registerAll(t, svc, "files.read")
	bad := reg("files.peek")
	bad.AnnotationsJson = []byte(`{"readOnlyHint":"yes"}`)
	pub, err := projection.Publish(projection.Tool{Name: bad.GetName(), Description: bad.GetDescription(),
		InputSchema: bad.GetInputSchemaJson(), Annotations: bad.GetAnnotationsJson(), Namespace: "files", Source: "provider:files"})
	if err != nil {
		t.Fatal(err)
	}
	// Straight into the store, as an older catalog-svc could have written it.
	if _, err := st.Create(testCtx(t), store.Record{Registration: bad, Canonical: pub.GetCanonicalJson(), Digest: pub.GetDigest()}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the stored tool in the cache", func() bool { _, err := svc.Resolve(testCtx(t), "files.peek"); return err == nil })
	for _, actx := range []*sharedosv1.AccessContext{nil, {Principal: "alice", Roles: []string{"engineer"}}} {
		l, err := svc.ListTools(testCtx(t), actx)
		if err != nil || len(l.Tools) != 1 || l.Tools[0].GetName() != "files.read" {
			t.Errorf("ListTools(%v) = %v, %v; want files.read alone", actx, l.Tools, err)
		}
	}
}

// quietStore is a memory store whose change feed is the test's: the cache
// changes only through the write path and what the test pushes. during,
// when set, runs inside CreateBatch once the batch is stored.
type quietStore struct {
	*memory.Store
	feed   *store.Feed
	during func()
}

func (q *quietStore) Watch(context.Context) (*store.Feed, error) { return q.feed, nil }

func (q *quietStore) CreateBatch(ctx context.Context, recs []store.Record) ([]store.Record, error) {
	out, err := q.Store.CreateBatch(ctx, recs)
	if err == nil && q.during != nil {
		q.during()
	}
	return out, err
}

// TestRegisterBatchCache: a batch is in the cache when RegisterBatch
// returns, as stored (revision, timestamps), without the change feed; and
// an update of one of its tools that another replica commits while the
// batch is written reaches the cache after the batch's own records, never
// under them.
func TestRegisterBatchCache(t *testing.T) {
	ctx := testCtx(t)
	batch := func(prefix string) []*sharedosv1.ToolRegistration {
		var regs []*sharedosv1.ToolRegistration
		for i := range 5 {
			regs = append(regs, reg(fmt.Sprintf("%s.t%02d", prefix, i)))
		}
		return regs
	}
	q := &quietStore{Store: memory.New(), feed: store.NewFeed()}
	svc := newService(t, q, nil)
	if got, err := svc.RegisterBatch(ctx, batch("bulk")); err != nil || len(got) != 5 {
		t.Fatalf("RegisterBatch = %v, %v", got, err)
	}
	stored, err := q.Get(ctx, "bulk.t01")
	if err != nil {
		t.Fatal(err)
	}
	res, err := svc.Resolve(ctx, "bulk.t01")
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(res.Registration, stored.Registration) {
		t.Fatalf("cached %v; want as stored %v", res.Registration, stored.Registration)
	}

	q.during = func() {
		rec, err := q.Get(ctx, "more.t01")
		if err != nil {
			t.Error(err)
			return
		}
		if _, err := q.Update(ctx, rec, 0); err != nil { // revision 2
			t.Error(err)
			return
		}
		q.feed.Push("more.t01")
	}
	if got, err := svc.RegisterBatch(ctx, batch("more")); err != nil || len(got) != 5 {
		t.Fatalf("RegisterBatch = %v, %v", got, err)
	}
	revision := func() int64 {
		r, err := svc.Resolve(ctx, "more.t01")
		if err != nil {
			t.Fatal(err)
		}
		return r.Registration.GetRevision()
	}
	// The feed's refresh comes after the batch: revision 1 now or 2, then 2.
	for rev := revision(); rev != 2; rev = revision() {
		if rev != 1 || ctx.Err() != nil {
			t.Fatalf("more.t01 cached at revision %d (%v); want 1, then 2", rev, ctx.Err())
		}
		time.Sleep(time.Millisecond)
	}
	if l, _ := svc.ListTools(ctx, nil); len(l.Tools) != 10 {
		t.Fatalf("cache holds %d tools, want 10", len(l.Tools))
	}
}

// A context authz-svc would refuse is the caller's: ListTools and
// ListPromptsResources refuse it as an *accesscontext.Error naming the
// field (InvalidArgument on the wire) without asking authz-svc, and an
// InvalidArgument authz-svc answers on the context (a rule this build does
// not know) is the caller's too; never ErrAuthzUnavailable (found by
// attack: `sharedosctl tools list --role ""` answered AUTHZ_UNAVAILABLE and
// catalog-svc logged authz-svc down at ERROR).
func TestListToolsRefusesAContextAuthzWouldRefuse(t *testing.T) {
	f := &fakeFilter{allow: func(*sharedosv1.AccessContext, *sharedosv1.ToolFacts) bool { return true }}
	svc := newService(t, nil, f)
	registerAll(t, svc, "files.read")
	for _, c := range accesscontexttest.Bad() {
		t.Run(c.Name, func(t *testing.T) {
			actx := &sharedosv1.AccessContext{Principal: "p", Tenant: "acme", Roles: []string{"engineer"}, Attributes: map[string]string{"k": "v"}}
			c.Edit(actx)
			_, err := svc.ListTools(testCtx(t), actx)
			_, perr := svc.ListPromptsResources(testCtx(t), actx)
			for _, err := range []error{err, perr} {
				var ce *accesscontext.Error
				if !errors.As(err, &ce) || ce.Field != c.Field || !strings.Contains(ce.Rule, c.Rule) || errors.Is(err, catalog.ErrAuthzUnavailable) {
					t.Errorf("= %v, want the context refused on %s: …%s…", err, c.Field, c.Rule)
				}
			}
		})
	}
	if f.calls != 0 {
		t.Errorf("authz-svc was asked %d times", f.calls)
	}
	// authz-svc's own refusal, as it answers it.
	refusal := func(field string) error {
		return grpcx.Error(codes.InvalidArgument, field+": a newer rule", outcome.ErrorDomainAuthz, "AUTHZ_INVALID_ARGUMENT",
			map[string]string{"field": field}, grpcx.FieldViolation(field, "a newer rule"))
	}
	f.err = refusal("context.roles[0]")
	var ce *accesscontext.Error
	if _, err := svc.ListTools(testCtx(t), &sharedosv1.AccessContext{Principal: "alice"}); !errors.As(err, &ce) || ce.Field != "context.roles[0]" || errors.Is(err, catalog.ErrAuthzUnavailable) {
		t.Errorf("authz-svc refusing the context: %v, want an *accesscontext.Error", err)
	}
	// A refusal of the catalogue's own facts is no fault of the caller's.
	f.err = refusal("tools[0].name")
	if _, err := svc.ListTools(testCtx(t), &sharedosv1.AccessContext{Principal: "alice"}); !errors.Is(err, catalog.ErrAuthzUnavailable) || errors.As(err, &ce) {
		t.Errorf("authz-svc refusing the tools: %v, want ErrAuthzUnavailable", err)
	}
}

// Resolve hands the kernel a tool's output schema compiled, nil when it
// declares none; compiled once and kept while its bytes do not change
// (another write of the tool reuses it), and a stored one that does not
// compile withholds the tool, as an input schema does.
func TestResolveCompilesTheOutputSchema(t *testing.T) {
	svc := newService(t, nil, nil)
	typed, untyped := reg("files.read"), reg("files.list")
	untyped.OutputSchemaJson = nil
	for _, r := range []*sharedosv1.ToolRegistration{typed, untyped} {
		if _, _, err := svc.Register(testCtx(t), r); err != nil {
			t.Fatal(err)
		}
	}
	res, err := svc.Resolve(testCtx(t), "files.read")
	if err != nil || res.OutputSchema == nil {
		t.Fatalf("Resolve(files.read) = %v, %v; want its compiled output schema", res, err)
	}
	if err := res.OutputSchema.Validate(map[string]any{"text": "hi"}); err != nil {
		t.Errorf("a conforming result refused: %v", err)
	}
	if err := res.OutputSchema.Validate(map[string]any{"text": json.Number("5")}); err == nil {
		t.Error("a result that breaks the output schema accepted")
	}
	if res, err := svc.Resolve(testCtx(t), "files.list"); err != nil || res.OutputSchema != nil {
		t.Errorf("Resolve(files.list) = %v, %v; want no output schema", res, err)
	}
	typed.Description = "Reads a file, described anew."
	if _, _, err := svc.Update(testCtx(t), typed, 0); err != nil {
		t.Fatal(err)
	}
	again, err := svc.Resolve(testCtx(t), "files.read")
	if err != nil || again.Registration.GetDescription() != typed.Description || again.OutputSchema != res.OutputSchema {
		t.Errorf("after an update that kept the output schema: %v, %v; want the one compiled before", again, err)
	}

	st := memory.New()
	rec := storetest.Record("files.read")
	rec.Registration.OutputSchemaJson = []byte(`{"type":"object","properties":{"p":{"type":"strin"}}}`)
	if _, err := st.Create(testCtx(t), rec); err != nil {
		t.Fatal(err)
	}
	if _, err := newService(t, st, nil).Resolve(testCtx(t), "files.read"); !errors.Is(err, catalog.ErrNotFound) || !strings.Contains(err.Error(), "withheld") {
		t.Errorf("Resolve of a stored tool whose output schema does not compile = %v, want a withheld ErrNotFound", err)
	}
}
