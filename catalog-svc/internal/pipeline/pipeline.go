package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	grpccodes "google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/outcome"
	"github.com/sharedos/toolshare/services/contract/pinproof"
	"github.com/sharedos/toolshare/services/contract/redact"
	"github.com/sharedos/toolshare/services/contract/requirement"
	"github.com/sharedos/toolshare/services/platform/grpcx"
	"github.com/sharedos/toolshare/services/platform/telemetry"

	"github.com/sharedos/toolshare/catalog-svc/internal/catalog"
	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline/grants"
	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline/records"
	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline/records/journal"
)

var tracer = otel.Tracer(telemetry.ScopeCatalog)

// Defaults for Config.
const (
	DefaultAuthzTimeout   = 2 * time.Second
	DefaultHandlerTimeout = 30 * time.Second
	// DefaultMaxHandlerTimeout caps a registration's own timeout, so the
	// kernel's longest call (and hence Reconcile's cutoff) is bounded.
	DefaultMaxHandlerTimeout = catalog.MaxHandlerTimeout
	// completionAttemptTimeout bounds one completion write.
	completionAttemptTimeout = 2 * time.Second
	// maxCompletionWait bounds how long an answer waits for a store that
	// is down when no durable journal can back it instead.
	maxCompletionWait = 10 * time.Second
	// reconcileMargin is added to MaxCallDuration before a pending row is
	// presumed dead: record writes and scheduling take time too.
	reconcileMargin = 30 * time.Second
)

// ToolResolver finds a published tool by its raw requested name; an unknown
// name wraps catalog.ErrNotFound. *catalog.Service implements it.
type ToolResolver interface {
	Resolve(ctx context.Context, name string) (*catalog.Resolved, error)
}

// Config wires the kernel.
type Config struct {
	Resolver ToolResolver
	// Entries resolves prompts and resources (ADR 0018); nil: this kernel
	// refuses GetPrompt and ReadResource calls (failed/internal, recorded).
	Entries EntryResolver
	// Catalogue is what GrantTurn pins; nil: this kernel grants no turns.
	Catalogue CatalogueLister
	// Grants signs and verifies turn grants; nil: a key that lives only in
	// this process (grants die with it, and other replicas refuse them).
	Grants  *grants.Keys
	Records records.Store
	// Journal keeps completions the store cannot take yet (ADR 0007); nil
	// means a memory-only journal owned by the Pipeline.
	Journal *journal.Journal
	Authz   sharedosv1.AuthzServiceClient
	// Handlers hands out provider clients; nil means a ConnCache owned (and
	// closed) by the Pipeline.
	Handlers HandlerClients
	Logger   *slog.Logger
	// AuthzTimeout bounds one Authorize call (default 2 s).
	AuthzTimeout time.Duration
	// DefaultHandlerTimeout applies when a registration sets none (30 s).
	DefaultHandlerTimeout time.Duration
	// MaxHandlerTimeout caps registration timeouts (default
	// catalog.MaxHandlerTimeout, the longest a registration may declare).
	MaxHandlerTimeout time.Duration
	// InstanceID is stamped on every record this process writes. It must be
	// unique among live kernels; when it is also stable across restarts of
	// the same slot (the pod name), ReconcileAtStartup can close the rows a
	// crashed predecessor left pending at once. Default: a random id.
	InstanceID string
	// InputWait is how long an attempt waits for the client's input after
	// its tool asked for it (default DefaultInputWait).
	InputWait time.Duration
	// Instances holds the claims of the kernels that stopped on the same
	// record journal directory (journal.ClaimInstance): ReconcileAtStartup
	// marks their pending rows interrupted at once, then forgets them; a
	// pass that cannot mark them lets go of them until the next one. Nil:
	// only the age cutoff (and a stable InstanceID) close them.
	Instances *journal.Instance
	// TurnLocks orders a turn's calls that are not read-only across kernel
	// replicas (pgdb.Locks on the shared database); nil: within this
	// process only (the embedded store has one replica).
	TurnLocks TurnLocker
}

// TurnLocker takes a turn's lock across kernel replicas.
type TurnLocker interface {
	Lock(ctx context.Context, turn string) (unlock func(), err error)
}

// Pipeline is the enforcement pipeline behind RuntimeService (served by
// server.RuntimeServer, which maps its errors).
type Pipeline struct {
	resolver     ToolResolver
	entries      EntryResolver
	catalogue    CatalogueLister
	grants       *grants.Keys
	inflight     flights
	records      records.Store
	journal      *journal.Journal
	ownedJournal bool
	// betweenJournalReads runs between Reconcile's two reads of the
	// journal (tests: an adoption there).
	betweenJournalReads func()
	authz               sharedosv1.AuthzServiceClient
	handlers            HandlerClients
	// The calls of a turn that are not read-only are ordered in this
	// process (localTurns), then across replicas (replicaTurns, when set).
	localTurns   localTurnLocks
	replicaTurns TurnLocker
	// unary holds the handler targets that answered Invoke UNIMPLEMENTED,
	// with when (contract v1 providers): Handle only, for unaryRetry.
	unary          sync.Map
	ownedHandlers  *ConnCache
	logger         *slog.Logger
	authzTimeout   time.Duration
	handlerTimeout time.Duration
	maxHandler     time.Duration
	inputWait      time.Duration
	// completionWait bounds how long an answer waits for a store that is
	// down (maxCompletionWait; shorter in tests).
	completionWait time.Duration
	instanceID     string
	instances      *journal.Instance
	// previousReconciled: this instance's previous incarnation's pending
	// rows are marked (reconcileStopped).
	previousReconciled atomic.Bool
	started            time.Time
	// storeFailedAt is the UnixNano of the last failed record write.
	storeFailedAt atomic.Int64

	calls    metric.Int64Counter
	duration metric.Float64Histogram
}

