package pgdb_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sharedos/toolshare/services/platform/pgdb"
	"github.com/sharedos/toolshare/services/platform/pgdb/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestOpenAppliesDefaults(t *testing.T) {
	dsn := pgtest.NewDatabase(t, nil)
	pool, err := pgdb.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	var one int
	if err := pool.QueryRow(context.Background(), "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("SELECT 1 = %d, %v", one, err)
	}
	cfg := pool.Config()
	if cfg.MaxConns != pgdb.DefaultMaxConns {
		t.Errorf("MaxConns = %d, want %d", cfg.MaxConns, pgdb.DefaultMaxConns)
	}
	if cfg.HealthCheckPeriod != pgdb.DefaultHealthCheckPeriod {
		t.Errorf("HealthCheckPeriod = %v, want %v", cfg.HealthCheckPeriod, pgdb.DefaultHealthCheckPeriod)
	}
	if cfg.ConnConfig.ConnectTimeout != pgdb.DefaultConnectTimeout {
		t.Errorf("ConnectTimeout = %v, want %v", cfg.ConnConfig.ConnectTimeout, pgdb.DefaultConnectTimeout)
	}
	// Issue 17, item 13: no statement waits on a stuck server unbounded.
	var st string
	if err := pool.QueryRow(context.Background(), "SHOW statement_timeout").Scan(&st); err != nil || st != "15s" {
		t.Errorf("statement_timeout = %q, %v; want 15s", st, err)
	}
}

func TestOpenKeepsDSNSettings(t *testing.T) {
	dsn := pgtest.NewDatabase(t, nil)
	pool, err := pgdb.Open(context.Background(), dsn+"&pool_max_conns=3&connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if got := pool.Config().MaxConns; got != 3 {
		t.Errorf("MaxConns = %d, want the DSN's 3", got)
	}
	if got := pool.Config().ConnConfig.ConnectTimeout.Seconds(); got != 2 {
		t.Errorf("ConnectTimeout = %vs, want the DSN's 2s", got)
	}
}

// TestWithMaxConns (issue 17, item 14): the pool size comes from the
// service's flag, and an operator's pool_max_conns in the DSN still wins.
func TestWithMaxConns(t *testing.T) {
	dsn := pgtest.NewDatabase(t, nil)
	for _, c := range []struct {
		dsn  string
		want int32
	}{{dsn, 4}, {dsn + "&pool_max_conns=3", 3}} {
		pool, err := pgdb.Open(context.Background(), c.dsn, pgdb.WithMaxConns(4))
		if err != nil {
			t.Fatal(err)
		}
		if got := pool.Config().MaxConns; got != c.want {
			t.Errorf("%s: MaxConns = %d, want %d", pgdb.RedactDSN(c.dsn), got, c.want)
		}
		pool.Close()
	}
}

func unusedPort(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(lis.Addr().String())
	_ = lis.Close()
	return port
}

func TestOpenErrorsNeverContainThePassword(t *testing.T) {
	const pw = "S3cr3tPw"
	port := unusedPort(t)
	for _, tc := range []struct {
		name, dsn string
		invalid   bool
	}{
		{"unreachable url", "postgres://app:" + pw + "@127.0.0.1:" + port + "/db?sslmode=disable", false},
		{"unreachable keyword", "host=127.0.0.1 port=" + port + " user=app password=" + pw + " sslmode=disable", false},
		{"unreachable quoted keyword", "host=127.0.0.1 port=" + port + " user=app password='" + pw + " x' sslmode=disable", false},
		{"bad port url", "postgres://app:" + pw + "@127.0.0.1:notaport/db", true},
		{"bad option url", "postgres://app:" + pw + "@127.0.0.1/db?sslmode=sometimes", true},
		{"bad keyword", "host=127.0.0.1 password=" + pw + " sslmode=sometimes", true},
		{"password in query", "postgres://app@127.0.0.1:" + port + "/db?password=" + pw + "&sslmode=sometimes", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool, err := pgdb.Open(context.Background(), tc.dsn)
			if err == nil {
				pool.Close()
				t.Fatal("Open succeeded")
			}
			if strings.Contains(err.Error(), pw) {
				t.Fatalf("error leaks the password: %v", err)
			}
			if got := errors.Is(err, pgdb.ErrInvalidDSN); got != tc.invalid {
				t.Errorf("errors.Is(err, ErrInvalidDSN) = %v, want %v: %v", got, tc.invalid, err)
			}
			if !tc.invalid {
				var ce *pgconn.ConnectError
				if !errors.As(err, &ce) {
					t.Errorf("connect failure does not unwrap to *pgconn.ConnectError: %v", err)
				}
				if !strings.Contains(err.Error(), "127.0.0.1") {
					t.Errorf("error does not say where it tried to connect: %v", err)
				}
			}
		})
	}
}

func TestRedactDSN(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://app:pw@db:5432/x?sslmode=disable":                 "postgres://app:xxxxx@db:5432/x?sslmode=disable",
		"postgres://app@db/x":                                         "postgres://app@db/x",
		"postgresql://db/x?password=pw&sslpassword=k":                 "postgresql://db/x?password=xxxxx&sslpassword=xxxxx",
		"host=db user=app password=pw dbname=x":                       "host=db user=app password=xxxxx dbname=x",
		"host=db password = 'p w\\'x' dbname=x":                       "host=db password = xxxxx dbname=x",
		"postgres://app:p%40ss@db/x":                                  "postgres://app:xxxxx@db/x",
		"postgres://app:broken:pw@db:port/x":                          "postgres://app:xxxxx@db:port/x",
		"host=db sslpassword=k user=app":                              "host=db sslpassword=xxxxx user=app",
		"postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable": "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable",
	} {
		if got := pgdb.RedactDSN(in); got != want {
			t.Errorf("RedactDSN(%q) = %q, want %q", in, got, want)
		}
	}
}
