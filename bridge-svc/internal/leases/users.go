package leases

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/go-jose/go-jose/v4"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/accesscontext"
	"github.com/sharedos/toolshare/services/platform/mtls"
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

	// now is the clock of the key set's ages (tests set it; nil: time.Now).
	now func() time.Time

	mu       sync.Mutex
	verifier *oidc.IDTokenVerifier
	// discovery is closed when the discovery under way ends (nil: none),
	// and discoverErr is why it failed, until failedUntil (then the next
	// caller tries again).
	discovery   chan struct{}
	discoverErr error
	failedUntil time.Time
	client      *http.Client
}

// issuerTimeout bounds each request to the issuer (discovery, key set): a
// hung issuer fails OpenTurns with user tokens, and recovers, instead of
// blocking them.
const issuerTimeout = 10 * time.Second

// MaxUserTokenBytes is the longest user_token accepted.
const MaxUserTokenBytes = 16 << 10

// issuedAtSkew is how far in the future a token's iat may be.
const issuedAtSkew = 5 * time.Minute

// discoveryRetry is how long a failed discovery answers for itself: an
// issuer that is down gets one request per interval, not one per OpenTurn.
const discoveryRetry = 5 * time.Second

// DefaultUserTokenAlgorithms are the signature algorithms accepted unless told.
var DefaultUserTokenAlgorithms = []string{oidc.RS256, oidc.ES256}

// Validate checks the configuration (no network). The issuer is https —
// its discovery document names the keys every user token is checked with
// — unless it is on loopback.
func (u *UserTokens) Validate() error {
	if u.Audience == "" {
		return errors.New("an audience is required with an issuer")
	}
	if err := CheckIssuer(u.Issuer); err != nil {
		return err
	}
	return CheckUserTokenAlgorithms(u.Algorithms)
}

// CheckIssuer refuses an issuer URL that is not https (http only on
// loopback): whoever is on the path of a plain-HTTP issuer hands out the
// signing keys.
func CheckIssuer(issuer string) error {
	p, err := url.Parse(issuer)
	if err != nil || p.Host == "" {
		return fmt.Errorf("issuer %q is not an absolute URL", issuer)
	}
	switch {
	case p.Scheme == "https":
		return nil
	case p.Scheme == "http" && mtls.IsLoopbackHost(p.Hostname()):
		return nil
	}
	return fmt.Errorf("issuer %q must be https:// (http:// only on loopback): its keys sign every user token", issuer)
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
// verifier, with its key set (keySet).
// One discovery runs at a time, bounded by issuerTimeout; a caller waits
// for it only as long as its own context allows.
func (u *UserTokens) verifierFor(ctx context.Context) (*oidc.IDTokenVerifier, error) {
	u.mu.Lock()
	if u.verifier != nil {
		defer u.mu.Unlock()
		return u.verifier, nil
	}
	if time.Now().Before(u.failedUntil) {
		defer u.mu.Unlock()
		return nil, u.discoverErr
	}
	done := u.discovery
	if done == nil {
		done = make(chan struct{})
		u.discovery = done
		if u.client == nil {
			u.client = issuerClient()
		}
		go u.discover(done, u.client)
	}
	u.mu.Unlock()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-done:
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.verifier != nil {
		return u.verifier, nil
	}
	return nil, u.discoverErr
}

// issuerClient is the one HTTP client of an issuer's requests: each bounded
// by issuerTimeout, and a redirect only to where an issuer may be (https,
// or http on loopback).
func issuerClient() *http.Client {
	return &http.Client{
		Timeout:   issuerTimeout,
		Transport: http.DefaultTransport.(*http.Transport).Clone(),
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 5 {
				return errors.New("too many redirects")
			}
			return CheckIssuer(req.URL.String())
		},
	}
}