// New validates cfg and returns the kernel.
func New(cfg Config) (*Pipeline, error) {
	var errs []error
	if cfg.Resolver == nil {
		errs = append(errs, errors.New("runtime: Config.Resolver is required"))
	}
	if cfg.Records == nil {
		errs = append(errs, errors.New("runtime: Config.Records is required"))
	}
	if cfg.Authz == nil {
		errs = append(errs, errors.New("runtime: Config.Authz is required"))
	}
	if cfg.AuthzTimeout < 0 || cfg.DefaultHandlerTimeout < 0 || cfg.MaxHandlerTimeout < 0 || cfg.InputWait < 0 {
		errs = append(errs, errors.New("runtime: timeouts must not be negative"))
	}
	err := errors.Join(errs...)
	if err != nil {
		return nil, err
	}
	s := &Pipeline{
		resolver:       cfg.Resolver,
		entries:        cfg.Entries,
		catalogue:      cfg.Catalogue,
		grants:         cfg.Grants,
		records:        cfg.Records,
		journal:        cfg.Journal,
		authz:          cfg.Authz,
		handlers:       cfg.Handlers,
		logger:         cfg.Logger,
		authzTimeout:   orDefault(cfg.AuthzTimeout, DefaultAuthzTimeout),
		handlerTimeout: orDefault(cfg.DefaultHandlerTimeout, DefaultHandlerTimeout),
		maxHandler:     orDefault(cfg.MaxHandlerTimeout, DefaultMaxHandlerTimeout),
		inputWait:      orDefault(cfg.InputWait, DefaultInputWait),
		completionWait: maxCompletionWait,
		instanceID:     cfg.InstanceID,
		instances:      cfg.Instances,
		replicaTurns:   cfg.TurnLocks,
		started:        time.Now(),
	}
	if s.handlerTimeout > s.maxHandler {
		s.maxHandler = s.handlerTimeout
	}
	if s.handlers == nil {
		s.ownedHandlers = NewConnCache()
		s.handlers = s.ownedHandlers
	}
	if s.logger == nil {
		s.logger = slog.Default()
	}
	if s.journal == nil {
		s.journal, _ = journal.Open("", s.logger) // memory-only never fails
		s.ownedJournal = true
	}
	if s.grants == nil {
		if s.grants, err = grants.Generate(); err != nil {
			return nil, err
		}
	}
	if s.instanceID == "" {
		s.instanceID = records.NewAttemptID()[:16]
	}
	meter := otel.Meter(telemetry.ScopeCatalog)
	if s.calls, err = meter.Int64Counter(telemetry.MetricToolCallCount,
		metric.WithDescription("Tool calls by outcome status and code.")); err != nil {
		return nil, fmt.Errorf("runtime: metric: %w", err)
	}
	if s.duration, err = meter.Float64Histogram(telemetry.MetricToolCallDuration, metric.WithUnit("s"),
		metric.WithDescription("Kernel time per tool call.")); err != nil {
		return nil, fmt.Errorf("runtime: metric: %w", err)
	}
	return s, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// Close releases the handler connections and the journal the Pipeline
// opened itself.
func (s *Pipeline) Close() error {
	var errs []error
	if s.ownedHandlers != nil {
		errs = append(errs, s.ownedHandlers.Close())
	}
	if s.ownedJournal {
		errs = append(errs, s.journal.Close())
	}
	return errors.Join(errs...)
}

// RunJournal writes journaled completions to the store as soon as it takes
// them, until ctx is done (ADR 0007).
func (s *Pipeline) RunJournal(ctx context.Context) {
	s.journal.Run(ctx, s.records, time.Second, func(err error) {
		s.storeFailed()
		s.logger.WarnContext(ctx, "journaled completions not written yet", slog.Int("left", s.journal.Len()),
			slog.Any("error", err))
	})
}

// DrainJournal tries to write every journaled completion once, for a clean
// shutdown after the last call has ended.
func (s *Pipeline) DrainJournal(ctx context.Context) {
	if s.journal.Len() == 0 {
		return
	}
	if _, err := s.journal.Flush(ctx, s.records); err != nil {
		s.logger.ErrorContext(ctx, "journaled completions left at shutdown", slog.Int("left", s.journal.Len()),
			slog.Any("error", err))
	}
}

// Journaled is the number of completions waiting for the store.
func (s *Pipeline) Journaled() int { return s.journal.Len() }

func (s *Pipeline) storeFailed() { s.storeFailedAt.Store(time.Now().UnixNano()) }

// MaxCallDuration is the longest one InvokeTool can take: writing its
// pending row, reading its turn's revocation, authorization and the longest
// handler timeout — each bounded on its own, whatever the caller's
// deadline, so Reconcile never takes a live call for a dead one (review:
// with only the last two counted, a call whose row a slow store took long
// to write could be marked interrupted while its handler ran, then be
// answered succeeded).
func (s *Pipeline) MaxCallDuration() time.Duration {
	return beginTimeout + revocationReadTimeout + s.authzTimeout + s.maxHandler
}

// Reconcile marks interrupted every pending record older than the longest
// possible call (plus a margin): its process died mid-call. Call it at
// startup and periodically; first, the rows of kernels that stopped on
// this journal directory (reconcileStopped). It does nothing while
// completions wait in the journal (this process's or another's on the same
// directory), or until the store has taken writes for reconcileMargin
// since it last failed: a kernel whose completions wait for the store
// (here or in a sibling) writes them within seconds of the store's return,
// and a row whose outcome was known must not be called interrupted (ADR
// 0007).
func (s *Pipeline) Reconcile(ctx context.Context) (int64, error) {
	// The stopped kernels' claims are held only while their rows are
	// marked: a pass that ends early lets go of the rest (releaseStopped).
	defer s.releaseStopped()
	// Other processes' files are read first: the journal's flusher adopts
	// a stopped sibling's file at any moment, moving its completions from
	// there to this process's, never back. Read the other way round, an
	// adoption between the two reads would hide them from both.
	held, heldErr := s.journal.HeldElsewhere()
	if s.betweenJournalReads != nil {
		s.betweenJournalReads()
	}
	if n := s.journal.Len(); n > 0 {
		s.logger.InfoContext(ctx, "reconcile postponed: completions wait in the journal", slog.Int("journaled", n))
		return 0, nil
	}
	if at := s.storeFailedAt.Load(); at != 0 && time.Since(time.Unix(0, at)) < reconcileMargin {
		return 0, nil
	}
	// Nor while another process on this journal directory holds any: it
	// may hold the outcome of any row here, its own or a stopped kernel's
	// it adopted, however old that row is.
	if heldErr != nil || held > 0 {
		if err := heldErr; err != nil {
			// Its lines may be outcomes: nothing is called interrupted
			// before someone has looked.
			s.logger.ErrorContext(ctx, "reconcile postponed: a record journal file cannot be read; repair or remove it",
				slog.Any("error", err))
		} else {
			s.logger.InfoContext(ctx, "reconcile postponed: another process holds journaled completions", slog.Int("journaled", held))
		}
		return 0, nil
	}
	stopped, err := s.reconcileStopped(ctx)
	if err != nil {
		return stopped, err
	}
	n, err := s.records.Reconcile(ctx, time.Now().Add(-(s.MaxCallDuration() + reconcileMargin)))
	if err != nil {
		return stopped, fmt.Errorf("runtime: reconcile: %w", err)
	}
	if n > 0 {
		s.logger.WarnContext(ctx, "operation records marked interrupted", slog.Int64("count", n))
	}
	return stopped + n, nil
}

// ReconcileAtStartup writes the completions journaled by stopped processes
// (this instance's previous incarnation among them) and then runs
// Reconcile, which marks interrupted what this instance's previous
// incarnation (only meaningful when Config.InstanceID is stable across
// restarts, e.g. the pod name) and the kernels stopped on this journal
// directory left pending. Call it once before serving. While any journaled
// completion is left, here or in a live sibling, nothing is marked
// interrupted; a later Reconcile does it.
func (s *Pipeline) ReconcileAtStartup(ctx context.Context) (int64, error) {
	// journal.ClaimInstance took the stopped kernels' claims: a startup
	// that postpones lets go of them too.
	defer s.releaseStopped()
	if w, err := s.journal.Flush(ctx, s.records); err != nil || s.journal.Len() > 0 {
		s.storeFailed()
		s.logger.WarnContext(ctx, "journaled completions left; reconcile postponed", slog.Int("written", w),
			slog.Int("left", s.journal.Len()), slog.Any("error", err))
		return 0, nil
	} else if w > 0 {
		s.logger.InfoContext(ctx, "journaled completions of a stopped process written", slog.Int("count", w))
	}
	return s.Reconcile(ctx)
}

// releaseStopped lets go of the claims of stopped kernels this one took
// and has not forgotten (their rows are not marked yet), keeping their
// files. Reconcile and ReconcileAtStartup end with it, whatever ended
// them: the journal held completions (here or in a sibling), the store
// failed lately, or a write failed. Held on, a claim kept a kernel
// restarting under its id (a pod's stable --instance-id) from starting
// for as long as the store was down; let go, that kernel takes its own
// back (and marks its previous rows itself), and the next pass takes
// again the claims of those still stopped (reconcileStopped). A claim is
// held while its rows are marked, so no two kernels mark them at once.
func (s *Pipeline) releaseStopped() {
	if s.instances != nil {
		s.instances.Release()
	}
}

// reconcileStopped marks interrupted the pending rows of this instance's
// previous incarnation (once) and of the kernels that stopped on this
// journal directory: their claim's lock was free, so none of their calls
// can still be in flight. Their outcomes, though, may wait in a journal
// file a live sibling adopted (or in its own): Reconcile calls it only
// while no other process holds a journaled completion (ADR 0007: what is
// journaled is written before anything is marked interrupted).
func (s *Pipeline) reconcileStopped(ctx context.Context) (int64, error) {
	var dead []string
	if s.instances != nil {
		// Claims an earlier pass let go of (releaseStopped), or left by
		// kernels stopped since.
		if err := s.instances.TakeStopped(); err != nil {
			s.logger.WarnContext(ctx, "claims of stopped kernels not taken", slog.Any("error", err))
		}
		dead = s.instances.Dead()
	}
	if s.previousReconciled.Load() && len(dead) == 0 {
		return 0, nil
	}
	var n int64
	if !s.previousReconciled.Load() {
		d, err := s.records.ReconcileInstance(ctx, s.instanceID, s.started)
		if err != nil {
			return 0, fmt.Errorf("runtime: reconcile instance %s: %w", s.instanceID, err)
		}
		if d > 0 {
			s.logger.WarnContext(ctx, "operation records of the previous run marked interrupted",
				slog.String("instance_id", s.instanceID), slog.Int64("count", d))
		}
		n += d
		s.previousReconciled.Store(true)
	}
	for _, id := range dead {
		d, err := s.records.ReconcileInstance(ctx, id, s.started)
		if err != nil {
			return n, fmt.Errorf("runtime: reconcile instance %s: %w", id, err)
		}
		if d > 0 {
			s.logger.WarnContext(ctx, "operation records of a stopped kernel marked interrupted",
				slog.String("instance_id", id), slog.Int64("count", d))
		}
		n += d
		if err := s.instances.Forget(id); err != nil {
			s.logger.WarnContext(ctx, "stopped kernel's claim not removed", slog.String("instance_id", id), slog.Any("error", err))
		}
	}
	return n, nil
}

// RunReconciler calls Reconcile (and ends waits for input that ran out,
// forgets expired revocations) now and then every interval until ctx is
// done.
func (s *Pipeline) RunReconciler(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := s.Reconcile(ctx); err != nil && ctx.Err() == nil {
			s.logger.ErrorContext(ctx, "reconcile operation records", slog.Any("error", err))
		}
		if _, err := s.ExpireWaiting(ctx); err != nil && ctx.Err() == nil {
			s.logger.ErrorContext(ctx, "expire waits for input", slog.Any("error", err))
		}
		if _, err := s.records.ForgetRevocations(ctx, time.Now()); err != nil && ctx.Err() == nil {
			s.logger.ErrorContext(ctx, "forget expired turn revocations", slog.Any("error", err))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// beginTimeout bounds writing an attempt's pending row (sooner when its
// caller's deadline is); revocationReadTimeout bounds reading whether its
// turn was revoked. MaxCallDuration counts both.
const (
	beginTimeout          = 30 * time.Second
	revocationReadTimeout = 30 * time.Second
)

// beginContext is ctx for writing an attempt's pending row: its caller's
// leaving does not end it, its caller's deadline does, and beginTimeout
// at the latest (a row in doubt at the deadline is journaled as refused:
// the answer, a timeout, says the call did not run).
func beginContext(ctx context.Context) (context.Context, context.CancelFunc) {
	deadline := time.Now().Add(beginTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	return context.WithDeadline(context.WithoutCancel(ctx), deadline)
}

// abandonedReason is the record's reason for a call its bridge gave up on
// (ToolCall.abandoned): its client left while it was on its way, and it
// was not run (had it arrived, it arrived after this was recorded).
const abandonedReason = "the client left while the call was on its way to SharedOS: not run"

// roundAbandonedReason is the record's reason for an attempt whose client
// cancelled it or left while asked for the tool's input (a 2025-era
// session's round): the rounds before ran.
const roundAbandonedReason = "the client cancelled the call or left while asked for the tool's input"

// abandonedOutcome is the outcome recorded for a call its bridge gave up
// on: what the bridge answered its client (ToolCall.abandoned_code), else
// cancelled (the client left).
func abandonedOutcome(call *sharedosv1.ToolCall) *sharedosv1.ToolResult {
	switch code := call.GetAbandonedCode(); {
	case code == outcome.Internal && call.GetResume() != nil:
		return outcome.Failed(outcome.Internal, "the bridge ended the tool's input request before its client answered (it could not pass it on, or it was shutting down)")
	case code == outcome.Timeout:
		return outcome.Failed(outcome.Timeout, "the call did not reach SharedOS within the bridge's call timeout: not run")
	case code == outcome.Internal:
		return outcome.Failed(outcome.Internal, "the bridge could not reach SharedOS: not run")
	case call.GetResume() != nil:
		// Its earlier rounds ran: only what the client was asked for is
		// given up.
		return outcome.CancelledResult(roundAbandonedReason)
	}
	return outcome.CancelledResult(abandonedReason)
}

// MaxIDBytes bounds call and turn ids.
const MaxIDBytes = 256

// maxAnswerReasonBytes cuts the reason a model reads (a schema error can
// quote a long argument value); the record redacts the whole text first.
const maxAnswerReasonBytes = 600

// InvokeTool runs one attempt through the pipeline. A ToolResult answers
// every attempt that could be taken; an error (*FieldError, *Error or a
// context error) means it could not be taken at all.
func (s *Pipeline) InvokeTool(ctx context.Context, call *sharedosv1.ToolCall) (answer *sharedosv1.ToolResult, err error) {
	if err := checkIDs(call); err != nil {
		return nil, err
	}
	start := time.Now()
	escaped, toolSHA := records.EscapeTool(call.GetTool())
	// The turn's context and pin come from its grant alone. A refused
	// grant is still recorded (under the turn the call named), and nothing
	// else runs.
	grant, grantErr := s.grants.Verify(call.GetGrant(), call.GetTurnId(), start)
	if grant == nil {
		grant = &grants.Grant{}
	}
	ctx, span := tracer.Start(ctx, telemetry.SpanInvokeTool, trace.WithAttributes(
		attribute.String(telemetry.AttrTurnID, call.GetTurnId()),
		attribute.String(telemetry.AttrCallID, call.GetCallId()),
		attribute.String(telemetry.AttrToolRequested, escaped),
		attribute.String(telemetry.AttrCatalogHash, grant.CatalogHash),
		attribute.String(telemetry.AttrHarnessName, telemetry.Escape(call.GetHarness(), 128)),
	))
	defer span.End()

	args := call.GetArgumentsJson()
	if len(bytes.TrimSpace(args)) == 0 {
		// MCP lets a client omit arguments for a tool that takes none; the
		// kernel authorizes and dispatches "{}" so policy and handler still
		// see the same bytes.
		args = []byte("{}")
	}

	// (1) The record first: nothing below may run unless it is durable.
	rec := &records.Record{
		Kind:                call.GetKind(),
		AttemptID:           records.NewAttemptID(),
		CallID:              call.GetCallId(),
		TurnID:              call.GetTurnId(),
		Principal:           grant.Context.GetPrincipal(),
		Tenant:              grant.Context.GetTenant(),
		RequestedTool:       escaped,
		RequestedToolSHA256: toolSHA,
		CatalogHash:         grant.CatalogHash,
		ArgumentsDigest:     redact.ArgumentsDigest(args),
		InstanceID:          s.instanceID,
		Harness:             grant.Identity.Harness,
		HarnessVersion:      grant.Identity.HarnessVersion,
		MCPSupport:          grant.Identity.MCPSupport,
		Extension:           grant.Identity.Extension,
		DeclaredModel:       grant.Identity.DeclaredModel,
		ToolPolicyDigest:    grant.Identity.ToolPolicyDigest,
		StartedAt:           start.UTC(),
	}
	if rec.Harness == "" {
		// A grant issued before grants carried the run's identity (or a
		// refused one): the harness name the bridge keeps on the lease.
		rec.Harness = call.GetHarness()
	}
	if sc := span.SpanContext(); sc.HasTraceID() {
		rec.TraceID = sc.TraceID().String()
	}
	closedRound, resumeInDoubt := false, false
	// The row is written whether or not the caller is still there: an
	// attempt that reached the kernel is recorded (invariant 4), completed
	// cancelled below when its caller left.
	bctx, cancelBegin := beginContext(ctx)
	defer cancelBegin()
	switch {
	case call.GetResume() != nil && (grantErr == nil || errors.Is(grantErr, grants.ErrExpired)):
		// A resumed call is the attempt it resumes: its record, not a new
		// one. Only under the turn's own grant (expired, it ends the
		// attempt as refused): one that is no grant of this turn ends no
		// attempt of it — it is refused below on a record of its own
		// (review: a forged grant ended a waiting attempt).
		var ended func()
		ended, err = s.resume(bctx, call, rec)
		defer ended() // once the run ends: completed, parked or refused
		if errors.Is(err, records.ErrNotWaiting) {
			if res, resolved := s.endedRound(bctx, call, rec); res != nil {
				// A notice of a round that ended before it came (its wait
				// ran out, its turn was closed): the attempt's own record
				// answers it, and no second record says otherwise.
				return s.finish(ctx, span, start, res, resolved), nil
			}
			closedRound = true
			err = s.records.Begin(bctx, rec) // refused below, on a record of its own
		} else if err != nil {
			// The resumption may have taken effect: the refusal is journaled
			// for the attempt, as for an insert in doubt.
			rec.AttemptID, resumeInDoubt = call.GetResume().GetAttemptId(), true
			err = fmt.Errorf("%w: %w", records.ErrInDoubt, err)
		}
	case call.GetAbandoned():
		// The bridge gave up on the call while sending it: recorded here
		// unless it arrived after all, whose record is its own.
		err = s.records.BeginNew(bctx, rec)
	default:
		err = s.records.Begin(bctx, rec)
	}
	if errors.Is(err, records.ErrRecorded) {
		// One attempt, one record: the bridge's notice of a call that had
		// arrived (BeginNew), or a call arriving after its notice was
		// recorded (Begin). Nobody waits for the answer.
		res := abandonedOutcome(call)
		res.CallId = call.GetCallId()
		return res, nil
	}
	if err != nil {
		if !errors.Is(err, records.ErrDuplicateCall) {
			s.storeFailed()
		}
		if errors.Is(err, records.ErrDuplicateCall) {
			res := outcome.Denied(outcome.DuplicateCall, records.DuplicateReason)
			res.CallId = call.GetCallId()
			return s.finish(ctx, span, start, res, ""), nil
		}
		s.logger.ErrorContext(ctx, "operation record not written; call refused",
			slog.String(telemetry.LogTurnID, rec.TurnID), slog.String(telemetry.LogCallID, rec.CallID), slog.Any("error", err))
		if errors.Is(err, records.ErrInDoubt) {
			// The pending row may still appear (a hung store that resumes
			// runs the insert it had read): it is completed as what it
			// was, a refusal, once the store answers (issue 17 item 13).
			// Of this turn only: a resumption's attempt id is the bridge's
			// word; and only if the resumption took effect (else the
			// attempt still waits, and a retry may resume it).
			c := records.Completion{Status: sharedosv1.OperationStatus_OPERATION_STATUS_FAILED, Code: outcome.RecordUnavailable,
				Reason: "the operation record could not be written in time; the call was not run", FinishedAt: time.Now().UTC(),
				TurnID: rec.TurnID}
			if resumeInDoubt {
				c.ResumedBy = s.instanceID
			}
			if jerr := s.journal.Keep(rec.AttemptID, c); jerr != nil {
				s.logger.ErrorContext(ctx, "refusal of a record in doubt not journaled", slog.String(telemetry.LogAttemptID, rec.AttemptID),
					slog.Any("error", jerr))
			}
		}
		span.SetStatus(codes.Error, "operation record not written")
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, ErrRecordUnavailable
	}

	// From here on the attempt has its record: a panic below ends it too
	// (recovered), never leaving it pending.
	stage := stagePreparing
	var answered *sharedosv1.ToolResult // once the record says it
	defer func() {
		if p := recover(); p != nil {
			answer, err = s.recovered(ctx, span, start, rec, args, stage, call.GetResume() != nil, answered, p), nil
		}
	}()

	var res *sharedosv1.ToolResult
	var resolved, recordReason string
	var refused *grants.Refusal
	// A notice of a call the bridge answered itself (it gave up on the
	// call, or refused it at the MCP edge) is recorded as that answer also
	// when the turn's grant has expired since: the bridge answers first
	// and sends the notice after, and denied/invalid_grant would say other
	// than what its client was told (invariant 4). Only expiry, which
	// Verify says only of a grant this kernel signed for this turn; any
	// other refusal is recorded as one.
	notice := call.GetAbandoned() || call.GetEdgeRejection() != ""
	switch {
	case errors.As(grantErr, &refused) && !(notice && errors.Is(grantErr, grants.ErrExpired)):
		s.logger.WarnContext(ctx, "call refused: invalid turn grant", slog.String(telemetry.LogTurnID, rec.TurnID),
			slog.String(telemetry.LogCallID, rec.CallID), slog.String("reason", refused.Reason))
		res = outcome.Denied(outcome.InvalidGrant, refused.Reason)
	case notice:
		// Given up on by the bridge, or refused at the MCP edge as a
		// protocol error: recorded, never run. A round the client would
		// not answer ends the attempt: a provider holding its call for the
		// next round lets it go now.
		if call.GetAbandoned() {
			res = abandonedOutcome(call)
		} else {
			res = outcome.Failed(outcome.InvalidRequest, truncate(call.GetEdgeRejection(), 512))
		}
		if rc, ok := s.handlers.(RoundCanceller); ok && call.GetResume() != nil {
			rc.CancelRound(call.GetTurnId(), call.GetResume().GetRequestState())
		}
	case closedRound:
		res = outcome.Failed(outcome.InvalidRequest, roundClosedReason)
	case checkInputResponses(call.GetInputResponsesJson()) != "":
		res = outcome.Failed(outcome.InvalidRequest, checkInputResponses(call.GetInputResponsesJson()))
	default:
		if call.GetResume() != nil && rec.CallID != call.GetCallId() {
			// A resumed attempt keeps its first call id: what the policy
			// and the provider see of each round, and what its record says.
			call = proto.Clone(call).(*sharedosv1.ToolCall)
			call.CallId = rec.CallID
		}
		res, resolved, recordReason = s.runInFlight(ctx, call, grant, args, &stage)
	}
	res.CallId = rec.CallID

	// (7) Complete the record; the answer leaves only once it is backed.
	// The record redacts the whole reason; the model's copy is cut after.
	// A tool that needs the client's input first leaves it waiting instead.
	stage = stageCompleting
	if res.GetStatus() == sharedosv1.OperationStatus_OPERATION_STATUS_INPUT_REQUIRED {
		res = s.park(ctx, rec.AttemptID, call, res, resolved, args)
	} else {
		res = s.complete(ctx, rec.AttemptID, res, resolved, recordReason, args)
	}
	res.Reason = truncate(res.GetReason(), maxAnswerReasonBytes)
	stage, answered = stageCompleted, res
	return s.finish(ctx, span, start, res, resolved), nil
}

// runInFlight is run among the turn's calls in flight, where a revocation
// of the turn cancels it; it leaves them however run ends, a panic
// included (else RevokeTurn and CloseTurn would wait for it in vain).
func (s *Pipeline) runInFlight(ctx context.Context, call *sharedosv1.ToolCall, grant *grants.Grant, args []byte, stage *attemptStage) (*sharedosv1.ToolResult, string, string) {
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer s.inflight.add(call.GetTurnId(), cancel)()
	return s.run(cctx, call, grant, args, stage)
}

// attemptStage is how far an attempt whose record was written has gone,
// for recovered.
type attemptStage int

const (
	stagePreparing  attemptStage = iota // steps 2–5: nothing dispatched yet
	stageRunning                        // step 6: the provider may have been called; no completion written
	stageCompleting                     // complete or park under way
	stageCompleted                      // the record says the answer
)

// panicReason is what the record and the answer of an attempt ended by a
// panic in the kernel say once the tool may have run: the panic came after
// its dispatch began, or the attempt resumes one whose earlier rounds ran.
// panicNotRunReason is theirs when the panic came before anything was
// dispatched (resolving the tool, validating the arguments — the schema
// validator's own panics included — the requirement, authorization).
const (
	panicReason       = "the SharedOS kernel failed while handling the call; the tool may have run"
	panicNotRunReason = "the SharedOS kernel failed while handling the call; the call was not run"
)

// recovered ends an attempt whose handling panicked after its record was
// written: grpcx's interceptor would answer Internal and the process lives
// on, but nothing would complete the record before the age-based
// reconcile (about 15 minutes), and until then its turn's RevokeTurn and
// CloseTurn would wait for it and fail Unavailable. A panic before the
// completion is under way ends the attempt failed/internal through the
// normal completion path (complete: one completion, durable before the
// answer) — saying the call was not run when it came before the dispatch
// of an attempt that had run nothing (not resumed), else that the tool may
// have run — and that is the answer, a ToolResult like every other: the
// answer is exactly what the record says (record_unavailable too, when
// the store is down), where an Internal error would have its bridge answer
// a failed/internal the record may not say. A panic once the record says
// the answer leaves that answer standing. A panic while the completion is
// written (the store's or the journal's code) is raised again: which of
// two completions the record took could not be told, so none is sent; the
// row is left to the reconciler as before.
func (s *Pipeline) recovered(ctx context.Context, span trace.Span, start time.Time, rec *records.Record, args []byte, stage attemptStage, resumed bool, answered *sharedosv1.ToolResult, p any) *sharedosv1.ToolResult {
	s.logger.ErrorContext(ctx, "panic while handling a call", slog.String(telemetry.LogAttemptID, rec.AttemptID),
		slog.String(telemetry.LogCallID, rec.CallID), slog.Int("stage", int(stage)),
		slog.String("panic", redact.Arguments(fmt.Sprint(p), args)), slog.String("stack", string(debug.Stack())))
	switch stage {
	case stageCompleted:
		return answered
	case stageCompleting:
		panic(p)
	}
	reason := panicReason
	if stage == stagePreparing && !resumed {
		reason = panicNotRunReason
	}
	res := outcome.Failed(outcome.Internal, reason)
	res.CallId = rec.CallID
	res = s.complete(ctx, rec.AttemptID, res, "", "", args)
	res.Reason = truncate(res.GetReason(), maxAnswerReasonBytes)
	return s.finish(ctx, span, start, res, "")
}

// completion is what the record of res says: recordReason when the step
// that refused wrote one for the record (a schema violation, without the
// value), else the model's reason — either with argument values replaced
// by digests (invariant 11); the model's reason, a policy's or a
// handler's text, with pieces of values too (redact.Values.Redact), the
// kernel's own without (it keeps the schema's words a value may hold).
func completion(res *sharedosv1.ToolResult, resolved, recordReason string, args []byte) records.Completion {
	var reason string
	if recordReason != "" {
		reason = redact.KeysAndValuesOf(args).RedactValues(recordReason)
	} else {
		reason = redact.Arguments(res.GetReason(), args) // "" reads no argument
	}
	return records.Completion{
		Status: res.GetStatus(), Code: res.GetCode(), Reason: reason, ResolvedTool: resolved,
		DecisionID: res.GetDecisionId(), PolicyRevision: res.GetPolicyRevision(), FinishedAt: time.Now().UTC(),
	}
}

// complete makes the record say what the answer says before the answer
// leaves (ADR 0007) and returns the answer. In order:
//   - the store commits the completion: answer res;
//   - the store fails and the durable journal has the completion on disk:
//     answer res (the journal writes it once the store is back, by this
//     process or, if it dies, by the next one on the same directory);
//   - neither: retry the store until shortly before the caller's deadline
//     (at most maxCompletionWait); once it commits, answer res;
//   - the store stays down: answer failed/record_unavailable, which says
//     what is true — the call's outcome and that its effect may have
//     happened — and queue exactly that completion for when it is back.
//
// Completions are written on a context the client cannot cancel: a call
// the client abandoned is recorded all the same.
func (s *Pipeline) complete(ctx context.Context, attemptID string, res *sharedosv1.ToolResult, resolved, recordReason string, args []byte) *sharedosv1.ToolResult {
	c := completion(res, resolved, recordReason, args)
	c.ProgressCount = progressCount(ctx)
	err := s.tryComplete(ctx, attemptID, c)
	if err == nil {
		return res
	}
	if s.journal.Durable() {
		jerr := s.journal.Add(attemptID, c)
		if jerr == nil {
			s.logger.WarnContext(ctx, "operation record completion journaled until the store is back",
				slog.String(telemetry.LogAttemptID, attemptID), slog.String("status", outcome.StatusName(c.Status)),
				slog.Any("error", err))
			return res
		}
		s.logger.ErrorContext(ctx, "operation record completion could not be journaled",
			slog.String(telemetry.LogAttemptID, attemptID), slog.Any("error", jerr))
	}
	deadline := time.Now().Add(s.completionWait)
	if d, ok := ctx.Deadline(); ok {
		d = d.Add(-min(time.Second, time.Until(d)/10)) // leave time for the answer
		if d.Before(deadline) {
			deadline = d
		}
	}
	if ctx.Err() != nil {
		deadline = time.Now() // nobody waits for this answer: queue it now
	}
	for backoff := 50 * time.Millisecond; err != nil && ctx.Err() == nil && time.Until(deadline) > backoff; backoff = min(2*backoff, time.Second) {
		select {
		case <-ctx.Done(): // the client left: queue the true outcome below
			continue
		case <-time.After(backoff):
		}
		err = s.tryComplete(ctx, attemptID, c)
	}
	if err == nil {
		return res
	}
	if ctx.Err() == nil {
		out := outcome.Failed(outcome.RecordUnavailable, fmt.Sprintf(
			"the call ended %s, but its operation record could not be written in time; the effect may have happened",
			describe(res)))
		out.CallId, out.DecisionId, out.PolicyRevision = res.GetCallId(), res.GetDecisionId(), res.GetPolicyRevision()
		res, c = out, completion(out, resolved, "", args)
		c.ProgressCount = progressCount(ctx)
	}
	if jerr := s.journal.Keep(attemptID, c); jerr != nil {
		s.logger.ErrorContext(ctx, "operation record completion lost", slog.String(telemetry.LogAttemptID, attemptID),
			slog.Any("error", jerr))
	}
	s.logger.ErrorContext(ctx, "operation record not completed before the answer; queued until the store is back",
		slog.String(telemetry.LogAttemptID, attemptID), slog.String("status", outcome.StatusName(c.Status)),
		slog.String("code", c.Code), slog.Any("error", err))
	return res
}

// tryComplete is one completion write. nil also when the store refuses it
// for good (the row is not pending, unknown, or the completion is invalid):
// retrying cannot help, and it is logged.
func (s *Pipeline) tryComplete(ctx context.Context, attemptID string, c records.Completion) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), completionAttemptTimeout)
	defer cancel()
	err := s.records.Complete(cctx, attemptID, c)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, records.ErrCompleted), errors.Is(err, records.ErrNotFound), errors.Is(err, records.ErrInvalid):
		s.logger.ErrorContext(ctx, "operation record refused its completion", slog.String(telemetry.LogAttemptID, attemptID),
			slog.String("status", outcome.StatusName(c.Status)), slog.Any("error", err))
		return nil
	default:
		s.storeFailed()
		return err
	}
}

