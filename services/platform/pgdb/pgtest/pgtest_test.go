package pgtest_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sharedos/toolshare/services/platform/pgdb/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var migrations atomic.Int32

func migrate(ctx context.Context, dsn string) error {
	migrations.Add(1)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `CREATE TABLE items (name text PRIMARY KEY); INSERT INTO items VALUES ('seed')`)
	return err
}

func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func names(t *testing.T, conn *pgx.Conn) []string {
	t.Helper()
	rows, err := conn.Query(context.Background(), "SELECT name FROM items ORDER BY name")
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func dbName(t *testing.T, conn *pgx.Conn) string {
	t.Helper()
	var name string
	if err := conn.QueryRow(context.Background(), "SELECT current_database()").Scan(&name); err != nil {
		t.Fatal(err)
	}
	return name
}

func exists(t *testing.T, db string) bool {
	t.Helper()
	admin := connect(t, pgtest.AdminDSN())
	var ok bool
	if err := admin.QueryRow(context.Background(), "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", db).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

func TestDatabasesAreIsolatedClonesOfOneTemplate(t *testing.T) {
	a := connect(t, pgtest.NewDatabase(t, migrate))
	before := migrations.Load()
	b := connect(t, pgtest.NewDatabase(t, migrate))

	if got := migrations.Load(); before < 1 || got != before {
		t.Fatalf("migrate ran %d times, then %d: want once per template", before, got)
	}
	if dbName(t, a) == dbName(t, b) {
		t.Fatal("two calls returned the same database")
	}
	if _, err := a.Exec(context.Background(), "INSERT INTO items VALUES ('only-in-a')"); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(names(t, a), ","); got != "only-in-a,seed" {
		t.Errorf("a has %s", got)
	}
	if got := strings.Join(names(t, b), ","); got != "seed" {
		t.Errorf("b has %s, want only the migrated seed", got)
	}
}

func TestDatabaseDroppedAfterTest(t *testing.T) {
	var db string
	t.Run("inner", func(t *testing.T) {
		// The test's own connection stays open: FORCE must still drop it.
		conn, err := pgx.Connect(context.Background(), pgtest.NewDatabase(t, migrate))
		if err != nil {
			t.Fatal(err)
		}
		db = dbName(t, conn)
		if !strings.HasPrefix(db, "sharedos_test_") {
			t.Errorf("database %q lacks the sharedos_test_ prefix", db)
		}
	})
	if exists(t, db) {
		t.Fatalf("database %s survived its test", db)
	}
}

func TestParallelClones(t *testing.T) {
	for i := range 6 {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			t.Parallel()
			conn := connect(t, pgtest.NewDatabase(t, migrate))
			if _, err := conn.Exec(context.Background(), "INSERT INTO items VALUES ($1)", "row"+strconv.Itoa(i)); err != nil {
				t.Fatal(err)
			}
			if got := len(names(t, conn)); got != 2 {
				t.Fatalf("%d rows, want seed + own row", got)
			}
		})
	}
}

func TestNamedTemplatesMigrateSeparately(t *testing.T) {
	var calls atomic.Int32
	other := func(ctx context.Context, dsn string) error {
		calls.Add(1)
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return err
		}
		// Left open on purpose: pgtest must evict it before cloning.
		_, err = conn.Exec(ctx, `CREATE TABLE other (id int)`)
		return err
	}
	c1 := connect(t, pgtest.NewNamedDatabase(t, "other", other))
	c2 := connect(t, pgtest.NewNamedDatabase(t, "other", other))
	if calls.Load() != 1 {
		t.Fatalf("named template migrated %d times, want 1", calls.Load())
	}
	for _, c := range []*pgx.Conn{c1, c2} {
		if _, err := c.Exec(context.Background(), "INSERT INTO other VALUES (1)"); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Exec(context.Background(), "SELECT 1 FROM items"); err == nil {
			t.Fatal("the named template has the default template's table")
		}
	}
}

