package requeststate

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
)

// State is what a sealed requestState carries: the attempt that waits and
// the provider's own state, bound to one turn, kind of call, name and
// arguments.
type State struct {
	TurnID    string `json:"t"`
	AttemptID string `json:"a"`
	Round     int32  `json:"r"`
	// Kind is the call's kind (tools/call, prompts/get, resources/read): a
	// prompt's state must not open on a tools/call of the same name and
	// arguments. A tools/call's is the zero value, so it is left out, and a
	// state sealed before kinds were opens as a tools/call's.
	Kind sharedosv1.CallKind `json:"o,omitempty"`
	Tool string              `json:"n"`
	// ArgumentsDigest is redact.ArgumentsDigest of the forwarded arguments.
	ArgumentsDigest string    `json:"d"`
	ExpiresAt       time.Time `json:"e"`
	// Provider is the provider's state of the round, verbatim.
	Provider []byte `json:"p,omitempty"`
	// Kernel is the address of the kernel replica that answered the round:
	// the retry goes there (an upstream call may wait in its memory).
	Kernel string `json:"k,omitempty"`
}

// Errors Open returns; each wraps ErrInvalid.
var (
	ErrInvalid = errors.New("requestState is not valid")
	// ErrSeal: altered, cut, forged, another turn's or another key's.
	ErrSeal = fmt.Errorf("%w: it was altered or belongs to another turn", ErrInvalid)
	// ErrExpired: the wait it continues has run out.
	ErrExpired = fmt.Errorf("%w: the input round it continues has expired", ErrInvalid)
)

// prefix versions the format.
const prefix = "s1."

// MaxBytes bounds a sealed state a client may send back.
const MaxBytes = 16 << 10

// info separates this use of the key from any other.
const info = "sharedos bridge requestState v1"

// Sealer seals with its current key and opens with it or a retired one.
type Sealer struct {
	seal cipher.AEAD
	open []cipher.AEAD
}

// New returns a Sealer over key material (at least 32 bytes, secret), the
// current key first, retired ones after.
func New(current []byte, retired ...[]byte) (*Sealer, error) {
	s := &Sealer{}
	for i, k := range append([][]byte{current}, retired...) {
		if len(k) < 32 {
			return nil, errors.New("requeststate: key material must be at least 32 bytes")
		}
		key, err := hkdf.Key(sha256.New, k, nil, info, 32)
		if err != nil {
			return nil, fmt.Errorf("requeststate: derive key: %w", err)
		}
		block, err := aes.NewCipher(key)
		if err != nil {
			return nil, fmt.Errorf("requeststate: %w", err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("requeststate: %w", err)
		}
		if i == 0 {
			s.seal = aead
		}
		s.open = append(s.open, aead)
	}
	return s, nil
}

// Generate returns a Sealer with a key that lives only in this process.
func Generate() (*Sealer, error) {
	k := make([]byte, 32)
	_, _ = rand.Read(k) // crypto/rand.Read never fails (Go ≥ 1.24)
	return New(k)
}

// Load reads the state key and retired keys: PEM PKCS #8 Ed25519 private
// keys (the format of the chart's key Secrets and of pki.WriteSigningKey),
// whose seeds are the key material.
func Load(keyFile string, retiredFiles ...string) (*Sealer, error) {
	var material [][]byte
	for _, f := range append([]string{keyFile}, retiredFiles...) {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("requeststate: %w", err)
		}
		block, _ := pem.Decode(b)
		if block == nil || block.Type != "PRIVATE KEY" {
			return nil, fmt.Errorf("requeststate: %s: no PEM PRIVATE KEY block", f)
		}
		k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("requeststate: %s: %w", f, err)
		}
		priv, ok := k.(ed25519.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("requeststate: %s: not an Ed25519 private key", f)
		}
		material = append(material, priv.Seed())
	}
	return New(material[0], material[1:]...)
}

// ad is the associated data: the state opens only for the turn it names.
func ad(turnID string) []byte { return []byte(info + "\x00" + turnID) }

// Seal returns st as an opaque string for the client to send back.
func (s *Sealer) Seal(st State) (string, error) {
	plain, err := json.Marshal(st)
	if err != nil {
		return "", fmt.Errorf("requeststate: %w", err)
	}
	nonce := make([]byte, s.seal.NonceSize(), s.seal.NonceSize()+len(plain)+s.seal.Overhead())
	_, _ = rand.Read(nonce)
	sealed := s.seal.Seal(nonce, nonce, plain, ad(st.TurnID))
	out := prefix + base64.RawURLEncoding.EncodeToString(sealed)
	if len(out) > MaxBytes {
		return "", errors.New("requeststate: the state is too large to hand out")
	}
	return out, nil
}

// Open returns the State token seals for turnID, refusing it (ErrSeal,
// ErrExpired) unless it is intact, this turn's, and not past its expiry
// at now.
func (s *Sealer) Open(token, turnID string, now time.Time) (State, error) {
	body, ok := strings.CutPrefix(token, prefix)
	if !ok || len(token) > MaxBytes {
		return State{}, ErrSeal
	}
	raw, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil || len(raw) < s.seal.NonceSize()+s.seal.Overhead() {
		return State{}, ErrSeal
	}
	for _, aead := range s.open {
		n := aead.NonceSize()
		plain, err := aead.Open(nil, raw[:n], raw[n:], ad(turnID))
		if err != nil {
			continue
		}
		var st State
		if json.Unmarshal(plain, &st) != nil || st.TurnID != turnID {
			return State{}, ErrSeal
		}
		if !now.Before(st.ExpiresAt) {
			return State{}, ErrExpired
		}
		return st, nil
	}
	return State{}, ErrSeal
}
