package pgdb_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.opentelemetry.io/otel/trace"

	"github.com/sharedos/toolshare/services/platform/pgdb"
	"github.com/sharedos/toolshare/services/platform/telemetry"
)

func scanText(row pgx.Row) (string, error) {
	var s string
	err := row.Scan(&s)
	return s, err
}

// waitQueued polls until n statements wait in the held group.
func waitQueued(t *testing.T, queued func() int, n int) {
	t.Helper()
	for queued() < n {
		select {
		case <-t.Context().Done():
			t.Fatalf("%d statements queued, want %d", queued(), n)
		default:
			time.Sleep(time.Millisecond) // polling a condition, not waiting out a duration
		}
	}
}

// TestGroupCommitsConcurrentStatementsTogether: statements that queue while
// a batch is in flight leave in one batch — one transaction — and each
// caller gets its own answer and a span of its own with the batch size.
func TestGroupCommitsConcurrentStatementsTogether(t *testing.T) {
	pool, exp, tracer := tracedPool(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `CREATE TABLE g (id int PRIMARY KEY, v text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	g := pgdb.NewGroup(pool)
	insert := pgdb.NewStmt(`INSERT INTO g (id, v) VALUES ($1, $2) RETURNING pg_current_xact_id()::text`)
	queued, release := g.HoldForTest()
	const n = 20
	xids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			cctx, span := tracer.Start(ctx, fmt.Sprintf("call %d", i))
			defer span.End()
			xids[i], errs[i] = pgdb.QueryRow(cctx, g, insert, []any{i, fmt.Sprint("v", i)}, scanText)
		})
	}
	waitQueued(t, queued, n)
	release()
	wg.Wait()
	for i := range n {
		if errs[i] != nil || xids[i] == "" || xids[i] != xids[0] {
			t.Fatalf("statement %d: xid %q, %v; want every statement in transaction %q", i, xids[i], errs[i], xids[0])
		}
	}
	var rows int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM g`).Scan(&rows); err != nil || rows != n {
		t.Fatalf("%d rows committed (%v), want %d", rows, err, n)
	}
	// A caller alone is a batch of one, at once.
	if tag, err := g.Exec(ctx, pgdb.NewStmt(`UPDATE g SET v = 'x' WHERE id = $1`), 3); err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("lone update: %v, %v", tag, err)
	}
	// Each traced caller has its own INSERT span, below its own, with the
	// batch size.
	parents := map[trace.SpanID]bool{}
	for _, s := range exp.GetSpans() {
		if s.Name != "INSERT g" {
			continue
		}
		parents[s.Parent.SpanID()] = true
		var size int64
		for _, kv := range s.Attributes {
			if string(kv.Key) == telemetry.AttrDBBatchSize {
				size = kv.Value.AsInt64()
			}
		}
		if size != n {
			t.Errorf("span %s: batch size %d, want %d", s.Name, size, n)
		}
	}
	if len(parents) != n {
		t.Errorf("INSERT spans under %d callers, want %d", len(parents), n)
	}
}

// TestGroupRefusalIsOnlyItsOwn: a statement the server refuses rolls its
// batch back; the others run again alone and commit, and only the refused
// caller sees the error.
func TestGroupRefusalIsOnlyItsOwn(t *testing.T) {
	pool, _, _ := tracedPool(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `CREATE TABLE g (id int PRIMARY KEY CHECK (id <> 3))`); err != nil {
		t.Fatal(err)
	}
	g := pgdb.NewGroup(pool)
	insert := pgdb.NewStmt(`INSERT INTO g (id) VALUES ($1)`)
	queued, release := g.HoldForTest()
	errs := make([]error, 6)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() { _, errs[i] = g.Exec(ctx, insert, i) })
	}
	waitQueued(t, queued, len(errs))
	release()
	wg.Wait()
	for i, err := range errs {
		var pgErr *pgconn.PgError
		switch {
		case i == 3 && (!errors.As(err, &pgErr) || pgErr.Code != "23514"):
			t.Errorf("statement 3: %v, want its check violation", err)
		case i != 3 && err != nil:
			t.Errorf("statement %d: %v, want it committed", i, err)
		}
	}
	var rows int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM g`).Scan(&rows); err != nil || rows != len(errs)-1 {
		t.Fatalf("%d rows committed (%v), want %d", rows, err, len(errs)-1)
	}
}

// TestGroupRerunKeepsNoRows: a statement that returns no rows says so
// (pgx.ErrNoRows) also when another caller's refused statement rolled its
// batch back and each ran again alone: an INSERT … ON CONFLICT DO NOTHING
// that inserted nothing must never read as one that did.
func TestGroupRerunKeepsNoRows(t *testing.T) {
	pool, _, _ := tracedPool(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `CREATE TABLE g (id int PRIMARY KEY); INSERT INTO g VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	g := pgdb.NewGroup(pool)
	insert := pgdb.NewStmt(`INSERT INTO g (id) VALUES ($1) ON CONFLICT DO NOTHING RETURNING id::text`)
	queued, release := g.HoldForTest()
	var (
		wg             sync.WaitGroup
		got            string
		errDup, errBad error
	)
	wg.Go(func() { got, errDup = pgdb.QueryRow(ctx, g, insert, []any{1}, scanText) })
	wg.Go(func() { _, errBad = g.Exec(ctx, pgdb.NewStmt(`SELECT 1/0`)) })
	waitQueued(t, queued, 2)
	release()
	wg.Wait()
	var pgErr *pgconn.PgError
	if !errors.As(errBad, &pgErr) || pgErr.Code != "22012" {
		t.Fatalf("refused statement: %v, want its division by zero", errBad)
	}
	if !errors.Is(errDup, pgx.ErrNoRows) {
		t.Fatalf("conflicting insert rerun alone: %q, %v; want pgx.ErrNoRows", got, errDup)
	}
}

