package journal_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"

	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline/records"
	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline/records/journal"
	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline/records/memory"
)

var quiet = slog.New(slog.DiscardHandler)

// downStore fails every Complete while down is set.
type downStore struct {
	records.Store
	down atomic.Bool
}

var errDown = errors.New("store down")

func (d *downStore) Complete(ctx context.Context, id string, c records.Completion) error {
	if d.down.Load() {
		return errDown
	}
	return d.Store.Complete(ctx, id, c)
}

func begin(t *testing.T, s records.Store, call string) string {
	t.Helper()
	r := &records.Record{AttemptID: records.NewAttemptID(), CallID: call, TurnID: "t", StartedAt: time.Now()}
	if err := s.Begin(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	return r.AttemptID
}

func done(code string) records.Completion {
	st := sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED
	if code != "" {
		st = sharedosv1.OperationStatus_OPERATION_STATUS_FAILED
	}
	return records.Completion{Status: st, Code: code, Reason: "r", ResolvedTool: "files.read", FinishedAt: time.Now().UTC()}
}

func files(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.completions.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func rows(t *testing.T, s records.Store) map[string]records.Record {
	t.Helper()
	recs, err := s.ListOperations(context.Background(), "t")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]records.Record{}
	for _, r := range recs {
		out[r.CallID] = r
	}
	return out
}

// A completion added while the store is down is on disk before Add returns,
// is written once the store is back, and the file is emptied then.
func TestFlushAfterOutage(t *testing.T) {
	store := &downStore{Store: memory.New()}
	dir := t.TempDir()
	j, err := journal.Open(dir, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if !j.Durable() || j.Dir() != dir {
		t.Fatal("a journal over a directory must be durable")
	}
	a, b := begin(t, store, "a"), begin(t, store, "b")
	store.down.Store(true)
	if err := j.Add(a, done("")); err != nil {
		t.Fatal(err)
	}
	if err := j.Add(b, done("timeout")); err != nil {
		t.Fatal(err)
	}
	fs := files(t, dir)
	raw, _ := os.ReadFile(fs[0])
	if len(fs) != 1 || strings.Count(string(raw), "\n") != 2 || !strings.Contains(string(raw), a) {
		t.Fatalf("journal on disk: %v %q", fs, raw)
	}
	if n, err := j.Flush(context.Background(), store); n != 0 || !errors.Is(err, errDown) || j.Len() != 2 {
		t.Fatalf("Flush while down = %d, %v; left %d", n, err, j.Len())
	}
	store.down.Store(false)
	if n, err := j.Flush(context.Background(), store); n != 2 || err != nil || j.Len() != 0 {
		t.Fatalf("Flush after = %d, %v; left %d", n, err, j.Len())
	}
	got := rows(t, store)
	if got["a"].Status != sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED || got["b"].Code != "timeout" {
		t.Fatalf("records %+v", got)
	}
	if st, _ := os.Stat(fs[0]); st.Size() != 0 {
		t.Fatalf("journal file still holds %d bytes after every entry was written", st.Size())
	}
}

// A live process's file is never adopted; a stopped process's file is, once,
// its torn last line skipped, and removed when replayed. A completion the
// store already has is dropped, not retried forever.
func TestAdoptOrphans(t *testing.T) {
	store := memory.New()
	dir := t.TempDir()
	a, b, c := begin(t, store, "a"), begin(t, store, "b"), begin(t, store, "c")

	first, err := journal.Open(dir, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Add(a, done("")); err != nil {
		t.Fatal(err)
	}
	if err := first.Add(c, done("")); err != nil {
		t.Fatal(err)
	}
	if err := store.Complete(context.Background(), c, done("")); err != nil { // written, its ack "lost"
		t.Fatal(err)
	}
	// A sibling on the same directory while first runs: nothing to adopt.
	sibling, err := journal.Open(dir, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if sibling.Len() != 0 {
		t.Fatalf("sibling adopted a live process's file (%d entries)", sibling.Len())
	}
	_ = sibling.Close()

	// first dies mid-write of b: the line has no newline.
	path := files(t, dir)[0]
	_ = first.Close()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString(`{"attemptId":"` + b + `","status":"succ`)
	_ = f.Close()

	next, err := journal.Open(dir, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	if next.Len() != 2 {
		t.Fatalf("adopted %d completions, want 2 (a, c; the torn line skipped)", next.Len())
	}
	if n, err := next.Flush(context.Background(), store); n != 1 || err != nil || next.Len() != 0 {
		t.Fatalf("Flush = %d, %v; left %d", n, err, next.Len())
	}
	got := rows(t, store)
	if got["a"].Status != sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED ||
		got["b"].Status != sharedosv1.OperationStatus_OPERATION_STATUS_PENDING {
		t.Fatalf("records %+v", got)
	}
	if fs := files(t, dir); len(fs) != 1 || fs[0] == path {
		t.Fatalf("files after the replay: %v (the orphan %s must be gone)", fs, path)
	}
}

// A refusal for an attempt a bridge named (a completion naming a turn)
// never replaces what the journal holds for the attempt, while the
// kernel's own outcome replaces it — in memory and on disk; the refusal
// keeps its turn across a restart and ends no other turn's row.
func TestNamedRefusalNeverReplacesAnOutcome(t *testing.T) {
	store := memory.New()
	dir := t.TempDir()
	a, b, c := begin(t, store, "a"), begin(t, store, "b"), begin(t, store, "c")
	first, err := journal.Open(dir, quiet)
	if err != nil {
		t.Fatal(err)
	}
	refused := done("record_unavailable")
	refused.TurnID = "t"
	if err := first.Add(a, done("")); err != nil {
		t.Fatal(err)
	}
	if err := first.Add(a, refused); err != nil {
		t.Fatal(err)
	}
	elsewhere := refused
	elsewhere.TurnID = "another turn"
	if err := first.Add(b, elsewhere); err != nil {
		t.Fatal(err)
	}
	if err := first.Add(c, refused); err != nil { // resumed and run after all:
		t.Fatal(err)
	}
	if err := first.Add(c, done("")); err != nil { // its outcome is the record
		t.Fatal(err)
	}
	if first.Len() != 4 { // a's outcome, b's refusal, c's refusal and outcome
		t.Fatalf("journal holds %d completions, want 4", first.Len())
	}
	_ = first.Close()

	next, err := journal.Open(dir, quiet) // adopts first's file
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	if n, err := next.Flush(context.Background(), store); n != 2 || err != nil || next.Len() != 0 {
		t.Fatalf("Flush = %d, %v; left %d", n, err, next.Len())
	}
	got := rows(t, store)
	if got["a"].Status != sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED || got["c"].Status != sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED {
		t.Fatalf("a = %+v, c = %+v: want each the kernel's outcome (succeeded)", got["a"], got["c"])
	}
	if got["b"].Status != sharedosv1.OperationStatus_OPERATION_STATUS_PENDING {
		t.Fatalf("b = %+v: ended by a completion naming another turn", got["b"])
	}
}

// A complete but unreadable line is not guessed at: Open fails and says
// which file and line, and the file stays for an operator.
func TestCorruptLineFailsOpen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "dead.completions.jsonl")
	if err := os.WriteFile(path, []byte("{not json}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := journal.Open(dir, quiet)
	if err == nil || !strings.Contains(err.Error(), "dead.completions.jsonl line 1") {
		t.Fatalf("Open = %v, want the file and line named", err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("corrupt file removed: %v", err)
	}
}

// Run writes an added completion without waiting for its interval, and keeps
// retrying while the store is down.
func TestRunFlushesOnAdd(t *testing.T) {
	store := &downStore{Store: memory.New()}
	j, err := journal.Open("", quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if j.Durable() {
		t.Fatal("a journal without a directory is memory-only")
	}
	a := begin(t, store, "a")
	store.down.Store(true)
	if err := j.Add(a, done("")); err != nil {
		t.Fatal(err)
	}
	if err := j.Add(a, records.Completion{}); !errors.Is(err, records.ErrInvalid) {
		t.Fatalf("Add of an invalid completion = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	var failures atomic.Int32
	go func() {
		defer close(stopped)
		j.Run(ctx, store, time.Hour, func(error) { failures.Add(1) })
	}()
	defer func() { cancel(); <-stopped }()
	deadline := time.Now().Add(10 * time.Second)
	for failures.Load() < 2 { // Run retries while the store is down
		if time.Now().After(deadline) {
			t.Fatal("Run did not retry within 10s")
		}
		time.Sleep(time.Millisecond)
	}
	store.down.Store(false)
	for j.Len() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("not flushed within 10s of the store's return")
		}
		time.Sleep(time.Millisecond)
	}
	if rows(t, store)["a"].Status != sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED {
		t.Fatal("record not completed")
	}
}

// A live kernel whose own journal is empty adopts, within its Run interval,
// the file of a sibling that stopped on the same directory with a
// journaled completion (its client was answered on its strength), and
// writes it: Flush alone adopted, and Run flushed only while it kept
// something of its own, so the row stayed pending and the sibling's file
// counted as held elsewhere, postponing every Reconcile, for as long as
// the live kernel ran (found by review). A live sibling's file is never
// adopted.
func TestRunAdoptsTheFileOfAStoppedSibling(t *testing.T) {
	store := memory.New()
	dir := t.TempDir()
	a := begin(t, store, "a")
	live, err := journal.Open(dir, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	sibling, err := journal.Open(dir, quiet)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { live.Run(ctx, store, time.Millisecond, nil); close(stopped) }()
	defer func() { cancel(); <-stopped }()
	if err := sibling.Add(a, done("")); err != nil {
		t.Fatal(err)
	}
	// While the sibling runs, its file is its own however often Run looks.
	if held, err := live.HeldElsewhere(); held != 1 || err != nil || live.Len() != 0 {
		t.Fatalf("with the sibling live: HeldElsewhere = %d, %v, Len = %d; want its one completion left to it", held, err, live.Len())
	}
	// The sibling stops: its file and completion stay, its lock goes.
	if err := sibling.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for rows(t, store)["a"].Status != sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED || len(files(t, dir)) != 1 {
		if time.Now().After(deadline) {
			held, _ := live.HeldElsewhere()
			t.Fatalf("the stopped sibling's completion not written within 10s: row %v, Len = %d, HeldElsewhere = %d, files %v",
				rows(t, store)["a"].Status, live.Len(), held, files(t, dir))
		}
		time.Sleep(time.Millisecond)
	}
	if held, err := live.HeldElsewhere(); held != 0 || err != nil || live.Len() != 0 {
		t.Fatalf("after the replay: HeldElsewhere = %d, %v, Len = %d; want nothing held anywhere", held, err, live.Len())
	}
}

// Refusals named from two turns are both kept (one from another turn keeps
// none of the attempt's own out); an outcome in this process's file wins
// over a refusal in an adopted one; a refusal held by a resumption in
// progress is not written, and dropped once that resumption took the
// attempt on.
func TestRefusalsPerTurnOutcomesAcrossFilesAndHold(t *testing.T) {
	store := memory.New()
	dir := t.TempDir()
	a, b, c := begin(t, store, "a"), begin(t, store, "b"), begin(t, store, "c")
	refusal := func(turn string) records.Completion {
		r := done("record_unavailable")
		r.TurnID = turn
		return r
	}
	orphan, err := journal.Open(dir, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if err := orphan.Add(a, refusal("t")); err != nil {
		t.Fatal(err)
	}
	_ = orphan.Close() // its file is adopted below

	j, err := journal.Open(dir, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if err := j.Add(a, done("")); err != nil { // a ran after all: its outcome wins
		t.Fatal(err)
	}
	if err := j.Add(b, refusal("intruder")); err != nil {
		t.Fatal(err)
	}
	if err := j.Add(b, refusal("t")); err != nil { // b's own turn's refusal is kept too
		t.Fatal(err)
	}
	if err := j.Add(c, refusal("t")); err != nil {
		t.Fatal(err)
	}
	release := j.Hold(c, "t")
	if n, err := j.Flush(context.Background(), store); n != 2 || err != nil {
		t.Fatalf("Flush = %d, %v; want a's outcome and b's own refusal written", n, err)
	}
	got := rows(t, store)
	if got["a"].Status != sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED || got["b"].Code != "record_unavailable" ||
		got["c"].Status != sharedosv1.OperationStatus_OPERATION_STATUS_PENDING {
		t.Fatalf("a %v, b %v/%s, c %v: want a succeeded, b refused, c untouched while held",
			got["a"].Status, got["b"].Status, got["b"].Code, got["c"].Status)
	}
	if j.Len() != 1 {
		t.Fatalf("journal holds %d completions, want c's held refusal", j.Len())
	}
	release(true) // the resumption took c on: its refusal goes
	if j.Len() != 0 {
		t.Fatalf("journal holds %d completions after the resumption took the attempt", j.Len())
	}
}

// A refusal a retry withdrew (Hold, taken) is withdrawn on disk too: the
// process that adopts the file after a crash does not replay it onto the
// attempt the retry ran; one the retry did not take stays.
func TestWithdrawnRefusalStaysWithdrawnAfterACrash(t *testing.T) {
	store := memory.New()
	dir := t.TempDir()
	a, b := begin(t, store, "a"), begin(t, store, "b")
	refusal := done("record_unavailable")
	refusal.TurnID, refusal.ResumedBy = "t", "kernel-1"
	first, err := journal.Open(dir, quiet)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{a, b} {
		if err := first.Add(id, refusal); err != nil {
			t.Fatal(err)
		}
	}
	first.Hold(a, "t")(true)  // a retry took a on
	first.Hold(b, "t")(false) // b's retry did not
	_ = first.Close()         // the process dies

	next, err := journal.Open(dir, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	if next.Len() != 1 {
		t.Fatalf("the adopting process holds %d completions, want b's refusal only", next.Len())
	}
}

// gateStore blocks Complete of block until gate closes, telling entered.
type gateStore struct {
	*memory.Store
	block   string
	entered chan struct{}
	gate    chan struct{}
}

func (g *gateStore) Complete(ctx context.Context, id string, c records.Completion) error {
	if id == g.block {
		close(g.entered)
		<-g.gate
	}
	return g.Store.Complete(ctx, id, c)
}

// A flush under way that snapshotted a held refusal and reaches it after
// the retry took the attempt on and withdrew it does not write it: it would
// end the retry's run as "not run" (found by review).
func TestFlushUnderWaySkipsAWithdrawnRefusal(t *testing.T) {
	mem := memory.New()
	dir := t.TempDir()
	x, c := begin(t, mem, "x"), begin(t, mem, "c")
	if _, err := mem.Park(context.Background(), c, records.Wait{Round: 1, TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	orphan, _ := journal.Open(dir, quiet)
	if err := orphan.Add(x, done("")); err != nil { // adopted file: iterated before own
		t.Fatal(err)
	}
	_ = orphan.Close()
	j, err := journal.Open(dir, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	ref := done("record_unavailable")
	ref.TurnID, ref.ResumedBy = "t", "kernel-1"
	if err := j.Add(c, ref); err != nil {
		t.Fatal(err)
	}
	release := j.Hold(c, "t") // retry begins
	g := &gateStore{Store: mem, block: x, entered: make(chan struct{}), gate: make(chan struct{})}
	res := make(chan error)
	go func() { _, err := j.Flush(context.Background(), g); res <- err }()
	<-g.entered // flush snapshotted c's (held) refusal and is writing x
	if _, err := mem.Resume(context.Background(), records.Resumption{AttemptID: c, TurnID: "t", Round: 1, InstanceID: "kernel-1"}); err != nil {
		t.Fatal(err)
	}
	release(true) // the retry took c on: refusal withdrawn
	close(g.gate)
	if err := <-res; err != nil {
		t.Fatal(err)
	}
	if got := rows(t, mem)["c"]; got.Status != sharedosv1.OperationStatus_OPERATION_STATUS_PENDING {
		t.Fatalf("the running retry's attempt c was ended %v/%s by the withdrawn refusal", got.Status, got.Code)
	}
}

// A refusal in an adopted file that a retry withdrew is withdrawn in that
// file too: a kernel whose --instance-id outlives its process would
// otherwise replay it onto the run after another crash.
func TestWithdrawnRefusalInAnAdoptedFile(t *testing.T) {
	store := memory.New()
	dir := t.TempDir()
	a := begin(t, store, "a")
	refusal := done("record_unavailable")
	refusal.TurnID, refusal.ResumedBy = "t", "kernel-1"
	dead, err := journal.Open(dir, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if err := dead.Add(a, refusal); err != nil {
		t.Fatal(err)
	}
	_ = dead.Close()
	adopter, err := journal.Open(dir, quiet)
	if err != nil {
		t.Fatal(err)
	}
	adopter.Hold(a, "t")(true) // a retry took a on
	_ = adopter.Close()        // and this process dies too
	next, err := journal.Open(dir, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	if next.Len() != 0 {
		t.Fatalf("the next process holds %d completions, want the withdrawn refusal gone", next.Len())
	}
}

// tearing writes half of a line and fails (a full disk) while tear is set,
// fails to cut a file back while stuck is set, and to sync while syncFails
// is.
type tearing struct {
	journal.Handle
	tear, stuck, syncFails atomic.Bool
}

var errFull = errors.New("no space left on device")

func (w *tearing) Write(b []byte) (int, error) {
	if w.tear.Load() {
		n, _ := w.Handle.Write(b[:len(b)/2])
		return n, errFull
	}
	return w.Handle.Write(b)
}

func (w *tearing) Sync() error {
	if w.syncFails.Load() {
		return errors.New("sync: i/o error")
	}
	return w.Handle.Sync()
}

func (w *tearing) Truncate(size int64) error {
	if w.stuck.Load() {
		return errors.New("i/o error")
	}
	return w.Handle.Truncate(size)
}

// tornJournal opens a journal over dir whose own file writes through the
// returned tearing.
func tornJournal(t *testing.T, dir string) (*journal.Journal, *tearing) {
	t.Helper()
	j, err := journal.Open(dir, quiet)
	if err != nil {
		t.Fatal(err)
	}
	w := &tearing{}
	journal.WriteOwnThrough(j, func(f *os.File) journal.Handle { w.Handle = f; return w })
	return j, w
}

// A completion whose line failed partway is cut off again: the completions
// added before and after it are replayed by the next process. Before, the
// torn line ran into the next one and the file could not be read at all
// (the next Open failed).
func TestFailedWriteLeavesNoTornLine(t *testing.T) {
	store := memory.New()
	dir := t.TempDir()
	a, b, c := begin(t, store, "a"), begin(t, store, "b"), begin(t, store, "c")
	first, w := tornJournal(t, dir)
	if err := first.Add(a, done("")); err != nil {
		t.Fatal(err)
	}
	w.tear.Store(true)
	if err := first.Add(b, done("")); !errors.Is(err, errFull) {
		t.Fatalf("Add on a full disk = %v, want its error", err)
	}
	w.tear.Store(false)
	if err := first.Add(c, done("tool_error")); err != nil {
		t.Fatal(err)
	}
	_ = first.Close() // the process dies

	next, err := journal.Open(dir, quiet)
	if err != nil {
		t.Fatalf("Open after a failed write: %v", err)
	}
	defer next.Close()
	if n, err := next.Flush(context.Background(), store); err != nil || n != 2 {
		t.Fatalf("Flush = %d, %v; want a's and c's completions", n, err)
	}
	got := rows(t, store)
	if got["a"].Status != sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED ||
		got["b"].Status != sharedosv1.OperationStatus_OPERATION_STATUS_PENDING ||
		got["c"].Code != "tool_error" {
		t.Fatalf("records a=%v b=%v c=%v/%s", got["a"].Status, got["b"].Status, got["c"].Status, got["c"].Code)
	}
}

// A torn line that cannot be cut off stays the file's last: the file takes
// no more completions (Add says so), and the next process replays the ones
// before it.
func TestTornLineThatStaysIsTheLast(t *testing.T) {
	store := memory.New()
	dir := t.TempDir()
	a, b, c := begin(t, store, "a"), begin(t, store, "b"), begin(t, store, "c")
	first, w := tornJournal(t, dir)
	if err := first.Add(a, done("")); err != nil {
		t.Fatal(err)
	}
	w.tear.Store(true)
	w.stuck.Store(true)
	if err := first.Add(b, done("")); !errors.Is(err, errFull) {
		t.Fatalf("Add on a full disk = %v, want its error", err)
	}
	w.tear.Store(false)
	if err := first.Add(c, done("")); err == nil || !strings.Contains(err.Error(), "torn line") {
		t.Fatalf("Add after a torn line stayed = %v, want it refused", err)
	}
	_ = first.Close()

	next, err := journal.Open(dir, quiet)
	if err != nil {
		t.Fatalf("Open after a torn line: %v", err)
	}
	defer next.Close()
	if n, err := next.Flush(context.Background(), store); err != nil || n != 1 {
		t.Fatalf("Flush = %d, %v; want a's completion only", n, err)
	}
	if got := rows(t, store); got["a"].Status != sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED {
		t.Fatalf("a = %v", got["a"].Status)
	}
}

// A file left torn takes lines again once it is emptied — also when the
// torn line was its first (found by review: it stayed refused for the
// life of the process) — and meanwhile Keep queues a completion in memory,
// as a memory-only journal does, where Add refuses it.
func TestTornFileRecovers(t *testing.T) {
	store := memory.New()
	a, b, c := begin(t, store, "a"), begin(t, store, "b"), begin(t, store, "c")
	j, w := tornJournal(t, t.TempDir())
	defer j.Close()
	w.tear.Store(true)
	w.syncFails.Store(true) // the first line tears and its removal is not synced
	if err := j.Add(a, done("")); !errors.Is(err, errFull) {
		t.Fatalf("Add on a full disk = %v, want its error", err)
	}
	w.tear.Store(false)
	w.syncFails.Store(false)
	if err := j.Add(b, done("")); err == nil {
		t.Fatal("Add on a torn file succeeded")
	}
	if err := j.Keep(b, done("")); err != nil || j.Len() != 1 {
		t.Fatalf("Keep = %v, Len %d: want b queued in memory", err, j.Len())
	}
	if n, err := j.Flush(context.Background(), store); err != nil || n != 1 {
		t.Fatalf("Flush = %d, %v; want b written", n, err)
	}
	if err := j.Add(c, done("")); err != nil {
		t.Fatalf("Add once the torn file was emptied: %v", err)
	}
	if n, err := j.Flush(context.Background(), store); err != nil || n != 1 {
		t.Fatalf("Flush = %d, %v; want c written", n, err)
	}
	got := rows(t, store)
	if got["a"].Status != sharedosv1.OperationStatus_OPERATION_STATUS_PENDING ||
		got["b"].Status != sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED || got["c"].Status != sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED {
		t.Fatalf("a %v, b %v, c %v", got["a"].Status, got["b"].Status, got["c"].Status)
	}
}

// A refusal journaled for a concurrent resumption in doubt while a
// resumption here took the attempt on and runs it is not written until
// that run ends: it names this kernel, so it would match the attempt the
// run holds (it cannot have taken effect: the run's did) and end it as
// "not run". Once the run ended, it is written (and the store drops it for
// a completed attempt).
func TestRefusalWaitsForARunHere(t *testing.T) {
	mem := memory.New()
	c := begin(t, mem, "c")
	if _, err := mem.Park(context.Background(), c, records.Wait{Round: 1, TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	j, err := journal.Open(t.TempDir(), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	release := j.Hold(c, "t") // the first retry
	if _, err := mem.Resume(context.Background(), records.Resumption{AttemptID: c, TurnID: "t", Round: 1, InstanceID: "kernel-1"}); err != nil {
		t.Fatal(err)
	}
	end := release(true) // it took c on and runs it
	ref := done("record_unavailable")
	ref.TurnID, ref.ResumedBy = "t", "kernel-1"
	if err := j.Add(c, ref); err != nil { // the second retry, in doubt
		t.Fatal(err)
	}
	if n, err := j.Flush(context.Background(), mem); n != 0 || err != nil {
		t.Fatalf("Flush during the run = %d, %v; want nothing written", n, err)
	}
	if got := rows(t, mem)["c"]; got.Status != sharedosv1.OperationStatus_OPERATION_STATUS_PENDING {
		t.Fatalf("the run's attempt was ended %v/%s by a refusal that never took effect", got.Status, got.Code)
	}
	if err := mem.Complete(context.Background(), c, done("")); err != nil { // the run's outcome
		t.Fatal(err)
	}
	other := j.Hold(c, "u")(true) // another resumption's run, still going
	end()
	end() // counts once
	if n, err := j.Flush(context.Background(), mem); n != 0 || err != nil || j.Len() != 1 {
		t.Fatalf("Flush while the other run goes on = %d, %v (left %d); want the refusal held", n, err, j.Len())
	}
	other()
	if _, err := j.Flush(context.Background(), mem); err != nil {
		t.Fatal(err)
	}
	if j.Len() != 0 {
		t.Fatalf("journal holds %d completions after the run ended", j.Len())
	}
	if got := rows(t, mem)["c"]; got.Status != sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED {
		t.Fatalf("c = %v/%s, want the run's outcome", got.Status, got.Code)
	}
}

// Run does not spin while what is left is held back: one flush, then it
// waits for the run's end (found by review: it flushed without a pause,
// fsyncing the directory each time, for as long as the tool ran).
func TestRunWaitsWhileHeld(t *testing.T) {
	mem := memory.New()
	c := begin(t, mem, "c")
	if _, err := mem.Park(context.Background(), c, records.Wait{Round: 1, TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	j, err := journal.Open(t.TempDir(), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	end := j.Hold(c, "t")(true)
	ref := done("record_unavailable")
	ref.TurnID, ref.ResumedBy = "t", "kernel-1"
	if err := j.Add(c, ref); err != nil { // signals Run
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { j.Run(ctx, mem, time.Hour, nil); close(stopped) }()
	defer func() { cancel(); <-stopped }()
	deadline := time.Now().Add(10 * time.Second)
	for journal.Flushes(j) < 1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	// A window to see that nothing more happens: a spinning Run flushes
	// hundreds of times in it; a waiting one, never.
	time.Sleep(100 * time.Millisecond)
	if n := journal.Flushes(j); n != 1 {
		t.Fatalf("Run flushed %d times while the refusal was held, want once", n)
	}
	end() // the run ended: Run is woken and writes the refusal
	for j.Len() > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if j.Len() != 0 {
		t.Fatal("the refusal was not written once the run ended")
	}
}

// Hold waits only for the write of the refusal it holds, never for a
// whole flush: a flush held up by a slow store on another completion does
// not hold up a resumption (found by review: Hold waited for the flush,
// whose length grows with the entries kept).
func TestHoldWaitsForItsWriteOnly(t *testing.T) {
	mem := memory.New()
	c, x := begin(t, mem, "c"), begin(t, mem, "x")
	dir := t.TempDir()
	dead, err := journal.Open(dir, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if err := dead.Add(x, done("")); err != nil {
		t.Fatal(err)
	}
	_ = dead.Close()
	j, err := journal.Open(dir, quiet) // adopts x's file: a flush writes x before c
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	ref := done("record_unavailable")
	ref.TurnID, ref.ResumedBy = "t", "kernel-1"
	if err := j.Add(c, ref); err != nil {
		t.Fatal(err)
	}
	g := &gateStore{Store: mem, block: x, entered: make(chan struct{}), gate: make(chan struct{})}
	flushed := make(chan error)
	go func() { _, err := j.Flush(context.Background(), g); flushed <- err }()
	<-g.entered // the flush is writing x, and stays there
	held := make(chan struct{})
	go func() { j.Hold(c, "t")(false); close(held) }()
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Error("Hold waited for the flush of another completion")
	}
	close(g.gate)
	if err := <-flushed; err != nil {
		t.Fatal(err)
	}
}

// Hold waits for a flush that is writing the refusal it holds: the write,
// once under way, may end the attempt, and the resumption must not run it
// meanwhile.
func TestHoldWaitsForTheWriteOfItsRefusal(t *testing.T) {
	mem := memory.New()
	c := begin(t, mem, "c")
	j, err := journal.Open(t.TempDir(), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	ref := done("record_unavailable")
	ref.TurnID, ref.ResumedBy = "t", "kernel-1"
	if err := j.Add(c, ref); err != nil {
		t.Fatal(err)
	}
	g := &gateStore{Store: mem, block: c, entered: make(chan struct{}), gate: make(chan struct{})}
	flushed := make(chan error)
	go func() { _, err := j.Flush(context.Background(), g); flushed <- err }()
	<-g.entered // the flush is writing c's refusal
	held := make(chan struct{})
	go func() { j.Hold(c, "t")(false); close(held) }()
	select { // a window to see Hold return too early; a waiting one never does
	case <-held:
		t.Error("Hold returned while the refusal it holds was being written")
	case <-time.After(50 * time.Millisecond):
	}
	close(g.gate)
	<-held
	if err := <-flushed; err != nil {
		t.Fatal(err)
	}
}

// A journal directory is bound to the first record store that uses it: the
// same store binds it again, another is refused naming both, and of
// kernels binding an empty directory at once one store wins, whole.
func TestBindStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "journal")
	const mine, theirs = `PostgreSQL system 1, database "a"`, `PostgreSQL system 2, database "b"`
	if err := journal.BindStore(dir, mine); err != nil {
		t.Fatalf("first bind: %v", err)
	}
	if err := journal.BindStore(dir, mine); err != nil {
		t.Fatalf("the same store again: %v", err)
	}
	err := journal.BindStore(dir, theirs)
	if err == nil || !strings.Contains(err.Error(), mine) || !strings.Contains(err.Error(), theirs) {
		t.Fatalf("another store = %v, want it refused naming both", err)
	}
	if ents, err := os.ReadDir(dir); err != nil || len(ents) != 1 || ents[0].Name() != journal.StoreFile {
		t.Fatalf("directory holds %v (%v), want the marker alone", ents, err)
	}
	if err := journal.BindStore(t.TempDir(), "two\nlines"); err == nil {
		t.Fatal("an identity of two lines was taken")
	}

	race := filepath.Join(t.TempDir(), "journal")
	errs := make(chan error, 8)
	for i := range cap(errs) {
		go func() { errs <- journal.BindStore(race, fmt.Sprintf("store %d", i%2)) }()
	}
	won := map[bool]int{}
	for range cap(errs) {
		won[<-errs == nil]++
	}
	b, err := os.ReadFile(filepath.Join(race, journal.StoreFile))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(b)); (got != "store 0" && got != "store 1") || won[true] != 4 || won[false] != 4 {
		t.Fatalf("marker %q, %d binds succeeded, %d refused; want one store's four and the other's refused", got, won[true], won[false])
	}
}

// A line with a field this kernel does not know — written by a newer one —
// is refused with the file and line named, never replayed without what the
// field says; the file stays for that version.
func TestLineOfANewerKernelIsRefused(t *testing.T) {
	for name, line := range map[string]string{
		"unknown field": `{"attemptId":"a1","status":"succeeded","finishedAt":"2026-12-01T00:00:00Z","supersededBy":"a2"}`,
		"two values":    `{"attemptId":"a1","status":"succeeded","finishedAt":"2026-12-01T00:00:00Z"} {}`,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "newer.completions.jsonl")
			if err := os.WriteFile(path, []byte(line+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := journal.Open(dir, quiet)
			if err == nil || !strings.Contains(err.Error(), "newer.completions.jsonl line 1") {
				t.Fatalf("Open = %v, want the file and line named", err)
			}
			if name == "unknown field" && !strings.Contains(err.Error(), `"supersededBy"`) {
				t.Errorf("Open = %v, want the unknown field named", err)
			}
			if _, err := os.Stat(path); err != nil {
				t.Fatalf("the file was removed: %v", err)
			}
		})
	}
	// Every field this kernel writes is one it reads.
	store := memory.New()
	dir := t.TempDir()
	j, err := journal.Open(dir, quiet)
	if err != nil {
		t.Fatal(err)
	}
	c := done("tool_error")
	c.DecisionID, c.PolicyRevision, c.ProgressCount, c.TurnID, c.ResumedBy = "d", "p", 2, "t", "kernel-1"
	if err := j.Add(begin(t, store, "a"), c); err != nil {
		t.Fatal(err)
	}
	_ = j.Close()
	next, err := journal.Open(dir, quiet)
	if err != nil {
		t.Fatalf("Open of this kernel's own lines: %v", err)
	}
	_ = next.Close()
}

// The own file is held under its journal name, so an error of its writes
// (a full disk) names it, not the .locking name it was created under.
func TestOwnFileErrorsNameIt(t *testing.T) {
	dir := t.TempDir()
	j, err := journal.Open(dir, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	own := files(t, dir)
	if len(own) != 1 || journal.OwnName(j) != own[0] {
		t.Fatalf("own file held as %s, files %v", journal.OwnName(j), own)
	}
	// A write the file refuses: its error, as the os reports it.
	journal.WriteOwnThrough(j, func(f *os.File) journal.Handle { _ = f.Close(); return f })
	err = j.Add(records.NewAttemptID(), done(""))
	if err == nil || strings.Contains(err.Error(), ".locking") || !strings.Contains(err.Error(), own[0]) {
		t.Fatalf("Add on a refusing file = %v, want it to name %s alone", err, own[0])
	}
}