// describe names an outcome for a record_unavailable reason.
func describe(res *sharedosv1.ToolResult) string {
	st := outcome.StatusName(res.GetStatus())
	if code := res.GetCode(); code != "" {
		return st + "/" + code
	}
	return st
}

func (s *Pipeline) finish(ctx context.Context, span trace.Span, start time.Time, res *sharedosv1.ToolResult, resolved string) *sharedosv1.ToolResult {
	st := outcome.StatusName(res.GetStatus())
	attrs := []attribute.KeyValue{
		attribute.String(telemetry.AttrOutcomeStatus, st),
		attribute.String(telemetry.AttrOutcomeCode, res.GetCode()),
	}
	span.SetAttributes(append(attrs,
		attribute.String(telemetry.AttrToolResolved, resolved),
		attribute.String(telemetry.AttrDecisionID, res.GetDecisionId()),
		attribute.String(telemetry.AttrPolicyRevision, res.GetPolicyRevision()),
	)...)
	if res.GetStatus() == sharedosv1.OperationStatus_OPERATION_STATUS_FAILED {
		span.SetStatus(codes.Error, res.GetCode())
	}
	s.calls.Add(ctx, 1, metric.WithAttributes(attrs...))
	s.duration.Record(ctx, time.Since(start).Seconds(), metric.WithAttributes(attrs...))
	return res
}

