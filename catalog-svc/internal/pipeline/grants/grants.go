package grants

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
)

// MaxLifetime bounds a grant: no turn lives longer (the bridge's MaxTTL).
// Issue allows ClockSkew on top, for a bridge whose clock is ahead.
const MaxLifetime = 24 * time.Hour

// issuer is both the issuer and the audience: the kernel signs grants for
// itself.
const issuer = "sharedos-kernel"

// ClockSkew is how far another clock may be ahead: a replica's that issued
// a grant (iat), a bridge's that set its expiry. Expiry itself is checked
// exactly.
const ClockSkew = 30 * time.Second

// cacheSize bounds the memo of verified grants; when full it starts over.
const cacheSize = 8192

// Grant is what a turn grant says.
type Grant struct {
	TurnID      string
	Context     *sharedosv1.AccessContext
	CatalogHash string
	// PinRoot and PinSize are the root and size of the Merkle tree over the
	// pinned tools and prompts (services/contract/pinproof): each call
	// proves its one entry's digest under them. Grants issued before carry
	// the Tools and Prompts maps instead.
	PinRoot string
	PinSize int64
	// Tools maps each pinned tool's name to its digest (grants issued
	// before PinRoot; nil in a grant that has one).
	Tools map[string]string
	// Prompts and Resources map each pinned prompt's name and resource's
	// URI (or URI template) to its digest (ADR 0018); PromptsResourcesHash
	// is their hash. Grants issued before them carry none. Grants with a
	// PinRoot carry no Prompts (they are in its tree), and grants with a
	// ResourceRoot no Resources.
	Prompts              map[string]string
	Resources            map[string]string
	PromptsResourcesHash string
	// ResourceRoot and ResourceSize are the root and size of the Merkle
	// tree over the pinned concrete resource URIs (pinproof.BuildResources);
	// ResourceTemplates maps each pinned URI template to its digest. A read
	// proves its URI pinned there, or proves it absent and names the first
	// template it matches (ADR 0015 amended).
	ResourceRoot      string
	ResourceSize      int64
	ResourceTemplates map[string]string
	// ExpiresAt is when the grant expires, to the nanosecond: the turn's
	// lease has sub-second precision, and the grant lives exactly as long.
	ExpiresAt time.Time
	// Identity is the turn's SystemIdentity as the host declared it;
	// grants issued before it existed carry none (zero).
	Identity Identity
}

// Identity is what a grant says of the run: the harness, the model the
// host declared and the ToolPolicy's digest (systemidentity.PolicyDigest).
// The kernel records it on every attempt of the turn.
type Identity struct {
	Harness          string
	HarnessVersion   string
	MCPSupport       string
	Extension        string
	DeclaredModel    string
	ToolPolicyDigest string
}

// Refusal says why a grant was refused; its text is safe to show a model.
type Refusal struct{ Reason string }

func (r *Refusal) Error() string { return "grants: " + r.Reason }

func refuse(reason string) error { return &Refusal{Reason: reason} }

// Refusals.
var (
	ErrMissing  = refuse("the call carries no turn grant")
	ErrForged   = refuse("the turn grant is not one this kernel signed")
	ErrExpired  = refuse("the turn grant has expired")
	ErrMismatch = refuse("the turn grant belongs to another turn")
	ErrEnded    = refuse("the turn grant was issued before this kernel restarted; on its embedded store a turn ends with the process")
)

// Keys signs grants with one key and verifies them with it and any retired
// keys.
type Keys struct {
	kid    string
	signer jose.Signer
	verify map[string]ed25519.PublicKey

	// life, when set (EndWithProcess), is carried by every grant Issue
	// signs, and Verify refuses a grant without it.
	life string

	mu       sync.RWMutex
	verified map[string]*Grant
}

