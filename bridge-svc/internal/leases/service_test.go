package leases_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sharedos/toolshare/bridge-svc/internal/leases"
	"github.com/sharedos/toolshare/bridge-svc/internal/leases/memory"
	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/accesscontext/accesscontexttest"
	"github.com/sharedos/toolshare/services/platform/grpcx"
)

// fakeKernel grants every turn the catalogue in resp.
type fakeKernel struct {
	resp      *sharedosv1.GrantTurnResponse
	err       error
	asked     *sharedosv1.GrantTurnRequest
	revoked   []string
	revokeErr error
}

func (f *fakeKernel) GrantTurn(_ context.Context, in *sharedosv1.GrantTurnRequest, _ ...grpc.CallOption) (*sharedosv1.GrantTurnResponse, error) {
	f.asked = in
	return f.resp, f.err
}

func (f *fakeKernel) RevokeTurn(_ context.Context, in *sharedosv1.RevokeTurnRequest, _ ...grpc.CallOption) (*sharedosv1.RevokeTurnResponse, error) {
	if f.revokeErr != nil {
		return nil, f.revokeErr
	}
	f.revoked = append(f.revoked, in.GetTurnId())
	return &sharedosv1.RevokeTurnResponse{}, nil
}

func validRequest() *sharedosv1.OpenTurnRequest {
	return &sharedosv1.OpenTurnRequest{
		Context:       &sharedosv1.AccessContext{Principal: "alice"},
		Policy:        &sharedosv1.ToolPolicy{Mode: sharedosv1.PolicyMode_POLICY_MODE_STRICT, HarnessLocal: []string{"patch"}},
		Harness:       &sharedosv1.HarnessIdentity{Name: "pi", McpSupport: sharedosv1.McpSupport_MCP_SUPPORT_EXTENSION, ExtensionName: "pi-mcp-adapter"},
		DeclaredModel: "m",
	}
}

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newService(t *testing.T) (*leases.Service, *fakeKernel, *clock, *[]string) {
	t.Helper()
	clk := &clock{t: time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)}
	cat := &fakeKernel{resp: &sharedosv1.GrantTurnResponse{Grant: "signed-grant", CatalogHash: "h1", Tools: []*sharedosv1.PublishedTool{
		{Name: "files.read", CanonicalJson: []byte(`{}`)},
	}}}
	var closed []string
	svc := leases.NewService(leases.ServiceConfig{
		Store: memory.New(memory.WithClock(clk.now)), Kernel: cat, PublicURL: "http://127.0.0.1:7480/",
		Now: clk.now, OnClose: func(id string) { closed = append(closed, id) },
	})
	return svc, cat, clk, &closed
}

