package journal_test

import (
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
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

// A kernel starting beside a running one that takes stopped kernels'
// claims meanwhile (its reconciler) is never refused its own fresh id: its
// claim file is made and locked under the directory's claims lock, so it
// is never found unlocked between the two.
func TestClaimNeverTakenWhileMade(t *testing.T) {
	dir := t.TempDir()
	running, err := journal.ClaimInstance(dir, "running")
	if err != nil {
		t.Fatal(err)
	}
	defer running.Close()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				if err := running.TakeStopped(); err != nil {
					t.Error(err)
					return
				}
				running.Release()
			}
		}
	}()
	for i := range 3000 {
		id := fmt.Sprintf("starting-%d", i)
		k, err := journal.ClaimInstance(dir, id)
		if err != nil {
			t.Errorf("start %d refused: %v", i, err)
			break
		}
		_ = k.Close()
		// Gone for good: the directory stays small (its claim file as
		// ClaimInstance names it).
		_ = os.Remove(filepath.Join(dir, hex.EncodeToString([]byte(id))+".instance"))
	}
	close(stop)
	<-done
}
