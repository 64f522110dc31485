package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/proto"

	"github.com/sharedos/toolshare/bridge-svc/internal/leases"
	"github.com/sharedos/toolshare/bridge-svc/internal/leases/postgres"
	"github.com/sharedos/toolshare/bridge-svc/internal/leases/storetest"
	"github.com/sharedos/toolshare/bridge-svc/migrations"
	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/platform/pgdb"
	"github.com/sharedos/toolshare/services/platform/pgdb/pgtest"
)

func open(t *testing.T) *postgres.Store { return postgres.New(openPool(t)) }

// openPool opens a pool on a fresh, migrated database.
func openPool(t *testing.T) *pgxpool.Pool {
	dsn := pgtest.NewDatabase(t, migrations.Up)
	pool, err := pgdb.Open(context.Background(), dsn)
	if err != nil {
		t.Fatalf("open %s: %v", pgdb.RedactDSN(dsn), err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) leases.Store { return open(t) })
}

// TestAnswersRelay: a passed answer is announced to every watcher and
// taken exactly once, whole; an id nobody passed is ErrNotFound.
func TestAnswersRelay(t *testing.T) {
	s := open(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	heard := make(chan string, 1)
	listening := make(chan struct{})
	go func() {
		_ = s.WatchAnswers(ctx, func() { close(listening) }, func(id []byte) { heard <- string(id) })
	}()
	<-listening
	a := leases.Answer{TurnID: "t1", SessionID: "s1", ID: []byte(`"sharedos-ask-1"`), Result: []byte(`{"action":"accept"}`)}
	if err := s.PassAnswer(ctx, a); err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-heard:
		if id != string(a.ID) {
			t.Fatalf("announced %q", id)
		}
	case <-ctx.Done():
		t.Fatal("the answer was never announced")
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var got []leases.Answer
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if g, err := s.TakeAnswer(ctx, a.ID); err == nil {
				mu.Lock()
				got = append(got, g)
				mu.Unlock()
			} else if !errors.Is(err, leases.ErrNotFound) {
				t.Errorf("TakeAnswer: %v", err)
			}
		}()
	}
	wg.Wait()
	if len(got) != 1 || got[0].TurnID != "t1" || got[0].SessionID != "s1" || string(got[0].Result) != string(a.Result) || got[0].Error != nil {
		t.Fatalf("taken %+v: want the answer once, whole", got)
	}
	if _, err := s.TakeAnswer(ctx, []byte(`"sharedos-ask-2"`)); !errors.Is(err, leases.ErrNotFound) {
		t.Fatalf("TakeAnswer of an id never passed: %v", err)
	}
}

// TestAnAnswerIDLongerThanTheTableHoldsIsRefusedByName: an answer whose
// id is longer than bridge.input_answers holds (64 characters) is refused
// with an error that says so, before the database would fail it by a bare
// SQLSTATE (its CHECK, or pg_notify's payload bound for 8,000 bytes or
// more); nothing is kept, and an id of 64 characters still passes.
func TestAnAnswerIDLongerThanTheTableHoldsIsRefusedByName(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	for _, n := range []int{65, 9000} {
		id := []byte(`"` + strings.Repeat("a", n-2) + `"`)
		err := s.PassAnswer(ctx, leases.Answer{TurnID: "t1", SessionID: "s1", ID: id, Result: []byte(`{}`)})
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("an id of %d characters", n)) {
			t.Fatalf("an answer id of %d characters: %v, want an error naming its length", n, err)
		}
		if _, err := s.TakeAnswer(ctx, id); !errors.Is(err, leases.ErrNotFound) {
			t.Fatalf("the refused answer of %d characters was kept: %v", n, err)
		}
	}
	if err := s.PassAnswer(ctx, leases.Answer{TurnID: "t1", SessionID: "s1", ID: []byte(`"` + strings.Repeat("a", 62) + `"`), Result: []byte(`{}`)}); err != nil {
		t.Fatalf("an answer id of 64 characters: %v", err)
	}
}