func TestKeywordValueAdminDSN(t *testing.T) {
	t.Setenv(pgtest.DSNEnv, "host=127.0.0.1 port=5432 user=postgres dbname=postgres sslmode=disable")
	conn := connect(t, pgtest.NewNamedDatabase(t, "keyword", migrate))
	if got := strings.Join(names(t, conn), ","); got != "seed" {
		t.Fatalf("rows %s", got)
	}
}

// fatalTB records Fatalf and stops the goroutine like testing does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper()        {}
func (f *fatalTB) Cleanup(func()) {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func fatalOf(t *testing.T, name string, m func(context.Context, string) error) string {
	t.Helper()
	tb := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		pgtest.NewNamedDatabase(tb, name, m)
		tb.msg = "<no failure>"
	}()
	<-done
	return tb.msg
}

func TestUnreachableServerFailsWithInstructions(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	_ = lis.Close()
	t.Setenv(pgtest.DSNEnv, "postgres://postgres:Hunter2pw@"+addr+"/postgres?sslmode=disable")

	msg := fatalOf(t, "unreachable", migrate)
	for _, want := range []string{
		"PostgreSQL is not reachable at postgres://postgres:xxxxx@" + addr,
		"pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start",
		"SHAREDOS_TEST_PG_DSN",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("failure %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "Hunter2pw") {
		t.Errorf("failure leaks the password: %q", msg)
	}
	// Every later test using the same template fails the same way rather
	// than retrying a dead server.
	if again := fatalOf(t, "unreachable", migrate); again != msg {
		t.Errorf("second failure %q differs from first %q", again, msg)
	}
}

func TestMigrationFailureFails(t *testing.T) {
	boom := errors.New("migration 7 is broken")
	msg := fatalOf(t, "broken", func(context.Context, string) error { return boom })
	if !strings.Contains(msg, "migration 7 is broken") || !strings.Contains(msg, "migrate template") {
		t.Fatalf("failure %q does not explain the migration error", msg)
	}
}

func TestStaleDatabasesAreDropped(t *testing.T) {
	admin := connect(t, pgtest.AdminDSN())
	old := fmt.Sprintf("sharedos_test_%d_0000deadbeef", time.Now().Add(-2*pgtest.StaleAfter).Unix())
	oldTmpl := fmt.Sprintf("sharedos_tmpl_abcdef_%d_0000deadbeef", time.Now().Add(-2*pgtest.StaleAfter).Unix())
	fresh := fmt.Sprintf("sharedos_test_%d_0000feedface", time.Now().Unix())
	for _, db := range []string{old, oldTmpl, fresh} {
		if _, err := admin.Exec(context.Background(), "CREATE DATABASE "+db); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, db := range []string{old, oldTmpl, fresh} {
			_, _ = admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db)
		}
	})

	// Creating a template sweeps abandoned databases first.
	pgtest.NewNamedDatabase(t, "sweep", nil)
	if exists(t, old) || exists(t, oldTmpl) {
		t.Error("databases older than StaleAfter survived the sweep")
	}
	if !exists(t, fresh) {
		t.Error("a recent database (maybe another process's) was dropped")
	}
}

func TestDropTemplates(t *testing.T) {
	// Template names start with a hash of the test binary and template name.
	sum := sha256.Sum256([]byte(os.Args[0] + "\x00" + "drop-me"))
	prefix := "sharedos_tmpl_" + hex.EncodeToString(sum[:3]) + "_"
	count := func() int {
		admin := connect(t, pgtest.AdminDSN())
		var n int
		if err := admin.QueryRow(context.Background(), "SELECT count(*) FROM pg_database WHERE starts_with(datname, $1)", prefix).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	t.Run("use", func(t *testing.T) { pgtest.NewNamedDatabase(t, "drop-me", nil) })
	if n := count(); n != 1 {
		t.Fatalf("%d templates named %s*, want 1", n, prefix)
	}
	if err := pgtest.DropTemplates(); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 0 {
		t.Fatalf("%d templates named %s* after DropTemplates, want 0", n, prefix)
	}
	// The registry forgets dropped templates, so later tests get a new one.
	conn := connect(t, pgtest.NewDatabase(t, migrate))
	if got := strings.Join(names(t, conn), ","); got != "seed" {
		t.Fatalf("rows after re-creation: %s", got)
	}
}
