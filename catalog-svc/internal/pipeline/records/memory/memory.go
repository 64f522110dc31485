package memory

import (
	"context"
	"fmt"
	"hash/maphash"
	"slices"
	"sync"
	"time"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/exportset"
	"github.com/sharedos/toolshare/services/contract/outcome"

	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline/grants"
	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline/records"
)

// Store keeps records in memory. The zero value is not usable; use New.
type Store struct {
	mu   sync.RWMutex
	rows rowLog
	// open are the rows still pending (running or waiting for input): the
	// only ones Reconcile and the ends of waits look at, so neither scans
	// every record under the lock (at a million records that took ≈ 46 ms
	// a minute, every call held up meanwhile).
	open    map[int]struct{}
	byID    map[string]int
	byTurn  map[string][]int
	calls   map[callKey]int // (turn, call) → the index of its first row
	revoked map[string]time.Time
	exports []records.Export
	nextSeq int64

	// keep bounds the finished rows kept (WithRetention; 0: all).
	keep int
	// dropped counts the rows dropped; low is where trim looks next: every
	// row below it was dropped, or pending when trim passed it (and is
	// dropped when it finishes).
	dropped, low int
	// gone holds, per turn, the call ids of first rows dropped while the
	// turn may still call: a repeat is still refused, never run twice.
	gone      map[string]*goneCalls
	seed      maphash.Seed
	nextSweep time.Time
	now       func() time.Time
	// free counts each chunk's dropped rows.
	free []int
}

type callKey struct{ turn, call string }

// goneCalls are the dropped first rows of one turn's calls: each call id's
// hash (maphash, seeded per store: a collision refuses a new call as a
// repeat, never runs one twice) and whether the row was an abandonment.
type goneCalls struct {
	calls map[uint64]bool
	// until is when no grant of the turn verifies any more: the latest of
	// their starts, and a grant's longest life.
	until time.Time
}

// grantWindow is how long after a call started its turn's grant may still
// verify (grants.Keys.Verify): past it, a repeat of the call is refused for
// its grant and a dropped row's call id need not be kept.
const grantWindow = grants.MaxLifetime + grants.ClockSkew

// DefaultRetention is how many finished records the kernel's embedded
// store keeps (--embedded-record-limit): about 100 MB.
const DefaultRetention = 100_000

// Option configures a Store.
type Option func(*Store)

// WithRetention keeps the newest n finished records (by sequence) and drops
// older ones, oldest first; a pending record — running, or waiting for
// input — is never dropped, and one that finishes behind n newer finished
// records is dropped as it finishes. 0 keeps every record. The PostgreSQL
// store deletes records only by the owner's purge of a noted export
// (docs/retention.md); the embedded store's records end with the process
// anyway, and this bounds what the process holds meanwhile. A dropped
// record's call id is kept (its 8-byte hash) while its turn may still call, so a
// repeat of the call is still refused (invariant 10).
func WithRetention(n int) Option { return func(s *Store) { s.keep = max(n, 0) } }

// WithClock sets the clock the store reads (tests).
func WithClock(now func() time.Time) Option { return func(s *Store) { s.now = now } }

// chunkSize is how many records one chunk of a rowLog holds.
const chunkSize = 1024

// rowLog is the records in sequence order (sequence n is row n-1), in
// chunks that never move once made: appending copies no record. A flat
// slice copied every record each time it grew — two thirds of Begin's CPU
// in the full path at c=16 (make profile), and twice the memory meanwhile.
type rowLog struct {
	chunks [][]records.Record
	n      int
}

// add appends r and returns its index.
func (l *rowLog) add(r records.Record) int {
	if l.n%chunkSize == 0 {
		l.chunks = append(l.chunks, make([]records.Record, 0, chunkSize))
	}
	last := &l.chunks[len(l.chunks)-1]
	*last = append(*last, r)
	l.n++
	return l.n - 1
}

// at is row i, in place; it must be kept (not dropped).
func (l *rowLog) at(i int) *records.Record { return &l.chunks[i/chunkSize][i%chunkSize] }

