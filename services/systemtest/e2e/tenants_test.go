package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/callers"
	"github.com/sharedos/toolshare/services/platform/mtls"
	"github.com/sharedos/toolshare/services/systemtest/launch"
)

// TestHostAssertsOnlyItsTenants: a host identity opens turns only for the
// tenants bridge-svc --host-tenants gives it; another tenant, no tenant, or
// a host without an entry is PermissionDenied and stores nothing; an
// operator may open a turn for any tenant. A host reads and closes only its
// tenants' turns: another tenant's turn is NotFound to it, as an unknown one,
// and its records (RuntimeService.ListOperations, catalog-svc --host-tenants)
// read as those of a turn that has none.
func TestHostAssertsOnlyItsTenants(t *testing.T) {
	tenants := []string{"--host-tenants",
		"spiffe://sharedos.local/host/h1=acme,spiffe://sharedos.local/host/h1=beta,spiffe://sharedos.local/host/any=*"}
	s := startStack(t, launch.Options{Flags: map[string][]string{"bridge-svc": tenants, "catalog-svc": tenants}})
	creds := map[string]*mtls.Credentials{}
	as := func(file string, role callers.Role, name string) sharedosv1.BridgeServiceClient {
		creds[file] = s.Credentials(t, s.Identity(t, file, role, name))
		return sharedosv1.NewBridgeServiceClient(s.DialAs(creds[file], s.Addrs["bridge"]))
	}
	h1, h2, anyHost, op := as("h1", callers.Host, "h1"), as("h2", callers.Host, "h2"), as("any", callers.Host, "any"), as("op", callers.Operator, "op")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	open := func(c sharedosv1.BridgeServiceClient, tenant string) (*sharedosv1.TurnLease, error) {
		return c.OpenTurn(ctx, &sharedosv1.OpenTurnRequest{
			Context: &sharedosv1.AccessContext{Principal: "alice", Tenant: tenant, Roles: []string{"admin"}},
			Policy:  &sharedosv1.ToolPolicy{Mode: sharedosv1.PolicyMode_POLICY_MODE_PERMISSIVE},
			Harness: &sharedosv1.HarnessIdentity{Name: "e2e", McpSupport: sharedosv1.McpSupport_MCP_SUPPORT_NATIVE},
			Ttl:     durationpb.New(time.Minute),
		})
	}
	turns := map[string]string{} // tenant → its turn
	for _, ok := range []struct {
		name   string
		c      sharedosv1.BridgeServiceClient
		tenant string
	}{{"h1 for acme", h1, "acme"}, {"h1 for beta", h1, "beta"}, {"any-tenant host", anyHost, "gamma"}, {"operator", op, "delta"}} {
		l, err := open(ok.c, ok.tenant)
		if err != nil || l.GetTurnId() == "" {
			t.Fatalf("%s: %v", ok.name, err)
		}
		turns[ok.tenant] = l.GetTurnId()
		// One call, so the turn has a record (a refusal: no such tool).
		call := &launch.MCPTarget{URL: l.GetMcpUrl(), Token: l.GetToken(), Modern: true}
		if st, err := call.Post(launch.ModernCall(1, "nope.tool", `{}`), "tools/call", "nope.tool"); err != nil || st != 200 {
			t.Fatalf("%s: tools/call: %d %v", ok.name, st, err)
		}
	}
	// ListOperations: a host reads its tenants' records only; the
	// any-tenant host and the operator read every turn's.
	records := func(file, tenant string) int {
		rt := sharedosv1.NewRuntimeServiceClient(s.DialAs(creds[file], s.Addrs["catalog"]))
		resp, err := rt.ListOperations(ctx, &sharedosv1.ListOperationsRequest{TurnId: turns[tenant]})
		if err != nil {
			t.Fatalf("ListOperations as %s on %s's turn: %v", file, tenant, err)
		}
		for _, op := range resp.GetOperations() {
			if op.GetTenant() != tenant {
				t.Errorf("%s read a record of tenant %q on %s's turn", file, op.GetTenant(), tenant)
			}
		}
		return len(resp.GetOperations())
	}
	for _, r := range []struct {
		file, tenant string
		want         int
	}{{"h1", "acme", 1}, {"h1", "beta", 1}, {"h1", "gamma", 0}, {"h1", "delta", 0}, {"h2", "acme", 0},
		{"any", "acme", 1}, {"any", "delta", 1}, {"op", "gamma", 1}, {"op", "beta", 1}} {
		if got := records(r.file, r.tenant); got != r.want {
			t.Errorf("%s read %d records of %s's turn, want %d", r.file, got, r.tenant, r.want)
		}
	}
	for _, bad := range []struct {
		name   string
		c      sharedosv1.BridgeServiceClient
		tenant string
		want   string
	}{
		{"h1 for another tenant", h1, "evil", `may not open turns for tenant "evil"`},
		{"h1 without a tenant", h1, "", "context.tenant is required"},
		{"a host without an entry", h2, "acme", "no tenants are configured"},
	} {
		l, err := open(bad.c, bad.tenant)
		if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), bad.want) || l != nil {
			t.Errorf("%s: %v, want PermissionDenied (%s)", bad.name, err, bad.want)
		}
	}

	// GetTurn and CloseTurn: another tenant's turn is NotFound, and stays
	// open; the host's own, the any-tenant host's and the operator's pass.
	for _, foreign := range []struct {
		name   string
		c      sharedosv1.BridgeServiceClient
		tenant string
	}{{"h1 on gamma's turn", h1, "gamma"}, {"h1 on delta's turn", h1, "delta"}, {"a host without an entry on acme's turn", h2, "acme"}} {
		_, gerr := foreign.c.GetTurn(ctx, &sharedosv1.GetTurnRequest{TurnId: turns[foreign.tenant]})
		_, cerr := foreign.c.CloseTurn(ctx, &sharedosv1.CloseTurnRequest{TurnId: turns[foreign.tenant]})
		if status.Code(gerr) != codes.NotFound || status.Code(cerr) != codes.NotFound {
			t.Errorf("%s: GetTurn %v, CloseTurn %v, want NotFound for both", foreign.name, gerr, cerr)
		}
	}
	for _, own := range []struct {
		name   string
		c      sharedosv1.BridgeServiceClient
		tenant string
	}{{"h1 on acme's turn", h1, "acme"}, {"any-tenant host on delta's turn", anyHost, "delta"}, {"operator on gamma's turn", op, "gamma"}} {
		got, err := own.c.GetTurn(ctx, &sharedosv1.GetTurnRequest{TurnId: turns[own.tenant]})
		if err != nil || got.GetState() != sharedosv1.TurnState_TURN_STATE_OPEN {
			t.Errorf("%s: GetTurn %v %v, want the open turn (a foreign CloseTurn closed nothing)", own.name, got.GetState(), err)
		}
		if _, err := own.c.CloseTurn(ctx, &sharedosv1.CloseTurnRequest{TurnId: turns[own.tenant]}); err != nil {
			t.Errorf("%s: CloseTurn %v", own.name, err)
		}
	}
}