// TestGroupWithdrawsCancelled: a caller that leaves before its statement
// is sent withdraws it (an error pgx calls safe to retry: nothing reached
// the server); one whose statement is in flight gets an error that is not.
func TestGroupWithdrawsCancelled(t *testing.T) {
	pool, _, _ := tracedPool(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `CREATE TABLE g (id int PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	g := pgdb.NewGroup(pool)
	insert := pgdb.NewStmt(`INSERT INTO g (id) VALUES ($1)`)
	queued, release := g.HoldForTest()
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { _, err := g.Exec(cctx, insert, 1); done <- err }()
	waitQueued(t, queued, 1)
	cancel()
	err := <-done
	if !errors.Is(err, context.Canceled) || !pgconn.SafeToRetry(err) {
		t.Fatalf("withdrawn statement: %v (safe to retry %v), want canceled and safe to retry", err, pgconn.SafeToRetry(err))
	}
	if queued() != 0 {
		t.Fatalf("%d statements still queued after the withdrawal", queued())
	}
	release()
	if _, err := g.Exec(cctx, insert, 2); !errors.Is(err, context.Canceled) || !pgconn.SafeToRetry(err) {
		t.Fatalf("statement on a cancelled context: %v, want canceled and safe to retry", err)
	}
	var rows int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM g`).Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("%d rows (%v), want none: nothing was sent", rows, err)
	}

	// In flight: the batch holds a lock the test releases only after the
	// caller has left.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO g (id) VALUES (7)`); err != nil {
		t.Fatal(err)
	}
	cctx, cancel = context.WithCancel(ctx)
	go func() { _, err := g.Exec(cctx, insert, 7); done <- err }()
	for {
		var waiting int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		time.Sleep(time.Millisecond) // polling a condition
	}
	cancel()
	err = <-done
	if !errors.Is(err, context.Canceled) || pgconn.SafeToRetry(err) {
		t.Fatalf("in-flight statement: %v (safe to retry %v), want canceled and in doubt", err, pgconn.SafeToRetry(err))
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestGroupUnderLoad: many callers at once, no hold; every answer is its
// own (run with -race).
func TestGroupUnderLoad(t *testing.T) {
	pool, _, _ := tracedPool(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `CREATE TABLE g (id int PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	g := pgdb.NewGroup(pool)
	insert := pgdb.NewStmt(`INSERT INTO g (id) VALUES ($1) ON CONFLICT DO NOTHING RETURNING id`)
	scan := func(row pgx.Row) (int, error) {
		var id int
		err := row.Scan(&id)
		return id, err
	}
	var wg sync.WaitGroup
	for w := range 32 {
		wg.Go(func() {
			for i := range 25 {
				id := w*25 + i
				got, err := pgdb.QueryRow(ctx, g, insert, []any{id}, scan)
				if err != nil || got != id {
					t.Errorf("insert %d: %d, %v", id, got, err)
					return
				}
				// The repeat conflicts: no row, and not an error of the batch.
				if _, err := pgdb.QueryRow(ctx, g, insert, []any{id}, scan); !errors.Is(err, pgx.ErrNoRows) {
					t.Errorf("repeat of %d: %v, want no rows", id, err)
					return
				}
			}
		})
	}
	wg.Wait()
}
