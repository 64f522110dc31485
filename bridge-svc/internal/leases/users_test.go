package leases_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sharedos/toolshare/bridge-svc/internal/leases"
	"github.com/sharedos/toolshare/bridge-svc/internal/leases/memory"
	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
)

// issuer is a local OIDC issuer: discovery document and JWKS over HTTP,
// and a signing key.
type issuer struct {
	srv *httptest.Server
	key *ecdsa.PrivateKey
	kid string

	// published is the key set served (key and kid until rotate), reads
	// counts its reads, and down makes them fail.
	published atomic.Pointer[[]byte]
	reads     atomic.Int32
	down      atomic.Bool
	// onRead, when set, runs at each read of the key set; a false answer
	// leaves the read without one (until the request ends).
	onRead atomic.Pointer[func() bool]
}

// rotate publishes key as kid in place of every key before.
func (is *issuer) rotate(key *ecdsa.PrivateKey, kid string) {
	b, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: kid, Algorithm: "ES256", Use: "sig"}}})
	is.publish(b)
}

// publish serves set as the key set.
func (is *issuer) publish(set []byte) { is.published.Store(&set) }

func newIssuer(t *testing.T) *issuer {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	is := &issuer{key: key, kid: "k1"}
	mux := http.NewServeMux()
	is.srv = httptest.NewServer(mux)
	t.Cleanup(is.srv.Close)
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer": is.srv.URL, "jwks_uri": is.srv.URL + "/jwks", "id_token_signing_alg_values_supported": []string{"ES256"},
			"authorization_endpoint": is.srv.URL + "/auth", "token_endpoint": is.srv.URL + "/token",
		})
	})
	is.rotate(key, is.kid)
	mux.HandleFunc("/jwks", func(w http.ResponseWriter, r *http.Request) {
		is.reads.Add(1)
		if f := is.onRead.Load(); f != nil && !(*f)() {
			<-r.Context().Done()
			return
		}
		if is.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write(*is.published.Load())
	})
	return is
}

