package server_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/accesscontext"
	"github.com/sharedos/toolshare/services/contract/accesscontext/accesscontexttest"
	"github.com/sharedos/toolshare/services/contract/outcome"
	"github.com/sharedos/toolshare/services/platform/grpcx"

	"github.com/sharedos/toolshare/catalog-svc/internal/catalog"
	"github.com/sharedos/toolshare/catalog-svc/internal/server"
	"github.com/sharedos/toolshare/catalog-svc/internal/store"
	"github.com/sharedos/toolshare/catalog-svc/internal/store/memory"
	"github.com/sharedos/toolshare/catalog-svc/internal/upstream"
)

func info(t *testing.T, err error) (*status.Status, *errdetails.ErrorInfo, *errdetails.BadRequest) {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok {
		t.Fatalf("%v is not a status error", err)
	}
	var ei *errdetails.ErrorInfo
	var br *errdetails.BadRequest
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			ei = d
		case *errdetails.BadRequest:
			br = d
		}
	}
	if ei == nil || ei.GetDomain() != server.ErrorDomain {
		t.Fatalf("status %v has no ErrorInfo in domain %s", st, server.ErrorDomain)
	}
	return st, ei, br
}

type coded struct{}

func (coded) Error() string        { return "tool call timed out" }
func (coded) GRPCCode() codes.Code { return codes.DeadlineExceeded }
func (coded) ErrorReason() string  { return "HANDLER_TIMEOUT" }

func TestToStatus(t *testing.T) {
	if server.ToStatus(nil) != nil {
		t.Fatal("ToStatus(nil) != nil")
	}
	driver := &pgconn.PgError{Code: "08006", Message: "connection to 10.0.0.5 failed: password authentication failed for user secret"}
	cases := []struct {
		err    error
		code   codes.Code
		reason string
		msg    string // substring
		notMsg string // must not appear
	}{
		{&catalog.ValidationError{Field: "description", Rule: catalog.RulePoisoning, Detail: "contains U+202E"}, codes.InvalidArgument, server.ReasonInvalidRegistration, "description", ""},
		{fmt.Errorf("%w: %q", catalog.ErrNotFound, "x.y"), codes.NotFound, server.ReasonToolNotFound, "x.y", ""},
		{fmt.Errorf("%w: %q", catalog.ErrAlreadyExists, "x.y"), codes.AlreadyExists, server.ReasonToolAlreadyExists, "x.y", ""},
		{fmt.Errorf("%w: at 3, not 2", catalog.ErrRevisionMismatch), codes.Aborted, server.ReasonRevisionMismatch, "revision", ""},
		{fmt.Errorf("%w: %w", catalog.ErrAuthzUnavailable, status.Error(codes.Unavailable, "dial tcp 10.1.2.3:7402: refused")), codes.Unavailable, server.ReasonAuthzUnavailable, "authorization", "10.1.2.3"},
		{catalog.ErrNotReady, codes.Unavailable, server.ReasonCatalogNotReady, "", ""},
		{fmt.Errorf("wrapped: %w", coded{}), codes.DeadlineExceeded, "HANDLER_TIMEOUT", "timed out", ""},
		{fmt.Errorf("x: %w", context.Canceled), codes.Canceled, server.ReasonCancelled, "", ""},
		{fmt.Errorf("x: %w", context.DeadlineExceeded), codes.DeadlineExceeded, server.ReasonDeadlineExceeded, "", ""},
		{fmt.Errorf("postgres: get: %w", driver), codes.Internal, server.ReasonInternal, "internal error", "password"},
		{errors.New("boom"), codes.Internal, server.ReasonInternal, "internal error", "boom"},
		// A wrapped status from some dependency is not trusted to be safe.
		{fmt.Errorf("x: %w", status.Error(codes.NotFound, "secret detail")), codes.Internal, server.ReasonInternal, "", "secret"},
	}
	for _, c := range cases {
		got := server.ToStatus(c.err)
		st, ei, _ := info(t, got)
		if st.Code() != c.code || ei.GetReason() != c.reason {
			t.Errorf("ToStatus(%v) = %v %s, want %v %s", c.err, st.Code(), ei.GetReason(), c.code, c.reason)
		}
		if !strings.Contains(st.Message(), c.msg) || (c.notMsg != "" && strings.Contains(st.Message(), c.notMsg)) {
			t.Errorf("ToStatus(%v) message %q", c.err, st.Message())
		}
	}
	// A bare status error made by a handler passes through.
	if got := server.ToStatus(server.InvalidArgument("name", "required")); status.Code(got) != codes.InvalidArgument {
		t.Errorf("handler status not passed through: %v", got)
	}
}