// TestAnswersBudget: a turn keeps at most leases.MaxPassedAnswers answers
// nobody took; past that a pass is ErrAnswerBudget and stores nothing,
// another turn is not held up, and an answer taken makes room.
func TestAnswersBudget(t *testing.T) {
	s := open(t)
	ctx := t.Context()
	pass := func(turn string, i int) error {
		return s.PassAnswer(ctx, leases.Answer{TurnID: turn, SessionID: "s", ID: []byte(fmt.Sprintf(`"sharedos-ask-%s-%d"`, turn, i)), Result: []byte(`{}`)})
	}
	for i := range leases.MaxPassedAnswers {
		if err := pass("t1", i); err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
	}
	if err := pass("t1", leases.MaxPassedAnswers); !errors.Is(err, leases.ErrAnswerBudget) {
		t.Fatalf("answer past the budget: %v, want ErrAnswerBudget", err)
	}
	if _, err := s.TakeAnswer(ctx, []byte(fmt.Sprintf(`"sharedos-ask-t1-%d"`, leases.MaxPassedAnswers))); !errors.Is(err, leases.ErrNotFound) {
		t.Fatalf("the refused answer was stored: %v", err)
	}
	if err := pass("t2", 0); err != nil {
		t.Fatalf("another turn's answer: %v", err)
	}
	if _, err := s.TakeAnswer(ctx, []byte(`"sharedos-ask-t1-0"`)); err != nil {
		t.Fatal(err)
	}
	if err := pass("t1", leases.MaxPassedAnswers+1); err != nil {
		t.Fatalf("an answer after one was taken: %v", err)
	}
}

