package records

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"time"
	"unicode/utf8"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/outcome"
	"github.com/sharedos/toolshare/services/platform/telemetry"
)

// MaxToolBytes caps the escaped requested tool name as stored (the
// operations table's CHECK holds the same number). It is
// telemetry.MaxValueBytes, the cap of the name on every span, so a record
// and its spans show one string.
const MaxToolBytes = 256

// MaxTextBytes caps every other free-text field (ids, principal, reason).
const MaxTextBytes = 1024

// ErrDuplicateCall is returned by Begin when the turn already has a row for
// the call id. The repeat has been recorded (denied/duplicate_call) when
// Begin returns it.
var ErrDuplicateCall = errors.New("records: call id already used in this turn")

// ErrRecorded is returned, and nothing written, by BeginNew when the turn
// already has a row for the call id, and by Begin when that row is an
// abandonment (BeginNew's): the same attempt, arrived after its bridge
// gave up on it.
var ErrRecorded = errors.New("records: call id already recorded in this turn")

// ErrInDoubt wraps a Begin error after which the row may still be written:
// the insert reached the store and no answer came back (a hung server that
// resumes runs what it had read). The call is refused all the same; the
// kernel journals a refused completion for the row, which completes it if
// it ever appears (and is dropped if not).
var ErrInDoubt = errors.New("records: the write may still take effect")

// ErrNotFound is returned by Complete for an unknown attempt id.
var ErrNotFound = errors.New("records: no such attempt")

// ErrCompleted is returned by Complete when the row is no longer pending:
// records are append-only and a completed row is never rewritten.
var ErrCompleted = errors.New("records: attempt already completed")

// Record is one attempt as stored.
type Record struct {
	// AttemptID is unique per row (random, 128 bits); set by NewAttemptID.
	AttemptID string
	// Sequence is assigned by the store on Begin; it orders a turn's rows.
	Sequence int64
	CallID   string
	TurnID   string
	// Principal and Tenant from the turn's AccessContext (its grant; ''
	// when the grant was refused).
	Principal string
	Tenant    string
	// RequestedTool is the raw name escaped and capped (see EscapeTool);
	// RequestedToolSHA256 is over the full raw name.
	RequestedTool       string
	RequestedToolSHA256 string
	// ResolvedTool is the canonical name once resolution succeeded.
	ResolvedTool string
	// CatalogHash is the turn's pinned catalogue hash.
	CatalogHash string
	// ArgumentsDigest is redact.ArgumentsDigest of the raw argument bytes.
	ArgumentsDigest string
	DecisionID      string
	PolicyRevision  string
	Status          sharedosv1.OperationStatus
	Code            string
	Reason          string
	// Duplicate marks the row of a refused repeat of (TurnID, CallID).
	Duplicate bool
	// Abandoned marks the row BeginNew wrote: a call whose bridge gave up
	// on it while sending it, which may still arrive (and is then not
	// recorded again).
	Abandoned bool
	// InstanceID names the kernel process that wrote the row.
	InstanceID string
	// Harness, HarnessVersion, MCPSupport ("native", "extension"),
	// Extension, DeclaredModel and ToolPolicyDigest are the turn's
	// SystemIdentity (with CatalogHash) from its grant (ADR 0014): set when
	// the row is written, never changed.
	Harness          string
	HarnessVersion   string
	MCPSupport       string
	Extension        string
	DeclaredModel    string
	ToolPolicyDigest string
	TraceID          string
	StartedAt        time.Time
	FinishedAt       time.Time
	// ProgressCount is how many progress reports the kernel passed on.
	ProgressCount int32
	// InputRounds is how many times the attempt asked the client for input.
	InputRounds int32
	// WaitingUntil is set while the pending attempt waits for the client's
	// input (Rounds.Park): when it stops waiting.
	WaitingUntil time.Time
	// Kind is what the attempt is (a tools/call unless said otherwise).
	Kind sharedosv1.CallKind
	// ResumedAt and ResumedBy are set once the attempt went on after a
	// wait (Rounds.Resume): when, and the kernel that took it on. Reconcile
	// judges a resumed row by them, not by StartedAt and InstanceID.
	ResumedAt time.Time
	ResumedBy string
}

