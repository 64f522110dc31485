package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/outcome"
	"github.com/sharedos/toolshare/services/platform/pgdb"

	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline/records"
)

// Store is the PostgreSQL store.
//
// The statements every call makes — its pending row, the revocation check
// and its completion — go through one pgdb.Group: concurrent calls share a
// round trip and a commit (group commit), and each still returns only once
// its own row is durable.
type Store struct {
	pool  *pgxpool.Pool
	group *pgdb.Group
}

var _ records.Store = (*Store)(nil)

// New returns a store over pool; the schema must be migrated
// (migrations.Up).
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool, group: pgdb.NewGroup(pool)} }

// Identity names the database the store writes to, as a record journal
// directory is bound to it (journal.BindStore): the cluster's system
// identifier (pg_control_system; a physical standby promoted in its place
// has the same) and the database's name. Where the server does not let the
// identifier be read, the name alone.
func (s *Store) Identity(ctx context.Context) (string, error) {
	var db, system string
	err := s.pool.QueryRow(ctx, `SELECT current_database(), (SELECT system_identifier::text FROM pg_control_system())`).Scan(&db, &system)
	if err != nil {
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || (pgErr.Code != "42501" && pgErr.Code != "42883" && pgErr.Code != "0A000") {
			// Not a server that withholds the identifier (insufficient
			// privilege, no such function, not supported): a failure.
			return "", fmt.Errorf("postgres: read the database's identity: %w", err)
		}
		system = "unknown"
		if err := s.pool.QueryRow(ctx, `SELECT current_database()`).Scan(&db); err != nil {
			return "", fmt.Errorf("postgres: read the database's identity: %w", err)
		}
	}
	return fmt.Sprintf("PostgreSQL system %s, database %q", system, db), nil
}

var (
	beginStmt = pgdb.NewStmt(insertSQL + `
ON CONFLICT (turn_id, call_id) WHERE NOT duplicate DO NOTHING
RETURNING sequence`)
	completeStmt = pgdb.NewStmt(`
UPDATE catalog.operations
   SET status = $2, code = $3, reason = $4, resolved_tool = $5, decision_id = $6,
       policy_revision = $7, finished_at = $8, progress_count = progress_count + $9, waiting_until = NULL
 WHERE attempt_id = $1 AND status = 'pending' AND ($10 = '' OR turn_id = $10)
   AND ($11 = '' OR (waiting_until IS NULL AND resumed_by = $11))`)
	revokedStmt = pgdb.NewStmt(`SELECT EXISTS (SELECT 1 FROM catalog.revoked_turns WHERE turn_id = $1)`)
)

func scanInt64(row pgx.Row) (int64, error) {
	var n int64
	err := row.Scan(&n)
	return n, err
}

func scanBool(row pgx.Row) (bool, error) {
	var b bool
	err := row.Scan(&b)
	return b, err
}

const insertSQL = `
INSERT INTO catalog.operations (attempt_id, call_id, turn_id, duplicate, principal, requested_tool,
    requested_tool_sha256, resolved_tool, catalog_hash, arguments_digest, decision_id, policy_revision,
    status, code, reason, instance_id, harness, trace_id, started_at, finished_at, kind,
    harness_version, mcp_support, extension, declared_model, tool_policy_digest, tenant, abandoned)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21,
    $22, $23, $24, $25, $26, $27, $28)`

// Begin implements records.Store. The first attempt of a (turn, call) is
// inserted pending; the partial unique index turns a repeat into a no-op
// insert, after which the repeat is written as its own completed row —
// unless the first row is an abandonment, of which r is the late arrival.
// The insert commits with its group's batch, the repeat's row alone: Begin
// returns only once the row is durable.
func (s *Store) Begin(ctx context.Context, r *records.Record) error {
	r.Abandoned = false
	err := s.insertPending(ctx, r)
	if !errors.Is(err, records.ErrRecorded) {
		return err
	}
	var abandoned bool
	if err := s.pool.QueryRow(ctx, `SELECT abandoned FROM catalog.operations WHERE turn_id = $1 AND call_id = $2 AND NOT duplicate`,
		r.TurnID, r.CallID).Scan(&abandoned); err != nil {
		return fmt.Errorf("postgres: read the first row of a repeated call: %w", err)
	}
	if abandoned {
		return records.ErrRecorded
	}
	records.MarkDuplicate(r, r.StartedAt)
	if err := s.pool.QueryRow(ctx, insertSQL+` RETURNING sequence`, args(r)...).Scan(&r.Sequence); err != nil {
		return fmt.Errorf("postgres: record duplicate call: %w", err)
	}
	return records.ErrDuplicateCall
}