type allowAll struct{ err error }

func (a allowAll) FilterTools(_ context.Context, in *sharedosv1.FilterToolsRequest, _ ...grpc.CallOption) (*sharedosv1.FilterToolsResponse, error) {
	if a.err != nil {
		return nil, a.err
	}
	var out []string
	for _, t := range in.GetTools() {
		out = append(out, t.GetName())
	}
	return &sharedosv1.FilterToolsResponse{AllowedTools: out}, nil
}

func newServer(t *testing.T, f catalog.ToolFilter) *server.CatalogServer {
	_, s := newService(t, f)
	return s
}

func newService(t *testing.T, f catalog.ToolFilter) (*catalog.Service, *server.CatalogServer) {
	return newServiceOf(t, f, nil)
}

func newServiceOf(t *testing.T, f catalog.ToolFilter, providers server.Providers) (*catalog.Service, *server.CatalogServer) {
	svc := startService(t, memory.New(), f)
	return svc, server.NewCatalogServer(svc, providers, nil)
}

// startService is a started catalogue over st, closed at the test's end.
func startService(t *testing.T, st store.Store, f catalog.ToolFilter) *catalog.Service {
	t.Helper()
	svc, err := catalog.New(catalog.Config{Store: st, Filter: f})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	if err := svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	return svc
}

// heldNamespaces are upstream providers' namespaces.
type heldNamespaces map[string]bool

func (h heldNamespaces) Holder(_ context.Context, ns string) (string, error) {
	if h[ns] {
		return ns, nil
	}
	return "", nil
}

func (h heldNamespaces) Exclusive(context.Context) (func(), error) { return func() {}, nil }

func registration(name string) *sharedosv1.ToolRegistration {
	return &sharedosv1.ToolRegistration{
		Name:            name,
		Description:     "Reads a file.",
		InputSchemaJson: []byte(`{"type":"object","properties":{"path":{"type":"string"}},"additionalProperties":false}`),
		Metadata:        &sharedosv1.ToolMetadata{Namespace: strings.Split(name, ".")[0], Source: "builtin"},
		Class:           sharedosv1.ToolClass_TOOL_CLASS_MANAGED,
		Requirement:     &sharedosv1.Requirement{Action: "read", Resource: "file:{path}"},
		Handler:         &sharedosv1.HandlerRef{Target: "127.0.0.1:7404"},
	}
}