// run is steps 2–6. It returns the result and the resolved tool name ("" if
// resolution failed).
//
// Whether the turn was revoked is read from the store once the pending row
// is durable, alongside steps 2–5, and decides before anything is
// dispatched: a revocation that committed before this call's row is always
// seen here, and one that commits later waits for this call to end (and
// cancels it). *stage becomes stageRunning as the dispatch begins.
func (s *Pipeline) run(ctx context.Context, call *sharedosv1.ToolCall, grant *grants.Grant, args []byte, stage *attemptStage) (_ *sharedosv1.ToolResult, resolved, recordReason string) {
	revoked := make(chan *sharedosv1.ToolResult, 1)
	go func() { revoked <- s.checkRevoked(ctx, call.GetTurnId()) }()
	res, name, dispatch, recordReason := s.prepare(ctx, call, grant, args)
	if r := <-revoked; r != nil {
		return r, name, ""
	}
	if res != nil {
		return res, name, recordReason
	}
	*stage = stageRunning
	return dispatch(), name, ""
}

// checkRevoked is nil while the turn may run calls.
func (s *Pipeline) checkRevoked(ctx context.Context, turn string) *sharedosv1.ToolResult {
	rctx, cancel := context.WithTimeout(ctx, revocationReadTimeout)
	defer cancel()
	revoked, err := s.records.TurnRevoked(rctx, turn)
	switch {
	case err != nil:
		if res := contextOutcome(ctx); res != nil {
			return res
		}
		s.logger.ErrorContext(ctx, "turn revocation unreadable; call refused", slog.String(telemetry.LogTurnID, turn),
			slog.Any("error", err))
		return outcome.Failed(outcome.Internal, "whether the turn is still open could not be read; the call was not run")
	case revoked:
		return outcome.Denied(outcome.InvalidGrant, "the turn was closed")
	}
	return nil
}