// get is row i, unless it was dropped.
func (l *rowLog) get(i int) (*records.Record, bool) {
	c := l.chunks[i/chunkSize]
	if c == nil || c[i%chunkSize].Sequence == 0 {
		return nil, false
	}
	return &c[i%chunkSize], true
}

// drop zeroes row i (sequence 0: dropped) and lets go of its chunk once
// every row of it is dropped; free counts each chunk's dropped rows.
func (l *rowLog) drop(i int, free []int) []int {
	*l.at(i) = records.Record{}
	c := i / chunkSize
	free = append(free, make([]int, max(0, c+1-len(free)))...)
	if free[c]++; free[c] == chunkSize {
		l.chunks[c] = nil
	}
	return free
}

// skip is the next index from i worth looking at: past a chunk let go.
func (l *rowLog) skip(i int) int {
	if c := i / chunkSize; c < len(l.chunks) && l.chunks[c] == nil {
		return (i/chunkSize + 1) * chunkSize
	}
	return i
}

func (l *rowLog) len() int { return l.n }

var _ records.Store = (*Store)(nil)

// New returns an empty store.
func New(opts ...Option) *Store {
	s := &Store{open: map[int]struct{}{}, byID: map[string]int{}, byTurn: map[string][]int{}, calls: map[callKey]int{}, revoked: map[string]time.Time{},
		gone: map[string]*goneCalls{}, seed: maphash.MakeSeed(), now: time.Now}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Begin implements records.Store.
func (s *Store) Begin(ctx context.Context, r *records.Record) error {
	return s.begin(ctx, r, false)
}

// BeginNew implements records.Store.
func (s *Store) BeginNew(ctx context.Context, r *records.Record) error {
	return s.begin(ctx, r, true)
}

// begin is Begin, or BeginNew when abandoned: a repeated (turn, call) then
// writes nothing, as it does when its first row is an abandonment.
func (s *Store) begin(ctx context.Context, r *records.Record, abandoned bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := r.Check(); err != nil {
		return err
	}
	r.Sanitize()
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.byID[r.AttemptID]; ok {
		return fmt.Errorf("memory: attempt %s already recorded: %w", r.AttemptID, records.ErrInvalid)
	}
	key := callKey{r.TurnID, r.CallID}
	first, dup := s.calls[key]
	firstAbandoned := dup && s.rows.at(first).Abandoned
	if g := s.gone[r.TurnID]; !dup && g != nil {
		firstAbandoned, dup = g.calls[maphash.String(s.seed, r.CallID)]
	}
	switch {
	case dup && (abandoned || firstAbandoned):
		return records.ErrRecorded
	case dup:
		records.MarkDuplicate(r, r.StartedAt)
		r.Abandoned = false
	default:
		r.Duplicate, r.Abandoned = false, abandoned
		r.Status = sharedosv1.OperationStatus_OPERATION_STATUS_PENDING
		r.Code, r.Reason, r.FinishedAt = "", "", time.Time{}
	}
	s.nextSeq++
	r.Sequence = s.nextSeq
	idx := s.rows.add(*r)
	s.byID[r.AttemptID] = idx
	s.byTurn[r.TurnID] = append(s.byTurn[r.TurnID], idx)
	if dup {
		s.trim()
		return records.ErrDuplicateCall
	}
	s.calls[key] = idx
	s.open[idx] = struct{}{}
	s.trim()
	return nil
}

// finished notes that row idx is no longer pending. Called with s.mu held.
func (s *Store) finished(idx int) {
	delete(s.open, idx)
	if s.keep > 0 && idx < s.low {
		// Passed by trim while pending: keep newer finished rows are kept,
		// so it is not among the newest.
		s.drop(idx)
		return
	}
	s.trim()
}

// trim drops the oldest finished rows while more than keep are kept, and
// forgets the dropped call ids of turns that can call no more. Called with
// s.mu held.
func (s *Store) trim() {
	if s.keep == 0 {
		return
	}
	for s.rows.len()-s.dropped-len(s.open) > s.keep && s.low < s.rows.len() {
		i := s.low
		s.low++
		if _, pending := s.open[i]; !pending {
			s.drop(i)
		}
	}
	if len(s.gone) == 0 {
		return
	}
	if now := s.now(); !now.Before(s.nextSweep) {
		for turn, g := range s.gone {
			if now.After(g.until) {
				delete(s.gone, turn)
			}
		}
		s.nextSweep = now.Add(time.Minute)
	}
}

// drop removes finished row i. Its call id stays (gone) while its turn may
// still call and was not revoked: a repeat is refused, never run. Called
// with s.mu held.
func (s *Store) drop(i int) {
	row := s.rows.at(i)
	delete(s.byID, row.AttemptID)
	switch idxs := s.byTurn[row.TurnID]; {
	case len(idxs) <= 1:
		delete(s.byTurn, row.TurnID)
	case idxs[0] == i:
		s.byTurn[row.TurnID] = idxs[1:]
	default: // behind a row still pending
		s.byTurn[row.TurnID] = slices.DeleteFunc(idxs, func(x int) bool { return x == i })
	}
	key := callKey{row.TurnID, row.CallID}
	if first, ok := s.calls[key]; ok && first == i {
		delete(s.calls, key)
		if _, revoked := s.revoked[row.TurnID]; !revoked {
			g := s.gone[row.TurnID]
			if g == nil {
				g = &goneCalls{calls: map[uint64]bool{}}
				s.gone[row.TurnID] = g
			}
			g.calls[maphash.String(s.seed, row.CallID)] = row.Abandoned
			if until := row.StartedAt.Add(grantWindow); until.After(g.until) {
				g.until = until
			}
		}
	}
	s.free = s.rows.drop(i, s.free)
	s.dropped++
}

// Complete implements records.Store.
func (s *Store) Complete(ctx context.Context, attemptID string, c records.Completion) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := c.Check(); err != nil {
		return err
	}
	c.Sanitize()
	s.mu.Lock()
	defer s.mu.Unlock()
	idx, ok := s.byID[attemptID]
	if !ok {
		return records.ErrNotFound
	}
	row := s.rows.at(idx)
	if c.TurnID != "" && row.TurnID != c.TurnID {
		return records.ErrNotFound
	}
	if c.ResumedBy != "" && (row.Status != sharedosv1.OperationStatus_OPERATION_STATUS_PENDING || !row.WaitingUntil.IsZero() || row.ResumedBy != c.ResumedBy) {
		return records.ErrNotFound // the resumption did not take effect, or another took the attempt on
	}
	if row.Status != sharedosv1.OperationStatus_OPERATION_STATUS_PENDING {
		return records.ErrCompleted
	}
	row.Status, row.Code, row.Reason = c.Status, c.Code, c.Reason
	row.ResolvedTool, row.DecisionID, row.PolicyRevision = c.ResolvedTool, c.DecisionID, c.PolicyRevision
	row.FinishedAt, row.WaitingUntil = c.FinishedAt, time.Time{}
	row.ProgressCount += c.ProgressCount
	s.finished(idx)
	return nil
}