// EndWithProcess makes the grants k signs valid for as long as k lives
// (this process), whatever key signs them: each carries a value drawn now,
// and Verify refuses a grant without it (ErrEnded). A kernel whose records
// live in process memory (the embedded store) loses with a restart the
// turns' revocations and the call ids they ran; a grant from before would
// let a closed turn call again and a call id run twice. Call it before k
// issues or verifies a grant.
func (k *Keys) EndWithProcess() error {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return fmt.Errorf("grants: %w", err)
	}
	k.life = base64.RawURLEncoding.EncodeToString(b[:])
	return nil
}

// New returns Keys signing with key and also verifying with retired.
func New(key ed25519.PrivateKey, retired ...ed25519.PublicKey) (*Keys, error) {
	pub, ok := key.Public().(ed25519.PublicKey)
	if !ok || len(key) != ed25519.PrivateKeySize {
		return nil, errors.New("grants: not an Ed25519 private key")
	}
	kid := KeyID(pub)
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader(jose.HeaderKey("kid"), kid))
	if err != nil {
		return nil, fmt.Errorf("grants: signer: %w", err)
	}
	k := &Keys{kid: kid, signer: signer, verify: map[string]ed25519.PublicKey{kid: pub}, verified: map[string]*Grant{}}
	for _, p := range retired {
		k.verify[KeyID(p)] = p
	}
	return k, nil
}

// Generate returns Keys with a fresh key that lives only in this process.
func Generate() (*Keys, error) {
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("grants: generate key: %w", err)
	}
	return New(key)
}

// Load reads the signing key (a PEM PKCS #8 Ed25519 private key) and the
// retired keys (private or public PEM keys) from files.
func Load(keyFile string, retiredFiles ...string) (*Keys, error) {
	key, err := readKey(keyFile)
	if err != nil {
		return nil, err
	}
	priv, ok := key.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("grants: %s: not an Ed25519 private key", keyFile)
	}
	var retired []ed25519.PublicKey
	for _, f := range retiredFiles {
		k, err := readKey(f)
		if err != nil {
			return nil, err
		}
		switch k := k.(type) {
		case ed25519.PrivateKey:
			retired = append(retired, k.Public().(ed25519.PublicKey))
		case ed25519.PublicKey:
			retired = append(retired, k)
		default:
			return nil, fmt.Errorf("grants: %s: not an Ed25519 key", f)
		}
	}
	return New(priv, retired...)
}

func readKey(file string) (crypto.PublicKey, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("grants: %w", err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, fmt.Errorf("grants: %s: no PEM block", file)
	}
	switch block.Type {
	case "PRIVATE KEY":
		k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("grants: %s: %w", file, err)
		}
		return k, nil
	case "PUBLIC KEY":
		k, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("grants: %s: %w", file, err)
		}
		return k, nil
	default:
		return nil, fmt.Errorf("grants: %s: PEM block %q is not a PRIVATE KEY or PUBLIC KEY", file, block.Type)
	}
}

// KeyID names a key: the unpadded base64url SHA-256 of its public key, cut
// to 16 characters.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return base64.RawURLEncoding.EncodeToString(sum[:])[:16]
}

// KeyID is the id of the signing key.
func (k *Keys) KeyID() string { return k.kid }

// PublicKey is the signing key's public half.
func (k *Keys) PublicKey() ed25519.PublicKey { return k.verify[k.kid] }

type claims struct {
	TurnID      string            `json:"tid"`
	Context     accessContext     `json:"ctx"`
	CatalogHash string            `json:"cat"`
	Tools       map[string]string `json:"pin,omitempty"`
	PinRoot     string            `json:"pinRoot,omitempty"`
	PinSize     int64             `json:"pinSize,omitempty"`
	Prompts     map[string]string `json:"prm,omitempty"`
	Resources   map[string]string `json:"res,omitempty"`
	PRHash      string            `json:"prh,omitempty"`
	ResRoot     string            `json:"resRoot,omitempty"`
	ResSize     int64             `json:"resSize,omitempty"`
	Templates   map[string]string `json:"rtp,omitempty"`
	Identity    *identity         `json:"sys,omitempty"`
	// ExpiresAt is the exact expiry (RFC 3339, nanoseconds); exp, a whole
	// second, holds it rounded up. Grants issued before it carry none:
	// their exp is their expiry.
	ExpiresAt string `json:"expiresAt,omitempty"`
	// Life is the issuing Keys' life (EndWithProcess); empty otherwise.
	Life string `json:"life,omitempty"`
}