func TestOpenTurnValidation(t *testing.T) {
	svc, _, _, _ := newService(t)
	cases := []struct {
		name  string
		edit  func(*sharedosv1.OpenTurnRequest)
		field string
	}{
		{"no principal", func(r *sharedosv1.OpenTurnRequest) { r.Context = nil }, "context.principal"},
		{"no policy", func(r *sharedosv1.OpenTurnRequest) { r.Policy = nil }, "policy"},
		{"unspecified mode", func(r *sharedosv1.OpenTurnRequest) { r.Policy.Mode = 0 }, "policy.mode"},
		{"strict with external direct", func(r *sharedosv1.OpenTurnRequest) { r.Policy.ExternalDirect = []string{"jira"} }, "policy.external_direct"},
		{"strict with empty local surface", func(r *sharedosv1.OpenTurnRequest) { r.Policy.HarnessLocal = nil }, "policy.harness_local"},
		{"unnamed local tool", func(r *sharedosv1.OpenTurnRequest) { r.Policy.HarnessLocal = []string{"patch", " "} }, "policy.harness_local[1]"},
		{"no harness name", func(r *sharedosv1.OpenTurnRequest) { r.Harness.Name = "" }, "harness.name"},
		{"unspecified mcp support", func(r *sharedosv1.OpenTurnRequest) { r.Harness.McpSupport = 0 }, "harness.mcp_support"},
		{"extension without name", func(r *sharedosv1.OpenTurnRequest) { r.Harness.ExtensionName = "" }, "harness.extension_name"},
		{"native with extension name", func(r *sharedosv1.OpenTurnRequest) {
			r.Harness.McpSupport = sharedosv1.McpSupport_MCP_SUPPORT_NATIVE
		}, "harness.extension_name"},
		{"negative ttl", func(r *sharedosv1.OpenTurnRequest) { r.Ttl = durationpb.New(-time.Second) }, "ttl"},
		{"ttl over 24h", func(r *sharedosv1.OpenTurnRequest) { r.Ttl = durationpb.New(25 * time.Hour) }, "ttl"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := validRequest()
			tc.edit(req)
			_, err := svc.OpenTurn(context.Background(), req)
			st := status.Convert(err)
			if st.Code() != codes.InvalidArgument {
				t.Fatalf("code = %v (%v), want InvalidArgument", st.Code(), err)
			}
			if !strings.HasPrefix(st.Message(), tc.field+": ") {
				t.Errorf("message %q does not name field %s", st.Message(), tc.field)
			}
			if info := errorInfo(st); info == nil || info.GetReason() != leases.ReasonInvalidField || info.GetMetadata()["field"] != tc.field {
				t.Errorf("ErrorInfo = %v", info)
			}
		})
	}
	// Permissive with external direct and no local tools is a valid declaration.
	req := validRequest()
	req.Policy = &sharedosv1.ToolPolicy{Mode: sharedosv1.PolicyMode_POLICY_MODE_PERMISSIVE, ExternalDirect: []string{"jira"}}
	if _, err := svc.OpenTurn(context.Background(), req); err != nil {
		t.Errorf("permissive: %v", err)
	}
}

func errorInfo(st *status.Status) *errdetails.ErrorInfo {
	for _, d := range st.Details() {
		if i, ok := d.(*errdetails.ErrorInfo); ok {
			return i
		}
	}
	return nil
}