// discover reads the issuer's discovery document and closes done. Its key
// set (keySet), whose URL is held to the issuer's rule, is read with
// client too.
func (u *UserTokens) discover(done chan struct{}, client *http.Client) {
	var doc struct {
		JWKS string `json:"jwks_uri"`
	}
	p, err := oidc.NewProvider(oidc.ClientContext(context.Background(), client), u.Issuer)
	if err == nil {
		if err = p.Claims(&doc); err == nil {
			if err = CheckIssuer(doc.JWKS); err != nil {
				err = fmt.Errorf("jwks_uri: %w", err)
			}
		}
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if err == nil {
		algs := u.Algorithms
		if len(algs) == 0 {
			algs = DefaultUserTokenAlgorithms
		}
		keys := &keySet{url: doc.JWKS, client: client, now: u.now}
		for _, a := range algs {
			keys.algs = append(keys.algs, jose.SignatureAlgorithm(a))
		}
		if keys.now == nil {
			keys.now = time.Now
		}
		u.verifier = oidc.NewVerifier(u.Issuer, keys, &oidc.Config{ClientID: u.Audience, SupportedSigningAlgs: algs})
	} else {
		u.failedUntil = time.Now().Add(discoveryRetry)
		client.CloseIdleConnections()
	}
	u.discoverErr = err
	u.discovery = nil
	close(done)
}

// Context verifies raw and returns the AccessContext of its claims and when
// the token expires (a turn it opens ends by then); errors are gRPC
// statuses naming the reason.
func (u *UserTokens) Context(ctx context.Context, raw string) (*sharedosv1.AccessContext, time.Time, error) {
	if u == nil {
		return nil, time.Time{}, status.Error(codes.InvalidArgument, "user_token: this bridge verifies no user tokens (bridge-svc --oidc-issuer)")
	}
	if len(raw) > MaxUserTokenBytes {
		return nil, time.Time{}, status.Errorf(codes.InvalidArgument, "user_token: longer than %d bytes", MaxUserTokenBytes)
	}
	v, err := u.verifierFor(ctx)
	if err != nil {
		return nil, time.Time{}, status.Errorf(codes.Unavailable, "user_token: the issuer %s cannot be reached: %v", u.Issuer, err)
	}
	var keysUnavailable bool
	tok, err := v.Verify(noteKeysUnavailable(ctx, &keysUnavailable), raw)
	switch {
	case err == nil:
	case keysUnavailable:
		return nil, time.Time{}, status.Errorf(codes.Unavailable, "user_token: the issuer %s cannot be reached: %v", u.Issuer, err)
	case ctx.Err() != nil:
		return nil, time.Time{}, status.FromContextError(ctx.Err()).Err()
	default:
		return nil, time.Time{}, status.Errorf(codes.Unauthenticated, "user_token: %v", err)
	}
	var claims map[string]any
	if err := tok.Claims(&claims); err != nil {
		return nil, time.Time{}, status.Errorf(codes.Unauthenticated, "user_token: claims: %v", err)
	}
	// RFC 7519 section 2: a NumericDate is a JSON number; go-oidc also
	// takes a string of digits, which no conforming issuer signs.
	for _, name := range []string{"exp", "iat", "nbf"} {
		if v, ok := claims[name]; ok {
			if _, number := v.(float64); !number {
				return nil, time.Time{}, status.Errorf(codes.Unauthenticated, "user_token: claim %q must be a NumericDate (a JSON number)", name)
			}
		}
	}
	// OpenID Connect Core 3.1.3.7: a token for several audiences names the
	// party it was issued to (azp), which must be us, as must any azp.
	switch azp, hasAzp := claims["azp"]; {
	case !hasAzp && len(tok.Audience) > 1:
		return nil, time.Time{}, status.Errorf(codes.Unauthenticated, "user_token: for several audiences, with no azp naming %s the party it was issued to", u.Audience)
	case hasAzp && azp != u.Audience:
		// %q: the claim is the token's issuer's text, shown quoted and
		// escaped (a line break or a terminal control in it is not
		// written as itself into the error its caller prints).
		return nil, time.Time{}, status.Errorf(codes.Unauthenticated, "user_token: issued to another party (azp %q), not %s", fmt.Sprint(azp), u.Audience)
	}
	if tok.IssuedAt.After(time.Now().Add(issuedAtSkew)) {
		return nil, time.Time{}, status.Error(codes.Unauthenticated, "user_token: issued in the future (iat)")
	}
	claim := func(name, def string) string {
		if name == "" {
			name = def
		}
		return name
	}
	principal, _ := claims[claim(u.PrincipalClaim, "sub")].(string)
	if principal == "" {
		return nil, time.Time{}, status.Errorf(codes.Unauthenticated, "user_token: claim %q (the principal) is missing or not a string", claim(u.PrincipalClaim, "sub"))
	}
	var tenant string
	switch t := claims[claim(u.TenantClaim, "tenant")].(type) {
	case nil:
	case string:
		tenant = t
	default:
		return nil, time.Time{}, status.Errorf(codes.Unauthenticated, "user_token: claim %q (the tenant) must be a string", claim(u.TenantClaim, "tenant"))
	}
	var roles []string
	switch r := claims[claim(u.RolesClaim, "roles")].(type) {
	case nil:
	case string:
		roles = strings.Fields(r)
	case []any:
		for _, x := range r {
			s, ok := x.(string)
			if !ok {
				return nil, time.Time{}, status.Errorf(codes.Unauthenticated, "user_token: claim %q must list strings", claim(u.RolesClaim, "roles"))
			}
			roles = append(roles, s)
		}
	default:
		return nil, time.Time{}, status.Errorf(codes.Unauthenticated, "user_token: claim %q (the roles) must be a string or a list of strings", claim(u.RolesClaim, "roles"))
	}
	actx := &sharedosv1.AccessContext{Principal: principal, Tenant: tenant, Roles: roles}
	// A context authz-svc would refuse is the token's fault: its claims
	// name the claim, never an outage downstream.
	if e := accesscontext.Check(actx); e != nil {
		name, what := claim(u.RolesClaim, "roles"), "a role"
		switch {
		case e.Field == "context.principal":
			name, what = claim(u.PrincipalClaim, "sub"), "the principal"
		case e.Field == "context.tenant":
			name, what = claim(u.TenantClaim, "tenant"), "the tenant"
		case e.Field == "context.roles":
			what = "the roles"
		case strings.HasPrefix(e.Field, "context.roles["):
			what = "role " + strings.TrimPrefix(e.Field, "context.roles")
		}
		return nil, time.Time{}, status.Errorf(codes.Unauthenticated, "user_token: claim %q (%s) %s", name, what, e.Rule)
	}
	return actx, tok.Expiry, nil
}