type identity struct {
	Harness          string `json:"harness,omitempty"`
	HarnessVersion   string `json:"harnessVersion,omitempty"`
	MCPSupport       string `json:"mcpSupport,omitempty"`
	Extension        string `json:"extension,omitempty"`
	DeclaredModel    string `json:"declaredModel,omitempty"`
	ToolPolicyDigest string `json:"toolPolicy,omitempty"`
}

type accessContext struct {
	Principal  string            `json:"principal"`
	Tenant     string            `json:"tenant,omitempty"`
	Roles      []string          `json:"roles,omitempty"`
	Attributes map[string]string `json:"attributes,omitempty"`
}

// Issue signs g; now is its issue time.
func (k *Keys) Issue(g Grant, now time.Time) (string, error) {
	switch {
	case g.TurnID == "":
		return "", errors.New("grants: a grant needs a turn id")
	case g.Context.GetPrincipal() == "":
		return "", errors.New("grants: a grant needs a principal")
	case !g.ExpiresAt.After(now):
		return "", errors.New("grants: a grant must expire in the future")
	case g.ExpiresAt.After(now.Add(MaxLifetime + ClockSkew)):
		return "", fmt.Errorf("grants: a grant lives at most %s", MaxLifetime)
	}
	std := jwt.Claims{
		Issuer: issuer, Audience: jwt.Audience{issuer}, Subject: g.Context.GetPrincipal(),
		IssuedAt: jwt.NewNumericDate(now), Expiry: expiryClaim(g.ExpiresAt),
	}
	c := claims{
		ExpiresAt: g.ExpiresAt.UTC().Format(time.RFC3339Nano),
		Life:      k.life,
		TurnID:    g.TurnID, CatalogHash: g.CatalogHash, Tools: g.Tools, PinRoot: g.PinRoot, PinSize: g.PinSize,
		Prompts: g.Prompts, Resources: g.Resources, PRHash: g.PromptsResourcesHash,
		ResRoot: g.ResourceRoot, ResSize: g.ResourceSize, Templates: g.ResourceTemplates,
		Context: accessContext{
			Principal: g.Context.GetPrincipal(), Tenant: g.Context.GetTenant(),
			Roles: g.Context.GetRoles(), Attributes: g.Context.GetAttributes(),
		},
	}
	if c.Tools == nil && c.PinRoot == "" {
		c.Tools = map[string]string{} // an empty pin, said explicitly
	}
	if g.Identity != (Identity{}) {
		id := identity(g.Identity)
		c.Identity = &id
	}
	tok, err := jwt.Signed(k.signer).Claims(std).Claims(c).Serialize()
	if err != nil {
		return "", fmt.Errorf("grants: sign: %w", err)
	}
	return tok, nil
}

// Verify checks that token is a grant these keys signed, for turnID, not
// expired at now, and returns what it says. A refusal is a *Refusal.
// ErrExpired is only ever the refusal of a grant these keys signed for
// turnID: the turn is checked first (the pipeline records a bridge's
// notice of a call it answered itself as that answer when the grant only
// expired since), and it returns the grant with it: the record of such a
// notice names the turn's principal. The returned Grant is shared: do not
// modify it.
func (k *Keys) Verify(token, turnID string, now time.Time) (*Grant, error) {
	if token == "" {
		return nil, ErrMissing
	}
	k.mu.RLock()
	g, ok := k.verified[token]
	k.mu.RUnlock()
	if !ok {
		var err error
		if g, err = k.verifySignature(token, now); err != nil {
			return nil, err
		}
		if now.Before(g.ExpiresAt) { // an expired one is never good again
			k.mu.Lock()
			if len(k.verified) >= cacheSize {
				clear(k.verified)
			}
			k.verified[token] = g
			k.mu.Unlock()
		}
	}
	if g.TurnID != turnID {
		return nil, ErrMismatch
	}
	if !now.Before(g.ExpiresAt) {
		return g, ErrExpired // whose it was: a notice's record names it
	}
	return g, nil
}

