package journal

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sharedos/toolshare/services/contract/outcome"
	"github.com/sharedos/toolshare/services/platform/telemetry"

	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline/records"
)

// fileSuffix names the journal files in a directory.
const fileSuffix = ".completions.jsonl"

// entry is one journaled completion, one JSON line on disk.
type entry struct {
	AttemptID      string    `json:"attemptId"`
	Status         string    `json:"status"`
	Code           string    `json:"code,omitempty"`
	Reason         string    `json:"reason,omitempty"`
	ResolvedTool   string    `json:"resolvedTool,omitempty"`
	DecisionID     string    `json:"decisionId,omitempty"`
	PolicyRevision string    `json:"policyRevision,omitempty"`
	FinishedAt     time.Time `json:"finishedAt"`
	ProgressCount  int32     `json:"progressCount,omitempty"`
	TurnID         string    `json:"turnId,omitempty"`
	ResumedBy      string    `json:"resumedBy,omitempty"`
	// Dropped withdraws the entry of the same attempt and turn above it
	// (a refusal whose resumption a retry proved never took effect: Hold).
	Dropped bool `json:"dropped,omitempty"`
}

func toEntry(attemptID string, c records.Completion) entry {
	return entry{AttemptID: attemptID, Status: outcome.StatusName(c.Status), Code: c.Code, Reason: c.Reason,
		ResolvedTool: c.ResolvedTool, DecisionID: c.DecisionID, PolicyRevision: c.PolicyRevision, FinishedAt: c.FinishedAt,
		ProgressCount: c.ProgressCount, TurnID: c.TurnID, ResumedBy: c.ResumedBy}
}

func (e entry) completion() (records.Completion, error) {
	st, ok := outcome.ParseStatus(e.Status)
	c := records.Completion{Status: st, Code: e.Code, Reason: e.Reason, ResolvedTool: e.ResolvedTool,
		DecisionID: e.DecisionID, PolicyRevision: e.PolicyRevision, FinishedAt: e.FinishedAt, ProgressCount: e.ProgressCount,
		TurnID: e.TurnID, ResumedBy: e.ResumedBy}
	if !ok || e.AttemptID == "" {
		return c, fmt.Errorf("journal: entry for attempt %q has status %q", e.AttemptID, e.Status)
	}
	return c, c.Check()
}

// file is one journal file this process holds the lock of: its own, or an
// orphan it adopted.
type file struct {
	path    string
	f       *os.File
	entries map[key]records.Completion
	own     bool
	// w is what append writes through: f, or a test's stand-in.
	w handle
	// torn is set when a line that failed could not be cut off again: the
	// file takes no more lines, so that the torn one stays last (skipped
	// on replay; a whole line whose sync failed is replayed, as the outcome
	// its call ended with) until the file is emptied (compact).
	torn error
}

// handle is what append needs of a journal file.
type handle interface {
	io.Writer
	io.Seeker
	Sync() error
	Truncate(size int64) error
}

// key names an entry: the kernel's outcome of an attempt (no turn), or the
// refusal of a write in doubt, which names the call's turn
// (records.Completion's TurnID) — one per turn, so that a resumption named
// from another turn keeps none of the attempt's own turn out.
type key struct{ attempt, turn string }

// Journal holds the completions the store has not taken yet.
type Journal struct {
	log  *slog.Logger
	wake chan struct{}
	// flushMu makes flushes one at a time.
	flushMu sync.Mutex

	mu     sync.Mutex
	dir    string
	own    *file   // nil when memory-only
	mem    *file   // memory-only entries (no path, no lock)
	others []*file // adopted orphans, replayed then removed
	// writing is the entry a flush is writing to the store (zero: none);
	// written is signalled when that write returns (Hold waits for it).
	writing key
	written *sync.Cond
	// flushes counts Flush calls (tests: Run does not spin).
	flushes atomic.Int64
	// running counts, per attempt, the resumptions of it on this kernel
	// that are under way or took it on and run it (Hold): its refusals
	// are not written meanwhile.
	running map[string]int
}