// Completion is what Complete writes onto a pending row.
type Completion struct {
	Status         sharedosv1.OperationStatus
	Code           string
	Reason         string
	ResolvedTool   string
	DecisionID     string
	PolicyRevision string
	FinishedAt     time.Time
	ProgressCount  int32
	// TurnID, when set, is the turn the row must be of: a completion the
	// kernel journals for an attempt a bridge named (a resumption in
	// doubt) ends no other turn's attempt.
	TurnID string
	// ResumedBy, when set, makes the completion a refusal of a resumption
	// in doubt by that kernel: it ends the row only if the resumption took
	// effect — the row no longer waits and that kernel resumed it last.
	// Else (still waiting, or resumed by another kernel since) it is not
	// found: the attempt goes on.
	ResumedBy string
}

// Store is the operation-record role the kernel depends on.
type Store interface {
	// Begin durably writes r as pending (Status and Code are ignored) and
	// sets r.Sequence. For a repeated (TurnID, CallID) it writes r as a
	// completed denied/duplicate_call row instead and returns
	// ErrDuplicateCall — unless the first row is an abandonment (BeginNew),
	// of which r is the late arrival: then nothing, and ErrRecorded.
	Begin(ctx context.Context, r *Record) error
	// BeginNew writes the abandonment of a call whose bridge gave up on it
	// while sending it (r.Abandoned set): as Begin when the turn has no row
	// for its call id, else nothing, and ErrRecorded.
	BeginNew(ctx context.Context, r *Record) error
	// Complete writes the outcome onto the pending row attemptID. It fails
	// with ErrCompleted when the row is not pending (completed or
	// interrupted) and ErrNotFound when there is no such row (of c.TurnID,
	// when set; resumed by c.ResumedBy and not waiting, when set).
	Complete(ctx context.Context, attemptID string, c Completion) error
	// ListOperations returns the rows of a turn in the order written.
	ListOperations(ctx context.Context, turnID string) ([]Record, error)
	// Reconcile marks interrupted every pending row started before cutoff
	// and returns how many it marked. A row still pending after the
	// kernel's longest possible call belongs to a process that died (or
	// whose completion write failed).
	Reconcile(ctx context.Context, startedBefore time.Time) (int64, error)
	// ReconcileInstance marks interrupted the pending rows written by
	// instanceID and started before startedBefore. A kernel whose instance
	// id survives its own restarts (a pod name) calls it at startup with its
	// start time: rows its previous incarnation left pending cannot still be
	// in flight, so they need not wait for Reconcile's age cutoff.
	ReconcileInstance(ctx context.Context, instanceID string, startedBefore time.Time) (int64, error)

	Revocations
	Exports
	Rounds
}

// ErrNotWaiting is returned by Resume when no row waits for exactly that
// input, and by Park when the row can no longer wait (it is not pending,
// or its turn was revoked).
var ErrNotWaiting = errors.New("records: the attempt is not waiting for this input")

// Resumption names the wait a call ends and what must match it.
type Resumption struct {
	AttemptID           string
	TurnID              string
	RequestedToolSHA256 string
	ArgumentsDigest     string
	// Kind is the call's kind, as KindName stores it: a prompts/get must
	// not continue a tools/call of the same name and arguments (its
	// provider would run the tool handler with the prompt's state), nor
	// the other way round.
	Kind sharedosv1.CallKind
	// Round is the row's InputRounds while it waits.
	Round int32
	// InstanceID is the kernel that takes the attempt on.
	InstanceID string
}

// Wait is what Park writes onto a row that starts waiting.
type Wait struct {
	Round, Progress int32
	TTL             time.Duration
	ResolvedTool    string
	DecisionID      string
	PolicyRevision  string
}

// Rounds is how one attempt waits for the client's input (MCP
// input-required results) and goes on as the same record (ADR 0017).
type Rounds interface {
	// Park makes the pending row attemptID wait for the client's input
	// for w.TTL from now (the store's clock) and returns until when: its
	// InputRounds becomes w.Round, w.Progress adds to its ProgressCount,
	// and the round's resolution and decision are written (what a wait
	// that ends unanswered is recorded with). ErrNotWaiting when the row
	// is not pending or its turn is revoked.
	Park(ctx context.Context, attemptID string, w Wait) (time.Time, error)
	// Resume takes a waiting row back when everything in r matches and its
	// wait has not run out, and returns the row's call id; ErrNotWaiting
	// otherwise (a replayed, expired or foreign state). Exactly one of
	// concurrent Resumes of a row succeeds.
	Resume(ctx context.Context, r Resumption) (callID string, err error)
	// ExpireWaiting completes failed/timeout every row whose wait ran out.
	ExpireWaiting(ctx context.Context) (int64, error)
	// EndedRound returns the row a resumption r names once that round can
	// no longer be answered: the row matching r in everything Resume
	// matches but the open wait (attempt, turn, tool, arguments, kind and
	// round) that is no longer pending, or that still waits past its wait
	// — then completed failed/timeout first, as ExpireWaiting would, so
	// the row returned is the attempt's one outcome whichever of the two
	// ended it. ErrNotWaiting when no row matches, or the matching row is
	// still in its wait or runs a resumption.
	EndedRound(ctx context.Context, r Resumption) (Record, error)
	// CloseWaiting completes cancelled every row of turnID that waits.
	CloseWaiting(ctx context.Context, turnID string) (int64, error)
}

