package upstream

import (
	"fmt"
	"slices"
	"testing"
)

// TestRememberedWithdrawals: a record listed again leaves the withdrawn
// ones, a name withdrawn again replaces its older record, and only the
// last maxWithdrawn are kept.
func TestRememberedWithdrawals(t *testing.T) {
	id := func(s string) string { return s[:1] }
	before := []string{"a1", "b1", "c1"}
	gone := map[string]string{"a": "a1", "c": "c1"} // b listed again
	if got := remembered(before, gone, []string{"c2", "d1"}, id); !slices.Equal(got, []string{"a1", "c2", "d1"}) {
		t.Errorf("remembered = %v", got)
	}
	var now []string
	for i := range maxWithdrawn + 10 {
		now = append(now, fmt.Sprintf("%d", i))
	}
	n := func(s string) string { return s }
	got := remembered([]string{"old"}, map[string]string{"old": "old"}, now, n)
	if len(got) != maxWithdrawn || got[0] != "10" || got[len(got)-1] != now[len(now)-1] {
		t.Errorf("bounded: %d kept, first %s, last %s", len(got), got[0], got[len(got)-1])
	}
}
