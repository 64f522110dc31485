package leases

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// keySet is an issuer's signing keys, read from its jwks_uri (go-oidc's
// oidc.KeySet). It asks the issuer again when a token names a key id it
// does not hold, or none of its keys verifies a token (the issuer rotated
// its keys), at most once per keyRefetch from the last read's start or
// end: tokens with made-up key ids cost the issuer one request per
// interval, not one each. Keys older than keysMaxAge are read again before
// they verify anything, so a key the issuer withdrew stops verifying
// within that. A read that fails is the issuer's unavailability, not the
// token's fault (noteKeysUnavailable).
type keySet struct {
	url    string
	client *http.Client
	algs   []jose.SignatureAlgorithm
	now    func() time.Time

	mu       sync.Mutex
	keys     []jose.JSONWebKey
	fetched  time.Time     // when keys were read (zero: never)
	tried    time.Time     // when the last read began
	fetching chan struct{} // closed when the read under way ends; nil: none
	err      error         // why the last read failed; nil when it did not
}

// keyRefetch is the least time between two reads of a key set; keysMaxAge
// how long keys read once verify tokens.
const (
	keyRefetch = 10 * time.Second
	keysMaxAge = time.Hour
)

// maxKeySetBytes bounds an issuer's key set document.
const maxKeySetBytes = 1 << 20

// errKeysUnavailable: the issuer's key set could not be read.
var errKeysUnavailable = errors.New("the issuer's key set cannot be read")

// keysUnavailableKey holds, in a verification's context, where the key set
// notes that it could not be read: go-oidc passes on a key set's error as
// text only.
type keysUnavailableKey struct{}

// noteKeysUnavailable returns ctx, in which a verification that fails
// because the key set could not be read sets *unavailable.
func noteKeysUnavailable(ctx context.Context, unavailable *bool) context.Context {
	return context.WithValue(ctx, keysUnavailableKey{}, unavailable)
}

// VerifySignature checks raw's signature with the issuer's key of its key
// id (every key when it names none) and returns its payload. When no key
// verifies it, the issuer may have rotated its keys under the same key id
// (or with none): the set is read again, at most once per keyRefetch.
func (k *keySet) VerifySignature(ctx context.Context, raw string) ([]byte, error) {
	jws, err := jose.ParseSigned(raw, k.algs)
	if err != nil {
		return nil, fmt.Errorf("malformed jwt: %w", err)
	}
	if len(jws.Signatures) != 1 {
		return nil, errors.New("a token has exactly one signature")
	}
	h := jws.Signatures[0].Header
	var keys []jose.JSONWebKey
	for _, again := range []bool{false, true} {
		if keys, err = k.keysFor(ctx, h.KeyID, again); err != nil {
			if p, ok := ctx.Value(keysUnavailableKey{}).(*bool); ok && errors.Is(err, errKeysUnavailable) {
				*p = true
			}
			return nil, err
		}
		for i := range keys {
			key := &keys[i]
			if h.KeyID != "" && key.KeyID != h.KeyID || key.Algorithm != "" && key.Algorithm != h.Algorithm {
				continue
			}
			if payload, err := jws.Verify(key); err == nil {
				return payload, nil
			}
		}
	}
	if h.KeyID != "" && !holds(keys, h.KeyID) {
		return nil, fmt.Errorf("the issuer has no key %q", h.KeyID)
	}
	return nil, errors.New("no key of the issuer verifies it")
}

// keysFor returns the keys to verify a token of key id kid with, reading
// the key set first when it is older than keysMaxAge, when it lacks kid,
// or when again (its keys verified nothing) — unless it was read in the
// last keyRefetch: that read's outcome answers for the interval. A caller
// waits for one read at most, and only as long as its context allows.
func (k *keySet) keysFor(ctx context.Context, kid string, again bool) ([]jose.JSONWebKey, error) {
	waited := false
	for {
		k.mu.Lock()
		now := k.now()
		stale := k.fetched.IsZero() || now.Sub(k.fetched) >= keysMaxAge
		if !stale && !again && (kid == "" || holds(k.keys, kid)) {
			keys := k.keys
			k.mu.Unlock()
			return keys, nil
		}
		if waited || k.fetching == nil && now.Sub(k.tried) < keyRefetch {
			keys, err := k.keys, k.err
			k.mu.Unlock()
			switch {
			case err != nil:
				return nil, fmt.Errorf("%w: %v", errKeysUnavailable, err)
			case stale:
				return nil, errKeysUnavailable
			}
			return keys, nil
		}
		if k.fetching == nil {
			k.fetching, k.tried = make(chan struct{}), now
			go k.fetch(k.fetching)
		}
		done := k.fetching
		k.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-done:
		}
		waited = true
	}
}

// fetch reads the key set, bounded by the client's timeout (not by the
// caller that asked: the others waiting for it keep it), and closes done.
// A key set that cannot be read keeps the keys read before.
func (k *keySet) fetch(done chan struct{}) {
	keys, err := k.read()
	k.mu.Lock()
	defer k.mu.Unlock()
	if err == nil {
		k.keys, k.fetched = keys, k.now()
	} else {
		k.client.CloseIdleConnections()
	}
	// The interval runs from the read's end too: a read that hung until
	// the client's timeout is not followed by another at once.
	k.err, k.fetching, k.tried = err, nil, k.now()
	close(done)
}

// read GETs the key set and returns its signing keys: public keys whose
// use, when given, is "sig".
func (k *keySet) read() ([]jose.JSONWebKey, error) {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, k.url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := k.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", k.url, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxKeySetBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", k.url, err)
	}
	if len(body) > maxKeySetBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes", k.url, maxKeySetBytes)
	}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, fmt.Errorf("%s: %w", k.url, err)
	}
	// A key of a type or curve go-jose does not know (X25519, secp256k1)
	// is one no token of ours is signed with: skipped, not the whole set.
	keys := make([]jose.JSONWebKey, 0, len(set.Keys))
	for _, b := range set.Keys {
		var key jose.JSONWebKey
		if key.UnmarshalJSON(b) == nil && key.IsPublic() && (key.Use == "" || key.Use == "sig") {
			keys = append(keys, key)
		}
	}
	return keys, nil
}

// holds reports whether keys has one of key id kid.
func holds(keys []jose.JSONWebKey, kid string) bool {
	for i := range keys {
		if keys[i].KeyID == kid {
			return true
		}
	}
	return false
}