// Reasons the Rounds completions record.
const (
	ExpiredWaitReason = "the client did not answer the tool's input request in time"
	ClosedWaitReason  = "the turn was closed while the tool waited for the client's input"
)

// ErrExportMismatch is returned by RecordExport when the range does not
// hold exactly the exported records (a record still pending, or one that
// committed into the range after it was read): export again.
var ErrExportMismatch = errors.New("records: the range does not hold exactly the exported records")

// Export is one archive of records: those in (After, Through], Rows of
// them, written to a file whose SHA-256 is SHA256 (hex).
type Export struct {
	After, Through, Rows int64
	SHA256               string
	// RecordsDigest names the archived records (services/contract/exportset):
	// the range must hold exactly them, now and when it is purged.
	RecordsDigest string
}

// Exports is how records are archived (docs/retention.md): read out in
// sequence order, the archive then noted in a ledger, and only records of
// a noted archive may ever be deleted (by the owner's purge function).
type Exports interface {
	// ExportPage returns up to limit records in sequence order after
	// after — or, when after is 0, from the first record started at or
	// after since — pending ones included (the caller stops before them),
	// and the sequence the page starts after.
	ExportPage(ctx context.Context, since time.Time, after int64, limit int) (from int64, rows []Record, err error)
	// RecordExport notes e in the export ledger and returns its id, or
	// ErrExportMismatch unless (e.After, e.Through] holds exactly e.Rows
	// finished records, no pending one, and exactly the set e.RecordsDigest
	// names.
	RecordExport(ctx context.Context, e Export) (int64, error)
}

// Revocations is where kernels learn which turns were closed (ADR 0015).
// A revocation is durable and seen by every kernel on the same store.
type Revocations interface {
	// RevokeTurn durably voids turnID's grant until until (idempotent; a
	// repeat keeps the later until) and announces it to every watcher.
	RevokeTurn(ctx context.Context, turnID string, until time.Time) error
	// TurnRevoked reports whether turnID's grant is revoked. It reads what
	// is committed: a revocation that committed before the call's pending
	// row did is always seen.
	TurnRevoked(ctx context.Context, turnID string) (bool, error)
	// PendingInTurn counts turnID's pending rows.
	PendingInTurn(ctx context.Context, turnID string) (int, error)
	// WatchRevocations calls listening once it hears every revocation
	// committed from then on, then f with each turn any kernel revokes,
	// until ctx is done (nil) or the watch fails. A store only one process
	// uses returns nil at once: that process's own revocations need no news.
	WatchRevocations(ctx context.Context, listening func(), f func(turnID string)) error
	// ForgetRevocations deletes revocations whose until is before cutoff:
	// no grant they void can still be valid.
	ForgetRevocations(ctx context.Context, cutoff time.Time) (int64, error)
}

// KindName is the stored name of a call kind: tool, prompt or resource.
func KindName(k sharedosv1.CallKind) string {
	switch k {
	case sharedosv1.CallKind_CALL_KIND_PROMPT:
		return "prompt"
	case sharedosv1.CallKind_CALL_KIND_RESOURCE:
		return "resource"
	}
	return "tool"
}

// ParseKind is the inverse of KindName.
func ParseKind(name string) sharedosv1.CallKind {
	switch name {
	case "prompt":
		return sharedosv1.CallKind_CALL_KIND_PROMPT
	case "resource":
		return sharedosv1.CallKind_CALL_KIND_RESOURCE
	}
	return sharedosv1.CallKind_CALL_KIND_UNSPECIFIED
}

// NewAttemptID returns a random 128-bit attempt id (32 hex digits).
func NewAttemptID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24).
	return hex.EncodeToString(b[:])
}

