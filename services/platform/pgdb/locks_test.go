package pgdb_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sharedos/toolshare/services/platform/pgdb"
	"github.com/sharedos/toolshare/services/platform/pgdb/pgtest"
)

// heldLocks counts the advisory locks granted in the test's database.
func heldLocks(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// sessions counts the connections of the test's database other than the
// probe's own.
func sessions(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestLocksOrderAcrossPools: two Locks on one database (two replicas): a
// name's second Lock returns only once the first unlocks; another name,
// and the same name in another space, do not wait; a Lock whose context
// ends while it waits returns its error and holds nothing; in one process
// a held name waits for its own unlock; many held locks share one session.
func TestLocksOrderAcrossPools(t *testing.T) {
	dsn := pgtest.NewDatabase(t, nil)
	ctx := context.Background()
	a, b := pgdb.NewLocks(pgtest.Pool(t, dsn), "test", nil), pgdb.NewLocks(pgtest.Pool(t, dsn), "test", nil)
	probe := pgtest.Pool(t, dsn)
	waits := make(chan struct{}, 64)
	b.OnWaitForTest(func() {
		select {
		case waits <- struct{}{}:
		default: // never hold Lock up
		}
	})

	unlockA, err := a.Lock(ctx, "turn-1")
	if err != nil {
		t.Fatal(err)
	}
	unlockOther, err := b.Lock(ctx, "turn-2")
	if err != nil {
		t.Fatal(err)
	}
	unlockOther()
	unlockSpace, err := pgdb.NewLocks(probe, "other", nil).Lock(ctx, "turn-1")
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
	<-waits // b asked and found it taken
	<-waits // and again
	select {
	case <-got:
		t.Fatal("the second Lock returned while the first held the lock")
	default:
	}
	// A third, on a context that ends while it waits, gives up.
	cctx, cancel := context.WithCancel(ctx)
	gaveUp := make(chan error, 1)
	go func() {
		_, err := b.Lock(cctx, "turn-1")
		gaveUp <- err
	}()
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Lock: %v, want context.Canceled", err)
	}
	unlockA()
	unlockB := <-got
	if unlockB == nil {
		t.FailNow()
	}
	if n := heldLocks(t, probe); n != 1 {
		t.Fatalf("%d advisory locks held, want the second holder's alone", n)
	}

	// In one process: a held name waits for its own unlock (the session's
	// locks are re-entrant, Locks is not); many names, one session.
	for len(waits) > 0 { // nothing else waits on b now
		<-waits
	}
	before := sessions(t, probe)
	unlock3, err := b.Lock(ctx, "turn-3")
	if err != nil {
		t.Fatal(err)
	}
	again := make(chan func(), 1)
	go func() {
		u, err := b.Lock(ctx, "turn-1")
		if err != nil {
			t.Errorf("Lock of a name held here: %v", err)
		}
		again <- u
	}()
	<-waits // it found the name held here
	if n := heldLocks(t, probe); n != 2 || sessions(t, probe) != before {
		t.Fatalf("%d locks on %d sessions (from %d), want 2 on the same one", n, sessions(t, probe), before)
	}
	select {
	case <-again:
		t.Fatal("a name held in this process was taken again before its unlock")
	default:
	}
	unlockB()
	u := <-again
	if u == nil {
		t.FailNow()
	}
	u()
	unlock3()
	if n := heldLocks(t, probe); n != 0 {
		t.Fatalf("%d advisory locks held after every unlock", n)
	}
}

// A Lock that gives up keeps no connection out of the pool, and a lock
// session that died (a failover, idle_session_timeout) costs no call: the
// next Lock asks again on a new session.
func TestLocksOutliveTheirSession(t *testing.T) {
	dsn := pgtest.NewDatabase(t, nil)
	ctx := context.Background()
	pool := pgtest.Pool(t, dsn)
	a, b := pgdb.NewLocks(pool, "test", nil), pgdb.NewLocks(pgtest.Pool(t, dsn), "test", nil)
	probe := pgtest.Pool(t, dsn)

	unlockB, err := b.Lock(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	wctx, giveUp := context.WithCancel(ctx)
	a.OnWaitForTest(giveUp) // a finds x taken, and gives up
	if _, err := a.Lock(wctx, "x"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock of a name held elsewhere, given up: %v", err)
	}
	a.OnWaitForTest(nil)
	unlockB()
	if n := pool.Stat().AcquiredConns(); n != 0 {
		t.Errorf("%d connections kept out of the pool by Locks holding nothing", n)
	}

	unlockH, err := a.Lock(ctx, "h")
	if err != nil {
		t.Fatal(err)
	}
	var ended bool
	if err := probe.QueryRow(ctx, `SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&ended); err != nil || !ended {
		t.Fatalf("ending the lock session: %v %v", ended, err)
	}
	unlockY, err := a.Lock(ctx, "y")
	if err != nil {
		t.Fatalf("Lock after the session died: %v", err)
	}
	if n := heldLocks(t, probe); n != 1 {
		t.Errorf("%d advisory locks held, want y's alone (h ended with its session)", n)
	}
	unlockY()
	unlockH() // its session is gone: nothing to release
	if n := heldLocks(t, probe); n != 0 {
		t.Errorf("%d advisory locks held after every unlock", n)
	}
	if n := pool.Stat().AcquiredConns(); n != 0 {
		t.Errorf("%d connections kept out of the pool after every unlock (the last of a lost session's)", n)
	}
}
