package pgtest

import (
	"context"
	"strings"
	"testing"
	"time"
)

// CheckRoleMadeConcurrently runs the DO block of migration (its SQL) that
// creates role, with role renamed to a throwaway one, in two sessions at
// once: the second waits on the first's uncommitted role, and must end
// without an error once the first commits (PostgreSQL then raises
// unique_violation, not duplicate_object). Two databases of one cluster
// migrated together — two installations, two test templates — are such
// a race.
func CheckRoleMadeConcurrently(t *testing.T, migration []byte, role string) {
	t.Helper()
	sql := string(migration)
	start, end := strings.Index(sql, "DO $$"), strings.LastIndex(sql, "$$;")
	if start < 0 || end < start || !strings.Contains(sql[start:end], "CREATE ROLE "+role+" ") {
		t.Fatalf("the migration has no DO block creating %s", role)
	}
	throwaway := newName("pgtest_role_")
	block := strings.ReplaceAll(sql[start:end+len("$$;")], role, throwaway)
	ctx := t.Context()
	first, err := connect(ctx, AdminDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = first.Close(context.Background()) }()
	second, err := connect(ctx, AdminDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = second.Close(context.Background()) }()
	t.Cleanup(func() {
		if err := exec(context.Background(), AdminDSN(), "DROP ROLE IF EXISTS "+throwaway); err != nil {
			t.Errorf("drop %s: %v", throwaway, err)
		}
	})

	tx, err := first.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(ctx, block); err != nil {
		t.Fatalf("first session: %v", err)
	}
	done := make(chan error, 1)
	waiter := second.PgConn().PID()
	go func() {
		_, err := second.Exec(ctx, block)
		done <- err
	}()
	// The second waits on the first's role: PostgreSQL shows it waiting
	// for a lock (the condition; the pause only spaces the looks).
	for waiting := false; !waiting; {
		if err := first.QueryRow(ctx, `SELECT count(*) = 1 FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'`, waiter).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			t.Fatalf("the second session did not wait for the first's role: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Errorf("the second of two migrations creating %s at once: %v", role, err)
	}
}