// Open returns the journal over dir, creating dir (0700) and this process's
// own locked file in it, and adopting every unlocked journal file already
// there. An empty dir gives a memory-only journal: it still queues
// completions for the flusher but they do not survive the process.
func Open(dir string, log *slog.Logger) (*Journal, error) {
	if log == nil {
		log = slog.Default()
	}
	j := &Journal{log: log, wake: make(chan struct{}, 1), dir: dir,
		mem: &file{entries: map[key]records.Completion{}}, running: map[string]int{}}
	j.written = sync.NewCond(&j.mu)
	if dir == "" {
		return j, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	path := filepath.Join(dir, hex.EncodeToString(id[:])+fileSuffix)
	// The file is locked before it takes a journal file's name: a live
	// sibling adopts orphans at every Run interval, and would take an
	// unlocked file of that name for a stopped process's and lock it
	// first, failing this Open.
	locking := path + ".locking"
	f, err := os.OpenFile(locking, os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		_ = os.Remove(locking)
		return nil, fmt.Errorf("journal: lock %s: %w", locking, err)
	}
	if err := os.Rename(locking, path); err != nil {
		_ = f.Close()
		_ = os.Remove(locking)
		return nil, fmt.Errorf("journal: %w", err)
	}
	if f, err = named(f, path); err != nil {
		return nil, err
	}
	if err := syncDir(dir); err != nil {
		_ = f.Close()
		return nil, err
	}
	j.own = &file{path: path, f: f, entries: map[key]records.Completion{}, own: true}
	if err := j.adopt(); err != nil {
		_ = j.Close()
		return nil, err
	}
	return j, nil
}

// named is f held under path, the name it was renamed to: the errors of
// an *os.File name the path it was opened by, and a full disk's would name
// the .locking file that no longer exists. The file is held from here
// through a duplicate of its descriptor (close-on-exec, as every descriptor
// Go opens: a stdio upstream the kernel starts must not hold the lock), on
// the same open file description, so the lock stays; f is closed.
func named(f *os.File, path string) (*os.File, error) {
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("journal: %s: %w", path, err)
	}
	_ = f.Close()
	return os.NewFile(uintptr(fd), path), nil
}

// Durable reports whether Add writes to disk.
func (j *Journal) Durable() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.own != nil
}

// Hold keeps every refusal of a resumption in doubt of attemptID from being
// written while the attempt is resumed here again, and, if this resumption
// takes it on, until its run ends: the resumption in doubt may not have
// taken effect, and then this one takes the attempt on and runs it; and a
// concurrent resumption here that is in doubt (its refusal, naming this
// kernel, would match the attempt this one took) cannot have taken effect
// while this one holds the attempt. Hold waits for a flush that is writing
// the refusal named from turn (that one write, not the whole flush). It
// returns release, told whether the resumption took the attempt on: then
// the refusal named from turn is dropped (its resumption never took
// effect), and release returns end, to be called once the run ended (the
// attempt completed, or parked for the next round); else end does nothing.
func (j *Journal) Hold(attemptID, turn string) (release func(taken bool) (end func())) {
	k := key{attemptID, turn}
	j.mu.Lock()
	j.running[attemptID]++ // refusals added from now on wait for the run
	for j.writing == k {
		// A flush that checked it before is writing it (one write: at
		// most writeTimeout).
		j.written.Wait()
	}
	j.mu.Unlock()
	var once sync.Once
	end := func() {
		once.Do(func() {
			j.mu.Lock()
			defer j.mu.Unlock()
			if j.running[attemptID]--; j.running[attemptID] <= 0 {
				delete(j.running, attemptID)
			}
			j.signal() // a refusal kept back goes to the store now
		})
	}
	return func(taken bool) func() {
		if !taken {
			end()
			return func() {}
		}
		j.mu.Lock()
		defer j.mu.Unlock()
		for _, f := range j.files() {
			// Withdrawn on disk too, in the file that holds it (own or
			// adopted): replayed after a crash, the refusal would end the
			// attempt this retry ran ("not run", where it is interrupted)
			// — also under a kernel whose --instance-id outlives it.
			if c, ok := f.entryOf(k); ok {
				if err := f.append(withdrawn(k.attempt, c)); err != nil {
					j.log.Error("journal: refusal withdrawn in memory only", slog.String(telemetry.LogAttemptID, k.attempt), slog.Any("error", err))
				}
			}
		}
		for _, f := range append(j.files(), j.mem) {
			delete(f.entries, k)
		}
		return end
	}
}