// claims are a valid token's claims for alice of tenant acme.
func (is *issuer) claims() map[string]any {
	return map[string]any{"iss": is.srv.URL, "aud": "sharedos-host", "sub": "alice", "tenant": "acme",
		"roles": []string{"engineer", "oncall"}, "exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix()}
}

func sign(t *testing.T, alg jose.SignatureAlgorithm, key any, kid string, claims map[string]any) string {
	t.Helper()
	opts := (&jose.SignerOptions{}).WithType("JWT")
	if kid != "" {
		opts = opts.WithHeader("kid", kid)
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, opts)
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(claims)
	obj, err := s.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	out, err := obj.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestUserTokens: a valid ID token opens a turn whose context comes from
// its claims; expired, wrong-audience, unknown-key, alg "none" and HS256
// tokens signed with the issuer's public key are UNAUTHENTICATED with the
// reason, and nothing is stored.
func TestUserTokens(t *testing.T) {
	is := newIssuer(t)
	store := memory.New()
	cat := &fakeKernel{resp: &sharedosv1.GrantTurnResponse{CatalogHash: "h1", Tools: []*sharedosv1.PublishedTool{{Name: "files.read", CanonicalJson: []byte(`{}`)}}}}
	users := &leases.UserTokens{Issuer: is.srv.URL, Audience: "sharedos-host"}
	if err := users.Validate(); err != nil {
		t.Fatal(err)
	}
	svc := leases.NewService(leases.ServiceConfig{Store: store, Kernel: cat, PublicURL: "http://127.0.0.1:7480/", Users: users})
	open := func(tok string) (*sharedosv1.TurnLease, error) {
		req := validRequest()
		req.Context, req.UserToken = nil, tok
		return svc.OpenTurn(context.Background(), req)
	}

	l, err := open(sign(t, jose.ES256, is.key, is.kid, is.claims()))
	if err != nil {
		t.Fatalf("valid token: %v", err)
	}
	if got := cat.asked.GetContext(); got.GetPrincipal() != "alice" || got.GetTenant() != "acme" || !slices.Equal(got.GetRoles(), []string{"engineer", "oncall"}) {
		t.Fatalf("the catalogue was asked for %v, want alice/acme [engineer oncall] from the claims", got)
	}
	lease, _, err := store.Get(context.Background(), l.GetTurnId())
	if err != nil || lease.Context.GetPrincipal() != "alice" {
		t.Fatalf("stored lease %+v, %v", lease, err)
	}
	cat.asked = nil

	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	pubDER, _ := x509.MarshalPKIXPublicKey(&is.key.PublicKey)
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	expired, wrongAud, noSub := is.claims(), is.claims(), is.claims()
	expired["exp"] = time.Now().Add(-time.Minute).Unix()
	wrongAud["aud"] = "someone-else"
	delete(noSub, "sub")
	otherParty, manyAud, future, tenantList, rolesMap := is.claims(), is.claims(), is.claims(), is.claims(), is.claims()
	otherParty["azp"] = "another-client"
	manyAud["aud"] = []string{"sharedos-host", "another-client"}
	future["iat"] = time.Now().Add(24 * time.Hour).Unix()
	tenantList["tenant"] = []string{"acme", "globex"}
	rolesMap["roles"] = map[string]any{"admin": true}
	expString, iatString := is.claims(), is.claims()
	expString["exp"] = strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)
	iatString["iat"] = strconv.FormatInt(time.Now().Unix(), 10)
	payload, _ := json.Marshal(is.claims())
	none := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + base64.RawURLEncoding.EncodeToString(payload) + "."
	bad := []struct {
		name, token, want string
	}{
		{"expired", sign(t, jose.ES256, is.key, is.kid, expired), "expired"},
		{"wrong audience", sign(t, jose.ES256, is.key, is.kid, wrongAud), "audience"},
		{"unknown key", sign(t, jose.ES256, other, "k2", is.claims()), "signature"},
		{"alg none", none, "none"},
		{"HS256 with the public key", sign(t, jose.HS256, pubPEM, is.kid, is.claims()), "HS256"},
		{"no principal", sign(t, jose.ES256, is.key, is.kid, noSub), `"sub"`},
		{"not a JWT", "garbage", "malformed"},
		// OpenID Connect Core 3.1.3.7 and the claims' types (found by review).
		{"issued to another party", sign(t, jose.ES256, is.key, is.kid, otherParty), "another party"},
		{"several audiences, no azp", sign(t, jose.ES256, is.key, is.kid, manyAud), "no azp"},
		{"issued in the future", sign(t, jose.ES256, is.key, is.kid, future), "future"},
		{"tenant not a string", sign(t, jose.ES256, is.key, is.kid, tenantList), "the tenant"},
		{"roles neither a string nor a list", sign(t, jose.ES256, is.key, is.kid, rolesMap), "the roles"},
		// RFC 7519 2: a NumericDate is a JSON number; go-oidc also takes
		// a string of digits (found by a black-box attack).
		{"exp a string", sign(t, jose.ES256, is.key, is.kid, expString), `"exp"`},
		{"iat a string", sign(t, jose.ES256, is.key, is.kid, iatString), `"iat"`},
	}
	for _, b := range bad {
		l, err := open(b.token)
		if status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), b.want) || l != nil {
			t.Errorf("%s: %v, want Unauthenticated naming %q", b.name, err, b.want)
		}
	}
	// A claim in an error is quoted and escaped: an IdP-signed azp with a
	// line break printed a fake JSON line under sharedosctl's error
	// (found by a black-box attack; it was formatted with %v).
	hostileAzp := is.claims()
	hostileAzp["azp"] = "x\n{\"turnId\":\"t1\"}\u009b2J\u202e"
	if _, err := open(sign(t, jose.ES256, is.key, is.kid, hostileAzp)); status.Code(err) != codes.Unauthenticated ||
		strings.ContainsAny(err.Error(), "\n\u009b\u202e") || !strings.Contains(err.Error(), `(azp "x\n{\"turnId\":\"t1\"}\u009b2J\u202e")`) {
		t.Errorf("azp with a line break and controls: %q", err)
	}
	if cat.asked != nil {
		t.Errorf("a refused token reached the catalogue with %v", cat.asked)
	}

	// A token and an asserted context together are refused.
	req := validRequest()
	req.UserToken = sign(t, jose.ES256, is.key, is.kid, is.claims())
	if _, err := svc.OpenTurn(context.Background(), req); status.Code(err) != codes.InvalidArgument {
		t.Errorf("token and context: %v, want InvalidArgument", err)
	}
	// A bridge without an issuer accepts no token.
	plain := leases.NewService(leases.ServiceConfig{Store: memory.New(), Kernel: cat, PublicURL: "http://x/"})
	req.Context = nil
	if _, err := plain.OpenTurn(context.Background(), req); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "--oidc-issuer") {
		t.Errorf("token without an issuer: %v", err)
	}
	if err := (&leases.UserTokens{Issuer: is.srv.URL, Audience: "a", Algorithms: []string{"HS256"}}).Validate(); err == nil {
		t.Error("HS256 allowed by configuration")
	}
	if _, err := open(strings.Repeat("a", leases.MaxUserTokenBytes+1)); status.Code(err) != codes.InvalidArgument {
		t.Errorf("an oversized token: %v, want InvalidArgument", err)
	}
	// Whoever is on the path of a plain-HTTP issuer hands out its keys.
	for issuer, ok := range map[string]bool{"https://idp.example.org": true, "http://127.0.0.1:9000": true, "http://[::1]:9": true,
		"http://localhost:8080": true, "http://idp.example.org": false, "idp.example.org": false, "ftp://idp.example.org": false} {
		if err := (&leases.UserTokens{Issuer: issuer, Audience: "a"}).Validate(); (err == nil) != ok {
			t.Errorf("issuer %s: Validate = %v, want accepted %v", issuer, err, ok)
		}
	}
}