// Park implements records.Rounds.
func (s *Store) Park(ctx context.Context, attemptID string, w records.Wait) (time.Time, error) {
	if err := ctx.Err(); err != nil {
		return time.Time{}, err
	}
	// The round's text is stored as a completion's is (the PostgreSQL
	// store's Park does the same).
	c := records.Completion{ResolvedTool: w.ResolvedTool, DecisionID: w.DecisionID, PolicyRevision: w.PolicyRevision}
	c.Sanitize()
	s.mu.Lock()
	defer s.mu.Unlock()
	idx, ok := s.byID[attemptID]
	if !ok {
		return time.Time{}, records.ErrNotFound
	}
	row := s.rows.at(idx)
	if _, revoked := s.revoked[row.TurnID]; revoked || row.Status != sharedosv1.OperationStatus_OPERATION_STATUS_PENDING ||
		!row.WaitingUntil.IsZero() {
		return time.Time{}, records.ErrNotWaiting
	}
	row.InputRounds, row.WaitingUntil = w.Round, s.now().Add(w.TTL)
	row.ProgressCount += w.Progress
	row.ResolvedTool, row.DecisionID, row.PolicyRevision = c.ResolvedTool, c.DecisionID, c.PolicyRevision
	return row.WaitingUntil, nil
}