// prepare is steps 2–5: a refusal, or the dispatch to run on allow.
func (s *Pipeline) prepare(ctx context.Context, call *sharedosv1.ToolCall, grant *grants.Grant, args []byte) (*sharedosv1.ToolResult, string, func() *sharedosv1.ToolResult, string) {
	if res := contextOutcome(ctx); res != nil {
		return res, "", nil, ""
	}
	if call.GetKind() != sharedosv1.CallKind_CALL_KIND_UNSPECIFIED {
		res, name, dispatch := s.prepareEntry(ctx, call, grant, args)
		return res, name, dispatch, ""
	}
	// (2) Resolve within the pin.
	res, resolved := s.resolve(ctx, call, grant)
	if res != nil {
		return res, "", nil, ""
	}
	reg := resolved.Registration
	name := reg.GetName()

	// (3) Validate the arguments (their one parse in the kernel).
	decoded, res, recordReason := s.validate(ctx, resolved, args)
	if res != nil {
		return res, name, nil, recordReason
	}

	// (4) Resolve the requirement.
	action, resource, err := requirement.ResolveValues(reg.GetRequirement(), decoded)
	if err != nil {
		if errors.Is(err, requirement.ErrArguments) {
			return outcome.Failed(outcome.InvalidArguments, "invalid arguments: "+err.Error()), name, nil, ""
		}
		s.logger.ErrorContext(ctx, "tool has an unusable requirement", slog.String(telemetry.LogTool, name), slog.Any("error", err))
		return outcome.Failed(outcome.Internal, "the tool's registration is unusable"), name, nil, ""
	}

	// (5) Authorize.
	res, decisionID, revision := s.authorize(ctx, call, grant.Context, toolFacts(reg), action, resource, args)
	if res != nil {
		res.DecisionId, res.PolicyRevision = decisionID, revision
		return res, name, nil, ""
	}

	// (6) Dispatch, only on allow.
	return nil, name, func() *sharedosv1.ToolResult {
		res := s.dispatch(ctx, call, grant.Context, resolved, args, decisionID)
		res.DecisionId, res.PolicyRevision = decisionID, revision
		return res
	}, ""
}

