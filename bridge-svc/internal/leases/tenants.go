package leases

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sharedos/toolshare/services/contract/callers"
	"github.com/sharedos/toolshare/services/platform/mtls"
)

// AnyTenant in a TenantPolicy lets a host open turns for every tenant.
const AnyTenant = "*"

// TenantPolicy binds each host identity (its SPIFFE ID) to the tenants it
// may open turns for: a host asserts an AccessContext only within them.
// Operators may open turns for any tenant; in plaintext (no identities,
// loopback only) every caller is trusted.
type TenantPolicy map[string][]string

// ParseTenantPolicy reads IDENTITY=TENANT entries (an identity may appear
// once per tenant; TENANT * is any tenant). The identity must be a SPIFFE ID
// with the host role.
func ParseTenantPolicy(entries []string) (TenantPolicy, error) {
	p := TenantPolicy{}
	for _, e := range entries {
		id, tenant, ok := strings.Cut(strings.TrimSpace(e), "=")
		if !ok || tenant == "" {
			return nil, fmt.Errorf("%q: want spiffe://<trust-domain>/host/<name>=<tenant>", e)
		}
		sid, err := spiffeid.FromString(id)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", e, err)
		}
		if !strings.HasPrefix(sid.Path(), "/"+string(callers.Host)+"/") {
			return nil, fmt.Errorf("%q: only host identities open turns for tenants (operators may for any)", e)
		}
		p[sid.String()] = append(p[sid.String()], tenant)
	}
	return p, nil
}

// anyTenant reports whether the caller may assert every tenant: an
// operator, a host allowed *, or any caller in plaintext.
func (p TenantPolicy) anyTenant(ctx context.Context) bool {
	id, ok := mtls.PeerIdentity(ctx)
	return !ok || id.Role == callers.Operator || slices.Contains(p[id.String()], AnyTenant)
}

// check refuses a caller that may not assert tenant.
func (p TenantPolicy) check(ctx context.Context, tenant string) error {
	id, ok := mtls.PeerIdentity(ctx)
	if !ok || id.Role == callers.Operator {
		return nil
	}
	allowed := p[id.String()]
	switch {
	case len(allowed) == 0:
		return status.Errorf(codes.PermissionDenied, "%s may not open turns: no tenants are configured for it (bridge-svc --host-tenants)", id)
	case slices.Contains(allowed, AnyTenant):
		return nil
	case tenant == "":
		return status.Errorf(codes.PermissionDenied, "%s opens turns only for its tenants %v: context.tenant is required", id, allowed)
	case !slices.Contains(allowed, tenant):
		return status.Errorf(codes.PermissionDenied, "%s may not open turns for tenant %q (its tenants: %v)", id, tenant, allowed)
	}
	return nil
}