// Resume implements records.Rounds.
func (s *Store) Resume(ctx context.Context, r records.Resumption) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	idx, ok := s.byID[r.AttemptID]
	if !ok {
		return "", records.ErrNotWaiting
	}
	row := s.rows.at(idx)
	if row.Status != sharedosv1.OperationStatus_OPERATION_STATUS_PENDING || row.WaitingUntil.IsZero() ||
		!now.Before(row.WaitingUntil) || row.TurnID != r.TurnID || row.RequestedToolSHA256 != r.RequestedToolSHA256 ||
		row.ArgumentsDigest != r.ArgumentsDigest || records.KindName(row.Kind) != records.KindName(r.Kind) || row.InputRounds != r.Round {
		return "", records.ErrNotWaiting
	}
	row.WaitingUntil, row.ResumedAt, row.ResumedBy = time.Time{}, now, r.InstanceID
	return row.CallID, nil
}

// ExpireWaiting implements records.Rounds.
func (s *Store) ExpireWaiting(ctx context.Context) (int64, error) {
	return s.endWaiting(ctx, "", func(row *records.Record, now time.Time) bool { return !now.Before(row.WaitingUntil) },
		sharedosv1.OperationStatus_OPERATION_STATUS_FAILED, outcome.Timeout, records.ExpiredWaitReason)
}

// EndedRound implements records.Rounds.
func (s *Store) EndedRound(ctx context.Context, r records.Resumption) (records.Record, error) {
	if err := ctx.Err(); err != nil {
		return records.Record{}, err
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	idx, ok := s.byID[r.AttemptID]
	if !ok {
		return records.Record{}, records.ErrNotWaiting
	}
	row := s.rows.at(idx)
	if row.TurnID != r.TurnID || row.RequestedToolSHA256 != r.RequestedToolSHA256 || row.ArgumentsDigest != r.ArgumentsDigest ||
		records.KindName(row.Kind) != records.KindName(r.Kind) || row.InputRounds != r.Round {
		return records.Record{}, records.ErrNotWaiting
	}
	if row.Status == sharedosv1.OperationStatus_OPERATION_STATUS_PENDING {
		if row.WaitingUntil.IsZero() || now.Before(row.WaitingUntil) {
			return records.Record{}, records.ErrNotWaiting
		}
		row.Status, row.Code, row.Reason = sharedosv1.OperationStatus_OPERATION_STATUS_FAILED, outcome.Timeout, records.ExpiredWaitReason
		row.FinishedAt, row.WaitingUntil = now, time.Time{}
		ended := *row
		s.finished(idx) // may drop the row
		return ended, nil
	}
	return *row, nil
}

// CloseWaiting implements records.Rounds.
func (s *Store) CloseWaiting(ctx context.Context, turnID string) (int64, error) {
	return s.endWaiting(ctx, turnID, func(*records.Record, time.Time) bool { return true },
		sharedosv1.OperationStatus_OPERATION_STATUS_CANCELLED, outcome.Cancelled, records.ClosedWaitReason)
}

func (s *Store) endWaiting(ctx context.Context, turnID string, ends func(*records.Record, time.Time) bool,
	status sharedosv1.OperationStatus, code, reason string) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for i := range s.open {
		row := s.rows.at(i)
		if row.WaitingUntil.IsZero() || (turnID != "" && row.TurnID != turnID) || !ends(row, now) {
			continue
		}
		row.Status, row.Code, row.Reason = status, code, reason
		row.FinishedAt, row.WaitingUntil = now, time.Time{}
		s.finished(i)
		n++
	}
	return n, nil
}

// ListOperations implements records.Store.
func (s *Store) ListOperations(ctx context.Context, turnID string) ([]records.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	idxs := s.byTurn[turnID]
	out := make([]records.Record, 0, len(idxs))
	for _, i := range idxs {
		out = append(out, *s.rows.at(i))
	}
	return out, nil
}

// Reconcile implements records.Store.
func (s *Store) Reconcile(ctx context.Context, startedBefore time.Time) (int64, error) {
	return s.reconcile(ctx, "", startedBefore)
}

// ReconcileInstance implements records.Store.
func (s *Store) ReconcileInstance(ctx context.Context, instanceID string, startedBefore time.Time) (int64, error) {
	if instanceID == "" {
		return 0, nil
	}
	return s.reconcile(ctx, instanceID, startedBefore)
}