// A turn opened with a user token ends when the token does, whatever TTL
// was asked for: a user the identity provider disabled keeps no turn past
// the token's expiry (found by review: up to 24 h).
func TestUserTokenBoundsTheTurn(t *testing.T) {
	is := newIssuer(t)
	cat := &fakeKernel{resp: &sharedosv1.GrantTurnResponse{CatalogHash: "h1", Tools: []*sharedosv1.PublishedTool{{Name: "files.read", CanonicalJson: []byte(`{}`)}}}}
	svc := leases.NewService(leases.ServiceConfig{Store: memory.New(), Kernel: cat, PublicURL: "http://127.0.0.1:7480/",
		Users: &leases.UserTokens{Issuer: is.srv.URL, Audience: "sharedos-host"}})
	claims := is.claims()
	exp := time.Now().Add(10 * time.Minute).Truncate(time.Second)
	claims["exp"] = exp.Unix()
	req := validRequest()
	req.Context, req.UserToken, req.Ttl = nil, sign(t, jose.ES256, is.key, is.kid, claims), durationpb.New(leases.MaxTTL)
	l, err := svc.OpenTurn(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if got := l.GetExpiresAt().AsTime(); got.After(exp) {
		t.Errorf("turn expires %s, after its token (%s)", got, exp)
	}
	if got := cat.asked.GetExpiresAt().AsTime(); got.After(exp) {
		t.Errorf("grant asked until %s, after the token (%s)", got, exp)
	}
}

// A hung issuer fails OpenTurns with user tokens at their own deadline and
// holds up none after it (found by review: discovery ran under a lock with
// no timeout, and every later OpenTurn waited for ever).
func TestHungIssuerBlocksNothing(t *testing.T) {
	hang := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(hang) })
	users := &leases.UserTokens{Issuer: srv.URL, Audience: "sharedos-host"}
	for i := range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		done := make(chan error, 1)
		go func() { _, _, err := users.Context(ctx, "x.y.z"); done <- err }()
		select {
		case err := <-done:
			if status.Code(err) != codes.Unavailable {
				t.Errorf("call %d: %v, want Unavailable", i, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("call %d still blocked 10 s after its 200 ms deadline", i)
		}
		cancel()
	}
}

