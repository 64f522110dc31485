package memory_test

import (
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"

	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline/grants"
	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline/records"
	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline/records/memory"
	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline/records/recordstest"
)

// clock is a settable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.now = c.now.Add(d) }
func newClock(t time.Time) *clock    { return &clock{now: t} }
func succeeded(at time.Time) records.Completion {
	return records.Completion{Status: sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED, FinishedAt: at}
}

// calls lists a turn's rows as call ids.
func calls(t *testing.T, s *memory.Store, turn string) []string {
	t.Helper()
	rows, err := s.ListOperations(t.Context(), turn)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rows {
		out = append(out, r.CallID)
	}
	return out
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// The embedded store keeps the newest N finished records (review D3: it
// kept every record, ~1 KB each, for the life of the process): older ones
// are dropped oldest first, a pending one never — one that finishes behind
// N newer finished records goes as it finishes — and what is dropped is
// given back (its chunk of records let go).
func TestRetentionKeepsTheNewestFinished(t *testing.T) {
	ctx := t.Context()
	clk := newClock(time.Date(2026, 12, 8, 10, 0, 0, 0, time.UTC))
	s := memory.New(memory.WithRetention(3), memory.WithClock(clk.Now))
	begin := func(call string) *records.Record {
		r := recordstest.NewRecord("turn-a", call, "files.read")
		r.StartedAt = clk.Now()
		if err := s.Begin(ctx, r); err != nil {
			t.Fatalf("Begin %s: %v", call, err)
		}
		return r
	}
	run := func(call string) {
		if err := s.Complete(ctx, begin(call).AttemptID, succeeded(clk.Now())); err != nil {
			t.Fatal(err)
		}
	}
	run("c1")
	run("c2")
	run("c3")
	pending := begin("p")
	if got := calls(t, s, "turn-a"); !equal(got, []string{"c1", "c2", "c3", "p"}) {
		t.Fatalf("at the bound: %v", got)
	}
	run("c4")
	run("c5")
	if got := calls(t, s, "turn-a"); !equal(got, []string{"c3", "p", "c4", "c5"}) || s.Len() != 4 {
		t.Fatalf("past the bound: %v (Len %d), want the three newest finished and the pending one", got, s.Len())
	}
	for i := range 10 {
		run("d" + strconv.Itoa(i))
	}
	if got := calls(t, s, "turn-a"); !equal(got, []string{"p", "d7", "d8", "d9"}) {
		t.Fatalf("a pending record is never dropped: %v", got)
	}
	if err := s.Complete(ctx, pending.AttemptID, succeeded(clk.Now())); err != nil {
		t.Fatal(err)
	}
	if got := calls(t, s, "turn-a"); !equal(got, []string{"d7", "d8", "d9"}) || s.Len() != 3 {
		t.Fatalf("a record finishing behind three newer finished ones: %v (Len %d)", got, s.Len())
	}
	if err := s.Complete(ctx, pending.AttemptID, succeeded(clk.Now())); !errors.Is(err, records.ErrNotFound) {
		t.Fatalf("Complete of a dropped record: %v, want ErrNotFound", err)
	}
	// An export reads the records kept, in sequence order.
	from, page, err := s.ExportPage(ctx, time.Time{}, 0, 10)
	if err != nil || len(page) != 3 || page[0].CallID != "d7" || from != page[0].Sequence-1 {
		t.Fatalf("ExportPage: from %d, %d rows, %v", from, len(page), err)
	}

	// Many records later the store holds the chunks of the newest only.
	for i := range 10 * memory.ChunkSize {
		run("e" + strconv.Itoa(i))
	}
	if s.Len() != 3 || memory.HeldChunks(s) > 2 {
		t.Fatalf("after %d records: Len %d, %d chunks held; want 3 records in at most 2 chunks", 10*memory.ChunkSize, s.Len(), memory.HeldChunks(s))
	}
	if _, page, err := s.ExportPage(ctx, time.Time{}, 0, 10); err != nil || len(page) != 3 {
		t.Fatalf("ExportPage across let-go chunks: %d rows, %v", len(page), err)
	}
}

// A repeat of a call whose record was dropped is still refused and
// recorded, never run twice (invariant 10), and a late arrival of an
// abandoned call still writes nothing — while the turn can still call: once
// no grant of it verifies (its longest life after the call), or it was
// revoked, its dropped call ids are let go.
func TestRetentionStillRefusesRepeats(t *testing.T) {
	ctx := t.Context()
	clk := newClock(time.Date(2026, 12, 8, 10, 0, 0, 0, time.UTC))
	s := memory.New(memory.WithRetention(1), memory.WithClock(clk.Now))
	first := func(turn, call string, abandoned bool) {
		r := recordstest.NewRecord(turn, call, "files.read")
		r.StartedAt = clk.Now()
		begin := s.Begin
		if abandoned {
			begin = s.BeginNew
		}
		if err := begin(ctx, r); err != nil {
			t.Fatalf("%s/%s: %v", turn, call, err)
		}
		if err := s.Complete(ctx, r.AttemptID, succeeded(clk.Now())); err != nil {
			t.Fatal(err)
		}
	}
	first("turn-a", "ran", false)
	first("turn-a", "abandoned", true)
	first("turn-b", "ran", false)
	first("turn-c", "last", false) // every other record is dropped
	if got := calls(t, s, "turn-a"); len(got) != 0 {
		t.Fatalf("turn-a keeps %v", got)
	}
	again := func(turn, call string) error {
		r := recordstest.NewRecord(turn, call, "files.read")
		r.StartedAt = clk.Now()
		return s.Begin(ctx, r)
	}
	if err := again("turn-a", "ran"); !errors.Is(err, records.ErrDuplicateCall) {
		t.Fatalf("a repeat of a dropped call: %v, want ErrDuplicateCall", err)
	}
	if rows, _ := s.ListOperations(ctx, "turn-a"); len(rows) != 1 || !rows[0].Duplicate ||
		rows[0].Status != sharedosv1.OperationStatus_OPERATION_STATUS_DENIED {
		t.Fatalf("the repeat's record: %+v", rows)
	}
	if err := again("turn-a", "abandoned"); !errors.Is(err, records.ErrRecorded) {
		t.Fatalf("the late arrival of a dropped abandoned call: %v, want ErrRecorded", err)
	}
	if err := again("turn-a", "new"); err != nil {
		t.Fatalf("a new call of the turn: %v", err)
	}

	// A revoked turn's calls are all refused: its dropped ids are let go.
	if err := s.RevokeTurn(ctx, "turn-b", clk.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := again("turn-b", "ran"); err != nil {
		t.Fatalf("a call of the revoked turn: %v, want it recorded as a call of its own", err)
	}
	// Past the grants' longest life, no call of turn-a can verify.
	clk.Add(grants.MaxLifetime + grants.ClockSkew + time.Second)
	first("turn-d", "tick", false)
	if n := memory.GoneTurns(s); n != 0 {
		t.Fatalf("%d turns' dropped call ids kept past the grants' life", n)
	}
	if err := again("turn-a", "ran"); err != nil {
		t.Fatalf("a call id of a turn past its grants' life: %v", err)
	}
}

// Records begun, parked, completed and reconciled at once stay consistent
// under retention (run with -race): the store never holds more than its
// bound of finished records, and every pending one is kept.
func TestRetentionUnderConcurrency(t *testing.T) {
	ctx := t.Context()
	const keep, workers, each = 50, 8, 500
	s := memory.New(memory.WithRetention(keep))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				turn := "turn-" + strconv.Itoa(w)
				r := recordstest.NewRecord(turn, strconv.Itoa(i), "files.read")
				if err := s.Begin(ctx, r); err != nil {
					t.Error(err)
					return
				}
				switch i % 4 {
				case 0:
					if _, err := s.Park(ctx, r.AttemptID, records.Wait{Round: 1, TTL: time.Hour}); err != nil {
						t.Error(err)
					}
				case 1:
					// left pending
				default:
					if err := s.Complete(ctx, r.AttemptID, succeeded(time.Now())); err != nil {
						t.Error(err)
					}
				}
				if i%100 == 99 {
					if _, err := s.ListOperations(ctx, turn); err != nil {
						t.Error(err)
					}
				}
			}
		}()
	}
	wg.Wait()
	pending := workers * each / 2
	if s.Len() != keep+pending {
		t.Fatalf("Len %d, want %d finished and %d pending", s.Len(), keep, pending)
	}
	if n, err := s.Reconcile(ctx, time.Now().Add(time.Minute)); err != nil || n != int64(workers*each/4) {
		t.Fatalf("Reconcile ended %d, %v", n, err)
	}
	if n, err := s.CloseWaiting(ctx, "turn-0"); err != nil || n != each/4 {
		t.Fatalf("CloseWaiting ended %d, %v", n, err)
	}
	if want := keep + workers*each/4 - each/4; s.Len() != want {
		t.Fatalf("Len %d after the pending ones ended, want %d", s.Len(), want)
	}
}
