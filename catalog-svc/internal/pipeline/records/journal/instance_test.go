package journal_test

import (
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
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

// A kernel restarting under a stopped kernel's id while a running one
// takes and forgets that claim (its reconciler) never ends up holding a
// claim file removed under it: a second kernel under the same id is then
// refused while the first runs.
func TestForgetNeverLeavesAnUnlinkedClaim(t *testing.T) {
	for round := range 300 {
		dir := t.TempDir()
		running, err := journal.ClaimInstance(dir, "running")
		if err != nil {
			t.Fatal(err)
		}
		d, err := journal.ClaimInstance(dir, "d")
		if err != nil {
			t.Fatal(err)
		}
		_ = d.Close() // d stopped
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
					_ = running.TakeStopped()
					_ = running.Forget("d")
				}
			}
		})
		var first *journal.Instance
		for first == nil {
			if k, err := journal.ClaimInstance(dir, "d"); err == nil {
				first = k
			}
		}
		close(stop)
		wg.Wait()
		if second, err := journal.ClaimInstance(dir, "d"); err == nil {
			_ = second.Close()
			t.Fatalf("round %d: id %q claimed by two running kernels at once", round, "d")
		}
		_ = first.Close()
		_ = running.Close()
	}
}

// Shutdown closes the claims while the reconciler takes more (run with
// -race): nothing is taken once closed.
func TestCloseWhileTakingStopped(t *testing.T) {
	dir := t.TempDir()
	for i := range 50 {
		k, err := journal.ClaimInstance(dir, fmt.Sprintf("dead-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		_ = k.Close()
	}
	inst, err := journal.ClaimInstance(dir, "me")
	if err != nil {
		t.Fatal(err)
	}
	inst.Release()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = inst.TakeStopped()
	}()
	if err := inst.Close(); err != nil {
		t.Fatal(err)
	}
	<-done
	if d := inst.Dead(); len(d) != 0 {
		t.Errorf("claims held after Close: %v", d)
	}
}
