package grants_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"maps"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/platform/mtls/pki"

	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline/grants"
)

var now = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

func grant() grants.Grant {
	return grants.Grant{
		TurnID:      "turn-1",
		Context:     &sharedosv1.AccessContext{Principal: "alice", Tenant: "acme", Roles: []string{"engineer"}, Attributes: map[string]string{"dept": "eng"}},
		CatalogHash: strings.Repeat("c", 64),
		Tools:       map[string]string{"files.read": strings.Repeat("d", 64)},
		ExpiresAt:   now.Add(time.Hour),
		// The resource pin: the concrete URIs' tree, the templates listed.
		ResourceRoot: "root", ResourceSize: 3, ResourceTemplates: map[string]string{"file:///{p}": strings.Repeat("f", 64)},
		Identity: grants.Identity{Harness: "pi", HarnessVersion: "0.74.2", MCPSupport: "extension",
			Extension: "pi-mcp-adapter", DeclaredModel: "fake-model", ToolPolicyDigest: "sha256:" + strings.Repeat("e", 64)},
	}
}

func mustKeys(t *testing.T) *grants.Keys {
	t.Helper()
	k, err := grants.Generate()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestIssueVerifyRoundTrip(t *testing.T) {
	k := mustKeys(t)
	tok, err := k.Issue(grant(), now)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second answer comes from the memo
		g, err := k.Verify(tok, "turn-1", now.Add(time.Minute))
		if err != nil {
			t.Fatalf("Verify: %v", err)
		}
		want := grant()
		if g.TurnID != want.TurnID || g.CatalogHash != want.CatalogHash || g.Tools["files.read"] != want.Tools["files.read"] ||
			g.Context.GetPrincipal() != "alice" || g.Context.GetTenant() != "acme" || g.Context.GetRoles()[0] != "engineer" ||
			g.Context.GetAttributes()["dept"] != "eng" || !g.ExpiresAt.Equal(want.ExpiresAt) || g.Identity != want.Identity ||
			g.ResourceRoot != "root" || g.ResourceSize != 3 || !maps.Equal(g.ResourceTemplates, want.ResourceTemplates) || g.Resources != nil {
			t.Fatalf("Verify = %+v", g)
		}
	}
}

func TestRefusals(t *testing.T) {
	k := mustKeys(t)
	tok, err := k.Issue(grant(), now)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(tok, ".")
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	altered := strings.Join([]string{parts[0],
		base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(payload), `"alice"`, `"admin"`, 1))), parts[2]}, ".")

	other := mustKeys(t)
	forged, _ := other.Issue(grant(), now)

	// The same claims with alg "none": never accepted.
	noneTok := parts[0][:0] + base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","kid":"`+k.KeyID()+`"}`)) + "." + parts[1] + "."

	// HS256 keyed with the public key's bytes (the classic confusion).
	hs, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: []byte(k.PublicKey())},
		(&jose.SignerOptions{}).WithHeader(jose.HeaderKey("kid"), k.KeyID()))
	if err != nil {
		t.Fatal(err)
	}
	confused, err := jwt.Signed(hs).Claims(map[string]any{"tid": "turn-1", "iss": "sharedos-kernel", "aud": "sharedos-kernel",
		"exp": now.Add(time.Hour).Unix(), "ctx": map[string]any{"principal": "admin"}}).Serialize()
	if err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name, token, turn string
		at                time.Time
		want              error
	}{
		{"missing", "", "turn-1", now, grants.ErrMissing},
		{"altered", altered, "turn-1", now, grants.ErrForged},
		{"forged by another key", forged, "turn-1", now, grants.ErrForged},
		{"alg none", noneTok, "turn-1", now, grants.ErrForged},
		{"HS256 with the public key", confused, "turn-1", now, grants.ErrForged},
		{"not a JWS", "garbage", "turn-1", now, grants.ErrForged},
		{"expired", tok, "turn-1", now.Add(time.Hour), grants.ErrExpired},
		{"other turn", tok, "turn-2", now, grants.ErrMismatch},
		// ErrExpired says the grant is the turn's own: the pipeline records
		// a bridge's notice under an expired grant as the bridge answered.
		{"other turn, expired", tok, "turn-2", now.Add(2 * time.Hour), grants.ErrMismatch},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g, err := k.Verify(tc.token, tc.turn, tc.at)
			// An expired grant of the turn comes with its refusal (whose
			// the turn was: a notice's record names it); no other does.
			if expired := tc.want == grants.ErrExpired; !errors.Is(err, tc.want) || (g != nil) != expired || expired && g.TurnID != tc.turn {
				t.Fatalf("Verify = %v, %v; want %v", g, err, tc.want)
			}
			var r *grants.Refusal
			if !errors.As(err, &r) || r.Reason == "" {
				t.Fatalf("%v is not a Refusal with a reason", err)
			}
		})
	}
	// A memoised grant still expires.
	if _, err := k.Verify(tok, "turn-1", now); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Verify(tok, "turn-1", now.Add(2*time.Hour)); !errors.Is(err, grants.ErrExpired) {
		t.Fatalf("memoised grant after expiry: %v", err)
	}
}