func (s *Pipeline) resolve(ctx context.Context, call *sharedosv1.ToolCall, grant *grants.Grant) (*sharedosv1.ToolResult, *catalog.Resolved) {
	raw := call.GetTool()
	shown := telemetry.Escape(raw, 80)
	pinned, ok := pinnedDigest(grant, pinproof.Tool, raw, call.GetPinProof())
	if !ok {
		return outcome.Denied(outcome.ToolUnavailable, fmt.Sprintf("tool %q is not in this turn's catalogue", shown)), nil
	}
	resolved, err := s.resolver.Resolve(ctx, raw)
	switch {
	case errors.Is(err, catalog.ErrNotFound):
		return outcome.Denied(outcome.ToolUnavailable, fmt.Sprintf("tool %q is no longer registered", shown)), nil
	case err != nil:
		if res := contextOutcome(ctx); res != nil {
			return res, nil
		}
		s.logger.ErrorContext(ctx, "resolve tool", slog.String(telemetry.LogTool, shown), slog.Any("error", err))
		return outcome.Failed(outcome.Internal, "the tool catalogue is unavailable"), nil
	case resolved == nil || resolved.Registration == nil:
		return outcome.Failed(outcome.Internal, "the tool catalogue is unavailable"), nil
	}
	if resolved.Digest != pinned {
		return outcome.Denied(outcome.ToolUnavailable,
			fmt.Sprintf("tool %q changed since this turn started; open a new turn to use it", shown)), nil
	}
	reg := resolved.Registration
	if reg.GetClass() != sharedosv1.ToolClass_TOOL_CLASS_MANAGED {
		return outcome.Denied(outcome.ToolUnavailable, fmt.Sprintf("tool %q is not a managed tool", shown)), nil
	}
	if reg.GetHandler().GetTarget() == "" {
		return outcome.Denied(outcome.ToolUnavailable, fmt.Sprintf("tool %q has no handler", shown)), nil
	}
	return nil, resolved
}