// An issuer that fails gets one discovery per few seconds, not one per
// OpenTurn (found by review: each failed discovery also left a connection
// open), and a discovery document whose key set is not where an issuer may
// be (https, or http on loopback) is refused.
func TestFailedDiscoveryIsNotRepeatedAtOnce(t *testing.T) {
	var asked atomic.Int32
	jwks := "http://keys.example.com/jwks"
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		if asked.Add(1) == 1 {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": srv.URL, "jwks_uri": jwks,
			"authorization_endpoint": srv.URL + "/auth", "token_endpoint": srv.URL + "/token"})
	})
	users := &leases.UserTokens{Issuer: srv.URL, Audience: "sharedos-host"}
	for range 20 {
		if _, _, err := users.Context(context.Background(), "x.y.z"); status.Code(err) != codes.Unavailable {
			t.Fatalf("issuer down: %v, want Unavailable", err)
		}
	}
	if n := asked.Load(); n != 1 {
		t.Errorf("20 OpenTurns asked a failing issuer %d times, want once", n)
	}
	other := &leases.UserTokens{Issuer: srv.URL, Audience: "sharedos-host"}
	if _, _, err := other.Context(context.Background(), "x.y.z"); status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "jwks_uri") {
		t.Errorf("a key set over plain HTTP elsewhere: %v, want Unavailable naming jwks_uri", err)
	}
}

// Tokens naming key ids the issuer never had cost it one read of its key
// set per interval, not one each (found by review: go-oidc's key set read
// it again for every unknown key id). A rotation is picked up once the
// interval has passed, a withdrawn key stops verifying then, and keys are
// read again once they are an hour old.
func TestMadeUpKeyIDsCostOneReadPerInterval(t *testing.T) {
	is := newIssuer(t)
	users := &leases.UserTokens{Issuer: is.srv.URL, Audience: "sharedos-host"}
	clk := &clock{t: time.Now()}
	leases.SetClock(users, clk.now)
	check := func(name, token string, want codes.Code, reads int32) {
		t.Helper()
		_, _, err := users.Context(t.Context(), token)
		if status.Code(err) != want {
			t.Errorf("%s: %v, want %v", name, err, want)
		}
		if n := is.reads.Load(); n != reads {
			t.Errorf("%s: the key set was read %d times, want %d", name, n, reads)
		}
	}
	check("a valid token", sign(t, jose.ES256, is.key, is.kid, is.claims()), codes.OK, 1)
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	for i := range 20 {
		check("a made-up key id", sign(t, jose.ES256, other, fmt.Sprintf("made-up-%d", i), is.claims()), codes.Unauthenticated, 1)
	}
	is.rotate(other, "k2")
	rotated := sign(t, jose.ES256, other, "k2", is.claims())
	check("the new key within the interval", rotated, codes.Unauthenticated, 1)
	clk.t = clk.t.Add(leases.KeyRefetch)
	check("the new key after the interval", rotated, codes.OK, 2)
	check("the withdrawn key", sign(t, jose.ES256, is.key, is.kid, is.claims()), codes.Unauthenticated, 2)
	check("the new key again", rotated, codes.OK, 2)
	clk.t = clk.t.Add(leases.KeysMaxAge)
	check("the new key an hour on", rotated, codes.OK, 3)
}

// A key set that cannot be read makes a user token Unavailable (the issuer
// cannot be reached), not Unauthenticated (found by review: a valid token
// was refused as if forged), is read again only after the interval, and
// keys an hour old no longer verify when they cannot be read again.
func TestUnreadableKeySetIsUnavailable(t *testing.T) {
	is := newIssuer(t)
	users := &leases.UserTokens{Issuer: is.srv.URL, Audience: "sharedos-host"}
	clk := &clock{t: time.Now()}
	leases.SetClock(users, clk.now)
	token := sign(t, jose.ES256, is.key, is.kid, is.claims())
	is.down.Store(true)
	for range 5 {
		if _, _, err := users.Context(t.Context(), token); status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "key set") {
			t.Errorf("key set down: %v, want Unavailable naming the key set", err)
		}
	}
	if n := is.reads.Load(); n != 1 {
		t.Errorf("5 tokens read a failing key set %d times, want once", n)
	}
	is.down.Store(false)
	clk.t = clk.t.Add(leases.KeyRefetch)
	if _, _, err := users.Context(t.Context(), token); err != nil {
		t.Errorf("key set back: %v", err)
	}
	is.down.Store(true)
	clk.t = clk.t.Add(leases.KeysMaxAge)
	if _, _, err := users.Context(t.Context(), token); status.Code(err) != codes.Unavailable {
		t.Errorf("keys an hour old, key set down: %v, want Unavailable", err)
	}
}