func (s *Store) reconcile(ctx context.Context, instanceID string, startedBefore time.Time) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for i := range s.open {
		row := s.rows.at(i)
		owner, active := row.InstanceID, row.StartedAt
		if !row.ResumedAt.IsZero() {
			owner, active = row.ResumedBy, row.ResumedAt
		}
		if (instanceID != "" && owner != instanceID) || !row.WaitingUntil.IsZero() {
			continue // another kernel's, or waiting for input: in no kernel's hands
		}
		if active.Before(startedBefore) {
			row.Status = sharedosv1.OperationStatus_OPERATION_STATUS_INTERRUPTED
			row.Reason = records.InterruptedReason
			row.FinishedAt = now
			s.finished(i)
			n++
		}
	}
	return n, nil
}

// Len returns the number of rows kept (all turns); tests compare it with
// attempts.
func (s *Store) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.rows.len() - s.dropped
}

// RevokeTurn implements records.Store.
func (s *Store) RevokeTurn(ctx context.Context, turnID string, until time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if until.After(s.revoked[turnID]) {
		s.revoked[turnID] = until
	}
	// Every call of the turn is refused from now on (after its record is
	// written): the dropped call ids need not be kept to refuse repeats.
	delete(s.gone, turnID)
	return nil
}

// TurnRevoked implements records.Store.
func (s *Store) TurnRevoked(ctx context.Context, turnID string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	_, ok := s.revoked[turnID]
	return ok, nil
}

// PendingInTurn implements records.Store.
func (s *Store) PendingInTurn(ctx context.Context, turnID string) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := 0
	for _, i := range s.byTurn[turnID] {
		if s.rows.at(i).Status == sharedosv1.OperationStatus_OPERATION_STATUS_PENDING {
			n++
		}
	}
	return n, nil
}

// WatchRevocations implements records.Store: one process uses this store.
func (s *Store) WatchRevocations(context.Context, func(), func(string)) error { return nil }

// ForgetRevocations implements records.Store.
func (s *Store) ForgetRevocations(ctx context.Context, cutoff time.Time) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for id, until := range s.revoked {
		if until.Before(cutoff) {
			delete(s.revoked, id)
			n++
		}
	}
	return n, nil
}

// ExportPage implements records.Store. Rows are kept in sequence order and
// sequence n is rows[n-1] (a dropped one is skipped, as PostgreSQL skips
// the sequences of purged records).
func (s *Store) ExportPage(ctx context.Context, since time.Time, after int64, limit int) (int64, []records.Record, error) {
	if err := ctx.Err(); err != nil {
		return 0, nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := s.rows.len()
	from := after
	if after == 0 {
		from = int64(n)
		for i := s.rows.skip(0); i < n; i = s.rows.skip(i + 1) {
			if r, ok := s.rows.get(i); ok && !r.StartedAt.Before(since) {
				from = r.Sequence - 1
				break
			}
		}
	}
	var out []records.Record
	for i := int(max(from, 0)); i < n && len(out) < limit; i = s.rows.skip(i + 1) {
		if r, ok := s.rows.get(i); ok {
			out = append(out, *r)
		}
	}
	return from, out, nil
}

// RecordExport implements records.Store.
func (s *Store) RecordExport(ctx context.Context, e records.Export) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// Sequence n is row n-1: the range (After, Through] is rows After to
	// Through-1, looked at alone (not every record, with the lock held).
	var n int64
	set := exportset.New()
	for i := s.rows.skip(int(max(e.After, 0))); int64(i) < min(e.Through, int64(s.rows.len())); i = s.rows.skip(i + 1) {
		row, ok := s.rows.get(i)
		if !ok {
			continue // dropped
		}
		if row.Status == sharedosv1.OperationStatus_OPERATION_STATUS_PENDING {
			return 0, records.ErrExportMismatch
		}
		set.Add(row.Sequence)
		n++
	}
	if n != e.Rows || set.Sum() != e.RecordsDigest {
		return 0, records.ErrExportMismatch
	}
	s.exports = append(s.exports, e)
	return int64(len(s.exports)), nil
}
