package journal_test

import (
	"slices"
	"testing"

	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline/records/journal"
)

// TestInstanceClaims (issue 17, item 16): a kernel learns the ids of the
// kernels that stopped on its journal directory, never a live sibling's,
// and an id a running kernel holds cannot be claimed twice.
func TestInstanceClaims(t *testing.T) {
	dir := t.TempDir()
	live, err := journal.ClaimInstance(dir, "host-a1")
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	stopped, err := journal.ClaimInstance(dir, "host-b2")
	if err != nil {
		t.Fatal(err)
	}
	if err := stopped.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := journal.ClaimInstance(dir, "host-a1"); err == nil {
		t.Fatal("a running kernel's id was claimed again")
	}
	next, err := journal.ClaimInstance(dir, "host-c3")
	if err != nil {
		t.Fatal(err)
	}
	if got := next.Dead(); !slices.Equal(got, []string{"host-b2"}) {
		t.Fatalf("Dead = %v, want only the stopped kernel (never the live host-a1)", got)
	}
	if err := next.Forget("host-b2"); err != nil {
		t.Fatal(err)
	}
	if err := next.Close(); err != nil {
		t.Fatal(err)
	}
	after, err := journal.ClaimInstance(dir, "host-d4")
	if err != nil {
		t.Fatal(err)
	}
	defer after.Close()
	if got := after.Dead(); !slices.Equal(got, []string{"host-c3"}) {
		t.Fatalf("Dead after Forget = %v, want only host-c3", got)
	}
}
