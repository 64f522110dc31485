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

// TestConfinementLeavesTheServersOwnPlaces: a private path in the server's
// home directory is left open to it (a server must create its caches
// there: npx makes ~/.npm), and the kernel warns about it; one whose
// linked parent exists but which is created only after the server started
// is closed to it where the link leads; "/" closes nothing and stops no
// server.
func TestConfinementLeavesTheServersOwnPlaces(t *testing.T) {
	if !landlock() {
		t.Log("no Landlock here: nothing is confined (TestStdioServerCannotReadPrivate checks the warning path)")
	}
	home, realDir, linkParent := t.TempDir(), t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	if err := os.MkdirAll(filepath.Join(home, "keys"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "keys", "k"), []byte("HOME-KEY"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(linkParent, "run")
	if err := os.Symlink(realDir, link); err != nil {
		t.Fatal(err)
	}
	later := filepath.Join(link, "secrets") // not there yet
	h, _ := stdioUpstreamGuarded(t, 0, []string{filepath.Join(home, "keys"), later, "/"})
	call := func(tool, p string) string {
		resp, err := h.call("sx", tool, `{"path":`+jsonString(p)+`}`)
		if err != nil {
			t.Fatalf("%s %s: %v", tool, p, err)
		}
		return string(resp.GetContentJson())
	}
	if got := call("sx.cat", filepath.Join(home, "keys", "k")); !strings.Contains(got, "HOME-KEY") {
		t.Errorf("a private path in the server's home is left open, read: %s", got)
	}
	if got := call("sx.touch", filepath.Join(home, ".cache")); !strings.Contains(got, "made") {
		t.Errorf("the server creates in its home: %s", got)
	}
	if err := os.MkdirAll(filepath.Join(realDir, "secrets"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(realDir, "secrets", "k"), []byte("LATER-KEY"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(later, "k"), filepath.Join(realDir, "secrets", "k")} {
		if got := call("sx.cat", p); landlock() && (strings.Contains(got, "LATER-KEY") || !strings.Contains(got, "permission denied")) {
			t.Errorf("a private path made after the server started, through its link or where it leads (%s): %s", p, got)
		}
	}
}

// unlistableEnv names, in the re-run, the tree its root prepared.
const unlistableEnv = "UPSTREAM_TEST_UNLISTABLE_TREE"

// TestConfinementUnderAnUnlistableParent: a private path beneath a
// directory the kernel's user may pass through but not list (0711, not
// its own) — one there and one not made yet — still lets the server start,
// closed to the private one, open to the path on to it. Run as nobody
// (root lists anything).
func TestConfinementUnderAnUnlistableParent(t *testing.T) {
	if tree := os.Getenv(unlistableEnv); tree != "" {
		if os.Geteuid() == 0 {
			t.Fatal("the re-run runs as root, which lists any directory")
		}
		if _, err := os.ReadDir(filepath.Join(tree, "opaque")); err == nil {
			t.Fatal("the parent is listable: nothing to test")
		}
		h, _ := stdioUpstreamGuarded(t, 0, []string{filepath.Join(tree, "opaque", "keys"), filepath.Join(tree, "opaque", "notyet", "keys")})
		cat := func(p string) string {
			resp, err := h.call("sx", "sx.cat", `{"path":`+jsonString(p)+`}`)
			if err != nil {
				t.Fatalf("cat %s: %v", p, err)
			}
			return string(resp.GetContentJson())
		}
		if got := cat(filepath.Join(tree, "opaque", "keys", "k")); landlock() && !strings.Contains(got, "permission denied") {
			t.Errorf("the private path under the unlistable parent: %s", got)
		}
		if got := cat(filepath.Join(tree, "public.txt")); !strings.Contains(got, "PUBLIC") {
			t.Errorf("beside the unlistable parent: %s", got)
		}
		return
	}
	tree := t.TempDir()
	if os.Geteuid() == 0 {
		for _, d := range []string{filepath.Dir(tree), tree} {
			if err := os.Chmod(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	keys := filepath.Join(tree, "opaque", "keys")
	if err := os.MkdirAll(keys, 0o755); err != nil {
		t.Fatal(err)
	}
	for p, text := range map[string]string{filepath.Join(keys, "k"): "KEY", filepath.Join(tree, "public.txt"): "PUBLIC"} {
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Passable, not listable — by anyone but its owner (root here; as
	// another user, the re-run is that user and the owner: then 0311).
	mode := os.FileMode(0o711)
	if os.Geteuid() != 0 {
		mode = 0o311
	}
	if err := os.Chmod(filepath.Join(tree, "opaque"), mode); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(filepath.Join(tree, "opaque"), 0o755) })
	rerunUnprivileged(t, "TestConfinementUnderAnUnlistableParent", unlistableEnv+"="+tree)
}
