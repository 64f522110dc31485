package leases

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/coreos/go-oidc/v3/oidc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
)

// UserTokens is how bridge-svc verifies an end user's OIDC ID token at
// OpenTurn (issue 16, 4b) and maps its claims to the AccessContext, so a host
// hands over who the user is instead of asserting it.
type UserTokens struct {
	// Issuer is the OIDC issuer URL; its discovery document names the JWKS.
	Issuer string
	// Audience the token must carry (the client id the host logs users in with).
	Audience string
	// Algorithms allowed (default RS256, ES256); HMAC and "none" never are.
	Algorithms []string
	// PrincipalClaim (default "sub"), TenantClaim (default "tenant", may be
	// absent) and RolesClaim (default "roles": a list of strings, or one
	// space-separated string) map claims to the context.
	PrincipalClaim, TenantClaim, RolesClaim string

	mu       sync.Mutex
	verifier *oidc.IDTokenVerifier
}

// DefaultUserTokenAlgorithms are the signature algorithms accepted unless told.
var DefaultUserTokenAlgorithms = []string{oidc.RS256, oidc.ES256}

// Validate checks the configuration (no network).
func (u *UserTokens) Validate() error {
	if u.Audience == "" {
		return errors.New("an audience is required with an issuer")
	}
	return CheckUserTokenAlgorithms(u.Algorithms)
}

// CheckUserTokenAlgorithms refuses HMAC and "none": user tokens are verified
// with the issuer's public keys only.
func CheckUserTokenAlgorithms(algs []string) error {
	for _, a := range algs {
		if strings.HasPrefix(strings.ToUpper(a), "HS") || strings.EqualFold(a, "none") {
			return fmt.Errorf("algorithm %s is not allowed: user tokens are verified with the issuer's public keys", a)
		}
	}
	return nil
}

// verifierFor discovers the issuer on first use (a bridge starts while the
// issuer is down; calls then fail closed until it answers) and keeps the
// verifier, whose key set go-oidc caches and refreshes on an unknown key id.
func (u *UserTokens) verifierFor(ctx context.Context) (*oidc.IDTokenVerifier, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.verifier != nil {
		return u.verifier, nil
	}
	p, err := oidc.NewProvider(context.WithoutCancel(ctx), u.Issuer)
	if err != nil {
		return nil, err
	}
	algs := u.Algorithms
	if len(algs) == 0 {
		algs = DefaultUserTokenAlgorithms
	}
	u.verifier = p.Verifier(&oidc.Config{ClientID: u.Audience, SupportedSigningAlgs: algs})
	return u.verifier, nil
}

// Context verifies raw and returns the AccessContext of its claims; errors
// are gRPC statuses naming the reason.
func (u *UserTokens) Context(ctx context.Context, raw string) (*sharedosv1.AccessContext, error) {
	if u == nil {
		return nil, status.Error(codes.InvalidArgument, "user_token: this bridge verifies no user tokens (bridge-svc --oidc-issuer)")
	}
	v, err := u.verifierFor(ctx)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "user_token: the issuer %s cannot be reached: %v", u.Issuer, err)
	}
	tok, err := v.Verify(ctx, raw)
	if err != nil {
		return nil, status.Errorf(codes.Unauthenticated, "user_token: %v", err)
	}
	var claims map[string]any
	if err := tok.Claims(&claims); err != nil {
		return nil, status.Errorf(codes.Unauthenticated, "user_token: claims: %v", err)
	}
	claim := func(name, def string) string {
		if name == "" {
			name = def
		}
		return name
	}
	principal, _ := claims[claim(u.PrincipalClaim, "sub")].(string)
	if principal == "" {
		return nil, status.Errorf(codes.Unauthenticated, "user_token: claim %q (the principal) is missing or not a string", claim(u.PrincipalClaim, "sub"))
	}
	tenant, _ := claims[claim(u.TenantClaim, "tenant")].(string)
	var roles []string
	switch r := claims[claim(u.RolesClaim, "roles")].(type) {
	case string:
		roles = strings.Fields(r)
	case []any:
		for _, x := range r {
			s, ok := x.(string)
			if !ok {
				return nil, status.Errorf(codes.Unauthenticated, "user_token: claim %q must list strings", claim(u.RolesClaim, "roles"))
			}
			roles = append(roles, s)
		}
	}
	return &sharedosv1.AccessContext{Principal: principal, Tenant: tenant, Roles: roles}, nil
}