func (k *Keys) verifySignature(token string, now time.Time) (*Grant, error) {
	tok, err := jwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.EdDSA})
	if err != nil || len(tok.Headers) != 1 {
		return nil, ErrForged
	}
	pub, ok := k.verify[tok.Headers[0].KeyID]
	if !ok {
		return nil, ErrForged
	}
	var std jwt.Claims
	var c claims
	if err := tok.Claims(pub, &std, &c); err != nil {
		return nil, ErrForged
	}
	if std.Expiry == nil || std.IssuedAt == nil || c.TurnID == "" || c.Context.Principal == "" {
		return nil, ErrForged
	}
	if k.life != "" && c.Life != k.life {
		return nil, ErrEnded
	}
	expiresAt := std.Expiry.Time()
	if c.ExpiresAt != "" {
		// exp is the exact expiry rounded up to the second: a grant whose
		// two disagree was not made here.
		exact, err := time.Parse(time.RFC3339Nano, c.ExpiresAt)
		if err != nil || *expiryClaim(exact) != *std.Expiry {
			return nil, ErrForged
		}
		expiresAt = exact
	}
	// Every grant Issue signs names when it was issued and lives at most
	// MaxLifetime (+ ClockSkew) from then (both cut to the second here, as
	// iat is): one that does not was not made here, whoever holds the key
	// (a retired key leaked, say).
	if expiresAt.Truncate(time.Second).Sub(std.IssuedAt.Time()) > MaxLifetime+ClockSkew {
		return nil, ErrForged
	}
	// Expiry is Verify's to check, exactly and after the turn (ErrExpired
	// names a grant of the caller's turn); the rest here.
	unexpiring := std
	unexpiring.Expiry = nil
	if err := unexpiring.ValidateWithLeeway(jwt.Expected{Issuer: issuer, AnyAudience: jwt.Audience{issuer}, Time: now}, ClockSkew); err != nil {
		return nil, ErrForged
	}
	var id Identity
	if c.Identity != nil {
		id = Identity(*c.Identity)
	}
	return &Grant{
		Identity: id,
		TurnID:   c.TurnID, PinRoot: c.PinRoot, PinSize: c.PinSize, CatalogHash: c.CatalogHash, Tools: maps.Clone(c.Tools), ExpiresAt: expiresAt,
		Prompts: maps.Clone(c.Prompts), Resources: maps.Clone(c.Resources), PromptsResourcesHash: c.PRHash,
		ResourceRoot: c.ResRoot, ResourceSize: c.ResSize, ResourceTemplates: maps.Clone(c.Templates),
		Context: &sharedosv1.AccessContext{
			Principal: c.Context.Principal, Tenant: c.Context.Tenant,
			Roles: slices.Clone(c.Context.Roles), Attributes: maps.Clone(c.Context.Attributes),
		},
	}, nil
}

// expiryClaim is the exp claim of a grant expiring at t: t rounded up to
// the whole second (a NumericDate holds no fraction), so that exp never
// ends the grant before its lease. A reader of exp alone takes it for live
// up to a second past t; Verify reads t itself (the expiresAt claim).
func expiryClaim(t time.Time) *jwt.NumericDate {
	exp := jwt.NumericDate(t.Unix())
	if t.Nanosecond() > 0 {
		exp++
	}
	return &exp
}
