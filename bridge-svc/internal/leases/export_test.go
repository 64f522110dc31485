package leases

import "time"

// SetClock sets the clock u's key set ages are read with.
func SetClock(u *UserTokens, now func() time.Time) { u.now = now }

// KeyRefetch and KeysMaxAge are the key set's intervals.
const (
	KeyRefetch = keyRefetch
	KeysMaxAge = keysMaxAge
)

// SetIssuerTimeout bounds each of u's requests to its issuer from now on
// by d (its key set's too, once discovered: they share the client).
func SetIssuerTimeout(u *UserTokens, d time.Duration) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.client == nil {
		u.client = issuerClient()
	}
	u.client.Timeout = d
}
