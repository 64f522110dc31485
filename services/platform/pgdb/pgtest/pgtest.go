package pgtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sharedos/toolshare/services/platform/pgdb"
)

// DSNEnv names the environment variable holding the admin DSN.
const DSNEnv = "SHAREDOS_TEST_PG_DSN"

// DefaultDSN is used when DSNEnv is unset.
const DefaultDSN = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// StaleAfter is the age beyond which a sharedos_tmpl_*/sharedos_test_*
// database is considered abandoned.
const StaleAfter = time.Hour

const (
	templatePrefix = "sharedos_tmpl_"
	testPrefix     = "sharedos_test_"
	// migrateTimeout bounds template creation plus migrations.
	migrateTimeout = 2 * time.Minute
	adminTimeout   = 30 * time.Second
)

// MigrateFunc prepares the template database at dsn; it must close every
// connection it opened before returning (connections are terminated anyway,
// because PostgreSQL refuses to clone a database in use).
type MigrateFunc func(ctx context.Context, dsn string) error

type template struct {
	once  sync.Once
	name  string
	admin string
	err   error
	// clone serialises CREATE DATABASE ... TEMPLATE for this template.
	clone sync.Mutex
}

// Process-wide registry: migrating once per test binary is the point of the
// package, and it is what Main cleans up.
var (
	mu        sync.Mutex
	templates = map[string]*template{}
)

// NewDatabase returns the DSN of a fresh database cloned from this process's
// template (created and migrated with migrate on first use) and drops it when
// the test ends. Use NewNamedDatabase when one test binary needs templates
// migrated differently.
func NewDatabase(t testing.TB, migrate func(ctx context.Context, dsn string) error) (dsn string) {
	t.Helper()
	return NewNamedDatabase(t, "default", migrate)
}

// NewNamedDatabase is NewDatabase with a template per name: the first call
// for a name migrates its template with migrate; later calls with the same
// name reuse it and ignore migrate.
func NewNamedDatabase(t testing.TB, name string, migrate func(ctx context.Context, dsn string) error) (dsn string) {
	t.Helper()
	admin := AdminDSN()
	tmpl := lookup(admin, name)
	tmpl.once.Do(func() { tmpl.err = tmpl.create(name, migrate) })
	if tmpl.err != nil {
		t.Fatalf("pgtest: %v", tmpl.err)
	}

	db := newName(testPrefix)
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	tmpl.clone.Lock()
	err := exec(ctx, admin, "CREATE DATABASE "+pgx.Identifier{db}.Sanitize()+" TEMPLATE "+pgx.Identifier{tmpl.name}.Sanitize())
	tmpl.clone.Unlock()
	if err != nil {
		t.Fatalf("pgtest: clone template %s into %s: %v", tmpl.name, db, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
		defer cancel()
		// FORCE: a pool the test forgot to close must not leak the database.
		if err := exec(ctx, admin, "DROP DATABASE IF EXISTS "+pgx.Identifier{db}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: drop database %s: %v", db, err)
		}
	})
	return withDatabase(admin, db)
}

// AdminDSN returns the DSN tests administer databases through.
func AdminDSN() string {
	if v := strings.TrimSpace(os.Getenv(DSNEnv)); v != "" {
		return v
	}
	return DefaultDSN
}

