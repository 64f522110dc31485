package testwait

import (
	"testing"
	"time"
)

// Until polls cond every millisecond until it holds, failing t ("never:
// what") if the test's context ends first (its deadline, -timeout).
func Until(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-t.Context().Done():
			t.Fatalf("never: %s", what)
		case <-time.After(time.Millisecond):
		}
	}
}
