package pgdb_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sharedos/toolshare/services/platform/pgdb"
	"github.com/sharedos/toolshare/services/platform/pgdb/pgtest"
)

// waitingLocks counts advisory lock requests PostgreSQL has not granted.
func waitingLocks(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func heldLocks(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestLocksOrderAcrossPools: two pools (two replicas) on one database: a
// name's second Lock waits in PostgreSQL until the first unlocks; another
// name does not wait; a Lock whose context ends while it waits returns an
// error and holds nothing.
func TestLocksOrderAcrossPools(t *testing.T) {
	dsn := pgtest.NewDatabase(t, nil)
	ctx := context.Background()
	open := func() *pgxpool.Pool { return pgtest.Pool(t, dsn) }
	a, b := pgdb.NewLocks(open(), "test"), pgdb.NewLocks(open(), "test")
	probe := open()

	unlockA, err := a.Lock(ctx, "turn-1")
	if err != nil {
		t.Fatal(err)
	}
	// Another name, and the same name in another space, are free.
	unlockOther, err := b.Lock(ctx, "turn-2")
	if err != nil {
		t.Fatal(err)
	}
	unlockOther()
	unlockSpace, err := pgdb.NewLocks(probe, "other").Lock(ctx, "turn-1")
	if err != nil {
		t.Fatal(err)
	}
	unlockSpace()

	got := make(chan func(), 1)
	go func() {
		unlock, err := b.Lock(ctx, "turn-1")
		if err != nil {
			t.Errorf("second Lock: %v", err)
			close(got)
			return
		}
		got <- unlock
	}()
	for waitingLocks(t, probe) == 0 {
		time.Sleep(time.Millisecond) // polling a condition
	}
	select {
	case <-got:
		t.Fatal("the second Lock returned while the first held the lock")
	default:
	}
	// A third, on a context that ends while it waits, gives up and holds
	// nothing.
	cctx, cancel := context.WithCancel(ctx)
	gaveUp := make(chan error, 1)
	go func() {
		_, err := a.Lock(cctx, "turn-1")
		gaveUp <- err
	}()
	for waitingLocks(t, probe) < 2 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Lock: %v, want context.Canceled", err)
	}
	for waitingLocks(t, probe) != 1 { // its request left PostgreSQL's queue
		time.Sleep(time.Millisecond)
	}
	unlockA()
	unlockB := <-got
	if unlockB == nil {
		t.FailNow()
	}
	if n := heldLocks(t, probe); n != 1 {
		t.Fatalf("%d advisory locks held, want the second holder's alone", n)
	}
	unlockB()
	if n := heldLocks(t, probe); n != 0 {
		t.Fatalf("%d advisory locks held after every unlock", n)
	}
}