// withdrawn is the line that withdraws attemptID's entry c.
func withdrawn(attemptID string, c records.Completion) entry {
	e := toEntry(attemptID, c)
	e.Dropped = true
	return e
}

// entryOf is f's entry under k; a nil f (memory-only) holds none.
func (f *file) entryOf(k key) (records.Completion, bool) {
	if f == nil {
		return records.Completion{}, false
	}
	c, ok := f.entries[k]
	return c, ok
}

// append writes e as one line at the end of f and syncs it. A line whose
// write or sync fails is cut off again before the error is returned: a torn
// line in front of later ones would make the file unreadable on replay,
// losing the completions after it. A file that cannot be cut back takes no
// more lines.
func (f *file) append(e entry) error {
	if f.torn != nil {
		return f.torn
	}
	line, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	w := f.w
	if w == nil {
		w = f.f
	}
	end, err := w.Seek(0, io.SeekEnd) // an adopted file was read, not opened to append
	if err != nil {
		return fmt.Errorf("journal: seek %s: %w", f.path, err)
	}
	werr := f.writeLine(w, append(line, '\n'))
	if werr == nil {
		return nil
	}
	if err := w.Truncate(end); err != nil {
		f.torn = fmt.Errorf("journal: %s holds a torn line that could not be cut off (%w); it takes no more completions", f.path, err)
		return errors.Join(werr, f.torn)
	}
	if err := w.Sync(); err != nil {
		f.torn = fmt.Errorf("journal: %s: a torn line's removal could not be synced (%w); it takes no more completions", f.path, err)
		return errors.Join(werr, f.torn)
	}
	return werr
}

func (f *file) writeLine(w handle, line []byte) error {
	if _, err := w.Write(line); err != nil {
		return fmt.Errorf("journal: write %s: %w", f.path, err)
	}
	if err := w.Sync(); err != nil {
		return fmt.Errorf("journal: sync %s: %w", f.path, err)
	}
	return nil
}

// entry is the completion some file holds under k. Called with j.mu held.
func (j *Journal) entry(k key) (records.Completion, bool) {
	for _, f := range append(j.files(), j.mem) {
		if c, ok := f.entries[k]; ok {
			return c, true
		}
	}
	return records.Completion{}, false
}

// outcomeHeld: some file holds the kernel's own outcome of attemptID.
// Called with j.mu held.
func (j *Journal) outcomeHeld(attemptID string) bool {
	_, ok := j.entry(key{attempt: attemptID})
	return ok
}

// Dir is the journal directory ("" when memory-only).
func (j *Journal) Dir() string { return j.dir }

// Add keeps c for attemptID until Flush writes it. On a durable journal it
// returns only once the entry is on disk (written and fsynced). The
// kernel's own outcome of an attempt is kept over a refusal of a
// resumption in doubt (c.TurnID set; the attempt, left waiting, may be
// resumed and run after all), which is not kept where an outcome is.
func (j *Journal) Add(attemptID string, c records.Completion) error {
	return j.add(attemptID, c, false)
}

// Keep is Add for a completion that must be queued whatever the disk says:
// when the own file refuses it (a full disk, a file left torn), it is kept
// in memory, as by a memory-only journal — written by the next flush, lost
// with the process — and that is logged. It returns an error only for a
// completion that is not valid.
func (j *Journal) Keep(attemptID string, c records.Completion) error {
	return j.add(attemptID, c, true)
}