// pinnedDigest is the digest the turn pinned for the tool or prompt name:
// proven by the call under the grant's pin root, or (a grant issued before
// pin roots) read from its pin maps.
func pinnedDigest(grant *grants.Grant, kind, name string, proof *sharedosv1.PinProof) (string, bool) {
	if grant.PinRoot == "" {
		pin := grant.Tools
		if kind == pinproof.Prompt {
			pin = grant.Prompts
		}
		d, ok := pin[name]
		return d, ok
	}
	d, err := pinproof.Check(grant.PinRoot, grant.PinSize, kind, name, proof)
	return d, err == nil
}

// validate decodes the arguments and validates them against the tool's
// input schema; the decoded value is what the requirement reads.
// A schema violation's reason differs for the record (recordReason: no
// value in any rendering) and the model.
func (s *Pipeline) validate(ctx context.Context, resolved *catalog.Resolved, args []byte) (_ map[string]any, _ *sharedosv1.ToolResult, recordReason string) {
	_, span := tracer.Start(ctx, telemetry.SpanValidateArguments)
	defer span.End()
	decoded, err := decodeArguments(args)
	if err != nil {
		return nil, outcome.Failed(outcome.InvalidArguments, "invalid arguments: "+err.Error()), ""
	}
	if resolved.InputSchema == nil {
		s.logger.ErrorContext(ctx, "tool has no compiled input schema", slog.String(telemetry.LogTool, resolved.Registration.GetName()))
		return nil, outcome.Failed(outcome.Internal, "the tool's registration is unusable"), ""
	}
	if answer, record, ok := validateSchema(resolved.InputSchema, decoded); !ok {
		return nil, outcome.Failed(outcome.InvalidArguments, "invalid arguments "+answer), "invalid arguments " + record
	}
	return decoded, nil, ""
}

// toolFacts are what the policy reads of a tool.
func toolFacts(reg *sharedosv1.ToolRegistration) *sharedosv1.ToolFacts {
	return &sharedosv1.ToolFacts{
		Name:            reg.GetName(),
		Namespace:       reg.GetMetadata().GetNamespace(),
		Class:           "managed",
		AnnotationsJson: reg.GetAnnotationsJson(),
		Source:          reg.GetMetadata().GetSource(),
	}
}

func (s *Pipeline) authorize(ctx context.Context, call *sharedosv1.ToolCall, access *sharedosv1.AccessContext, facts *sharedosv1.ToolFacts, action, resource string, args []byte) (res *sharedosv1.ToolResult, decisionID, revision string) {
	actx, cancel := context.WithTimeout(ctx, s.authzTimeout)
	defer cancel()
	actx, span := tracer.Start(actx, telemetry.SpanAuthorize, trace.WithAttributes(
		attribute.String(telemetry.AttrAuthzAction, action),
	))
	defer span.End()
	resp, err := s.authz.Authorize(actx, &sharedosv1.AuthorizeRequest{
		Context:       access,
		Tool:          facts,
		Action:        action,
		Resource:      resource,
		ArgumentsJson: args,
		CallId:        call.GetCallId(),
		TurnId:        call.GetTurnId(),
	})
	if err != nil {
		span.SetStatus(codes.Error, status.Code(err).String())
		if res := contextOutcome(ctx); res != nil {
			return res, "", ""
		}
		if domain, reason := grpcx.ErrorReason(err); domain == outcome.ErrorDomainAuthz && reason == outcome.ReasonAuthzEvalError {
			// authz-svc answered that it made no decision, even when its
			// code is DeadlineExceeded (an evaluation past --eval-timeout).
			s.logger.ErrorContext(ctx, "policy evaluation failed", slog.String("code", status.Code(err).String()))
			return outcome.Failed(outcome.AuthzError, "the policy could not be evaluated; the call was not run"), "", ""
		}
		switch status.Code(err) {
		case grpccodes.Unavailable, grpccodes.DeadlineExceeded:
			return outcome.Failed(outcome.AuthzUnavailable, "the policy decision point is unavailable; the call was not run"), "", ""
		default:
			s.logger.ErrorContext(ctx, "authorize failed", slog.String("code", status.Code(err).String()))
			return outcome.Failed(outcome.AuthzError, "the policy could not be evaluated; the call was not run"), "", ""
		}
	}
	decisionID, revision = resp.GetDecisionId(), resp.GetPolicyRevision()
	span.SetAttributes(
		attribute.Bool(telemetry.AttrAuthzAllowed, resp.GetDecision() == sharedosv1.Decision_DECISION_ALLOW),
		attribute.String(telemetry.AttrDecisionID, decisionID),
	)
	switch resp.GetDecision() {
	case sharedosv1.Decision_DECISION_ALLOW:
		return nil, decisionID, revision
	case sharedosv1.Decision_DECISION_DENY:
		reason := resp.GetReason()
		if reason == "" {
			reason = fmt.Sprintf("%s on %s is not permitted by policy", action, truncate(resource, 200))
		}
		return outcome.Denied(outcome.PermissionDenied, reason), decisionID, revision
	default:
		return outcome.Failed(outcome.AuthzError, "the policy returned no decision; the call was not run"), decisionID, revision
	}
}

// serialize waits, until hctx ends, for the turn's previous call that is
// not read-only to end — in this process, then on every replica — and
// returns the release; or the refusal when it did not end in time or the
// replicas' order could not be taken (the call is not run: fail closed).
func (s *Pipeline) serialize(ctx, hctx context.Context, turn string, timeout time.Duration) (func(), *sharedosv1.ToolResult) {
	late := func() *sharedosv1.ToolResult {
		if res := contextOutcome(ctx); res != nil {
			return res
		}
		return outcome.Failed(outcome.Timeout, fmt.Sprintf("the turn's previous call of a tool that is not read-only did not end within this tool's %s", timeout))
	}
	release, err := s.localTurns.acquire(hctx, turn)
	if err != nil {
		return nil, late()
	}
	if s.replicaTurns == nil {
		return release, nil
	}
	unlock, err := s.replicaTurns.Lock(hctx, turn)
	if err != nil {
		release()
		if hctx.Err() != nil {
			// Waiting for the turn's lock held on another replica (or for
			// the lock session): the log tells which.
			s.logger.WarnContext(ctx, "turn order across replicas not taken in time", slog.String(telemetry.LogTurnID, turn), slog.Any("error", err))
			return nil, late()
		}
		s.logger.ErrorContext(ctx, "turn order across replicas not taken; call refused", slog.String(telemetry.LogTurnID, turn), slog.Any("error", err))
		return nil, outcome.Failed(outcome.Internal, "the turn's order across kernel replicas could not be taken; the call was not run")
	}
	return func() { unlock(); release() }, nil
}