// BeginNew implements records.Store: Begin's insert alone, of a row marked
// abandoned.
func (s *Store) BeginNew(ctx context.Context, r *records.Record) error {
	r.Abandoned = true
	return s.insertPending(ctx, r)
}

// insertPending inserts r pending, or nothing when its (turn, call) has a
// row already (ErrRecorded).
func (s *Store) insertPending(ctx context.Context, r *records.Record) error {
	if err := r.Check(); err != nil {
		return err
	}
	r.Sanitize()
	r.Duplicate = false
	r.Status = sharedosv1.OperationStatus_OPERATION_STATUS_PENDING
	r.Code, r.Reason, r.FinishedAt = "", "", time.Time{}
	seq, err := pgdb.QueryRow(ctx, s.group, beginStmt, args(r), scanInt64)
	switch {
	case err == nil:
		r.Sequence = seq
		return nil
	case errors.Is(err, pgx.ErrNoRows):
		return records.ErrRecorded
	}
	return fmt.Errorf("postgres: begin operation: %w", inDoubt(err))
}

func args(r *records.Record) []any {
	var finished *time.Time
	if !r.FinishedAt.IsZero() {
		finished = &r.FinishedAt
	}
	return []any{r.AttemptID, r.CallID, r.TurnID, r.Duplicate, r.Principal, r.RequestedTool,
		r.RequestedToolSHA256, r.ResolvedTool, r.CatalogHash, r.ArgumentsDigest, r.DecisionID, r.PolicyRevision,
		outcome.StatusName(r.Status), r.Code, r.Reason, r.InstanceID, r.Harness, r.TraceID, r.StartedAt, finished,
		records.KindName(r.Kind), r.HarnessVersion, r.MCPSupport, r.Extension, r.DeclaredModel, r.ToolPolicyDigest, r.Tenant, r.Abandoned}
}

// inDoubt marks err records.ErrInDoubt when the insert may have reached the
// server without an answer coming back: not an error the server answered
// (it rolled the statement back), and not one before anything was sent.
func inDoubt(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) || pgconn.SafeToRetry(err) {
		return err
	}
	return fmt.Errorf("%w: %w", records.ErrInDoubt, err)
}

// Complete implements records.Store. It returns once the completion is
// committed durably (synchronous commit, like Begin): the kernel answers a
// call only after its record says the same (ADR 0007).
func (s *Store) Complete(ctx context.Context, attemptID string, c records.Completion) error {
	if err := c.Check(); err != nil {
		return err
	}
	c.Sanitize()
	tag, err := s.group.Exec(ctx, completeStmt,
		attemptID, outcome.StatusName(c.Status), c.Code, c.Reason, c.ResolvedTool, c.DecisionID,
		c.PolicyRevision, c.FinishedAt, c.ProgressCount, c.TurnID, c.ResumedBy)
	affected := tag.RowsAffected()
	if err != nil {
		return fmt.Errorf("postgres: complete operation: %w", err)
	}
	if affected == 1 {
		return nil
	}
	if c.ResumedBy != "" {
		return records.ErrNotFound // the resumption did not take effect, or another took the attempt on
	}
	var exists bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM catalog.operations WHERE attempt_id = $1 AND ($2 = '' OR turn_id = $2))`,
		attemptID, c.TurnID).Scan(&exists); err != nil {
		return fmt.Errorf("postgres: complete operation: %w", err)
	}
	if exists {
		return records.ErrCompleted
	}
	return records.ErrNotFound
}

// recordColumns are the columns scanRecords reads, in its order.
const recordColumns = `sequence, attempt_id, call_id, turn_id, duplicate, principal, requested_tool, requested_tool_sha256,
       resolved_tool, catalog_hash, arguments_digest, decision_id, policy_revision, status, code, reason,
       instance_id, harness, trace_id, started_at, finished_at, progress_count, input_rounds, waiting_until,
       resumed_at, resumed_by, kind, harness_version, mcp_support, extension, declared_model, tool_policy_digest, tenant, abandoned`

// ListOperations implements records.Store.
func (s *Store) ListOperations(ctx context.Context, turnID string) ([]records.Record, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+recordColumns+`
  FROM catalog.operations WHERE turn_id = $1 ORDER BY sequence`, turnID)
	if err != nil {
		return nil, fmt.Errorf("postgres: list operations: %w", err)
	}
	out, err := scanRecords(rows)
	if err != nil {
		return nil, fmt.Errorf("postgres: list operations: %w", err)
	}
	return out, nil
}

// scanRecords reads rows of recordColumns and closes rows.
func scanRecords(rows pgx.Rows) ([]records.Record, error) {
	defer rows.Close()
	var out []records.Record
	for rows.Next() {
		var (
			r                          records.Record
			status, kind               string
			finished, waiting, resumed *time.Time
		)
		if err := rows.Scan(&r.Sequence, &r.AttemptID, &r.CallID, &r.TurnID, &r.Duplicate, &r.Principal,
			&r.RequestedTool, &r.RequestedToolSHA256, &r.ResolvedTool, &r.CatalogHash, &r.ArgumentsDigest,
			&r.DecisionID, &r.PolicyRevision, &status, &r.Code, &r.Reason, &r.InstanceID, &r.Harness,
			&r.TraceID, &r.StartedAt, &finished, &r.ProgressCount, &r.InputRounds, &waiting, &resumed,
			&r.ResumedBy, &kind, &r.HarnessVersion, &r.MCPSupport, &r.Extension, &r.DeclaredModel,
			&r.ToolPolicyDigest, &r.Tenant, &r.Abandoned); err != nil {
			return nil, err
		}
		r.Kind = records.ParseKind(kind)
		if waiting != nil {
			r.WaitingUntil = *waiting
		}
		if resumed != nil {
			r.ResumedAt = *resumed
		}
		st, ok := outcome.ParseStatus(status)
		if !ok {
			return nil, fmt.Errorf("unknown status %q", status)
		}
		r.Status = st
		if finished != nil {
			r.FinishedAt = *finished
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// ExportPage implements records.Store.
func (s *Store) ExportPage(ctx context.Context, since time.Time, after int64, limit int) (int64, []records.Record, error) {
	from := after
	if after == 0 {
		if err := s.pool.QueryRow(ctx, `