// add is Add, and with inMemory Keep.
func (j *Journal) add(attemptID string, c records.Completion, inMemory bool) error {
	if err := c.Check(); err != nil {
		return err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if c.TurnID != "" && j.outcomeHeld(attemptID) {
		return nil
	}
	k := key{attemptID, c.TurnID}
	at := j.mem
	if j.own != nil {
		if err := j.own.append(toEntry(attemptID, c)); err == nil {
			at = j.own
		} else if !inMemory {
			return err
		} else {
			j.log.Error("journal: completion kept in memory only (the journal file refused it); lost if the process stops before the store takes it",
				slog.String(telemetry.LogAttemptID, attemptID), slog.Any("error", err))
		}
	}
	at.entries[k] = c
	j.signal()
	return nil
}

func (j *Journal) signal() {
	select {
	case j.wake <- struct{}{}:
	default:
	}
}

// Len is the number of completions not yet written to the store, adopted
// orphans included.
func (j *Journal) Len() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	n := len(j.mem.entries)
	for _, f := range j.files() {
		n += len(f.entries)
	}
	return n
}

func (j *Journal) files() []*file {
	fs := append([]*file(nil), j.others...)
	if j.own != nil {
		fs = append(fs, j.own)
	}
	return fs
}

// Flush adopts orphan files that appeared since, then writes every kept
// completion to store. A completion the store refuses as already completed
// or unknown is dropped (logged); any other error stops the flush and is
// returned, and what is left stays for the next one. It returns how many
// completions it wrote.
func (j *Journal) Flush(ctx context.Context, store records.Store) (int, error) {
	j.flushMu.Lock()
	defer j.flushMu.Unlock()
	j.flushes.Add(1)
	j.adoptOrphans(ctx)
	type item struct {
		f *file
		k key
		c records.Completion
	}
	var todo []item
	j.mu.Lock()
	for _, f := range append(j.files(), j.mem) {
		for k, c := range f.entries {
			todo = append(todo, item{f, k, c})
		}
	}
	j.mu.Unlock()
	written := 0
	var ferr error
	for _, it := range todo {
		j.mu.Lock()
		// A refusal whose attempt has an outcome (in another file) is not
		// written; one whose attempt is being resumed or run here waits
		// for that resumption or run (Hold), and one withdrawn (or
		// replaced) since the snapshot is not this flush's to write. (A
		// Hold that begins once this check is past waits for the write.)
		superseded := it.k.turn != "" && j.outcomeHeld(it.k.attempt)
		cur, kept := it.f.entries[it.k]
		held := (it.k.turn != "" && j.running[it.k.attempt] > 0) || !kept || cur != it.c
		if !held && !superseded {
			j.writing = it.k
		}
		j.mu.Unlock()
		if held {
			continue
		}
		if !superseded {
			err := j.write(ctx, store, it.k.attempt, it.c)
			j.mu.Lock()
			j.writing = key{}
			j.written.Broadcast()
			j.mu.Unlock()
			if err != nil && !errors.Is(err, errDropped) {
				ferr = err
				break
			}
			if err == nil {
				written++
			}
		}
		j.mu.Lock()
		if cur, ok := it.f.entries[it.k]; ok && cur == it.c { // not replaced meanwhile
			delete(it.f.entries, it.k)
		}
		j.mu.Unlock()
	}
	j.mu.Lock()
	cerr := j.compact()
	j.mu.Unlock()
	return written, errors.Join(ferr, cerr)
}

// adoptOrphans adopts the journal files of processes that stopped since
// the last look (a memory-only or closed journal has none to look for). A
// file that cannot be adopted is logged and looked at again next time.
func (j *Journal) adoptOrphans(ctx context.Context) {
	j.mu.Lock()
	var err error
	if j.own != nil {
		err = j.adopt()
	}
	j.mu.Unlock()
	if err != nil {
		j.log.WarnContext(ctx, "journal: adopt orphan files", slog.Any("error", err))
	}
}

// writeTimeout bounds one completion's write: a hung store fails the flush
// (retried with backoff) instead of holding it, and a resumption waiting
// for that write (Hold), indefinitely.
const writeTimeout = 5 * time.Second

// errDropped: the store refused a completion for good; it is dropped
// (logged).
var errDropped = errors.New("journal: completion dropped")