// When none of its keys verifies a token, the issuer may have rotated its
// keys under the same key id, or with none: the key set is read again,
// once per interval (found by review: it was not for an hour).
func TestKeySetReadAgainWhenNoKeyVerifies(t *testing.T) {
	for _, kid := range []string{"", "k1"} {
		is := newIssuer(t)
		is.rotate(is.key, kid)
		users := &leases.UserTokens{Issuer: is.srv.URL, Audience: "sharedos-host"}
		clk := &clock{t: time.Now()}
		leases.SetClock(users, clk.now)
		if _, _, err := users.Context(t.Context(), sign(t, jose.ES256, is.key, kid, is.claims())); err != nil {
			t.Fatalf("kid %q: %v", kid, err)
		}
		next, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		is.rotate(next, kid)
		token := sign(t, jose.ES256, next, kid, is.claims())
		if _, _, err := users.Context(t.Context(), token); status.Code(err) != codes.Unauthenticated || is.reads.Load() != 1 {
			t.Errorf("kid %q, the new key within the interval: %v after %d reads, want Unauthenticated after 1", kid, err, is.reads.Load())
		}
		clk.t = clk.t.Add(leases.KeyRefetch)
		if _, _, err := users.Context(t.Context(), token); err != nil || is.reads.Load() != 2 {
			t.Errorf("kid %q, the new key after the interval: %v after %d reads, want accepted after 2", kid, err, is.reads.Load())
		}
	}
}

// A key set holding keys go-jose cannot parse (X25519, secp256k1) still
// verifies tokens with the keys it can (found by review: one such key made
// every token Unavailable), and a key whose alg is not the token's — one
// published for encryption, with no use — verifies none.
func TestKeySetSkipsKeysItCannotUse(t *testing.T) {
	is := newIssuer(t)
	users := &leases.UserTokens{Issuer: is.srv.URL, Audience: "sharedos-host"}
	good, _ := json.Marshal(jose.JSONWebKey{Key: &is.key.PublicKey, KeyID: is.kid, Algorithm: "ES256", Use: "sig"})
	forEncryption, _ := json.Marshal(jose.JSONWebKey{Key: &is.key.PublicKey, KeyID: "enc", Algorithm: "ECDH-ES"})
	is.publish([]byte(`{"keys":[` + string(good) + `,` + string(forEncryption) +
		`,{"kty":"OKP","crv":"X25519","use":"enc","x":"hSDwCYkwp1R0i33ctD73Wg2_Og0mOBr066SpjqqbTmo","kid":"x"}` +
		`,{"kty":"EC","crv":"secp256k1","alg":"ES256K","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0","kid":"s"}]}`))
	if _, _, err := users.Context(t.Context(), sign(t, jose.ES256, is.key, is.kid, is.claims())); err != nil {
		t.Errorf("a valid token beside keys that cannot be parsed: %v", err)
	}
	if _, _, err := users.Context(t.Context(), sign(t, jose.ES256, is.key, "enc", is.claims())); status.Code(err) != codes.Unauthenticated {
		t.Errorf("a token verified by a key for ECDH-ES: %v, want Unauthenticated", err)
	}
}

