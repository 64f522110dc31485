package leases

import "time"

// SetClock sets the clock u's key set ages are read with.
func SetClock(u *UserTokens, now func() time.Time) { u.now = now }

// KeyRefetch and KeysMaxAge are the key set's intervals.
const (
	KeyRefetch = keyRefetch
	KeysMaxAge = keysMaxAge
)
