package tenancy

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

// Any in a Policy lets a host act for every tenant.
const Any = "*"

// Policy binds each host identity (its SPIFFE ID) to its tenants.
type Policy map[string][]string

// Parse reads IDENTITY=TENANT entries (an identity may appear once per
// tenant; TENANT * is any tenant). The identity must be a SPIFFE ID with the
// host role.
func Parse(entries []string) (Policy, error) {
	p := Policy{}
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
			return nil, fmt.Errorf("%q: only host identities are bound to tenants (operators act for any)", e)
		}
		p[sid.String()] = append(p[sid.String()], tenant)
	}
	return p, nil
}

// AnyTenant reports whether the caller acts for every tenant: an operator,
// a host bound to *, or any caller in plaintext.
func (p Policy) AnyTenant(ctx context.Context) bool {
	id, ok := mtls.PeerIdentity(ctx)
	return !ok || id.Role == callers.Operator || slices.Contains(p[id.String()], Any)
}

// Check refuses (PermissionDenied, saying why) a caller that may not act
// for tenant.
func (p Policy) Check(ctx context.Context, tenant string) error {
	id, ok := mtls.PeerIdentity(ctx)
	if !ok || id.Role == callers.Operator {
		return nil
	}
	allowed := p[id.String()]
	switch {
	case len(allowed) == 0:
		return status.Errorf(codes.PermissionDenied, "%s may not open turns: no tenants are configured for it (--host-tenants)", id)
	case slices.Contains(allowed, Any):
		return nil
	case tenant == "":
		return status.Errorf(codes.PermissionDenied, "%s opens turns only for its tenants %v: context.tenant is required", id, allowed)
	case !slices.Contains(allowed, tenant):
		return status.Errorf(codes.PermissionDenied, "%s may not open turns for tenant %q (its tenants: %v)", id, tenant, allowed)
	}
	return nil
}