// write writes one completion to store: nil once written, errDropped when
// the store refuses it for good, else the store's error.
func (j *Journal) write(ctx context.Context, store records.Store, attemptID string, c records.Completion) error {
	wctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	err := store.Complete(wctx, attemptID, c)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, records.ErrCompleted):
		// The write went through before (its acknowledgement was lost),
		// or the row was reconciled first: the log says which attempt.
		j.log.WarnContext(ctx, "journal: record was already completed; journaled completion dropped",
			slog.String(telemetry.LogAttemptID, attemptID), slog.String("status", outcome.StatusName(c.Status)))
	case errors.Is(err, records.ErrNotFound):
		// A refusal journaled for a write in doubt (records.ErrInDoubt):
		// the write never took effect, or the resumption did not (the
		// attempt goes on), or it names an attempt of another turn.
		j.log.WarnContext(ctx, "journal: no such record (its write never took effect); completion dropped",
			slog.String(telemetry.LogAttemptID, attemptID), slog.String("status", outcome.StatusName(c.Status)))
	case errors.Is(err, records.ErrInvalid):
		j.log.ErrorContext(ctx, "journal: completion cannot be written; dropped",
			slog.String(telemetry.LogAttemptID, attemptID), slog.Any("error", err))
	default:
		return err
	}
	return errDropped
}

// compact empties the own file and removes adopted files once every entry
// of theirs is written. Called with j.mu held.
func (j *Journal) compact() error {
	var errs []error
	if j.own != nil && len(j.own.entries) == 0 {
		if st, err := j.own.f.Stat(); err == nil && (st.Size() > 0 || j.own.torn != nil) {
			if err := j.own.f.Truncate(0); err != nil {
				errs = append(errs, fmt.Errorf("journal: truncate %s: %w", j.own.path, err))
			} else if err := j.own.f.Sync(); err != nil {
				errs = append(errs, fmt.Errorf("journal: sync %s: %w", j.own.path, err))
			} else {
				j.own.torn = nil // emptied: a torn line went with the rest
			}
		}
	}
	kept := j.others[:0]
	for _, f := range j.others {
		if len(f.entries) > 0 {
			kept = append(kept, f)
			continue
		}
		if err := os.Remove(f.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("journal: remove %s: %w", f.path, err))
			kept = append(kept, f)
			continue
		}
		_ = f.f.Close() // releases the lock
		j.log.Info("journal: orphan file replayed and removed", slog.String("path", f.path))
	}
	j.others = kept
	if len(errs) == 0 && j.own != nil {
		if err := syncDir(j.dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// adopt takes over every journal file in the directory whose owner is gone
// (its lock can be taken). Called with j.mu held.
func (j *Journal) adopt() error {
	names, err := j.foreign()
	if err != nil {
		return err
	}
	var errs []error
	for _, path := range names {
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("journal: %w", err))
			}
			continue
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			_ = f.Close() // a live process owns it
			continue
		}
		entries, err := read(f, path, j.log)
		if err != nil {
			_ = f.Close()
			errs = append(errs, err)
			continue
		}
		j.log.Warn("journal: adopted the completions of a stopped process",
			slog.String("path", path), slog.Int("completions", len(entries)))
		j.others = append(j.others, &file{path: path, f: f, entries: entries})
	}
	return errors.Join(errs...)
}