func TestCatalogServer(t *testing.T) {
	s := newServer(t, allowAll{})
	ctx := context.Background()
	resp, err := s.RegisterTool(ctx, &sharedosv1.RegisterToolRequest{Registration: registration("files.read")})
	if err != nil || resp.GetRegistration().GetRevision() != 1 || len(resp.GetPublished().GetCanonicalJson()) == 0 {
		t.Fatalf("RegisterTool = %v, %v", resp, err)
	}
	_, err = s.RegisterTool(ctx, &sharedosv1.RegisterToolRequest{Registration: registration("files.read")})
	if status.Code(err) != codes.AlreadyExists {
		t.Errorf("duplicate: %v", err)
	}
	bad := registration("github.search")
	bad.Metadata.Namespace = "notion"
	_, err = s.RegisterTool(ctx, &sharedosv1.RegisterToolRequest{Registration: bad})
	st, ei, br := info(t, err)
	if st.Code() != codes.InvalidArgument || ei.GetMetadata()["field"] != "metadata.namespace" || ei.GetMetadata()["rule"] != catalog.RuleNamespace ||
		br == nil || br.GetFieldViolations()[0].GetField() != "metadata.namespace" {
		t.Errorf("foreign namespace: %v %v %v", st, ei, br)
	}
	if _, err := s.RegisterTool(ctx, &sharedosv1.RegisterToolRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("missing registration: %v", err)
	}
	if _, err := s.UpdateTool(ctx, &sharedosv1.UpdateToolRequest{Registration: registration("files.read"), ExpectedRevision: 5}); status.Code(err) != codes.Aborted {
		t.Errorf("stale update: %v", err)
	}
	if _, err := s.UpdateTool(ctx, &sharedosv1.UpdateToolRequest{Registration: registration("files.write")}); status.Code(err) != codes.NotFound {
		t.Errorf("update missing: %v", err)
	}
	if r, err := s.UpdateTool(ctx, &sharedosv1.UpdateToolRequest{Registration: registration("files.read"), ExpectedRevision: 1}); err != nil || r.GetRegistration().GetRevision() != 2 {
		t.Errorf("update: %v %v", r, err)
	}
	if r, err := s.RegisterTools(ctx, &sharedosv1.RegisterToolsRequest{Registrations: []*sharedosv1.ToolRegistration{registration("git.a"), registration("git.b")}}); err != nil || r.GetRegistered() != 2 {
		t.Errorf("RegisterTools: %v %v", r, err)
	}
	g, err := s.GetTool(ctx, &sharedosv1.GetToolRequest{Name: "files.read"})
	if err != nil || g.GetRegistration().GetHandler().GetTarget() == "" || g.GetPublished().GetName() != "files.read" {
		t.Errorf("GetTool: %v %v", g, err)
	}
	lr, err := s.ListRegistrations(ctx, &sharedosv1.ListRegistrationsRequest{PageSize: 2})
	if err != nil || len(lr.GetRegistrations()) != 2 || lr.GetNextPageToken() == "" {
		t.Errorf("ListRegistrations: %v %v", lr, err)
	}
	lt, err := s.ListTools(ctx, &sharedosv1.ListToolsRequest{Context: &sharedosv1.AccessContext{Principal: "alice"}})
	if err != nil || len(lt.GetTools()) != 3 || len(lt.GetCatalogHash()) != 64 {
		t.Errorf("ListTools: %v %v", lt, err)
	}
	if _, err := s.DeregisterTool(ctx, &sharedosv1.DeregisterToolRequest{Name: "files.read"}); err != nil {
		t.Errorf("DeregisterTool: %v", err)
	}
	if _, err := s.DeregisterTool(ctx, &sharedosv1.DeregisterToolRequest{Name: "files.read"}); status.Code(err) != codes.NotFound {
		t.Errorf("DeregisterTool again: %v", err)
	}
	if _, err := s.GetTool(ctx, &sharedosv1.GetToolRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("GetTool without name: %v", err)
	}
}

