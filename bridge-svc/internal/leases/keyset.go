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
// does not hold (the issuer rotated its keys), at most once per
// keyRefetch: tokens with made-up key ids cost the issuer one request per
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
// id (every key when it names none) and returns its payload.
func (k *keySet) VerifySignature(ctx context.Context, raw string) ([]byte, error) {
	jws, err := jose.ParseSigned(raw, k.algs)
	if err != nil {
		return nil, fmt.Errorf("malformed jwt: %w", err)
	}
	if len(jws.Signatures) != 1 {
		return nil, errors.New("a token has exactly one signature")
	}
	kid := jws.Signatures[0].Header.KeyID
	keys, err := k.keysFor(ctx, kid)
	if err != nil {
		if p, ok := ctx.Value(keysUnavailableKey{}).(*bool); ok && errors.Is(err, errKeysUnavailable) {
			*p = true
		}
		return nil, err
	}
	for i := range keys {
		if kid != "" && keys[i].KeyID != kid {
			continue
		}
		if payload, err := jws.Verify(&keys[i]); err == nil {
			return payload, nil
		}
	}
	if kid != "" && !holds(keys, kid) {
		return nil, fmt.Errorf("the issuer has no key %q", kid)
	}
	return nil, errors.New("no key of the issuer verifies it")
}

// keysFor returns the keys to verify a token of key id kid with, reading
// the key set first when it is older than keysMaxAge, or when it lacks kid
// and was not read in the last keyRefetch. A caller waits for the read
// only as long as its context allows.
func (k *keySet) keysFor(ctx context.Context, kid string) ([]jose.JSONWebKey, error) {
	for {
		k.mu.Lock()
		now := k.now()
		stale := k.fetched.IsZero() || now.Sub(k.fetched) >= keysMaxAge
		if !stale && (kid == "" || holds(k.keys, kid)) {
			keys := k.keys
			k.mu.Unlock()
			return keys, nil
		}
		if k.fetching == nil && now.Sub(k.tried) < keyRefetch {
			// Read moments ago: its outcome answers for the interval.
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
	k.err, k.fetching = err, nil
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
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, fmt.Errorf("%s: %w", k.url, err)
	}
	keys := make([]jose.JSONWebKey, 0, len(set.Keys))
	for _, key := range set.Keys {
		if key.IsPublic() && (key.Use == "" || key.Use == "sig") {
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