// Main runs the tests and then drops the templates this process created; call
// it from TestMain: func TestMain(m *testing.M) { pgtest.Main(m) }. A
// TestMain that must do more (goleak.Find, say) calls m.Run and then
// DropTemplates itself.
func Main(m *testing.M) {
	code := m.Run()
	if err := DropTemplates(); err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

func lookup(admin, name string) *template {
	mu.Lock()
	defer mu.Unlock()
	key := admin + "\x00" + name
	tmpl, ok := templates[key]
	if !ok {
		tmpl = &template{admin: admin}
		templates[key] = tmpl
	}
	return tmpl
}

// DropTemplates drops every template database this process created. Call it
// after m.Run: tests still running would fail to clone.
func DropTemplates() error {
	mu.Lock()
	defer mu.Unlock()
	var errs []string
	for key, tmpl := range templates {
		if tmpl.name == "" || tmpl.err != nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
		if err := exec(ctx, tmpl.admin, "DROP DATABASE IF EXISTS "+pgx.Identifier{tmpl.name}.Sanitize()+" WITH (FORCE)"); err != nil {
			errs = append(errs, fmt.Sprintf("drop template %s: %v", tmpl.name, err))
		}
		cancel()
		delete(templates, key)
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

func (tmpl *template) create(name string, migrate MigrateFunc) error {
	ctx, cancel := context.WithTimeout(context.Background(), migrateTimeout)
	defer cancel()

	conn, err := connect(ctx, tmpl.admin)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()

	if err := dropStale(ctx, conn); err != nil {
		return err
	}

	// The binary's path and the name make the template recognisable in
	// pg_database; the random part keeps concurrent runs of the same
	// package apart.
	sum := sha256.Sum256([]byte(os.Args[0] + "\x00" + name))
	tmpl.name = newName(templatePrefix + hex.EncodeToString(sum[:3]) + "_")
	quoted := pgx.Identifier{tmpl.name}.Sanitize()
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+quoted); err != nil {
		return fmt.Errorf("create template database %s: %w", tmpl.name, err)
	}
	dsn := withDatabase(tmpl.admin, tmpl.name)
	if migrate != nil {
		if err := migrate(ctx, dsn); err != nil {
			_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+quoted+" WITH (FORCE)")
			return fmt.Errorf("migrate template database %s: %w", tmpl.name, err)
		}
	}
	// Clones fail while anyone is connected to the template, so shut the
	// door and evict whatever the migration left open.
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+quoted+" WITH ALLOW_CONNECTIONS false"); err != nil {
		return fmt.Errorf("close template database %s: %w", tmpl.name, err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", tmpl.name); err != nil {
		return fmt.Errorf("disconnect template database %s: %w", tmpl.name, err)
	}
	return nil
}

// dropStale drops template and test databases older than StaleAfter, judging
// age by the creation time in the name.
func dropStale(ctx context.Context, conn *pgx.Conn) error {
	rows, err := conn.Query(ctx, `SELECT datname FROM pg_database WHERE datname LIKE 'sharedos\_tmpl\_%' OR datname LIKE 'sharedos\_test\_%'`)
	if err != nil {
		return fmt.Errorf("list stale databases: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("list stale databases: %w", err)
	}
	cutoff := time.Now().Add(-StaleAfter)
	for _, n := range names {
		created, ok := createdAt(n)
		if !ok || created.After(cutoff) {
			continue
		}
		// Another process may be dropping the same one; IF EXISTS covers it
		// and a failure here must not fail the caller's tests.
		_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{n}.Sanitize()+" WITH (FORCE)")
	}
	return nil
}

// newName returns prefix + <unix seconds> + "_" + 12 random hex digits; well
// under PostgreSQL's 63-byte identifier limit.
func newName(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + strconv.FormatInt(time.Now().Unix(), 10) + "_" + hex.EncodeToString(b[:])
}

// createdAt parses the creation time out of a name made by newName. A
// template name has the binary hash between the prefix and the time.
func createdAt(name string) (time.Time, bool) {
	var rest string
	switch {
	case strings.HasPrefix(name, testPrefix):
		rest = strings.TrimPrefix(name, testPrefix)
	case strings.HasPrefix(name, templatePrefix):
		rest = strings.TrimPrefix(name, templatePrefix)
		_, after, ok := strings.Cut(rest, "_")
		if !ok {
			return time.Time{}, false
		}
		rest = after
	default:
		return time.Time{}, false
	}
	ts, _, ok := strings.Cut(rest, "_")
	if !ok {
		return time.Time{}, false
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(sec, 0), true
}

// connect opens an admin connection, turning failure into the instructions a
// developer needs.
func connect(ctx context.Context, admin string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(admin)
	if err != nil {
		return nil, fmt.Errorf("%s=%s is not a valid DSN: %w", DSNEnv, pgdb.RedactDSN(admin), pgdb.ErrInvalidDSN)
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = pgdb.DefaultConnectTimeout
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL is not reachable at %s: start it with "+
			"`pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start` or set %s (%s)",
			pgdb.RedactDSN(admin), DSNEnv, connectReason(err, admin))
	}
	return conn, nil
}

// connectReason keeps the driver's explanation (refused, auth failed, ...)
// but never its copy of the DSN's secrets.
func connectReason(err error, admin string) string {
	msg := err.Error()
	if cfg, perr := pgx.ParseConfig(admin); perr == nil && cfg.Password != "" {
		msg = strings.ReplaceAll(msg, cfg.Password, "xxxxx")
	}
	return msg
}

func exec(ctx context.Context, admin, sql string) error {
	conn, err := connect(ctx, admin)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	_, err = conn.Exec(ctx, sql)
	return err
}

// withDatabase returns admin with its database replaced by db, in either DSN
// form.
func withDatabase(admin, db string) string {
	if u, err := url.Parse(admin); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		u.Path = "/" + db
		u.RawPath = ""
		return u.String()
	}
	// Keyword/value: a later setting overrides an earlier one.
	return admin + " dbname=" + db
}

// Pool opens a pool on dsn with pgdb's defaults and closes it when the test
// ends.
func Pool(t testing.TB, dsn string) *pgxpool.Pool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := pgdb.Open(ctx, dsn)
	if err != nil {
		t.Fatalf("open test database: %v", err)
	}
	t.Cleanup(p.Close)
	return p
}