// A grant lives until the exact expiry it was issued for, which the bridge
// takes from the turn's lease (sub-second precision): exp, a whole second,
// cut it to the second before, so a grant expired up to a second before its
// lease (found by review). exp holds the expiry rounded up, so that no
// validator reading exp alone takes the grant for live after it.
func TestGrantLivesUntilItsExactExpiry(t *testing.T) {
	k := mustKeys(t)
	g := grant()
	g.ExpiresAt = now.Add(time.Hour + 900*time.Millisecond)
	tok, err := k.Issue(g, now)
	if err != nil {
		t.Fatal(err)
	}
	var claims struct {
		Exp int64 `json:"exp"`
	}
	payload, _ := base64.RawURLEncoding.DecodeString(strings.Split(tok, ".")[1])
	if err := json.Unmarshal(payload, &claims); err != nil || claims.Exp != now.Add(time.Hour+time.Second).Unix() {
		t.Fatalf("exp = %d, %v; want the expiry rounded up to %d", claims.Exp, err, now.Add(time.Hour+time.Second).Unix())
	}
	// First past the expiry (read from the token: an expired grant is not
	// memoised), then before it (memoised), then past it again.
	if _, err := k.Verify(tok, "turn-1", now.Add(time.Hour+901*time.Millisecond)); !errors.Is(err, grants.ErrExpired) {
		t.Fatalf("Verify 1 ms past the expiry = %v, want ErrExpired", err)
	}
	got, err := k.Verify(tok, "turn-1", now.Add(time.Hour+100*time.Millisecond))
	if err != nil {
		t.Fatalf("Verify 800 ms before the expiry: %v", err)
	}
	if !got.ExpiresAt.Equal(g.ExpiresAt) {
		t.Fatalf("ExpiresAt = %v, want %v", got.ExpiresAt, g.ExpiresAt)
	}
	if _, err := k.Verify(tok, "turn-1", now.Add(time.Hour+900*time.Millisecond)); !errors.Is(err, grants.ErrExpired) {
		t.Fatalf("memoised grant at its expiry = %v, want ErrExpired", err)
	}
	// The longest grant Issue makes, issued within a second: exp rounded
	// up is more than MaxLifetime past iat (cut down), and it is one of
	// Issue's all the same.
	issued := now.Add(500 * time.Millisecond)
	g.ExpiresAt = issued.Add(grants.MaxLifetime + grants.ClockSkew)
	if tok, err = k.Issue(g, issued); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Verify(tok, "turn-1", issued); err != nil {
		t.Fatalf("the longest grant Issue makes: %v", err)
	}
}

// A grant signed with a kernel key (a retired one that leaked, say) but not
// as Issue makes them — without an issue time, living longer than
// MaxLifetime from it, or with an exact expiry exp does not round it up to
// — is refused (found by review: a 10-year grant for any context
// verified). One without an exact expiry was issued before grants carried
// it: it expires at exp.
func TestVerifyRefusesGrantsIssueNeverMakes(t *testing.T) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k, err := grants.New(priv)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: priv},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader(jose.HeaderKey("kid"), k.KeyID()))
	if err != nil {
		t.Fatal(err)
	}
	sign := func(claims map[string]any) string {
		tok, err := jwt.Signed(signer).Claims(claims).Serialize()
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	base := func() map[string]any {
		return map[string]any{"tid": "turn-1", "iss": "sharedos-kernel", "aud": "sharedos-kernel", "iat": now.Unix(),
			"exp": now.Add(time.Hour).Unix(), "expiresAt": now.Add(time.Hour - 100*time.Millisecond).Format(time.RFC3339Nano),
			"ctx": map[string]any{"principal": "mallory", "roles": []string{"admin"}}, "tools": map[string]string{}}
	}
	if _, err := k.Verify(sign(base()), "turn-1", now); err != nil {
		t.Fatalf("a grant as Issue makes them: %v", err)
	}
	before := base()
	delete(before, "expiresAt")
	if g, err := k.Verify(sign(before), "turn-1", now); err != nil || !g.ExpiresAt.Equal(now.Add(time.Hour)) {
		t.Fatalf("a grant issued before exact expiries = %v, %v; want it to expire at exp", g, err)
	}
	noIat, long, later, earlier, unreadable := base(), base(), base(), base(), base()
	delete(noIat, "iat")
	long["exp"] = now.Add(10 * 365 * 24 * time.Hour).Unix()
	long["expiresAt"] = now.Add(10 * 365 * 24 * time.Hour).Format(time.RFC3339Nano)
	later["expiresAt"] = now.Add(time.Hour + time.Millisecond).Format(time.RFC3339Nano)
	earlier["expiresAt"] = now.Add(time.Hour - time.Second).Format(time.RFC3339Nano)
	unreadable["expiresAt"] = "in an hour"
	for name, claims := range map[string]map[string]any{"no issue time": noIat, "ten years": long,
		"exact expiry after exp": later, "exact expiry a second before exp": earlier, "exact expiry unreadable": unreadable} {
		if _, err := k.Verify(sign(claims), "turn-1", now); !errors.Is(err, grants.ErrForged) {
			t.Errorf("%s: Verify = %v, want ErrForged", name, err)
		}
	}
}