// hexSHA256 is the lowercase hex SHA-256 of b (requested_tool_sha256).
func hexSHA256(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// EscapeTool returns the storable form of a raw requested tool name (escaped
// by telemetry.Escape, the one rule for a harness-chosen string, and capped
// at MaxToolBytes) and the SHA-256 of the full raw name.
func EscapeTool(raw string) (escaped, sha string) {
	return telemetry.Escape(raw, MaxToolBytes), hexSHA256([]byte(raw))
}

// Sanitize prepares r for storage: every free-text field that did not come
// through EscapeTool is made valid UTF-8 without NUL and capped, so a hostile
// principal, reason or id can neither break the insert (PostgreSQL text
// rejects NUL) nor bloat the table.
func (r *Record) Sanitize() {
	for _, f := range []*string{&r.CallID, &r.TurnID, &r.Principal, &r.Tenant, &r.ResolvedTool, &r.CatalogHash,
		&r.ArgumentsDigest, &r.DecisionID, &r.PolicyRevision, &r.Code, &r.Reason, &r.InstanceID,
		&r.Harness, &r.HarnessVersion, &r.MCPSupport, &r.Extension, &r.DeclaredModel, &r.ToolPolicyDigest,
		&r.TraceID, &r.AttemptID, &r.RequestedToolSHA256} {
		*f = sanitizeText(*f)
	}
	if len(r.RequestedTool) > MaxToolBytes || !utf8.ValidString(r.RequestedTool) || strings.IndexByte(r.RequestedTool, 0) >= 0 {
		r.RequestedTool = telemetry.Escape(r.RequestedTool, MaxToolBytes)
	}
}

// Sanitize is Record.Sanitize for a completion.
func (c *Completion) Sanitize() {
	for _, f := range []*string{&c.Code, &c.Reason, &c.ResolvedTool, &c.DecisionID, &c.PolicyRevision} {
		*f = sanitizeText(*f)
	}
}

func sanitizeText(s string) string {
	if len(s) <= MaxTextBytes && utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		return s
	}
	return telemetry.Escape(s, MaxTextBytes)
}

// DuplicateReason is the reason recorded (and answered) for a repeated call id.
const DuplicateReason = "call id already used in this turn; a tool call is never run twice"

// MarkDuplicate turns r into the completed row of a refused repeat.
func MarkDuplicate(r *Record, now time.Time) {
	r.Duplicate = true
	r.Status = sharedosv1.OperationStatus_OPERATION_STATUS_DENIED
	r.Code = outcome.DuplicateCall
	r.Reason = DuplicateReason
	r.FinishedAt = now
}

// InterruptedReason is the reason Reconcile records.
const InterruptedReason = "the kernel stopped before this call completed; its effect is unknown"

// IsTerminal reports whether s may be written by Complete.
func IsTerminal(s sharedosv1.OperationStatus) bool {
	switch s {
	case sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED, sharedosv1.OperationStatus_OPERATION_STATUS_DENIED,
		sharedosv1.OperationStatus_OPERATION_STATUS_FAILED, sharedosv1.OperationStatus_OPERATION_STATUS_CANCELLED:
		return true
	}
	return false
}

// ErrInvalid is wrapped by errors about a malformed Record or Completion.
var ErrInvalid = errors.New("records: invalid record")

// Check validates the fields every row must carry.
func (r *Record) Check() error {
	switch {
	case r.AttemptID == "":
		return errors.Join(ErrInvalid, errors.New("attempt_id: required"))
	case r.TurnID == "":
		return errors.Join(ErrInvalid, errors.New("turn_id: required"))
	case r.CallID == "":
		return errors.Join(ErrInvalid, errors.New("call_id: required"))
	case r.StartedAt.IsZero():
		return errors.Join(ErrInvalid, errors.New("started_at: required"))
	}
	return nil
}

// Check validates a completion.
func (c *Completion) Check() error {
	if !IsTerminal(c.Status) {
		return errors.Join(ErrInvalid, errors.New("status: must be succeeded, denied, failed or cancelled"))
	}
	if c.FinishedAt.IsZero() {
		return errors.Join(ErrInvalid, errors.New("finished_at: required"))
	}
	if c.ProgressCount < 0 {
		return errors.Join(ErrInvalid, errors.New("progress_count: must not be negative"))
	}
	return nil
}

// ToProto converts a record to its wire form.
func (r *Record) ToProto() *sharedosv1.OperationRecord {
	return toProto(r)
}