SELECT COALESCE((SELECT min(sequence) - 1 FROM catalog.operations WHERE started_at >= $1),
                (SELECT max(sequence) FROM catalog.operations), 0)`, since).Scan(&from); err != nil {
			return 0, nil, fmt.Errorf("postgres: export operations: %w", err)
		}
	}
	rows, err := s.pool.Query(ctx, `SELECT `+recordColumns+`
  FROM catalog.operations WHERE sequence > $1 ORDER BY sequence LIMIT $2`, from, limit)
	if err != nil {
		return 0, nil, fmt.Errorf("postgres: export operations: %w", err)
	}
	out, err := scanRecords(rows)
	if err != nil {
		return 0, nil, fmt.Errorf("postgres: export operations: %w", err)
	}
	return from, out, nil
}

// RecordExport implements records.Store: the range is counted and the
// ledger row written in one statement.
func (s *Store) RecordExport(ctx context.Context, e records.Export) (int64, error) {
	var id int64
	err := s.pool.QueryRow(ctx, `
WITH r AS (
    SELECT count(*) FILTER (WHERE status <> 'pending') AS finished,
           count(*) FILTER (WHERE status = 'pending') AS pending
      FROM catalog.operations WHERE sequence > $1 AND sequence <= $2
)
INSERT INTO catalog.operation_exports (after_sequence, through_sequence, rows, sha256, records_digest)
SELECT $1, $2, $3, $4, $5 FROM r
 WHERE r.finished = $3 AND r.pending = 0 AND catalog.operations_set_digest($1, $2) = $5
RETURNING id`, e.After, e.Through, e.Rows, e.SHA256, e.RecordsDigest).Scan(&id)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, records.ErrExportMismatch
	case err != nil:
		return 0, fmt.Errorf("postgres: record export: %w", err)
	}
	return id, nil
}

// sinceWatermark bounds a search for pending rows: no index names the
// status (a completion is a heap-only update, migration 00014), so pending
// rows are found among those started since catalog.reconcile_watermark,
// which no pending row predates.
const sinceWatermark = `started_at >= (SELECT through FROM catalog.reconcile_watermark)`

// Reconcile implements records.Store. The stale rows are marked, then the
// watermark moves up to the oldest row left pending (waiting for input, or
// resumed and not stale yet) or, when none is, to startedBefore — in one
// transaction, so the rows it marked no longer count as pending.
func (s *Store) Reconcile(ctx context.Context, startedBefore time.Time) (int64, error) {
	var n int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `
UPDATE catalog.operations
   SET status = 'interrupted', reason = $2, finished_at = now()
 WHERE `+sinceWatermark+` AND started_at < $1
   AND status = 'pending' AND waiting_until IS NULL AND COALESCE(resumed_at, started_at) < $1`,
			startedBefore, records.InterruptedReason)
		if err != nil {
			return err
		}
		n = tag.RowsAffected()
		_, err = tx.Exec(ctx, `
UPDATE catalog.reconcile_watermark w
   SET through = GREATEST(w.through, COALESCE((SELECT min(o.started_at) FROM catalog.operations o
        WHERE o.started_at >= w.through AND o.started_at < $1 AND o.status = 'pending'), $1))`, startedBefore)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("postgres: reconcile operations: %w", err)
	}
	return n, nil
}

// ReconcileInstance implements records.Store.
func (s *Store) ReconcileInstance(ctx context.Context, instanceID string, startedBefore time.Time) (int64, error) {
	if instanceID == "" {
		return 0, nil
	}
	tag, err := s.pool.Exec(ctx, `
UPDATE catalog.operations
   SET status = 'interrupted', reason = $3, finished_at = now()
 WHERE `+sinceWatermark+` AND status = 'pending' AND waiting_until IS NULL
   AND CASE WHEN resumed_at IS NULL THEN instance_id = $1 AND started_at < $2
            ELSE resumed_by = $1 AND resumed_at < $2 END`, instanceID, startedBefore, records.InterruptedReason)
	if err != nil {
		return 0, fmt.Errorf("postgres: reconcile instance operations: %w", err)
	}
	return tag.RowsAffected(), nil
}

// Park implements records.Rounds: the row waits unless its turn is
// revoked, decided in the same statement that parks it.
func (s *Store) Park(ctx context.Context, attemptID string, w records.Wait) (time.Time, error) {
	c := records.Completion{ResolvedTool: w.ResolvedTool, DecisionID: w.DecisionID, PolicyRevision: w.PolicyRevision}
	c.Sanitize()
	var until time.Time
	err := s.pool.QueryRow(ctx, `
UPDATE catalog.operations o
   SET input_rounds = $2, progress_count = progress_count + $3,
       waiting_until = now() + make_interval(secs => $4::double precision),
       resolved_tool = $5, decision_id = $6, policy_revision = $7
 WHERE attempt_id = $1 AND status = 'pending' AND waiting_until IS NULL
   AND NOT EXISTS (SELECT 1 FROM catalog.revoked_turns r WHERE r.turn_id = o.turn_id)
RETURNING waiting_until`, attemptID, w.Round, w.Progress, w.TTL.Seconds(), c.ResolvedTool, c.DecisionID, c.PolicyRevision).Scan(&until)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return time.Time{}, records.ErrNotWaiting
	case err != nil:
		return time.Time{}, fmt.Errorf("postgres: park operation: %w", err)
	}
	return until, nil
}

// Resume implements records.Rounds: one conditional update, so exactly one
// of concurrent resumptions of a row matches.
func (s *Store) Resume(ctx context.Context, r records.Resumption) (string, error) {
	var callID string
	err := s.pool.QueryRow(ctx, `
UPDATE catalog.operations
   SET waiting_until = NULL, resumed_at = now(), resumed_by = $6
 WHERE attempt_id = $1 AND status = 'pending' AND waiting_until > now() AND turn_id = $2
   AND requested_tool_sha256 = $3 AND arguments_digest = $4 AND input_rounds = $5 AND kind = $7
RETURNING call_id`,
		r.AttemptID, r.TurnID, r.RequestedToolSHA256, r.ArgumentsDigest, r.Round, r.InstanceID, records.KindName(r.Kind)).Scan(&callID)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return "", records.ErrNotWaiting
	case err != nil:
		return "", fmt.Errorf("postgres: resume operation: %w", err)
	}
	return callID, nil
}

// ExpireWaiting implements records.Rounds.
func (s *Store) ExpireWaiting(ctx context.Context) (int64, error) {
	tag, err := s.pool.Exec(ctx, `