func (s *Pipeline) dispatch(ctx context.Context, call *sharedosv1.ToolCall, access *sharedosv1.AccessContext, resolved *catalog.Resolved, args []byte, decisionID string) *sharedosv1.ToolResult {
	if res := contextOutcome(ctx); res != nil {
		return res
	}
	reg := resolved.Registration
	client, err := s.handlers.Client(reg.GetHandler().GetTarget())
	if err != nil {
		s.logger.ErrorContext(ctx, "handler client", slog.String(telemetry.LogTool, reg.GetName()), slog.Any("error", err))
		if catalog.Acquired(reg) {
			return outcome.Failed(outcome.UpstreamUnavailable, "the tool's upstream MCP server is not configured")
		}
		return outcome.Failed(outcome.HandlerError, "the tool's provider cannot be reached")
	}
	timeout := s.timeoutOf(reg.GetHandler())
	hctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if !resolved.ReadOnly {
		release, res := s.serialize(ctx, hctx, call.GetTurnId(), timeout)
		if res != nil {
			return res
		}
		defer release()
	}
	hctx, span := tracer.Start(hctx, telemetry.ExecuteToolSpanName(reg.GetName()), trace.WithAttributes(
		attribute.String(telemetry.AttrGenAIToolName, reg.GetName()),
		attribute.String(telemetry.AttrGenAIOperation, telemetry.SpanExecuteTool),
	))
	defer span.End()
	req := &sharedosv1.HandleRequest{
		CallId:        call.GetCallId(),
		TurnId:        call.GetTurnId(),
		Tool:          reg.GetName(),
		ArgumentsJson: args, // the very bytes that were authorized
		Context:       access,
		DecisionId:    decisionID,
		// v3: the round and the client's answers, passed on as they came.
		Round:              call.GetResume().GetRound(),
		RequestState:       call.GetResume().GetRequestState(),
		InputResponsesJson: call.GetInputResponsesJson(),
	}
	if call.GetInputRounds() {
		req.InputMethods = call.GetInputMethods()
	}
	resp, err := s.handle(hctx, client, reg.GetHandler().GetTarget(), req)
	if err != nil {
		span.SetStatus(codes.Error, status.Code(err).String())
		if res := contextOutcome(ctx); res != nil {
			return res
		}
		if res := boundOrSilence(hctx, err, catalog.Acquired(reg), "the tool", timeout); res != nil {
			return res
		}
		if catalog.Acquired(reg) {
			return outcome.Failed(outcome.UpstreamUnavailable, "the tool's upstream MCP server could not be reached or answered outside the protocol")
		}
		return outcome.Failed(outcome.HandlerError, fmt.Sprintf("the tool's provider failed (%s)", status.Code(err)))
	}
	if in := resp.GetInputRequired(); in != nil {
		return inputRequired(call, in)
	}
	content := resp.GetContentJson()
	if len(bytes.TrimSpace(content)) == 0 {
		content = []byte("[]")
	}
	items, wrong := checkContent(content)
	if wrong == "" && !isJSONObjectOrEmpty(resp.GetStructuredContentJson()) {
		wrong = "a structuredContent that is not a JSON object"
	}
	if wrong == "" && catalog.Acquired(reg) {
		var res *sharedosv1.ToolResult
		if wrong, res = s.foreignEmbedded(ctx, reg.GetMetadata().GetSource(), items, func(i int) string {
			return fmt.Sprintf("content[%d]", i)
		}); res != nil {
			return res
		}
	}
	if wrong != "" {
		// Passed on, the bridge would answer failed while the record said
		// succeeded (attack run S1): an isError result's content too,
		// which the harness reads after "failed:".
		span.SetStatus(codes.Error, "malformed content")
		if catalog.Acquired(reg) {
			return outcome.Failed(outcome.UpstreamUnavailable, "the tool's upstream MCP server answered outside the protocol: "+wrong)
		}
		return outcome.Failed(outcome.HandlerError, "the tool's provider returned "+wrong)
	}
	if resp.GetIsError() {
		res := outcome.Failed(outcome.HandlerError, "the tool reported an error")
		if catalog.Acquired(reg) {
			res = outcome.Failed(outcome.ToolError, "the tool reported an error")
		}
		res.ContentJson, res.StructuredContentJson, res.HandlerIsError = content, resp.GetStructuredContentJson(), true
		return res
	}
	if resolved.OutputSchema != nil {
		if res := checkOutput(resolved.OutputSchema, resp.GetStructuredContentJson(), catalog.Acquired(reg)); res != nil {
			span.SetStatus(codes.Error, res.GetCode())
			return res
		}
	}
	return &sharedosv1.ToolResult{
		Status:                sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED,
		ContentJson:           content,
		StructuredContentJson: resp.GetStructuredContentJson(),
	}
}

// timeoutOf is a provider call's deadline: the registration's own, capped
// at the longest the kernel allows, else the default.
func (s *Pipeline) timeoutOf(h *sharedosv1.HandlerRef) time.Duration {
	if d := h.GetTimeout(); d != nil && d.AsDuration() > 0 {
		return min(d.AsDuration(), s.maxHandler)
	}
	return s.handlerTimeout
}

// handle runs the handler: as Invoke when the call asked for progress and
// the target is not known to be a v1 provider, falling back to Handle when
// Invoke is UNIMPLEMENTED (answered before anything ran); else Handle.
func (s *Pipeline) handle(ctx context.Context, client sharedosv1.ToolHandlerServiceClient, target string, req *sharedosv1.HandleRequest) (*sharedosv1.HandleResponse, error) {
	p := progressFrom(ctx)
	if p == nil {
		return client.Handle(ctx, req)
	}
	defer p.end()
	if at, ok := s.unary.Load(target); !ok || time.Since(at.(time.Time)) > unaryRetry {
		resp, err := invoke(ctx, client, req, p)
		if status.Code(err) != grpccodes.Unimplemented {
			return resp, err
		}
		s.unary.Store(target, time.Now())
	}
	return client.Handle(ctx, req)
}

// errNoResult: an Invoke stream ended without its result.
var errNoResult = status.Error(grpccodes.Internal, "the provider's stream ended without a result")

// invoke reads an Invoke stream: progress to p, up to the one result.
func invoke(ctx context.Context, client sharedosv1.ToolHandlerServiceClient, req *sharedosv1.HandleRequest, p *progress) (*sharedosv1.HandleResponse, error) {
	ctx, cancel := context.WithCancel(ctx) // ends the stream once the result is in
	defer cancel()
	stream, err := client.Invoke(ctx, req)
	if err != nil {
		return nil, err
	}
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil, errNoResult
		}
		if err != nil {
			return nil, err
		}
		if r := ev.GetResult(); r != nil {
			return r, nil
		}
		if pr := ev.GetProgress(); pr != nil {
			p.report(pr)
		}
	}
}

// boundOrSilence is the outcome of a provider request that failed with err
// for one of two reasons the provider's failure is not: a bound of the
// kernel's on upstream calls (ResourceExhausted from an acquired source:
// the result budget, even when the deadline passed waiting for it; the
// calls parked on their harness), or who's silence until the request's
// deadline (hctx). nil for any other failure. A bound was recorded as an
// upstream that "could not be reached", a budget wait as a tool that "did
// not answer": both untrue of the upstream.
func boundOrSilence(hctx context.Context, err error, acquired bool, who string, timeout time.Duration) *sharedosv1.ToolResult {
	if st := status.Convert(err); acquired && st.Code() == grpccodes.ResourceExhausted {
		return outcome.Failed(outcome.UpstreamUnavailable, "the kernel's bounds on upstream calls refused it: "+telemetry.Escape(st.Message(), 512))
	}
	if hctx.Err() == context.DeadlineExceeded || status.Code(err) == grpccodes.DeadlineExceeded {
		return outcome.Failed(outcome.Timeout, fmt.Sprintf("%s did not answer within %s", who, timeout))
	}
	return nil
}

// contextOutcome maps a finished caller context: cancellation is cancelled,
// an expired caller deadline is failed/timeout. nil while ctx is live.
func contextOutcome(ctx context.Context) *sharedosv1.ToolResult {
	switch ctx.Err() {
	case nil:
		return nil
	case context.DeadlineExceeded:
		return outcome.Failed(outcome.Timeout, "the call ran out of time before it completed")
	default:
		if errors.Is(context.Cause(ctx), errTurnClosed) {
			return outcome.CancelledResult("the turn was closed")
		}
		return outcome.CancelledResult("the client cancelled the call")
	}
}

func isJSONObjectOrEmpty(b []byte) bool {
	t := bytes.TrimSpace(b)
	return len(t) == 0 || (t[0] == '{' && json.Valid(t))
}
