package app_test

import (
	"bytes"
	"context"
	"flag"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sharedos/toolshare/services/platform/pgdb/pgtest"

	"github.com/sharedos/toolshare/catalog-svc/internal/app"
	recmemory "github.com/sharedos/toolshare/catalog-svc/internal/pipeline/records/memory"
	"github.com/sharedos/toolshare/catalog-svc/migrations"
)

func run(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := app.Main(args, &out, &errb)
	return code, out.String(), errb.String()
}

// The command line: usage errors exit 2, config-reference lists every serve
// flag with its environment variable (the record journal's included), and
// every bad value is reported at once.
func TestCommandLine(t *testing.T) {
	if code, _, stderr := run(); code != 2 || !strings.Contains(stderr, "usage: catalog-svc") || !strings.Contains(stderr, "migrate") {
		t.Errorf("no command: exit %d, stderr %q", code, stderr)
	}
	if code, _, stderr := run("frobnicate"); code != 2 || !strings.Contains(stderr, `"frobnicate"`) {
		t.Errorf("unknown command: exit %d, stderr %q", code, stderr)
	}
	code, out, _ := run("config-reference")
	for _, want := range []string{"`--record-journal-dir`", "`SHAREDOS_RECORD_JOURNAL_DIR`", "`--database-url`", "`--instance-id`"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("config-reference (exit %d) lacks %s", code, want)
		}
	}
	t.Setenv("SHAREDOS_DATABASE_URL", "")
	code, _, stderr := run("serve", "--insecure-plaintext", "--listen", "", "--authz-timeout", "0s", "--reconcile-interval", "-1s",
		"--upstream-result-budget", "65536", // under budget.MinSize: every chunked result refused
		"--embedded-record-limit", "-1")
	if code != 1 {
		t.Errorf("serve with bad flags: exit %d, want 1", code)
	}
	for _, want := range []string{"--listen", "--authz-timeout", "--reconcile-interval", "--upstream-result-budget", "--embedded-record-limit"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("serve with bad flags: stderr lacks %s (every bad value at once): %s", want, stderr)
		}
	}
}

func TestMain(m *testing.M) { pgtest.Main(m) }

// config is a kernel's Config over the database at dsn ("": the embedded
// store) with the record journal in dir ("": none); nothing it names is
// dialled before a call.
func config(dsn, dir string) app.Config {
	return app.Config{Listen: "127.0.0.1:0", AuthzAddr: "127.0.0.1:1", AuthzTimeout: time.Second,
		DefaultHandlerTimeout: time.Second, ReconcileInterval: time.Second, DatabaseURL: dsn, RecordJournalDir: dir}
}

// A record journal directory that cannot be used is refused before
// anything listens, naming the flag.
func TestRecordJournalDirMustBeUsable(t *testing.T) {
	file := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := config(pgtest.NewDatabase(t, migrations.Up), filepath.Join(file, "journal"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := cfg.Complete(ctx, nil, nil)
	if err == nil {
		t.Fatalf("Complete with an unusable journal directory succeeded: %v", a.Addr())
	}
	if !strings.Contains(err.Error(), "--record-journal-dir") {
		t.Errorf("error %q does not name --record-journal-dir", err)
	}
}

// TestDefaultInstanceIDIsPerProcess (issue 17, item 16): without
// --instance-id every process gets its own id — the host name and a random
// suffix — so two kernels on one host never share one.
func TestDefaultInstanceIDIsPerProcess(t *testing.T) {
	host, _ := os.Hostname()
	seen := map[string]bool{}
	for range 20 {
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		read := app.Bind(fs)
		if err := fs.Parse(nil); err != nil {
			t.Fatal(err)
		}
		id := read().InstanceID
		if !strings.HasPrefix(id, host+"-") || len(id) != len(host)+9 || seen[id] {
			t.Fatalf("default instance id %q: want %s-<8 hex>, unique", id, host)
		}
		seen[id] = true
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	read := app.Bind(fs)
	if err := fs.Parse([]string{"--instance-id", "catalog-0"}); err != nil || read().InstanceID != "catalog-0" {
		t.Fatalf("an explicit --instance-id is kept: %v %q", err, read().InstanceID)
	}
}

// complete completes cfg and closes it again at once (Run with its context
// done), returning Complete's error.
func complete(t *testing.T, cfg app.Config) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := cfg.Complete(ctx, nil, nil)
	if err != nil {
		return err
	}
	done, stop := context.WithCancel(ctx)
	stop()
	_ = a.Run(done)
	return nil
}

// A record journal directory without a database is refused before the
// journal is opened (review D1): the embedded store knows none of the
// records journaled there, and replaying the completions a PostgreSQL
// kernel journaled in the directory would drop them — their records left
// pending, then interrupted, though their clients were told the outcome.
func TestRecordJournalDirNeedsADatabase(t *testing.T) {
	dir := t.TempDir()
	orphan := filepath.Join(dir, "0123456789abcdef.completions.jsonl")
	line := `{"attemptId":"a1","status":"succeeded","finishedAt":"2026-12-01T00:00:00Z"}` + "\n"
	if err := os.WriteFile(orphan, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := config("", dir)
	err := complete(t, cfg)
	if err == nil || !strings.Contains(err.Error(), "--record-journal-dir") || !strings.Contains(err.Error(), "--database-url") {
		t.Fatalf("Complete with a journal directory and the embedded store = %v, want it refused naming both flags", err)
	}
	if b, err := os.ReadFile(orphan); err != nil || string(b) != line {
		t.Fatalf("the journaled completion is gone or changed: %q, %v", b, err)
	}
	cfg.RecordJournalDir = ""
	if err := complete(t, cfg); err != nil {
		t.Fatalf("the embedded store without a journal (make run): %v", err)
	}
}

// A record journal directory journals one database's records (review D1):
// the first kernel binds it to its database, and a kernel of another
// database is refused, the error naming both; the first starts again.
func TestRecordJournalDirIsBoundToItsDatabase(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "journal")
	first, other := pgtest.NewDatabase(t, migrations.Up), pgtest.NewDatabase(t, migrations.Up)
	if err := complete(t, config(first, dir)); err != nil {
		t.Fatalf("the first kernel on the directory: %v", err)
	}
	err := complete(t, config(other, dir))
	if err == nil {
		t.Fatal("a kernel of another database started on the directory")
	}
	for _, want := range []string{"--record-journal-dir", dbName(t, first), dbName(t, other), "PostgreSQL system "} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not name %s", err, want)
		}
	}
	if err := complete(t, config(first, dir)); err != nil {
		t.Fatalf("the first database's kernel again: %v", err)
	}
}

// dbName is the database a DSN names.
func dbName(t *testing.T, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return `"` + strings.TrimPrefix(u.Path, "/") + `"`
}

// The embedded store keeps a bounded number of finished records (review
// D3): --embedded-record-limit, recmemory.DefaultRetention unless told; 0
// keeps every record.
func TestEmbeddedRecordLimit(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int
	}{{nil, recmemory.DefaultRetention}, {[]string{"--embedded-record-limit", "2"}, 2}, {[]string{"--embedded-record-limit", "0"}, 0}} {
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		read := app.Bind(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		if got := read().EmbeddedRecordLimit; got != tc.want {
			t.Errorf("%v: limit %d, want %d", tc.args, got, tc.want)
		}
	}
}