func TestOpenGetCloseExpire(t *testing.T) {
	svc, cat, clk, closed := newService(t)
	ctx := context.Background()
	req := validRequest()
	lease, err := svc.OpenTurn(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(cat.asked.GetContext(), req.GetContext()) || cat.asked.GetTurnId() != lease.GetTurnId() ||
		!cat.asked.GetExpiresAt().AsTime().Equal(lease.GetExpiresAt().AsTime()) {
		t.Errorf("kernel asked for %v, want the turn's id, context and expiry", cat.asked)
	}
	if !leases.ValidTurnID(lease.GetTurnId()) || len(lease.GetToken()) != 43 {
		t.Errorf("turn id %q / token %q malformed", lease.GetTurnId(), lease.GetToken())
	}
	if lease.GetMcpUrl() != "http://127.0.0.1:7480/turns/"+lease.GetTurnId()+"/mcp" {
		t.Errorf("mcp url = %q", lease.GetMcpUrl())
	}
	if got := lease.GetExpiresAt().AsTime(); !got.Equal(clk.t.Add(leases.DefaultTTL)) {
		t.Errorf("expires at %v, want default ttl", got)
	}
	if lease.GetCatalogHash() != "h1" || len(lease.GetTools()) != 1 {
		t.Errorf("lease catalogue = %v", lease)
	}
	got, err := svc.GetTurn(ctx, &sharedosv1.GetTurnRequest{TurnId: lease.GetTurnId()})
	if err != nil {
		t.Fatal(err)
	}
	want := &sharedosv1.SystemIdentity{CatalogHash: "h1", Harness: req.GetHarness(), DeclaredModel: "m", Policy: req.GetPolicy()}
	if got.GetState() != sharedosv1.TurnState_TURN_STATE_OPEN || !proto.Equal(got.GetIdentity(), want) || got.GetTools()[0] != "files.read" {
		t.Errorf("GetTurn = %v", got)
	}

	clk.t = clk.t.Add(leases.DefaultTTL)
	got, _ = svc.GetTurn(ctx, &sharedosv1.GetTurnRequest{TurnId: lease.GetTurnId()})
	if got.GetState() != sharedosv1.TurnState_TURN_STATE_EXPIRED {
		t.Errorf("state at expiry = %v, want EXPIRED", got.GetState())
	}

	second, err := svc.OpenTurn(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if second.GetTurnId() == lease.GetTurnId() || second.GetToken() == lease.GetToken() {
		t.Errorf("ids or tokens repeat")
	}
	// The kernel cannot confirm the revocation: the lease stays open and
	// the host is told to retry.
	cat.revokeErr = status.Error(codes.Unavailable, "kernel down")
	_, err = svc.CloseTurn(ctx, &sharedosv1.CloseTurnRequest{TurnId: second.GetTurnId()})
	if st := status.Convert(err); st.Code() != codes.Unavailable || errorInfo(st).GetReason() != leases.ReasonRevocationUnconfirmed {
		t.Fatalf("CloseTurn with the kernel down = %v", err)
	}
	if got, _ := svc.GetTurn(ctx, &sharedosv1.GetTurnRequest{TurnId: second.GetTurnId()}); got.GetState() != sharedosv1.TurnState_TURN_STATE_OPEN || len(*closed) != 0 {
		t.Fatalf("an unconfirmed revocation closed the lease: %v", got)
	}
	cat.revokeErr = nil
	if _, err := svc.CloseTurn(ctx, &sharedosv1.CloseTurnRequest{TurnId: second.GetTurnId()}); err != nil {
		t.Fatal(err)
	}
	if len(cat.revoked) != 1 || cat.revoked[0] != second.GetTurnId() {
		t.Errorf("kernel revoked %v, want the closed turn", cat.revoked)
	}
	got, _ = svc.GetTurn(ctx, &sharedosv1.GetTurnRequest{TurnId: second.GetTurnId()})
	if got.GetState() != sharedosv1.TurnState_TURN_STATE_CLOSED || got.GetClosedAt() == nil {
		t.Errorf("after close = %v", got)
	}
	if len(*closed) != 1 || (*closed)[0] != second.GetTurnId() {
		t.Errorf("OnClose saw %v, want the closed turn", *closed)
	}
	if _, err := svc.CloseTurn(ctx, &sharedosv1.CloseTurnRequest{TurnId: "tnope"}); status.Code(err) != codes.NotFound {
		t.Errorf("close unknown = %v, want NotFound", err)
	}
	if _, err := svc.GetTurn(ctx, &sharedosv1.GetTurnRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("get without id = %v", err)
	}
}

func TestOpenTurnCatalogDown(t *testing.T) {
	svc, cat, _, _ := newService(t)
	cat.err = status.Error(codes.Unavailable, "authz down: dial tcp 10.0.0.1:7402")
	_, err := svc.OpenTurn(context.Background(), validRequest())
	st := status.Convert(err)
	if st.Code() != codes.Unavailable || strings.Contains(st.Message(), "10.0.0.1") {
		t.Errorf("err = %v, want Unavailable without upstream text", err)
	}
	if info := errorInfo(st); info.GetReason() != leases.ReasonCatalogUnavailable {
		t.Errorf("reason = %v", info)
	}
}

func TestTokensAndIDs(t *testing.T) {
	seen := map[string]bool{}
	for range 10000 {
		id, err := leases.NewTurnID()
		if err != nil || !leases.ValidTurnID(id) || seen[id] {
			t.Fatalf("turn id %q (err %v) invalid or repeated", id, err)
		}
		seen[id] = true
	}
	tok, hash, err := leases.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	if !leases.TokenMatches(tok, hash) || leases.TokenMatches(tok+"x", hash) || leases.TokenMatches("", hash) {
		t.Error("TokenMatches disagrees with HashToken")
	}
}

// undecodable is a lease store whose leases no longer decode whole.
type undecodable struct{ leases.Store }

func (undecodable) Get(context.Context, string) (*leases.Lease, leases.Status, error) {
	return nil, leases.Status{}, errors.New("decode lease: unknown field")
}

// A caller that may close any tenant's turns (here: plaintext) closes a
// turn by its status alone: a lease that no longer decodes is closed all
// the same, and an unknown turn is still NotFound.
func TestCloseNeedsOnlyTheStatus(t *testing.T) {
	clk := &clock{t: time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)}
	mem := memory.New(memory.WithClock(clk.now))
	cat := &fakeKernel{resp: &sharedosv1.GrantTurnResponse{Grant: "g", CatalogHash: "h1", Tools: []*sharedosv1.PublishedTool{{Name: "files.read", CanonicalJson: []byte(`{}`)}}}}
	open := leases.NewService(leases.ServiceConfig{Store: mem, Kernel: cat, PublicURL: "http://127.0.0.1:7480/", Now: clk.now})
	lease, err := open.OpenTurn(t.Context(), validRequest())
	if err != nil {
		t.Fatal(err)
	}
	svc := leases.NewService(leases.ServiceConfig{Store: undecodable{mem}, Kernel: cat, PublicURL: "http://127.0.0.1:7480/", Now: clk.now})
	if _, err := svc.CloseTurn(t.Context(), &sharedosv1.CloseTurnRequest{TurnId: lease.GetTurnId()}); err != nil {
		t.Fatalf("close: %v", err)
	}
	if st, err := mem.Status(t.Context(), lease.GetTurnId()); err != nil || st.ClosedAt.IsZero() || len(cat.revoked) != 1 {
		t.Errorf("after close: %+v %v, revoked %v", st, err, cat.revoked)
	}
	if _, err := svc.CloseTurn(t.Context(), &sharedosv1.CloseTurnRequest{TurnId: "tnope"}); status.Code(err) != codes.NotFound {
		t.Errorf("close unknown = %v, want NotFound", err)
	}
}

// A context authz-svc would refuse is the caller's own input: OpenTurn
// refuses it InvalidArgument naming the field and the rule, and never asks
// the kernel (found by attack: each was answered Unavailable,
// CATALOG_UNAVAILABLE, "retry later", and logged as authz-svc down).
func TestOpenTurnRefusesAContextAuthzWouldRefuse(t *testing.T) {
	svc, kernel, _, _ := newService(t)
	for _, c := range accesscontexttest.Bad() {
		if c.Field == "context.principal" && c.Rule == "must not be empty" {
			c.Rule = "required" // OpenTurn's own words (TestOpenTurnValidation)
		}
		t.Run(c.Name, func(t *testing.T) {
			req := validRequest()
			req.Context = &sharedosv1.AccessContext{Principal: "p", Tenant: "acme", Roles: []string{"engineer"}, Attributes: map[string]string{"k": "v"}}
			c.Edit(req.Context)
			kernel.asked = nil
			_, err := svc.OpenTurn(context.Background(), req)
			st := status.Convert(err)
			if st.Code() != codes.InvalidArgument || !strings.HasPrefix(st.Message(), c.Field+": ") || !strings.Contains(st.Message(), c.Rule) {
				t.Fatalf("OpenTurn = %v, want InvalidArgument %s: …%s…", err, c.Field, c.Rule)
			}
			if info := errorInfo(st); info.GetReason() != leases.ReasonInvalidField || info.GetMetadata()["field"] != c.Field {
				t.Errorf("ErrorInfo = %v, want %s naming %s", info, leases.ReasonInvalidField, c.Field)
			}
			if kernel.asked != nil {
				t.Errorf("the kernel was asked for %v", kernel.asked.GetContext())
			}
		})
	}
	// Names are not ASCII: accented and CJK contexts open turns.
	req := validRequest()
	req.Context = &sharedosv1.AccessContext{Principal: "José Ñúñez", Tenant: "株式会社", Roles: []string{"ingénieur", "工程师"}, Attributes: map[string]string{"équipe": "données"}}
	if _, err := svc.OpenTurn(context.Background(), req); err != nil {
		t.Errorf("OpenTurn with a Unicode context: %v", err)
	}
}

// kernelStatus is an error as the kernel answers it (catalog-svc's
// server.ToStatus): domain sharedos.io, a reason, and the field it
// refuses, if any.
func kernelStatus(code codes.Code, reason, field, rule string) error {
	if field == "" {
		return grpcx.Error(code, rule, "sharedos.io", reason, nil)
	}
	return grpcx.Error(code, field+": "+rule, "sharedos.io", reason, map[string]string{"field": field}, grpcx.FieldViolation(field, rule))
}

// The kernel's refusal of the request is passed on as what it is: its
// InvalidArgument as INVALID_FIELD naming the field (the kernel names
// GrantTurnRequest's fields, which are OpenTurnRequest's), its
// FailedPrecondition as GRANT_REFUSED; only an outage is Unavailable (found
// by attack: a harness name holding ESC, which the kernel refuses, was
// answered Unavailable, CATALOG_UNAVAILABLE).
func TestOpenTurnPassesTheKernelsRefusalOn(t *testing.T) {
	const escRule = "must not hold control or format characters (U+001B at byte 1)"
	cases := []struct {
		name   string
		kernel error
		code   codes.Code
		reason string
		field  string // the field, or the kernel's reason under GRANT_REFUSED
	}{
		{"harness name with ESC", kernelStatus(codes.InvalidArgument, "INVALID_ARGUMENT", "harness.name", escRule),
			codes.InvalidArgument, leases.ReasonInvalidField, "harness.name"},
		{"a context only the kernel refuses", kernelStatus(codes.InvalidArgument, "INVALID_ARGUMENT", "context.roles[0]", "must be 1 to 1024 bytes"),
			codes.InvalidArgument, leases.ReasonInvalidField, "context.roles[0]"},
		{"no catalogue", kernelStatus(codes.FailedPrecondition, "NO_CATALOGUE", "", "this kernel has no catalogue to grant"),
			codes.FailedPrecondition, leases.ReasonGrantRefused, "NO_CATALOGUE"},
		{"kernel down", status.Error(codes.Unavailable, "dial tcp 10.0.0.1:7401"), codes.Unavailable, leases.ReasonCatalogUnavailable, ""},
		{"authz-svc down", kernelStatus(codes.Unavailable, "AUTHZ_UNAVAILABLE", "", "authorization service unavailable; no catalogue returned"),
			codes.Unavailable, leases.ReasonCatalogUnavailable, ""},
		{"kernel too slow", status.Error(codes.DeadlineExceeded, "deadline exceeded"), codes.Unavailable, leases.ReasonCatalogUnavailable, ""},
		{"kernel internal error", kernelStatus(codes.Internal, "INTERNAL", "", "internal error"), codes.Unavailable, leases.ReasonCatalogUnavailable, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			svc, kernel, _, _ := newService(t)
			kernel.err = c.kernel
			_, err := svc.OpenTurn(context.Background(), validRequest())
			st := status.Convert(err)
			info := errorInfo(st)
			if st.Code() != c.code || info.GetReason() != c.reason || info.GetDomain() != leases.ErrorDomain {
				t.Fatalf("OpenTurn = %v %v, want %v %s", err, info, c.code, c.reason)
			}
			switch c.reason {
			case leases.ReasonInvalidField:
				if info.GetMetadata()["field"] != c.field || !strings.HasPrefix(st.Message(), c.field+": ") {
					t.Errorf("OpenTurn = %v %v, want the field %s", err, info, c.field)
				}
			case leases.ReasonGrantRefused:
				if info.GetMetadata()["kernel_reason"] != c.field {
					t.Errorf("OpenTurn = %v %v, want kernel_reason %s", err, info, c.field)
				}
			default:
				if strings.Contains(st.Message(), "10.0.0.1") {
					t.Errorf("OpenTurn = %v: the kernel's text leaked", err)
				}
			}
		})
	}
}
