package secretref_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sharedos/toolshare/services/platform/secretref"
)

// The zero scope resolves any environment variable but the process's own
// configuration and the platform's, and no file.
func TestZeroScope(t *testing.T) {
	t.Setenv("UPSTREAM_TOKEN_FOR_TEST", "tok")
	t.Setenv("SHAREDOS_GRANT_KEY", "/etc/sharedos/grant/key.pem")
	t.Setenv("PGPASSWORD", "pw")
	var s secretref.Scope
	if v, err := s.Resolve("env:UPSTREAM_TOKEN_FOR_TEST"); err != nil || v != "tok" {
		t.Fatalf("Resolve = %q, %v", v, err)
	}
	for _, ref := range []string{"env:SHAREDOS_GRANT_KEY", "SHAREDOS_GRANT_KEY", "env:PGPASSWORD", "env:OTEL_EXPORTER_OTLP_HEADERS",
		"env:KUBERNETES_SERVICE_HOST", "file:/etc/sharedos/grant/key.pem"} {
		if _, err := s.Resolve(ref); !errors.Is(err, secretref.ErrOutOfScope) {
			t.Errorf("Resolve(%s) = %v, want ErrOutOfScope", ref, err)
		}
	}
	if err := s.Allows("a=b"); err == nil || errors.Is(err, secretref.ErrOutOfScope) {
		t.Errorf("a malformed reference: %v", err)
	}
}

// A parsed scope allows exactly what it lists; files are read inside their
// directory, never through .. or a symbolic link out of it.
func TestParsedScope(t *testing.T) {
	dir := t.TempDir()
	creds := filepath.Join(dir, "creds")
	if err := os.MkdirAll(creds, 0o700); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(dir, "grant-key.pem")
	for path, v := range map[string]string{filepath.Join(creds, "token"): "file-token\n", outside: "grant key"} {
		if err := os.WriteFile(path, []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(creds, "link")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GITHUB_MCP_TOKEN", "gh")
	t.Setenv("VENDOR_A_KEY", "a")
	t.Setenv("OTHER_TOKEN", "o")
	s, err := secretref.ParseScope([]string{"env:GITHUB_MCP_TOKEN", "env:VENDOR_*", "file:" + creds + "/"})
	if err != nil {
		t.Fatal(err)
	}
	for ref, want := range map[string]string{"env:GITHUB_MCP_TOKEN": "gh", "VENDOR_A_KEY": "a", "file:" + creds + "/token": "file-token"} {
		if got, err := s.Resolve(ref); err != nil || got != want {
			t.Errorf("Resolve(%s) = %q, %v; want %q", ref, got, err, want)
		}
	}
	for _, ref := range []string{"env:OTHER_TOKEN", "file:" + outside, "file:" + creds + "/../grant-key.pem", "file:" + creds, "file:" + creds + "/"} {
		if _, err := s.Resolve(ref); !errors.Is(err, secretref.ErrOutOfScope) {
			t.Errorf("Resolve(%s) = %v, want ErrOutOfScope", ref, err)
		}
	}
	if v, err := s.Resolve("file:" + creds + "/link"); err == nil {
		t.Errorf("a symbolic link out of the directory was followed: %q", v)
	}
	wide, err := secretref.ParseScope([]string{"env:*"})
	if err != nil {
		t.Fatal(err)
	}
	if err := wide.Allows("env:SHAREDOS_DATABASE_URL"); !errors.Is(err, secretref.ErrOutOfScope) {
		t.Errorf("env:* allowed the process's own configuration: %v", err)
	}
	none, err := secretref.ParseScope([]string{secretref.None})
	if err != nil {
		t.Fatal(err)
	}
	if err := none.Allows("env:GITHUB_MCP_TOKEN"); !errors.Is(err, secretref.ErrOutOfScope) {
		t.Errorf("none allowed a reference: %v", err)
	}
	for _, bad := range [][]string{{"file:relative/"}, {"file:/no/trailing/slash"}, {"env:"}, {"GITHUB_MCP_TOKEN"}, {"none", "env:X"}, {"env:a=b"},
		{"env:PGPASSWORD"}, {"env:SHAREDOS_*"},
		// The process's environment (file:/proc/self/environ) and devices
		// are never credentials (review finding: a scope of file:/proc/
		// sent SHAREDOS_DATABASE_URL to an operator's token URL).
		{"file:/"}, {"file:/proc/"}, {"file:/proc/self/"}, {"file:/sys/"}, {"file:/dev/"}, {"file:/dev/shm/"}, {"file:/proc/../proc/"}} {
		if _, err := secretref.ParseScope(bad); err == nil {
			t.Errorf("ParseScope(%q) accepted", bad)
		}
	}
}

// A secret file is read only when it is a regular file of at most
// MaxFileBytes: a FIFO (whose open would wait for a writer) or a file
// larger than that is refused, scoped or not (review finding: nothing
// bounded the read).
func TestASecretFileIsBounded(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, secretref.MaxFileBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := secretref.ParseScope([]string{"file:" + dir + "/"})
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"file:" + big, "file:" + fifo, "file:" + dir + "/"} {
		if v, err := s.Resolve(ref); err == nil {
			t.Errorf("scoped Resolve(%s) read %d bytes", ref, len(v))
		}
		if v, err := secretref.Resolve(ref); err == nil {
			t.Errorf("Resolve(%s) read %d bytes", ref, len(v))
		}
	}
}

// The chart's schema refuses an upstream credential named with a protected
// prefix: the same prefixes as here, so what the chart lets through this
// process resolves, and what it refuses this process would too.
func TestChartRefusesTheProtectedPrefixes(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "helm", "sharedos", "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := `"pattern": "^(` + strings.Join(secretref.ProtectedPrefixes(), "|") + `)"`
	if n := strings.Count(string(b), want); n != 1 {
		t.Errorf("values.schema.json holds %s %d times, want once (the credentials' name rule)", want, n)
	}
}