// HeldElsewhere counts the completions in journal files of this directory
// that another live process holds: its own, or a stopped process's it
// adopted. A stopped kernel's outcomes may wait there, so its pending rows
// are not to be marked interrupted before that process writes them. A file
// that cannot be read counts as holding one.
func (j *Journal) HeldElsewhere() (int, error) {
	if !j.Durable() {
		return 0, nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	names, err := j.foreign()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, path := range names {
		f, err := os.Open(path)
		if errors.Is(err, os.ErrNotExist) {
			continue // written and removed meanwhile
		}
		if err != nil {
			return n + 1, fmt.Errorf("journal: %w", err)
		}
		entries, err := read(f, path, slog.New(slog.DiscardHandler))
		_ = f.Close()
		if err != nil {
			return n + 1, err
		}
		n += len(entries)
	}
	return n, nil
}

// foreign are the journal files in the directory that are not this
// process's: neither its own nor adopted. Called with j.mu held.
func (j *Journal) foreign() ([]string, error) {
	names, err := filepath.Glob(filepath.Join(j.dir, "*"+fileSuffix))
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	return slices.DeleteFunc(names, func(path string) bool { return path == j.own.path || j.holds(path) }), nil
}

func (j *Journal) holds(path string) bool {
	for _, f := range j.others {
		if f.path == path {
			return true
		}
	}
	return false
}

// read parses a journal file. A last line without its newline was being
// written when its process died, or its write failed and it could not be
// cut off: Add had not returned success, so nobody was answered on its
// strength, and it is skipped. A bad complete line is an error: the file is
// left for an operator.
func read(r io.Reader, path string, log *slog.Logger) (map[key]records.Completion, error) {
	out := map[key]records.Completion{}
	br := bufio.NewReader(r)
	for n := 1; ; n++ {
		line, err := br.ReadString('\n')
		if errors.Is(err, io.EOF) {
			if strings.TrimSpace(line) != "" {
				log.Warn("journal: torn last line skipped (never acknowledged)", slog.String("path", path))
			}
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("journal: read %s: %w", path, err)
		}
		e, err := decode(line)
		if err != nil {
			return nil, fmt.Errorf("journal: %s line %d: %w", path, n, err)
		}
		c, err := e.completion()
		if err != nil {
			return nil, fmt.Errorf("journal: %s line %d: %w", path, n, err)
		}
		switch _, held := out[key{attempt: e.AttemptID}]; {
		case e.Dropped:
			delete(out, key{e.AttemptID, c.TurnID})
		case c.TurnID == "" || !held: // as Add kept them
			out[key{e.AttemptID, c.TurnID}] = c
		}
	}
}

// decode parses one journal line. A field this kernel does not know is
// refused, not skipped: the line was written by a newer kernel, and what
// the field says (as Dropped withdraws the line above) would be lost.
func decode(line string) (entry, error) {
	var e entry
	dec := json.NewDecoder(strings.NewReader(line))
	dec.DisallowUnknownFields()
	err := dec.Decode(&e)
	if err != nil && strings.HasPrefix(err.Error(), "json: unknown field") {
		return e, fmt.Errorf("%w: written by a newer kernel, whose lines this one cannot replay whole (run that version on the directory to write them)", err)
	}
	if err != nil {
		return e, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return e, errors.New("the line holds more than one JSON value")
	}
	return e, nil
}

// Run flushes to store whenever a completion is added, and at least every
// interval while anything is kept, backing off while the store fails, until
// ctx is done. Every interval it also adopts the files of sibling processes
// on the directory that stopped, even while it keeps nothing of its own: a
// stopped sibling's completions were answered to its clients, and until a
// live process writes them their rows stay pending and every sibling's
// Reconcile waits for them (HeldElsewhere). onError is told about every
// failed flush (nil: ignored).
func (j *Journal) Run(ctx context.Context, store records.Store, interval time.Duration, onError func(error)) {
	const maxBackoff = 2 * time.Second
	backoff := 50 * time.Millisecond
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-j.wake:
		case <-t.C:
			j.adoptOrphans(ctx)
		}
		for j.Len() > 0 && ctx.Err() == nil {
			left := j.Len()
			n, err := j.Flush(ctx, store)
			if n > 0 {
				j.log.InfoContext(ctx, "journal: journaled completions written", slog.Int("count", n),
					slog.Int("left", j.Len()))
			}
			if err == nil {
				backoff = 50 * time.Millisecond
				if n == 0 && j.Len() >= left {
					break // all held back (Hold): end signals, or the timer
				}
				continue
			}
			if onError != nil && ctx.Err() == nil {
				onError(err)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, maxBackoff)
		}
		t.Reset(interval)
	}
}

// Close releases the files. The own file is removed when it holds nothing;
// otherwise it stays for the next process to adopt. Memory-only entries
// still kept are lost, and logged.
func (j *Journal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if n := len(j.mem.entries); n > 0 {
		j.log.Error("journal: memory-only completions lost at shutdown; their records stay pending until reconciled",
			slog.Int("count", n))
	}
	var errs []error
	for _, f := range j.files() {
		if f.own && len(f.entries) == 0 {
			if err := os.Remove(f.path); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
		if err := f.f.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	j.own, j.others = nil, nil
	return errors.Join(errs...)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	defer func() { _ = d.Close() }()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("journal: sync %s: %w", dir, err)
	}
	return nil
}