// RegisterTools answers the revision each tool was stored at, in the
// request's order: a name deregistered before continues its revision,
// which the caller cannot know (sharedosctl printed 1 for every tool).
func TestRegisterToolsAnswersTheRevisionsStored(t *testing.T) {
	s := newServer(t, allowAll{})
	ctx := context.Background()
	if _, err := s.RegisterTools(ctx, &sharedosv1.RegisterToolsRequest{Registrations: []*sharedosv1.ToolRegistration{
		registration("git.a"), registration("git.b")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeregisterTool(ctx, &sharedosv1.DeregisterToolRequest{Name: "git.a"}); err != nil {
		t.Fatal(err)
	}
	r, err := s.RegisterTools(ctx, &sharedosv1.RegisterToolsRequest{Registrations: []*sharedosv1.ToolRegistration{
		registration("git.c"), registration("git.a")}})
	if err != nil || r.GetRegistered() != 2 || fmt.Sprint(r.GetRevisions()) != "[1 2]" {
		t.Errorf("RegisterTools = %v, %v; want revisions [1 2] (git.c new, git.a after its revision 1)", r, err)
	}
}

func TestListToolsAuthzDownIsUnavailable(t *testing.T) {
	s := newServer(t, allowAll{err: status.Error(codes.Unavailable, "dial 10.9.9.9")})
	if _, err := s.RegisterTool(context.Background(), &sharedosv1.RegisterToolRequest{Registration: registration("files.read")}); err != nil {
		t.Fatal(err)
	}
	resp, err := s.ListTools(context.Background(), &sharedosv1.ListToolsRequest{Context: &sharedosv1.AccessContext{Principal: "alice"}})
	if status.Code(err) != codes.Unavailable || resp != nil || strings.Contains(err.Error(), "10.9.9.9") {
		t.Fatalf("ListTools with authz down = %v, %v; want Unavailable, no tools, no internal address", resp, err)
	}
}

// TestAcquiredEntriesAreTheProvidersAPIs (ADR 0019): the catalogue API
// neither registers an entry with an upstream's source nor changes or
// removes one acquired from an upstream (that would publish or withdraw it
// past the pin and its approval record); native entries are untouched.
func TestAcquiredEntriesAreTheProvidersAPIs(t *testing.T) {
	svc, s := newService(t, allowAll{})
	ctx := context.Background()
	acquiredTool := registration("up.read")
	acquiredTool.Metadata.Source, acquiredTool.Handler.Target = "mcp:up", "mcp:up"
	prompt := func(source string) *sharedosv1.PromptRegistration {
		return &sharedosv1.PromptRegistration{Name: "up.review", Description: "Reviews.",
			Metadata: &sharedosv1.ToolMetadata{Namespace: "up", Source: source}, Handler: &sharedosv1.HandlerRef{Target: source}}
	}
	resource := func(source string) *sharedosv1.ResourceRegistration {
		return &sharedosv1.ResourceRegistration{Uri: "test://up/data", Name: "data", Description: "Data.",
			Metadata: &sharedosv1.ToolMetadata{Source: source}, Handler: &sharedosv1.HandlerRef{Target: source}}
	}
	// What the upstream manager writes, through the service itself.
	if _, _, err := svc.Register(ctx, acquiredTool); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.RegisterPrompt(ctx, prompt("mcp:up")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.RegisterResource(ctx, resource("mcp:up")); err != nil {
		t.Fatal(err)
	}

	claims := registration("other.read")
	claims.Metadata.Source = "mcp:other"
	native := registration("files.read")
	refusedField := func(name string, err error, field string) {
		t.Helper()
		st, ei, _ := info(t, err)
		if st.Code() != codes.InvalidArgument || ei.GetMetadata()["field"] != field || !strings.Contains(st.Message(), "providers add") {
			t.Errorf("%s: %v (%v), want InvalidArgument on %s", name, err, ei, field)
		}
	}
	_, err := s.RegisterTool(ctx, &sharedosv1.RegisterToolRequest{Registration: claims})
	refusedField("RegisterTool with an upstream source", err, "registration.metadata.source")
	_, err = s.RegisterTools(ctx, &sharedosv1.RegisterToolsRequest{Registrations: []*sharedosv1.ToolRegistration{native, claims}})
	refusedField("RegisterTools with an upstream source", err, "registrations[1].metadata.source")
	_, err = s.UpdateTool(ctx, &sharedosv1.UpdateToolRequest{Registration: acquiredTool})
	refusedField("UpdateTool with an upstream source", err, "registration.metadata.source")
	_, err = s.RegisterPrompt(ctx, &sharedosv1.RegisterPromptRequest{Registration: prompt("mcp:other")})
	refusedField("RegisterPrompt with an upstream source", err, "registration.metadata.source")
	_, err = s.RegisterResource(ctx, &sharedosv1.RegisterResourceRequest{Registration: resource("mcp:other")})
	refusedField("RegisterResource with an upstream source", err, "registration.metadata.source")

	nativeTool := registration("up.read") // the acquired tool's name, a native source
	refusedEntry := func(name string, err error) {
		t.Helper()
		st, ei, _ := info(t, err)
		if st.Code() != codes.FailedPrecondition || ei.GetReason() != server.ReasonAcquiredEntry || ei.GetMetadata()["source"] != "mcp:up" {
			t.Errorf("%s: %v (%v), want FailedPrecondition %s", name, err, ei, server.ReasonAcquiredEntry)
		}
	}
	_, err = s.UpdateTool(ctx, &sharedosv1.UpdateToolRequest{Registration: nativeTool})
	refusedEntry("UpdateTool of an acquired tool", err)
	_, err = s.DeregisterTool(ctx, &sharedosv1.DeregisterToolRequest{Name: "up.read"})
	refusedEntry("DeregisterTool of an acquired tool", err)
	_, err = s.RegisterPrompt(ctx, &sharedosv1.RegisterPromptRequest{Registration: prompt("provider:up")})
	refusedEntry("RegisterPrompt over an acquired prompt", err)
	_, err = s.DeregisterPrompt(ctx, &sharedosv1.DeregisterPromptRequest{Name: "up.review"})
	refusedEntry("DeregisterPrompt of an acquired prompt", err)
	_, err = s.RegisterResource(ctx, &sharedosv1.RegisterResourceRequest{Registration: resource("provider:up")})
	refusedEntry("RegisterResource over an acquired resource", err)
	_, err = s.DeregisterResource(ctx, &sharedosv1.DeregisterResourceRequest{Uri: "test://up/data"})
	refusedEntry("DeregisterResource of an acquired resource", err)

	// Nothing acquired changed; native entries still register and go.
	if reg, _, err := svc.Get(ctx, "up.read"); err != nil || reg.GetRevision() != 1 || reg.GetMetadata().GetSource() != "mcp:up" {
		t.Errorf("the acquired tool is now %v, %v", reg, err)
	}
	if e, err := svc.ResolvePrompt(ctx, "up.review"); err != nil || e.Prompt.GetMetadata().GetSource() != "mcp:up" {
		t.Errorf("the acquired prompt is now %v, %v", e, err)
	}
	if e, err := svc.ResolveResource(ctx, "test://up/data"); err != nil || e.Resource.GetMetadata().GetSource() != "mcp:up" {
		t.Errorf("the acquired resource is now %v, %v", e, err)
	}
	if _, err := s.RegisterTool(ctx, &sharedosv1.RegisterToolRequest{Registration: native}); err != nil {
		t.Errorf("native RegisterTool: %v", err)
	}
	if _, err := s.UpdateTool(ctx, &sharedosv1.UpdateToolRequest{Registration: native}); err != nil {
		t.Errorf("native UpdateTool: %v", err)
	}
	if _, err := s.DeregisterTool(ctx, &sharedosv1.DeregisterToolRequest{Name: "files.read"}); err != nil {
		t.Errorf("native DeregisterTool: %v", err)
	}
	if _, err := s.DeregisterPrompt(ctx, &sharedosv1.DeregisterPromptRequest{Name: "no.such"}); status.Code(err) != codes.NotFound {
		t.Errorf("DeregisterPrompt of nothing: %v", err)
	}
}

// A namespace an upstream provider holds takes no tool or prompt through
// the catalogue API (it would share the upstream's grants); other
// namespaces and unqualified names do.
func TestAnUpstreamNamespaceTakesNoNativeEntry(t *testing.T) {
	_, s := newServiceOf(t, allowAll{}, heldNamespaces{"up": true})
	ctx := context.Background()
	refused := func(name string, err error, what string) {
		t.Helper()
		st, ei, _ := info(t, err)
		if st.Code() != codes.FailedPrecondition || ei.GetReason() != server.ReasonAcquiredEntry ||
			ei.GetMetadata()["source"] != "mcp:up" || !strings.Contains(st.Message(), what) {
			t.Errorf("%s: %v (%v), want FailedPrecondition %s naming %s", name, err, ei, server.ReasonAcquiredEntry, what)
		}
	}
	_, err := s.RegisterTool(ctx, &sharedosv1.RegisterToolRequest{Registration: registration("up.read")})
	refused("RegisterTool", err, "tool named up.read")
	_, err = s.RegisterTools(ctx, &sharedosv1.RegisterToolsRequest{Registrations: []*sharedosv1.ToolRegistration{
		registration("files.read"), registration("files.write"), registration("up.write")}})
	refused("RegisterTools", err, "tool named up.write")
	_, err = s.RegisterPrompt(ctx, &sharedosv1.RegisterPromptRequest{Registration: &sharedosv1.PromptRegistration{
		Name: "up.review", Description: "Reviews.", Metadata: &sharedosv1.ToolMetadata{Namespace: "up", Source: "provider:up"},
		Handler: &sharedosv1.HandlerRef{Target: "127.0.0.1:7404"}}})
	refused("RegisterPrompt", err, "prompt named up.review")

	if _, err := s.RegisterTools(ctx, &sharedosv1.RegisterToolsRequest{Registrations: []*sharedosv1.ToolRegistration{
		registration("files.read"), registration("upper.read")}}); err != nil {
		t.Errorf("RegisterTools outside the namespace: %v", err)
	}
	plain := registration("read")
	plain.Metadata.Namespace = ""
	if _, err := s.RegisterTool(ctx, &sharedosv1.RegisterToolRequest{Registration: plain}); err != nil {
		t.Errorf("RegisterTool of an unqualified name: %v", err)
	}
}

// An upstream provider's namespace takes no tool or prompt spelled
// otherwise either (letter case, '-' and '_' read alike, as tool names
// are compared): GH.search would take the folded key of upstream gh's own
// search, which then could not be acquired. The refusal names the
// provider as it is spelled.
func TestAnUpstreamNamespaceTakesNoNativeEntryHoweverSpelled(t *testing.T) {
	mem := memory.New()
	svc, err := catalog.New(catalog.Config{Store: mem, Filter: allowAll{}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	m := upstream.New(upstream.Config{Store: mem, Registry: svc, Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(func() { _ = m.Close() })
	for _, ns := range []string{"gh", "my-ns"} {
		// Unreachable, and added all the same: it holds its namespace.
		if _, err := m.Add(ctx, &sharedosv1.UpstreamProvider{Namespace: ns, Url: "http://127.0.0.1:1/mcp"}, "tester"); err != nil {
			t.Fatal(err)
		}
	}
	s := server.NewCatalogServer(svc, m, nil)
	refused := func(name string, err error, source, what string) {
		t.Helper()
		if err == nil {
			t.Errorf("%s: registered, want FailedPrecondition %s of %s", name, server.ReasonAcquiredEntry, source)
			return
		}
		st, ei, _ := info(t, err)
		if st.Code() != codes.FailedPrecondition || ei.GetReason() != server.ReasonAcquiredEntry ||
			ei.GetMetadata()["source"] != source || !strings.Contains(st.Message(), what) {
			t.Errorf("%s: %v (%v), want FailedPrecondition %s of %s naming %s", name, err, ei, server.ReasonAcquiredEntry, source, what)
		}
	}
	_, err = s.RegisterTool(ctx, &sharedosv1.RegisterToolRequest{Registration: registration("GH.search")})
	refused("RegisterTool GH.search", err, "mcp:gh", "tool named GH.search")
	_, err = s.RegisterTool(ctx, &sharedosv1.RegisterToolRequest{Registration: registration("My_Ns.read")})
	refused("RegisterTool My_Ns.read", err, "mcp:my-ns", "tool named My_Ns.read")
	_, err = s.RegisterTools(ctx, &sharedosv1.RegisterToolsRequest{Registrations: []*sharedosv1.ToolRegistration{
		registration("files.read"), registration("gH.write")}})
	refused("RegisterTools gH.write", err, "mcp:gh", "tool named gH.write")
	_, err = s.RegisterPrompt(ctx, &sharedosv1.RegisterPromptRequest{Registration: &sharedosv1.PromptRegistration{
		Name: "Gh.review", Description: "Reviews.", Metadata: &sharedosv1.ToolMetadata{Namespace: "Gh", Source: "provider:gh"},
		Handler: &sharedosv1.HandlerRef{Target: "127.0.0.1:7404"}}})
	refused("RegisterPrompt Gh.review", err, "mcp:gh", "prompt named Gh.review")

	if _, err := s.RegisterTools(ctx, &sharedosv1.RegisterToolsRequest{Registrations: []*sharedosv1.ToolRegistration{
		registration("files.read"), registration("ghx.read"), registration("my.read")}}); err != nil {
		t.Errorf("RegisterTools outside the namespaces: %v", err)
	}
}

// lockingProviders is an upstream manager's lock as the catalogue API
// sees it: the test holds it as an acquisition would, and hears when a
// change asks for it.
type lockingProviders struct {
	mu     sync.Mutex
	asking chan struct{}
}

func (p *lockingProviders) Holder(context.Context, string) (string, error) { return "", nil }

func (p *lockingProviders) Exclusive(context.Context) (func(), error) {
	p.asking <- struct{}{}
	p.mu.Lock()
	return p.mu.Unlock, nil
}

// An entry acquired while a change of the catalogue API waits for the
// providers' lock is seen by that change's check: the check and the change
// run under the lock the upstream manager acquires under, never with an
// acquisition between them (which the change would overwrite or remove).
func TestAnAcquisitionNeverFallsBetweenTheCheckAndTheChange(t *testing.T) {
	p := &lockingProviders{asking: make(chan struct{})}
	svc, s := newServiceOf(t, allowAll{}, p)
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		change func() error
	}{
		{"DeregisterTool", func() error {
			_, err := s.DeregisterTool(ctx, &sharedosv1.DeregisterToolRequest{Name: "up.read"})
			return err
		}},
		{"UpdateTool", func() error {
			_, err := s.UpdateTool(ctx, &sharedosv1.UpdateToolRequest{Registration: registration("up.read")})
			return err
		}},
	} {
		if _, _, err := svc.Register(ctx, registration("up.read")); err != nil {
			t.Fatal(err)
		}
		p.mu.Lock() // an acquisition under way
		done := make(chan error, 1)
		go func() { done <- c.change() }()
		select {
		case <-p.asking:
		case err := <-done:
			p.mu.Unlock()
			t.Fatalf("%s ran without the providers' lock: %v", c.name, err)
		}
		acquired := registration("up.read")
		acquired.Metadata.Source, acquired.Handler.Target = "mcp:up", "mcp:up"
		if _, _, err := svc.Update(ctx, acquired, 0); err != nil {
			t.Fatal(err)
		}
		p.mu.Unlock()
		if st, _ := status.FromError(<-done); st.Code() != codes.FailedPrecondition {
			t.Errorf("%s after the acquisition: %v, want FailedPrecondition", c.name, st)
		}
		if reg, _, err := svc.Get(ctx, "up.read"); err != nil || reg.GetMetadata().GetSource() != "mcp:up" {
			t.Errorf("%s: the acquired tool is now %v, %v", c.name, reg, err)
		}
		if err := svc.Deregister(ctx, "up.read"); err != nil {
			t.Fatal(err)
		}
	}
}

// ListTools with a context authz-svc would refuse (sharedosctl tools list
// --role "") is the caller's InvalidArgument naming the field, logged as
// nothing failed (found by attack: it answered AUTHZ_UNAVAILABLE and
// logged authz-svc down at ERROR).
func TestListToolsRefusesAContextAuthzWouldRefuse(t *testing.T) {
	svc, _ := newService(t, authzLike{})
	var logged strings.Builder
	s := server.NewCatalogServer(svc, nil, slog.New(slog.NewTextHandler(&syncWriter{w: &logged}, nil)))
	if _, err := s.RegisterTool(context.Background(), &sharedosv1.RegisterToolRequest{Registration: registration("files.read")}); err != nil {
		t.Fatal(err)
	}
	for _, c := range accesscontexttest.Bad() {
		actx := &sharedosv1.AccessContext{Principal: "p", Tenant: "acme", Roles: []string{"engineer"}, Attributes: map[string]string{"k": "v"}}
		c.Edit(actx)
		_, err := s.ListTools(context.Background(), &sharedosv1.ListToolsRequest{Context: actx})
		st, ei, br := info(t, err)
		if st.Code() != codes.InvalidArgument || ei.GetReason() != server.ReasonInvalidArgument || ei.GetMetadata()["field"] != c.Field ||
			len(br.GetFieldViolations()) != 1 || !strings.Contains(br.GetFieldViolations()[0].GetDescription(), c.Rule) {
			t.Errorf("%s: ListTools = %v %v %v, want InvalidArgument %s on %s", c.Name, err, ei, br, server.ReasonInvalidArgument, c.Field)
		}
	}
	if strings.Contains(logged.String(), "level=ERROR") {
		t.Errorf("a refused context was logged as a failure:\n%s", logged.String())
	}
	// The mapping itself, whoever returns it (the kernel's GrantTurn too).
	st, ei, _ := info(t, server.ToStatus(fmt.Errorf("x: %w", &accesscontext.Error{Field: "context.roles[0]", Rule: "must be 1 to 1024 bytes"})))
	if st.Code() != codes.InvalidArgument || ei.GetReason() != server.ReasonInvalidArgument || ei.GetMetadata()["field"] != "context.roles[0]" {
		t.Errorf("ToStatus(accesscontext.Error) = %v %v", st, ei)
	}
}

type syncWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

// authzLike lists every tool for a context authz-svc takes, and refuses
// one it would not as authz-svc does.
type authzLike struct{}

func (authzLike) FilterTools(ctx context.Context, in *sharedosv1.FilterToolsRequest, opts ...grpc.CallOption) (*sharedosv1.FilterToolsResponse, error) {
	if e := accesscontext.Check(in.GetContext()); e != nil {
		return nil, grpcx.Error(codes.InvalidArgument, e.Error(), outcome.ErrorDomainAuthz, "AUTHZ_INVALID_ARGUMENT",
			map[string]string{"field": e.Field}, grpcx.FieldViolation(e.Field, e.Rule))
	}
	return allowAll{}.FilterTools(ctx, in, opts...)
}