func TestIssueRefusesUnboundedGrants(t *testing.T) {
	k := mustKeys(t)
	for name, mutate := range map[string]func(*grants.Grant){
		"no turn":      func(g *grants.Grant) { g.TurnID = "" },
		"no principal": func(g *grants.Grant) { g.Context = &sharedosv1.AccessContext{} },
		"past":         func(g *grants.Grant) { g.ExpiresAt = now },
		"too long":     func(g *grants.Grant) { g.ExpiresAt = now.Add(grants.MaxLifetime + time.Minute) },
	} {
		g := grant()
		mutate(&g)
		if _, err := k.Issue(g, now); err == nil {
			t.Errorf("%s: Issue accepted %+v", name, g)
		}
	}
}

func TestRotation(t *testing.T) {
	dir := t.TempDir()
	oldFile, newFile := filepath.Join(dir, "old.key"), filepath.Join(dir, "new.key")
	for _, f := range []string{oldFile, newFile} {
		if err := pki.WriteSigningKey(f); err != nil {
			t.Fatal(err)
		}
	}
	before, err := grants.Load(oldFile)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := before.Issue(grant(), now)
	if err != nil {
		t.Fatal(err)
	}
	after, err := grants.Load(newFile, oldFile)
	if err != nil {
		t.Fatal(err)
	}
	if after.KeyID() == before.KeyID() {
		t.Fatal("two keys share an id")
	}
	if _, err := after.Verify(tok, "turn-1", now); err != nil {
		t.Fatalf("a grant of the retired key after rotation: %v", err)
	}
	fresh, _ := after.Issue(grant(), now)
	if _, err := before.Verify(fresh, "turn-1", now); !errors.Is(err, grants.ErrForged) {
		t.Fatalf("a kernel without the new key accepted its grant: %v", err)
	}
	if _, err := grants.Load(filepath.Join(dir, "missing.key")); err == nil {
		t.Fatal("Load of a missing file succeeded")
	}
}

// A grant issued before grants carried the run's identity verifies with a
// zero Identity, and one issued without it carries no "sys" claim.
func TestGrantWithoutIdentity(t *testing.T) {
	k := mustKeys(t)
	g := grant()
	g.Identity = grants.Identity{}
	tok, err := k.Issue(g, now)
	if err != nil {
		t.Fatal(err)
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.Split(tok, ".")[1])
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(payload), `"sys"`) {
		t.Errorf("claims of a grant without identity: %s", payload)
	}
	got, err := k.Verify(tok, "turn-1", now)
	if err != nil {
		t.Fatal(err)
	}
	if got.Identity != (grants.Identity{}) {
		t.Errorf("Identity = %+v, want zero", got.Identity)
	}
}

// Keys that end with their process (EndWithProcess) verify only the grants
// they issued: not those of an earlier process with the same key, bound or
// not, nor those of another bound process; the key still signs them all.
func TestGrantsEndWithTheirProcess(t *testing.T) {
	file := filepath.Join(t.TempDir(), "grant.key")
	if err := pki.WriteSigningKey(file); err != nil {
		t.Fatal(err)
	}
	load := func(bound bool) *grants.Keys {
		k, err := grants.Load(file)
		if err != nil {
			t.Fatal(err)
		}
		if bound {
			if err := k.EndWithProcess(); err != nil {
				t.Fatal(err)
			}
		}
		return k
	}
	issue := func(k *grants.Keys) string {
		tok, err := k.Issue(grant(), now)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	first, second, unbound := load(true), load(true), load(false)
	if _, err := first.Verify(issue(first), "turn-1", now); err != nil {
		t.Fatalf("a bound process's own grant: %v", err)
	}
	for name, tok := range map[string]string{"another bound process's": issue(second), "an unbound process's": issue(unbound)} {
		if _, err := first.Verify(tok, "turn-1", now); !errors.Is(err, grants.ErrEnded) {
			t.Errorf("%s grant: %v, want %v", name, err, grants.ErrEnded)
		}
	}
	if _, err := unbound.Verify(issue(unbound), "turn-1", now); err != nil {
		t.Fatalf("an unbound process's own grant: %v", err)
	}
}