// A key set read that hangs until the client's timeout, as long as the
// interval between reads, ends its caller's wait as Unavailable (found by
// review: the caller started read after read until its own deadline).
func TestHungKeySetReadEndsTheWait(t *testing.T) {
	is := newIssuer(t)
	users := &leases.UserTokens{Issuer: is.srv.URL, Audience: "sharedos-host"}
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	leases.SetClock(users, func() time.Time { return time.Unix(0, now.Load()) })
	// Discovery and a first read with the usual bound; then reads hang
	// until a bound this test can wait for.
	if _, _, err := users.Context(t.Context(), sign(t, jose.ES256, is.key, is.kid, is.claims())); err != nil {
		t.Fatal(err)
	}
	leases.SetIssuerTimeout(users, 200*time.Millisecond)
	hang := func() bool { now.Add(int64(leases.KeyRefetch)); return false }
	is.onRead.Store(&hang)
	now.Add(int64(leases.KeyRefetch))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if _, _, err := users.Context(ctx, sign(t, jose.ES256, other, "k2", is.claims())); status.Code(err) != codes.Unavailable {
		t.Errorf("a hung key set: %v, want Unavailable", err)
	}
	if n := is.reads.Load(); n != 2 {
		t.Errorf("a hung key set was read %d times (the first read included) for one token, want once more", n)
	}
}

// A token whose claims make a context authz-svc would refuse is the
// token's fault: Unauthenticated naming the claim, and the kernel is never
// asked (found by attack: roles [""] was answered Unavailable,
// CATALOG_UNAVAILABLE, and logged as authz-svc down).
func TestUserTokenWithAContextAuthzWouldRefuse(t *testing.T) {
	is := newIssuer(t)
	cat := &fakeKernel{resp: &sharedosv1.GrantTurnResponse{CatalogHash: "h1", Tools: []*sharedosv1.PublishedTool{{Name: "files.read", CanonicalJson: []byte(`{}`)}}}}
	svc := leases.NewService(leases.ServiceConfig{Store: memory.New(), Kernel: cat, PublicURL: "http://127.0.0.1:7480/",
		Users: &leases.UserTokens{Issuer: is.srv.URL, Audience: "sharedos-host", RolesClaim: "groups"}})
	many := make([]string, 257)
	for i := range many {
		many[i] = fmt.Sprint("r", i)
	}
	cases := []struct {
		name string
		edit func(map[string]any)
		want string
	}{
		{`roles [""]`, func(c map[string]any) { c["groups"] = []string{""} }, `claim "groups" (role [0]) must be 1 to 1024 bytes`},
		{"257 roles", func(c map[string]any) { c["groups"] = many }, `claim "groups" (the roles) must hold at most 256 roles`},
		{"a role with an ANSI escape", func(c map[string]any) { c["groups"] = []string{"eng", "x\x1b[31m"} }, `claim "groups" (role [1]) must not hold control`},
		{"a role string with a bidi override", func(c map[string]any) { c["groups"] = "eng ad\u202emin" }, `claim "groups" (role [1]) must not hold control`},
		{"sub over 1024 bytes", func(c map[string]any) { c["sub"] = strings.Repeat("p", 1025) }, `claim "sub" (the principal) must be at most 1024 bytes`},
		{"tenant with a C1 control", func(c map[string]any) { c["tenant"] = "acme\u0085" }, `claim "tenant" (the tenant) must not hold control`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			claims := is.claims()
			delete(claims, "roles")
			c.edit(claims)
			req := validRequest()
			req.Context, req.UserToken = nil, sign(t, jose.ES256, is.key, is.kid, claims)
			cat.asked = nil
			_, err := svc.OpenTurn(context.Background(), req)
			if status.Code(err) != codes.Unauthenticated || !strings.Contains(status.Convert(err).Message(), "user_token: "+c.want) {
				t.Errorf("OpenTurn = %v, want Unauthenticated: user_token: %s…", err, c.want)
			}
			if cat.asked != nil {
				t.Errorf("the kernel was asked for %v", cat.asked.GetContext())
			}
		})
	}
	// A Unicode principal, tenant and roles are claims like any other.
	claims := is.claims()
	claims["sub"], claims["tenant"], claims["groups"] = "José", "株式会社", []string{"ingénieur", "工程师"}
	req := validRequest()
	req.Context, req.UserToken = nil, sign(t, jose.ES256, is.key, is.kid, claims)
	if _, err := svc.OpenTurn(context.Background(), req); err != nil {
		t.Errorf("OpenTurn with Unicode claims: %v", err)
	}
}
