package postgres_test

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sharedos/toolshare/services/platform/pgdb"
	"github.com/sharedos/toolshare/services/platform/pgdb/pgtest"

	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline/records"
	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline/records/postgres"
	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline/records/recordstest"
	"github.com/sharedos/toolshare/catalog-svc/migrations"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/exportset"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func newPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	dsn := pgtest.NewDatabase(t, migrations.Up)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgdb.Open(ctx, dsn)
	if err != nil {
		t.Fatalf("open %s: %v", pgdb.RedactDSN(dsn), err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func TestConformance(t *testing.T) {
	recordstest.Run(t, func(t *testing.T) records.Store { return postgres.New(newPool(t)) })
}

// TestAppendOnlyInSQL proves the guarantee does not rest on the Go code: the
// service role itself cannot rewrite or delete history.
func TestAppendOnlyInSQL(t *testing.T) {
	pool := newPool(t)
	s := postgres.New(pool)
	ctx := context.Background()
	pending := recordstest.NewRecord("t1", "pending", "files.read")
	done := recordstest.NewRecord("t1", "done", "files.read")
	for _, r := range []*records.Record{pending, done} {
		if err := s.Begin(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Complete(ctx, done.AttemptID, records.Completion{Status: sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED, FinishedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}

	refused := map[string]string{
		"update completed":        `UPDATE catalog.operations SET status = 'failed' WHERE call_id = 'done'`,
		"update completed reason": `UPDATE catalog.operations SET reason = 'x' WHERE call_id = 'done'`,
		"rewrite pending tool":    `UPDATE catalog.operations SET requested_tool = 'files.write' WHERE call_id = 'pending'`,
		"rewrite pending args":    `UPDATE catalog.operations SET arguments_digest = '00' WHERE call_id = 'pending'`,
		"delete completed":        `DELETE FROM catalog.operations WHERE call_id = 'done'`,
		"delete pending":          `DELETE FROM catalog.operations WHERE call_id = 'pending'`,
		"truncate":                `TRUNCATE catalog.operations`,
		"oversize requested tool": `INSERT INTO catalog.operations (attempt_id, call_id, turn_id, requested_tool, requested_tool_sha256, status, started_at) VALUES ('x', 'x', 't1', repeat('a', 257), '', 'pending', now())`,
	}
	for name, sql := range refused {
		if _, err := pool.Exec(ctx, sql); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM catalog.operations`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("rows = %d (%v), want 2", n, err)
	}
	// Filling in the outcome of a pending row is the one permitted update.
	if _, err := pool.Exec(ctx, `UPDATE catalog.operations SET status = 'failed', code = 'internal', finished_at = now() WHERE call_id = 'pending'`); err != nil {
		t.Fatalf("completing a pending row refused: %v", err)
	}
	rows, err := s.ListOperations(ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	if rows[1].Status != sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED || rows[0].Status != sharedosv1.OperationStatus_OPERATION_STATUS_FAILED {
		t.Fatalf("rows = %+v", rows)
	}
	if !strings.HasPrefix(rows[0].CallID, "pending") {
		t.Fatalf("order changed: %+v", rows)
	}
}

// TestAppendOnlyEveryColumn: the guard, not the service role's column
// grants, refuses the owner (the test's role) a change to any column of a
// pending row but its outcome's, and any change at all once a row is
// completed; it lets every outcome column of a pending row be written. A
// column missing from the guard's comparison would pass here.
func TestAppendOnlyEveryColumn(t *testing.T) {
	pool := newPool(t)
	s := postgres.New(pool)
	ctx := context.Background()
	pending := recordstest.NewRecord("t1", "pending", "files.read")
	if err := s.Begin(ctx, pending); err != nil {
		t.Fatal(err)
	}
	// Every column of the table is the record's (a new value for each) or
	// its outcome's; a column added later must be put in one of the two.
	record := map[string]string{
		"sequence": "sequence + 1000", "attempt_id": "attempt_id || 'x'", "call_id": "call_id || 'x'",
		"turn_id": "turn_id || 'x'", "duplicate": "NOT duplicate", "principal": "principal || 'x'",
		"requested_tool": "requested_tool || 'x'", "requested_tool_sha256": "requested_tool_sha256 || 'x'",
		"catalog_hash": "catalog_hash || 'x'", "arguments_digest": "arguments_digest || 'x'",
		"instance_id": "instance_id || 'x'", "harness": "harness || 'x'", "trace_id": "trace_id || 'x'",
		"started_at": "started_at + interval '1 second'", "kind": "CASE kind WHEN 'prompt' THEN 'tool' ELSE 'prompt' END",
		"harness_version": "harness_version || 'x'", "mcp_support": "CASE mcp_support WHEN 'native' THEN 'extension' ELSE 'native' END", "extension": "extension || 'x'",
		"declared_model": "declared_model || 'x'", "tool_policy_digest": "tool_policy_digest || 'x'", "tenant": "tenant || 'x'", "abandoned": "NOT abandoned",
	}
	outcome := map[string]string{
		"resolved_tool": "'files.read'", "decision_id": "'d1'", "policy_revision": "'r1'", "code": "'c'",
		"reason": "'why'", "progress_count": "progress_count + 1", "input_rounds": "input_rounds + 1",
		"waiting_until": "now() + interval '1 minute'", "resumed_at": "now()", "resumed_by": "'k2'",
	}
	rows, err := pool.Query(ctx, `SELECT column_name FROM information_schema.columns
 WHERE table_schema = 'catalog' AND table_name = 'operations'`)
	if err != nil {
		t.Fatal(err)
	}
	var columns []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			t.Fatal(err)
		}
		columns = append(columns, c)
	}
	if rows.Close(); rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	for _, c := range columns {
		_, isRecord := record[c]
		_, isOutcome := outcome[c]
		if !isRecord && !isOutcome && c != "status" && c != "finished_at" {
			t.Errorf("column %s is neither the record's nor its outcome's in this test", c)
		}
	}
	where := ` WHERE call_id = '` + pending.CallID + `'`
	for c, v := range record {
		_, err := pool.Exec(ctx, `UPDATE catalog.operations SET `+c+` = `+v+where)
		if err == nil || !strings.Contains(err.Error(), "only the outcome of a pending row may be written") {
			t.Errorf("pending row, %s rewritten: %v", c, err)
		}
	}
	for c, v := range outcome {
		if _, err := pool.Exec(ctx, `UPDATE catalog.operations SET `+c+` = `+v+where); err != nil {
			t.Errorf("pending row, outcome column %s refused: %v", c, err)
		}
	}
	if _, err := pool.Exec(ctx, `UPDATE catalog.operations SET status = 'failed', finished_at = now(), waiting_until = NULL`+where); err != nil {
		t.Fatalf("completing the pending row refused: %v", err)
	}
	for c, v := range outcome {
		_, err := pool.Exec(ctx, `UPDATE catalog.operations SET `+c+` = `+v+where)
		if err == nil || !strings.Contains(err.Error(), "can no longer change") {
			t.Errorf("completed row, %s rewritten: %v", c, err)
		}
	}
	for _, q := range []string{`UPDATE catalog.operations SET status = status` + where, `DELETE FROM catalog.operations` + where} {
		if _, err := pool.Exec(ctx, q); err == nil {
			t.Errorf("%s: accepted on a completed row", q)
		}
	}
}

// TestRevocationsReachEveryKernel: a revocation committed through one pool
// (one kernel) is announced to a watcher on another.
func TestRevocationsReachEveryKernel(t *testing.T) {
	dsn := pgtest.NewDatabase(t, migrations.Up)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stores [2]*postgres.Store
	for i := range stores {
		pool, err := pgdb.Open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		stores[i] = postgres.New(pool)
	}
	listening, heard := make(chan struct{}), make(chan string, 1)
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- stores[0].WatchRevocations(wctx, func() { close(listening) }, func(turn string) { heard <- turn })
	}()
	select {
	case <-listening:
	case err := <-done:
		t.Fatalf("watch ended before listening: %v", err)
	}
	if err := stores[1].RevokeTurn(ctx, "t-closed", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	select {
	case turn := <-heard:
		if turn != "t-closed" {
			t.Errorf("heard %q, want t-closed", turn)
		}
	case <-ctx.Done():
		t.Fatal("the other kernel never heard of the revocation")
	}
	stop()
	if err := <-done; err != nil {
		t.Errorf("watch ended with %v after its context, want nil", err)
	}
}

// ownerAndService are pools on a fresh migrated database: as its owner (who
// may purge) and as the service role catalog-svc acts as.
func ownerAndService(ctx context.Context, t *testing.T) (owner, service *pgxpool.Pool) {
	t.Helper()
	dsn := pgtest.NewDatabase(t, migrations.Up)
	owner, err := pgdb.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(owner.Close)
	service, err = pgdb.Open(ctx, dsn, pgdb.WithRole(migrations.ServiceRole))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(service.Close)
	return owner, service
}

// TestPurgeOnlyExported: catalog.purge_exported_operations deletes exactly
// the records of a noted archive that still matches the table; no record
// outside one can be deleted, and the service role cannot purge at all.
func TestPurgeOnlyExported(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	owner, service := ownerAndService(ctx, t)
	s := postgres.New(service)
	var rs []*records.Record
	for i := range 4 {
		r := recordstest.NewRecord("t1", strings.Repeat("c", i+1), "files.read")
		if err := s.Begin(ctx, r); err != nil {
			t.Fatal(err)
		}
		if i < 3 {
			if err := s.Complete(ctx, r.AttemptID, records.Completion{Status: sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED, FinishedAt: time.Now()}); err != nil {
				t.Fatal(err)
			}
		}
		rs = append(rs, r)
	}
	base := rs[0].Sequence - 1
	if _, err := s.RecordExport(ctx, records.Export{After: base, Through: rs[1].Sequence, Rows: 2, SHA256: strings.Repeat("0", 64),
		RecordsDigest: sequences(rs[0].Sequence, rs[1].Sequence)}); err != nil {
		t.Fatal(err)
	}
	if _, err := service.Exec(ctx, `SELECT catalog.purge_exported_operations(now())`); err == nil {
		t.Error("the service role ran the purge")
	}
	if _, err := owner.Exec(ctx, `DELETE FROM catalog.operations WHERE sequence = $1`, rs[2].Sequence); err == nil {
		t.Error("the owner deleted a record outside any export")
	}
	var n int64
	if err := owner.QueryRow(ctx, `SELECT catalog.purge_exported_operations(now() - interval '1 hour')`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("purge of records finished before an hour ago = %d, %v; want 0", n, err)
	}
	if err := owner.QueryRow(ctx, `SELECT catalog.purge_exported_operations(now() + interval '1 hour')`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("purge = %d, %v; want the 2 exported records", n, err)
	}
	var left []int64
	rows, err := owner.Query(ctx, `SELECT sequence FROM catalog.operations ORDER BY sequence`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var q int64
		_ = rows.Scan(&q)
		left = append(left, q)
	}
	if rows.Close(); len(left) != 2 || left[0] != rs[2].Sequence || left[1] != rs[3].Sequence {
		t.Fatalf("left %v, want the unexported %d and %d", left, rs[2].Sequence, rs[3].Sequence)
	}
	if err := owner.QueryRow(ctx, `SELECT catalog.purge_exported_operations(now() + interval '1 hour')`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("a second purge = %d, %v; want 0", n, err)
	}
	if _, err := owner.Exec(ctx, `TRUNCATE catalog.operations`); err == nil {
		t.Error("TRUNCATE accepted")
	}
}

// sequences is the records digest of an archive of these sequences.
func sequences(seqs ...int64) string {
	d := exportset.New()
	for _, q := range seqs {
		d.Add(q)
	}
	return d.Sum()
}

// TestPurgeNeverDeletesARecordInFlight: a record whose sequence was taken
// before its range was exported, and that committed after, is in no
// archive. An export of the range is noted without it (the set it names
// is what the range held), and no purge deletes it: not after it commits
// and another export's purge brings the range's count back to the
// archived one (found by review: the purge compared counts only). The SQL
// digest is the Go one (exportset). (That a record committing while the
// purge runs is not deleted either follows from the purge deleting the
// sequences it checked, read in one snapshot.)
func TestPurgeNeverDeletesARecordInFlight(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	owner, service := ownerAndService(ctx, t)
	s := postgres.New(service)
	done := records.Completion{Status: sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED, FinishedAt: time.Now()}
	add := func(call string) *records.Record {
		r := recordstest.NewRecord("t1", call, "files.read")
		if err := s.Begin(ctx, r); err != nil {
			t.Fatal(err)
		}
		if err := s.Complete(ctx, r.AttemptID, done); err != nil {
			t.Fatal(err)
		}
		return r
	}
	r1 := add("c1")
	add("c2")
	// A kernel's insert took the next sequence and has not committed (a
	// group-commit batch in flight).
	tx, err := service.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	inflight := recordstest.NewRecord("t1", "c3", "files.read")
	if err := tx.QueryRow(ctx, `INSERT INTO catalog.operations (attempt_id, call_id, turn_id, principal, requested_tool, requested_tool_sha256,
    catalog_hash, arguments_digest, instance_id, started_at, status)
SELECT $1, $2, turn_id, principal, requested_tool, requested_tool_sha256, catalog_hash, arguments_digest, instance_id, started_at, 'pending'
  FROM catalog.operations WHERE sequence = $3 RETURNING sequence`, inflight.AttemptID, inflight.CallID, r1.Sequence).Scan(&inflight.Sequence); err != nil {
		t.Fatal(err)
	}
	r4 := add("c4")
	from, page, err := s.ExportPage(ctx, time.Time{}, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var seen []int64
	for _, r := range page {
		seen = append(seen, r.Sequence)
	}
	var inSQL string
	if err := owner.QueryRow(ctx, `SELECT catalog.operations_set_digest($1, $2)`, from, r4.Sequence).Scan(&inSQL); err != nil || inSQL != sequences(seen...) {
		t.Fatalf("the SQL digest %s (%v) is not exportset's %s", inSQL, err, sequences(seen...))
	}
	if _, err := s.RecordExport(ctx, records.Export{After: from, Through: r4.Sequence, Rows: int64(len(page)), SHA256: strings.Repeat("a", 64),
		RecordsDigest: sequences(seen...)}); err != nil {
		t.Fatalf("the export of what the range held: %v", err)
	}
	if err := tx.Commit(ctx); err != nil { // the record in flight commits, then completes
		t.Fatal(err)
	}
	if err := s.Complete(ctx, inflight.AttemptID, done); err != nil {
		t.Fatal(err)
	}
	// Another archive of the first record alone, purged: the first range's
	// count is back to its archive's.
	if _, err := s.RecordExport(ctx, records.Export{After: from, Through: r1.Sequence, Rows: 1, SHA256: strings.Repeat("b", 64),
		RecordsDigest: sequences(r1.Sequence)}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := owner.Exec(ctx, `SELECT catalog.purge_exported_operations(now() + interval '1 hour')`); err != nil {
			t.Fatal(err)
		}
	}
	var left int
	if err := owner.QueryRow(ctx, `SELECT count(*) FROM catalog.operations WHERE sequence = $1`, inflight.Sequence).Scan(&left); err != nil || left != 1 {
		t.Fatalf("the record in no archive: %d left (%v), want 1", left, err)
	}
	// An export noted before exports named their records is never purged.
	if _, err := owner.Exec(ctx, `INSERT INTO catalog.operation_exports (after_sequence, through_sequence, rows, sha256)
VALUES ($1, $2, 1, $3)`, inflight.Sequence-1, inflight.Sequence, strings.Repeat("c", 64)); err != nil {
		t.Fatal(err)
	}
	var n int64
	if err := owner.QueryRow(ctx, `SELECT catalog.purge_exported_operations(now() + interval '1 hour')`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("purge of an export that names no records = %d, %v; want 0", n, err)
	}
}

// TestCompletionIsHeapOnly: no index of catalog.operations names a column
// a completion writes, and its pages keep room for the completed version,
// so PostgreSQL can complete a row without a new entry in every index (a
// heap-only update; migration 00014, issue 20 P1e). waiting_until is the
// exception a completion leaves alone: it writes NULL over NULL unless the
// row was waiting, and an equal value does not stop a heap-only update.
func TestCompletionIsHeapOnly(t *testing.T) {
	pool := newPool(t)
	ctx := context.Background()
	written := regexp.MustCompile(`\b(status|code|reason|resolved_tool|decision_id|policy_revision|finished_at|progress_count)\b`)
	rows, err := pool.Query(ctx, `SELECT indexrelid::regclass::text, pg_get_indexdef(indexrelid)
  FROM pg_index WHERE indrelid = 'catalog.operations'::regclass`)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		var name, def string
		if err := rows.Scan(&name, &def); err != nil {
			t.Fatal(err)
		}
		n++
		if col := written.FindString(def); col != "" {
			t.Errorf("index %s names %s, which a completion writes: %s", name, col, def)
		}
	}
	if rows.Close(); rows.Err() != nil || n == 0 {
		t.Fatalf("read %d indexes: %v", n, rows.Err())
	}
	var opts []string
	if err := pool.QueryRow(ctx, `SELECT COALESCE(reloptions, '{}') FROM pg_class WHERE oid = 'catalog.operations'::regclass`).Scan(&opts); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(opts, "fillfactor=80") {
		t.Errorf("catalog.operations options %v, want fillfactor=80", opts)
	}
}

// TestReconcileWatermark: the service role's reconcile moves the watermark
// up to the oldest row it leaves pending — one waiting for input holds it —
// and then to its cutoff; a reconcile with an older cutoff never moves it
// back. A row that started before the watermark is outside every search:
// the bound the watermark assumes (a pending row's insert commits within
// the reconciler's cutoff of its start, ADR 0027).
func TestReconcileWatermark(t *testing.T) {
	dsn := pgtest.NewDatabase(t, migrations.Up)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	service, err := pgdb.Open(ctx, dsn, pgdb.WithRole(migrations.ServiceRole))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(service.Close)
	s := postgres.New(service)
	watermark := func() time.Time {
		t.Helper()
		var w time.Time
		if err := service.QueryRow(ctx, `SELECT through FROM catalog.reconcile_watermark`).Scan(&w); err != nil {
			t.Fatal(err)
		}
		return w
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	if w := watermark(); w.After(now.Add(-time.Hour)) {
		t.Fatalf("watermark after migration %v, want an hour back at least", w)
	}
	waiting := recordstest.NewRecord("t1", "waiting", "files.read")
	waiting.StartedAt = now.Add(-30 * time.Minute)
	stale := recordstest.NewRecord("t1", "stale", "files.read")
	stale.StartedAt = now.Add(-20 * time.Minute)
	for _, r := range []*records.Record{waiting, stale} {
		if err := s.Begin(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Park(ctx, waiting.AttemptID, records.Wait{Round: 1, TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	cutoff := now.Add(-time.Minute)
	if n, err := s.Reconcile(ctx, cutoff); err != nil || n != 1 {
		t.Fatalf("Reconcile = %d, %v; want the stale row", n, err)
	}
	if w := watermark(); !w.Equal(waiting.StartedAt) {
		t.Fatalf("watermark %v, want %v: the waiting row is still pending", w, waiting.StartedAt)
	}
	if _, err := s.Resume(ctx, records.Resumption{AttemptID: waiting.AttemptID, TurnID: "t1", RequestedToolSHA256: waiting.RequestedToolSHA256,
		ArgumentsDigest: waiting.ArgumentsDigest, Round: 1, InstanceID: "kernel-2"}); err != nil {
		t.Fatal(err)
	}
	// Resumed just now: not stale, and still holding the watermark.
	if n, err := s.Reconcile(ctx, cutoff); err != nil || n != 0 {
		t.Fatalf("Reconcile = %d, %v; want nothing", n, err)
	}
	if w := watermark(); !w.Equal(waiting.StartedAt) {
		t.Fatalf("watermark %v, want %v: the resumed row is still pending", w, waiting.StartedAt)
	}
	if n, err := s.ReconcileInstance(ctx, "kernel-2", time.Now().Add(time.Minute)); err != nil || n != 1 {
		t.Fatalf("ReconcileInstance(kernel-2) = %d, %v; want the resumed row", n, err)
	}
	if n, err := s.Reconcile(ctx, cutoff); err != nil || n != 0 {
		t.Fatalf("Reconcile = %d, %v; want nothing", n, err)
	}
	if w := watermark(); !w.Equal(cutoff) {
		t.Fatalf("watermark %v, want the cutoff %v: nothing is pending before it", w, cutoff)
	}
	if _, err := s.Reconcile(ctx, now.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if w := watermark(); !w.Equal(cutoff) {
		t.Fatalf("watermark %v after an older cutoff, want it kept at %v", w, cutoff)
	}
	before := recordstest.NewRecord("t1", "before", "files.read")
	before.StartedAt = cutoff.Add(-time.Minute)
	if err := s.Begin(ctx, before); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Reconcile(ctx, now); err != nil || n != 0 {
		t.Fatalf("Reconcile = %d, %v; a row started before the watermark was searched", n, err)
	}
}

// Identity names the cluster (its system identifier) and the database, as
// the service role reads them; where the server withholds the identifier
// from that role, the database alone.
func TestIdentity(t *testing.T) {
	dsn := pgtest.NewDatabase(t, migrations.Up)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	open := func() *pgxpool.Pool {
		pool, err := pgdb.Open(ctx, dsn, pgdb.WithRole(migrations.ServiceRole))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		return pool
	}
	var db string
	if err := open().QueryRow(ctx, `SELECT current_database()`).Scan(&db); err != nil {
		t.Fatal(err)
	}
	id, err := postgres.New(open()).Identity(ctx)
	if err != nil || !regexp.MustCompile(`^PostgreSQL system [0-9]+, database "`+regexp.QuoteMeta(db)+`"$`).MatchString(id) {
		t.Fatalf("Identity = %q, %v", id, err)
	}
	owner, err := pgdb.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()
	if _, err := owner.Exec(ctx, `REVOKE EXECUTE ON FUNCTION pg_control_system() FROM PUBLIC`); err != nil {
		t.Fatal(err)
	}
	if id, err := postgres.New(open()).Identity(ctx); err != nil || id != `PostgreSQL system unknown, database "`+db+`"` {
		t.Fatalf("Identity without the identifier = %q, %v", id, err)
	}
}
