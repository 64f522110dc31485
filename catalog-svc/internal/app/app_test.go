package app_test

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sharedos/toolshare/catalog-svc/internal/app"
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
		"--upstream-result-budget", "65536") // under budget.MinSize: every chunked result refused
	if code != 1 {
		t.Errorf("serve with bad flags: exit %d, want 1", code)
	}
	for _, want := range []string{"--listen", "--authz-timeout", "--reconcile-interval", "--upstream-result-budget"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("serve with bad flags: stderr lacks %s (every bad value at once): %s", want, stderr)
		}
	}
}

// A record journal directory that cannot be used is refused before
// anything listens, naming the flag.
func TestRecordJournalDirMustBeUsable(t *testing.T) {
	file := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := app.Config{Listen: "127.0.0.1:0", AuthzAddr: "127.0.0.1:1", AuthzTimeout: time.Second,
		DefaultHandlerTimeout: time.Second, ReconcileInterval: time.Second, RecordJournalDir: filepath.Join(file, "journal")}
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