// TestOldCatalogueRowsDecode: a lease written before prompts and resources
// were pinned holds a ListToolsResponse; it reads as a LeaseCatalogue with
// the same tools and hash, and none of the rest.
func TestOldCatalogueRowsDecode(t *testing.T) {
	old, err := proto.Marshal(&sharedosv1.ListToolsResponse{CatalogHash: "c0ffee",
		Tools: []*sharedosv1.PublishedTool{{Name: "files.read", CanonicalJson: []byte(`{"name":"files.read"}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	var cat sharedosv1.LeaseCatalogue
	if err := proto.Unmarshal(old, &cat); err != nil || cat.GetCatalogHash() != "c0ffee" || len(cat.GetTools()) != 1 ||
		cat.GetTools()[0].GetName() != "files.read" || len(cat.GetPrompts()) != 0 || cat.GetPromptsResourcesHash() != "" {
		t.Fatalf("decoded %v, %v", &cat, err)
	}
}

// TestCataloguesShared: leases pinning the same catalogue share one stored
// copy (migration 00008); a lease stored before it, its catalogue inline,
// still reads whole; the purge deletes a catalogue only when no lease
// names it.
func TestCataloguesShared(t *testing.T) {
	pool := openPool(t)
	s, ctx, now := postgres.New(pool), t.Context(), time.Now()
	count := func() (n int) {
		t.Helper()
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM bridge.catalogues`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// Every catalogue a statement sends, stored or not, is counted.
	if _, err := pool.Exec(ctx, `
		CREATE TABLE bridge.test_sent (n int NOT NULL);
		CREATE FUNCTION bridge.test_sent() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN INSERT INTO bridge.test_sent VALUES (1); RETURN NEW; END $$;
		CREATE TRIGGER test_sent BEFORE INSERT ON bridge.catalogues FOR EACH ROW EXECUTE FUNCTION bridge.test_sent()`); err != nil {
		t.Fatal(err)
	}
	sent := func() (n int) {
		t.Helper()
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM bridge.test_sent`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	a, b, other := storetest.Sample(t, now, now.Add(time.Hour)), storetest.Sample(t, now, now.Add(time.Hour)), storetest.Sample(t, now, now.Add(time.Hour))
	other.Tools = append(other.Tools, &sharedosv1.PublishedTool{Name: "files.list", CanonicalJson: []byte(`{"name":"files.list"}`)})
	for _, l := range []*leases.Lease{a, b, other} {
		if err := s.Create(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	if n := count(); n != 2 {
		t.Fatalf("%d catalogues stored for three leases of two catalogues, want 2", n)
	}
	// b's catalogue was not sent again: the store had just written it.
	if n := sent(); n != 2 {
		t.Fatalf("%d catalogues sent for three leases of two catalogues, want 2", n)
	}
	// Another pod's store sends it once, and stores no second copy.
	otherPod := postgres.New(pool)
	for range 2 {
		if err := otherPod.Create(ctx, storetest.Sample(t, now, now.Add(time.Hour))); err != nil {
			t.Fatal(err)
		}
	}
	if n, m := sent(), count(); n != 3 || m != 2 {
		t.Fatalf("after another pod's two leases: %d sent, %d stored; want 3 and 2", n, m)
	}
	var inline int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM bridge.leases WHERE catalogue IS NOT NULL`).Scan(&inline); err != nil || inline != 0 {
		t.Fatalf("%d leases hold their catalogue inline (%v), want 0", inline, err)
	}

	// A lease as stored before migration 00008.
	old := storetest.Sample(t, now, now.Add(time.Hour))
	cat, err := proto.Marshal(&sharedosv1.LeaseCatalogue{Tools: old.Tools, CatalogHash: old.CatalogHash})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `
		INSERT INTO bridge.leases (turn_id, token_sha256, context, policy, harness, declared_model, catalog_hash,
			catalogue, opened_at, expires_at)
		VALUES ($1, $2, '{}', '{}', '{}', '', $3, $4, $5, $6)`,
		old.TurnID, old.TokenHash[:], old.CatalogHash, cat, old.OpenedAt, old.ExpiresAt); err != nil {
		t.Fatal(err)
	}
	for _, l := range []*leases.Lease{a, b, other, old} {
		got, _, err := s.Get(ctx, l.TurnID)
		if err != nil || len(got.Tools) != len(l.Tools) || !proto.Equal(got.Tools[len(l.Tools)-1], l.Tools[len(l.Tools)-1]) {
			t.Fatalf("Get(%s) = %v, %v; want its own %d tools", l.TurnID, got, err, len(l.Tools))
		}
	}

	// Both leases of the shared catalogue closed: it goes, other's stays.
	for _, l := range []*leases.Lease{a, b} {
		if err := s.Close(ctx, l.TurnID); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(ctx, other.TurnID); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(ctx, storetest.Sample(t, now, now.Add(time.Hour))); err != nil { // names the shared one again
		t.Fatal(err)
	}
	if n, err := s.PurgeInactive(ctx, time.Now().Add(time.Minute)); err != nil || n != 3 {
		t.Fatalf("PurgeInactive = %d, %v, want 3", n, err)
	}
	if n := count(); n != 1 {
		t.Fatalf("%d catalogues after the purge, want 1 (the one a lease still names)", n)
	}
}

// A purge whose catalogue got named after its statement began — a lease
// committed meanwhile by a pod that remembered the digest (it sends no
// catalogue, only the lease) — fails its own key check (23503): the purge
// ends without an error and the catalogue stays with the lease. The lease's
// own key check, which would wait for the purge's row lock, is switched off
// for the pod's session (session_replication_role) so that it commits
// while the purge's DELETE waits at a gate between its snapshot and its
// key check.
func TestPurgeKeepsACatalogueNamedMeanwhile(t *testing.T) {
	pool := openPool(t)
	ctx, now := t.Context(), time.Now()
	cfg := pool.Config().Copy()
	cfg.ConnConfig.RuntimeParams["session_replication_role"] = "replica"
	podPool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(podPool.Close)
	pod := postgres.New(podPool)
	first := storetest.Sample(t, now, now.Add(time.Hour))
	if err := pod.Create(ctx, first); err != nil { // the pod now remembers the digest
		t.Fatal(err)
	}
	if err := pod.Close(ctx, first.TurnID); err != nil {
		t.Fatal(err)
	}
	g := closeGate(t, pool, "test_gate", "BEFORE DELETE ON bridge.catalogues", "OLD")
	type result struct {
		n   int64
		err error
	}
	purged := make(chan result, 1)
	go func() {
		n, err := postgres.New(pool).PurgeInactive(ctx, time.Now().Add(time.Minute))
		purged <- result{n, err}
	}()
	// The DELETE of the unnamed catalogue waits at the gate: its snapshot
	// is taken, its key check is not done.
	g.awaitWaiter()
	second := storetest.Sample(t, now, now.Add(time.Hour))
	if err := pod.Create(ctx, second); err != nil {
		t.Fatal(err)
	}
	g.open()
	if r := <-purged; r.err != nil || r.n != 1 {
		t.Fatalf("PurgeInactive = %d, %v; want the closed lease and no error", r.n, r.err)
	}
	var left int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM bridge.catalogues`).Scan(&left); err != nil || left != 1 {
		t.Fatalf("%d catalogues left (%v); want the one the new lease names", left, err)
	}
	if got, _, err := postgres.New(pool).Get(ctx, second.TurnID); err != nil || len(got.Tools) != len(second.Tools) {
		t.Fatalf("Get = %v, %v; want the lease with its catalogue", got, err)
	}
}

// TestCreateAfterPurgeTookItsCatalogue: a purge that deletes a catalogue an
// OpenTurn is about to name does not fail the OpenTurn: the next attempt
// stores the catalogue again. On another pod the store sends the catalogue
// with the lease, and the purge comes between the statement's conflict
// check (the catalogue is there) and its foreign-key check (it is gone); on
// the pod that wrote it, the store names it without sending it. A test
// trigger holds the statement before its key check until the purge has
// committed: after-row triggers fire by name, "A_…" before the foreign
// key's "RI_…", and all after the statement's WITH part has run.
func TestCreateAfterPurgeTookItsCatalogue(t *testing.T) {
	for _, pod := range []string{"another pod", "the pod that wrote it"} {
		t.Run(pod, func(t *testing.T) {
			pool := openPool(t)
			writer, ctx, now := postgres.New(pool), t.Context(), time.Now()
			// The catalogue is stored and then unnamed: its only lease is closed.
			first := storetest.Sample(t, now, now.Add(time.Hour))
			if err := writer.Create(ctx, first); err != nil {
				t.Fatal(err)
			}
			if err := writer.Close(ctx, first.TurnID); err != nil {
				t.Fatal(err)
			}
			s := writer
			if pod == "another pod" {
				s = postgres.New(pool)
			}
			// "A_…" fires before the key's "RI_…" trigger.
			g := closeGate(t, pool, `"A_test_gate"`, "AFTER INSERT ON bridge.leases", "NULL")
			second := storetest.Sample(t, now, now.Add(time.Hour))
			created := make(chan error, 1)
			go func() { created <- s.Create(ctx, second) }()
			// The INSERT waits at the gate, before its key check.
			g.awaitWaiter()
			if n, err := writer.PurgeInactive(ctx, time.Now().Add(time.Minute)); err != nil || n != 1 {
				t.Fatalf("PurgeInactive = %d, %v, want the closed lease", n, err)
			}
			var left int
			if err := pool.QueryRow(ctx, `SELECT count(*) FROM bridge.catalogues`).Scan(&left); err != nil || left != 0 {
				t.Fatalf("%d catalogues left (%v): the purge should have taken the unnamed one", left, err)
			}
			g.open()
			if err := <-created; err != nil {
				t.Fatalf("Create after the purge took its catalogue: %v", err)
			}
			if got, _, err := s.Get(ctx, second.TurnID); err != nil || len(got.Tools) != len(second.Tools) {
				t.Fatalf("Get = %v, %v; want the lease with its catalogue", got, err)
			}
		})
	}
}

// gate holds statements at a trigger until opened: the trigger takes a
// shared advisory lock the test holds exclusively.
type gate struct {
	t      *testing.T
	pool   *pgxpool.Pool
	holder *pgxpool.Conn
}

// gateLock is the advisory lock behind the gate (advisory locks are per
// database: each test has its own).
const gateLock = 7400

// closeGate creates the trigger name (timing: e.g. "AFTER INSERT ON
// bridge.leases"; result: what its function returns) and closes the gate.
func closeGate(t *testing.T, pool *pgxpool.Pool, name, timing, result string) *gate {
	t.Helper()
	ctx := t.Context()
	if _, err := pool.Exec(ctx, fmt.Sprintf(`
		CREATE FUNCTION bridge.test_gate() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN PERFORM pg_advisory_xact_lock_shared(%d); RETURN %s; END $$;
		CREATE TRIGGER %s %s FOR EACH ROW EXECUTE FUNCTION bridge.test_gate()`, gateLock, result, name, timing)); err != nil {
		t.Fatal(err)
	}
	holder, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(holder.Release)
	if _, err := holder.Exec(ctx, `SELECT pg_advisory_lock($1)`, gateLock); err != nil {
		t.Fatal(err)
	}
	return &gate{t: t, pool: pool, holder: holder}
}

// awaitWaiter returns once a statement waits at the gate (a condition,
// polled).
func (g *gate) awaitWaiter() {
	g.t.Helper()
	for waiting := 0; waiting == 0; {
		if err := g.pool.QueryRow(g.t.Context(), `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = $1 AND NOT granted
		   AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`, gateLock).Scan(&waiting); err != nil {
			g.t.Fatal(err)
		}
	}
}

// open lets the waiting statements go on.
func (g *gate) open() {
	g.t.Helper()
	if _, err := g.holder.Exec(g.t.Context(), `SELECT pg_advisory_unlock($1)`, gateLock); err != nil {
		g.t.Fatal(err)
	}
}
