package postgres_test

import (
	"context"
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

// TestPurgeOnlyExported: catalog.purge_exported_operations deletes exactly
// the records of a noted archive that still matches the table; no record
// outside one can be deleted, and the service role cannot purge at all.
func TestPurgeOnlyExported(t *testing.T) {
	dsn := pgtest.NewDatabase(t, migrations.Up)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	owner, err := pgdb.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(owner.Close)
	service, err := pgdb.Open(ctx, dsn, pgdb.WithRole(migrations.ServiceRole))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(service.Close)
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
	if _, err := s.RecordExport(ctx, records.Export{After: base, Through: rs[1].Sequence, Rows: 2, SHA256: strings.Repeat("0", 64)}); err != nil {
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
