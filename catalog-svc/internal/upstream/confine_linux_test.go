//go:build linux

package upstream_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// landlock reports whether this kernel has Landlock.
func landlock() bool {
	abi, _, errno := syscall.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	return errno == 0 && abi >= 1
}

// TestStdioServerCannotReadPrivate: a stdio server runs as the kernel's
// user, but opens nothing under the guard's Private paths (the kernel's
// key directories, its journal) — not through a link either — while the
// rest of the filesystem stays open to it and the kernel itself, every
// thread of it, still reads its keys. Without Landlock it runs unconfined,
// and the kernel says so (logged once).
func TestStdioServerCannotReadPrivate(t *testing.T) {
	keys, journal, public := t.TempDir(), t.TempDir(), t.TempDir()
	write := func(p, text string) {
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(keys, "tls.key"), "KEY-MATERIAL")
	write(filepath.Join(journal, "x.completions.jsonl"), "JOURNAL")
	write(filepath.Join(public, "readme.txt"), "PUBLIC")
	if err := os.Symlink(filepath.Join(keys, "tls.key"), filepath.Join(public, "link")); err != nil {
		t.Fatal(err)
	}
	h, _ := stdioUpstreamGuarded(t, 0, []string{keys, journal})
	cat := func(p string) string {
		resp, err := h.call("sx", "sx.cat", `{"path":`+jsonString(p)+`}`)
		if err != nil {
			t.Fatalf("cat %s: %v", p, err)
		}
		return string(resp.GetContentJson())
	}
	if got := cat(filepath.Join(public, "readme.txt")); !strings.Contains(got, "PUBLIC") {
		t.Errorf("a public file: %s", got)
	}
	for _, p := range []string{filepath.Join(keys, "tls.key"), filepath.Join(public, "link"), filepath.Join(journal, "x.completions.jsonl")} {
		got := cat(p)
		switch {
		case !landlock():
			t.Logf("no Landlock here: %s read unconfined (%s)", p, got)
		case strings.Contains(got, "KEY-MATERIAL") || strings.Contains(got, "JOURNAL") || !strings.Contains(got, "permission denied"):
			t.Errorf("the stdio server read %s: %s", p, got)
		}
	}
	// The kernel's own threads are untouched by the confinement.
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			if b, err := os.ReadFile(filepath.Join(keys, "tls.key")); err != nil || string(b) != "KEY-MATERIAL" {
				t.Errorf("the kernel reads its own key: %q, %v", b, err)
			}
		})
	}
	wg.Wait()
}

func jsonString(s string) string { b, _ := json.Marshal(s); return string(b) }
