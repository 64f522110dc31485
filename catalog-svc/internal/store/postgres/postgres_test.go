package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sharedos/toolshare/services/platform/pgdb"
	"github.com/sharedos/toolshare/services/platform/pgdb/pgtest"

	"github.com/sharedos/toolshare/catalog-svc/internal/store"
	"github.com/sharedos/toolshare/catalog-svc/internal/store/postgres"
	"github.com/sharedos/toolshare/catalog-svc/internal/store/storetest"
	"github.com/sharedos/toolshare/catalog-svc/migrations"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// newPool returns a pool on a fresh migrated database.
func newPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	dsn := pgtest.NewDatabase(t, migrations.Up)
	return openPool(t, dsn)
}

func openPool(t *testing.T, dsn string, opts ...pgdb.Option) *pgxpool.Pool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgdb.Open(ctx, dsn, opts...)
	if err != nil {
		t.Fatalf("open %s: %v", pgdb.RedactDSN(dsn), err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) (store.Store, store.Store) {
		pool := newPool(t)
		return postgres.New(pool), postgres.New(pool)
	})
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// replicas are two Stores over one new database, each with a pool of its
// own, as two catalog-svc replicas have.
func replicas(t *testing.T) (a, b *postgres.Store) {
	t.Helper()
	dsn := pgtest.NewDatabase(t, migrations.Up)
	return postgres.New(openPool(t, dsn)), postgres.New(openPool(t, dsn))
}

// watch is s's feed for the test's lifetime.
func watch(t *testing.T, s *postgres.Store) *store.Feed {
	t.Helper()
	feed, err := s.Watch(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	return feed
}

// Two stores over one database stand for two replicas: each sees the
// other's writes through LISTEN/NOTIFY.
func TestWatchAcrossReplicas(t *testing.T) {
	t.Parallel()
	a, b := replicas(t)
	feed := watch(t, b)
	if _, err := a.Create(testCtx(t), storetest.Record("files.read")); err != nil {
		t.Fatal(err)
	}
	waitName(t, feed, "files.read")
}

// A batch reaches every other replica's feed as "all changed" and not the
// feed of the Store that wrote it, whose caller has the records: the next
// thing that feed reports is the writer's next change, by name.
func TestOwnBatchNotInOwnFeed(t *testing.T) {
	t.Parallel()
	a, b := replicas(t)
	own := watch(t, a)
	other := watch(t, b)
	for round := range 3 {
		if _, err := a.CreateBatch(testCtx(t), storetest.Batch(fmt.Sprintf("bulk%d", round), 3)); err != nil {
			t.Fatal(err)
		}
		next := fmt.Sprintf("files.read%d", round)
		if _, err := a.Create(testCtx(t), storetest.Record(next)); err != nil {
			t.Fatal(err)
		}
		// Notices arrive in commit order: had the batch's been reported,
		// it would come first (or coalesce with the name into "all").
		names, all := takeNext(t, own)
		if all || !slices.Equal(names, []string{next}) {
			t.Fatalf("round %d: own feed reported %v (all=%v), want only %s", round, names, all, next)
		}
		// The other feed: the batch as "all changed" (the name after it
		// may be folded into it, or come on its own before the next batch).
		for all := false; !all; {
			_, all = takeNext(t, other)
		}
	}
	// A batch the other replica writes is "all changed" here.
	if _, err := b.CreateBatch(testCtx(t), storetest.Batch("theirs", 2)); err != nil {
		t.Fatal(err)
	}
	if _, all := takeNext(t, own); !all {
		t.Fatal("another replica's batch was not reported as all changed")
	}
}

// takeNext waits for the feed's next report.
func takeNext(t *testing.T, feed *store.Feed) ([]string, bool) {
	t.Helper()
	select {
	case <-feed.Ready():
		return feed.Take()
	case <-time.After(10 * time.Second):
		t.Fatal("nothing reported within 10s")
		return nil, false
	}
}

// The listening connection is killed server-side; the feed reconnects and
// reports "all changed", and later changes arrive again.
func TestWatchReconnects(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	s := postgres.New(pool)
	feed := watch(t, s)
	var killed int
	err := pool.QueryRow(testCtx(t), `
		SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND query ILIKE 'LISTEN %'`).Scan(&killed)
	if err != nil || killed != 1 {
		t.Fatalf("terminated %d listener backends (%v), want 1", killed, err)
	}
	deadline := time.After(10 * time.Second)
	for all := false; !all; {
		select {
		case <-feed.Ready():
			_, all = feed.Take()
		case <-deadline:
			t.Fatal("no 'all changed' after the listener was killed")
		}
	}
	if _, err := s.Create(testCtx(t), storetest.Record("files.read")); err != nil {
		t.Fatal(err)
	}
	waitName(t, feed, "files.read")
}

func waitName(t *testing.T, feed *store.Feed, name string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case <-feed.Ready():
			if names, all := feed.Take(); all || slices.Contains(names, name) {
				return
			}
		case <-deadline:
			t.Fatalf("change to %q not seen within 10s", name)
		}
	}
}