UPDATE catalog.operations
   SET status = 'failed', code = $1, reason = $2, finished_at = now(), waiting_until = NULL
 WHERE waiting_until <= now() AND status = 'pending'`, outcome.Timeout, records.ExpiredWaitReason)
	if err != nil {
		return 0, fmt.Errorf("postgres: expire waiting operations: %w", err)
	}
	return tag.RowsAffected(), nil
}

// EndedRound implements records.Rounds. The row is expired by one
// statement and read by the next: the read's snapshot is taken after the
// expiry, or after the reconciler's concurrent one it waited for, has
// committed, so an ended row is always found.
func (s *Store) EndedRound(ctx context.Context, r records.Resumption) (records.Record, error) {
	const match = `attempt_id = $1 AND turn_id = $2 AND requested_tool_sha256 = $3 AND arguments_digest = $4
   AND input_rounds = $5 AND kind = $6`
	args := []any{r.AttemptID, r.TurnID, r.RequestedToolSHA256, r.ArgumentsDigest, r.Round, records.KindName(r.Kind)}
	if _, err := s.pool.Exec(ctx, `
UPDATE catalog.operations
   SET status = 'failed', code = $7, reason = $8, finished_at = now(), waiting_until = NULL
 WHERE `+match+` AND waiting_until <= now() AND status = 'pending'`,
		append(args, outcome.Timeout, records.ExpiredWaitReason)...); err != nil {
		return records.Record{}, fmt.Errorf("postgres: end an expired round: %w", err)
	}
	rows, err := s.pool.Query(ctx, `SELECT `+recordColumns+`
  FROM catalog.operations WHERE `+match+` AND status <> 'pending'`, args...)
	if err != nil {
		return records.Record{}, fmt.Errorf("postgres: read an ended round: %w", err)
	}
	out, err := scanRecords(rows)
	switch {
	case err != nil:
		return records.Record{}, fmt.Errorf("postgres: read an ended round: %w", err)
	case len(out) == 0:
		return records.Record{}, records.ErrNotWaiting
	}
	return out[0], nil
}

// CloseWaiting implements records.Rounds.
func (s *Store) CloseWaiting(ctx context.Context, turnID string) (int64, error) {
	tag, err := s.pool.Exec(ctx, `
UPDATE catalog.operations
   SET status = 'cancelled', code = $2, reason = $3, finished_at = now(), waiting_until = NULL
 WHERE turn_id = $1 AND waiting_until IS NOT NULL AND status = 'pending'`, turnID, outcome.Cancelled, records.ClosedWaitReason)
	if err != nil {
		return 0, fmt.Errorf("postgres: close waiting operations: %w", err)
	}
	return tag.RowsAffected(), nil
}

// revocationChannel is the NOTIFY channel revocations are announced on.
const revocationChannel = "sharedos_turn_revoked"

// RevokeTurn implements records.Store: the row and the announcement commit
// together.
func (s *Store) RevokeTurn(ctx context.Context, turnID string, until time.Time) error {
	if _, err := s.pool.Exec(ctx, `
WITH r AS (
    INSERT INTO catalog.revoked_turns (turn_id, until) VALUES ($1, $2)
    ON CONFLICT (turn_id) DO UPDATE SET until = GREATEST(catalog.revoked_turns.until, EXCLUDED.until)
)
SELECT pg_notify('`+revocationChannel+`', $1)`, turnID, until); err != nil {
		return fmt.Errorf("postgres: revoke turn: %w", err)
	}
	return nil
}

// TurnRevoked implements records.Store.
func (s *Store) TurnRevoked(ctx context.Context, turnID string) (bool, error) {
	revoked, err := pgdb.QueryRow(ctx, s.group, revokedStmt, []any{turnID}, scanBool)
	if err != nil {
		return false, fmt.Errorf("postgres: turn revoked: %w", err)
	}
	return revoked, nil
}

// PendingInTurn implements records.Store.
func (s *Store) PendingInTurn(ctx context.Context, turnID string) (int, error) {
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM catalog.operations WHERE turn_id = $1 AND status = 'pending'`,
		turnID).Scan(&n); err != nil {
		return 0, fmt.Errorf("postgres: pending in turn: %w", err)
	}
	return n, nil
}

// WatchRevocations implements records.Store.
func (s *Store) WatchRevocations(ctx context.Context, listening func(), f func(turnID string)) error {
	if err := pgdb.Listen(ctx, s.pool, revocationChannel, listening, f); err != nil {
		return fmt.Errorf("postgres: watch revocations: %w", err)
	}
	return nil
}

// ForgetRevocations implements records.Store.
func (s *Store) ForgetRevocations(ctx context.Context, cutoff time.Time) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM catalog.revoked_turns WHERE until < $1`, cutoff)
	if err != nil {
		return 0, fmt.Errorf("postgres: forget revocations: %w", err)
	}
	return tag.RowsAffected(), nil
}