// The jsonb copies are real JSON values operators can query, while the raw
// bytes keep the registered text.
func TestJSONBColumns(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	s := postgres.New(pool)
	if _, err := s.Create(testCtx(t), storetest.Record("files.read")); err != nil {
		t.Fatal(err)
	}
	var typ, key string
	err := pool.QueryRow(testCtx(t), `SELECT input_schema->>'type', collision_key FROM catalog.tools WHERE name = 'files.read'`).Scan(&typ, &key)
	if err != nil || typ != "object" || key != "files_read" {
		t.Fatalf("jsonb type / collision key = %q / %q (%v), want object / files_read", typ, key, err)
	}
}

// JSON that jsonb cannot hold is a domain error, not a driver error.
func TestUnstorableJSON(t *testing.T) {
	t.Parallel()
	s := postgres.New(newPool(t))
	rec := storetest.Record("files.read")
	rec.Registration.InputSchemaJson = []byte(`{"type":"object","description":"nul \u0000 here"}`)
	if _, err := s.Create(testCtx(t), rec); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Create error = %v, want ErrInvalid", err)
	}
}

// A registration entry PostgreSQL refuses a value of (a key past the
// table's check, NUL in the text key) is ErrInvalid, as a tool's is.
func TestUnstorableEntry(t *testing.T) {
	t.Parallel()
	s := postgres.New(newPool(t))
	for _, key := range []string{strings.Repeat("n", 200), "fs\x00"} {
		_, err := s.PutEntry(testCtx(t), store.KindUpstream, store.Entry{Key: key, Registration: []byte("x"), Canonical: []byte{}})
		if !errors.Is(err, store.ErrInvalid) {
			t.Errorf("PutEntry(upstream %q) error = %v, want ErrInvalid", key, err)
		}
	}
}

// A number numeric cannot hold (SQLSTATE 22003) is a domain error too, in a
// single write and in a batch.
func TestUnstorableNumber(t *testing.T) {
	t.Parallel()
	s := postgres.New(newPool(t))
	rec := storetest.Record("files.read")
	rec.Registration.InputSchemaJson = []byte(`{"type":"object","properties":{"n":{"type":"number","default":1e-20000}}}`)
	if _, err := s.Create(testCtx(t), rec); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Create error = %v, want ErrInvalid", err)
	}
	if _, err := s.CreateBatch(testCtx(t), []store.Record{storetest.Record("bulk.a"), rec}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("CreateBatch error = %v, want ErrInvalid", err)
	}
}

// waitLockWaits waits until n backends of pool's database wait for a lock.
func waitLockWaits(t *testing.T, pool *pgxpool.Pool, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var got int
		if err := pool.QueryRow(testCtx(t), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d backends wait for a lock, want %d", got, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A tool re-created while its deletion commits, through another replica
// acting as the service role (which may keep tombstones, migration 00020),
// still continues from its predecessor's last revision: the re-creation's
// insert waits for the deleting transaction, and the tombstone is read by a
// statement that begins after it committed.
func TestRecreateWhileDeleteCommits(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	dsn := pgtest.NewDatabase(t, migrations.Up)
	owner := openPool(t, dsn)
	a := postgres.New(openPool(t, dsn, pgdb.WithRole(migrations.ServiceRole)))
	b := postgres.New(openPool(t, dsn, pgdb.WithRole(migrations.ServiceRole)))
	if _, err := a.Create(ctx, storetest.Record("files.read")); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Update(ctx, storetest.Record("files.read"), 1); err != nil {
		t.Fatal(err)
	}
	// An uncommitted tombstone for the name holds the Delete open after it
	// has deleted the row: its own tombstone write waits.
	hold, err := owner.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = hold.Rollback(ctx) }()
	if _, err := hold.Exec(ctx, `INSERT INTO catalog.tool_tombstones (name, last_revision) VALUES ('files.read', 1)`); err != nil {
		t.Fatal(err)
	}
	deleted := make(chan error, 1)
	go func() { deleted <- a.Delete(ctx, "files.read") }()
	waitLockWaits(t, owner, 1)
	type result struct {
		rec store.Record
		err error
	}
	created := make(chan result, 1)
	go func() {
		rec, err := b.Create(ctx, storetest.Record("files.read"))
		created <- result{rec, err}
	}()
	waitLockWaits(t, owner, 2) // the Create's insert waits for the Delete
	if err := hold.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-deleted; err != nil {
		t.Fatalf("Delete: %v", err)
	}
	got := <-created
	if got.err != nil {
		t.Fatalf("Create: %v", got.err)
	}
	if rev := got.rec.Registration.GetRevision(); rev != 3 {
		t.Errorf("re-created tool's revision = %d, want 3", rev)
	}
	if _, err := a.Update(ctx, storetest.Record("files.read"), 2); !errors.Is(err, store.ErrRevisionMismatch) {
		t.Errorf("Update expecting the deleted tool's revision 2: error %v, want ErrRevisionMismatch", err)
	}
}
