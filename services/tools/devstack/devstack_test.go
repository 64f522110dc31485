package devstack_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sharedos/toolshare/services/tools/devstack"
)

// --debug-listen-base gives each service of `make run` its own pprof
// address, consecutive in start order; none without it; a bad base is
// refused with the flag's name.
func TestDebugListenBase(t *testing.T) {
	cfg := devstack.Config{Root: "/repo", DebugListenBase: "127.0.0.1:6060"}
	var got []string
	for _, s := range devstack.Services(cfg) {
		i := slices.Index(s.Args, "--debug-listen")
		if i < 0 || i+1 >= len(s.Args) {
			t.Fatalf("%s has no --debug-listen: %v", s.Name, s.Args)
		}
		got = append(got, s.Name+"="+s.Args[i+1])
	}
	if want := "authz-svc=127.0.0.1:6060,files-provider=127.0.0.1:6061,catalog-svc=127.0.0.1:6062,bridge-svc=127.0.0.1:6063"; strings.Join(got, ",") != want {
		t.Errorf("debug addresses %v, want %s", got, want)
	}
	for _, s := range devstack.Services(devstack.Config{Root: "/repo"}) {
		if slices.Contains(s.Args, "--debug-listen") {
			t.Errorf("%s profiles without --debug-listen-base: %v", s.Name, s.Args)
		}
	}
	for _, bad := range []string{"6060", "127.0.0.1:x", "127.0.0.1:65534", "127.0.0.1:0"} {
		if _, err := devstack.DebugAddrs(bad, 4); err == nil || !strings.Contains(err.Error(), "--debug-listen-base") {
			t.Errorf("base %q: %v", bad, err)
		}
	}
	if a, err := devstack.DebugAddrs("[::1]:7000", 2); err != nil || strings.Join(a, ",") != "[::1]:7000,[::1]:7001" {
		t.Errorf("IPv6 base: %v, %v", a, err)
	}
}

// MakePKI keeps the local CA where only this user can change it: a
// directory left writable by others is tightened, and one in a parent
// others can write is refused (found by review: an existing 0777
// directory was used as it was).
func TestMakePKIOnlyInPrivateDirectories(t *testing.T) {
	base := filepath.Join(t.TempDir(), "dev")
	dir := filepath.Join(base, "pki")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := devstack.MakePKI(dir); err != nil {
		t.Fatalf("MakePKI in a loose directory of this user's: %v", err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the CA's directory is %v (%v), want 0700", fi.Mode().Perm(), err)
	}
	if err := os.Chmod(base, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := devstack.MakePKI(dir); err == nil || !strings.Contains(err.Error(), "writable by others") {
		t.Errorf("MakePKI under a directory others can write: %v", err)
	}
}

// A directory above the CA's that others can write (and is not sticky, as
// /tmp is) lets them swap the tree below after any check: refused (found
// by review: only the directory and its parent were checked).
// A link on the way to the CA's directory is followed, and the directory
// holding it is checked too: whoever can write that one can swap the link
// (and so the CA) after the check.
func TestCheckPrivateDirChecksWhereALinkOnTheWayIs(t *testing.T) {
	top := t.TempDir()
	private := filepath.Join(top, "private", "s")
	dir := filepath.Join(top, "shared", "repo", ".sharedos", "dev", "pki")
	if err := os.MkdirAll(filepath.Join(private, "dev", "pki"), 0o700); err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join(top, "shared", "repo")
	if err := os.MkdirAll(repo, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join("..", "..", "private", "s"), filepath.Join(repo, ".sharedos")); err != nil {
		t.Fatal(err)
	}
	if err := devstack.CheckPrivateDir(dir); err != nil {
		t.Fatalf("a private tree reached through a link in a private directory: %v", err)
	}
	if err := os.Chmod(repo, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := devstack.CheckPrivateDir(dir); err == nil || !strings.Contains(err.Error(), repo) {
		t.Errorf("the link to the CA in a directory others can write: %v", err)
	}
	if err := os.Chmod(repo, 0o700); err != nil {
		t.Fatal(err)
	}
	// The link's target is checked as well: its own directories.
	if err := os.Chmod(filepath.Join(top, "private"), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := devstack.CheckPrivateDir(dir); err == nil || !strings.Contains(err.Error(), filepath.Join(top, "private")) {
		t.Errorf("the link's target under a directory others can write: %v", err)
	}
}

// ".." after a link is the parent of the link's target, as the kernel
// (and MakePKI's MkdirAll) resolves it, not a word cut from the text: the
// directory checked is the one the CA is written to.
func TestCheckPrivateDirResolvesDotDotAfterALink(t *testing.T) {
	top := t.TempDir()
	for _, d := range []string{filepath.Join(top, "real", "deep"), filepath.Join(top, "x")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(top, "real", "deep"), filepath.Join(top, "x", "link")); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(top, "x", "link") + "/../pki" // top/real/pki
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := devstack.CheckPrivateDir(dir); err != nil {
		t.Errorf("a private directory reached by .. after a link: %v", err)
	}
	// Its text's twin top/x/pki is private; the directory it is in is not.
	if err := os.MkdirAll(filepath.Join(top, "x", "pki"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(top, "real"), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := devstack.CheckPrivateDir(dir); err == nil || !strings.Contains(err.Error(), filepath.Join(top, "real")) {
		t.Errorf("the CA's directory under one others can write: %v", err)
	}
}

func TestCheckPrivateDirLooksAllTheWayUp(t *testing.T) {
	top := t.TempDir()
	dir := filepath.Join(top, "shared", "repo", ".sharedos", "dev", "pki")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := devstack.CheckPrivateDir(dir); err != nil {
		t.Fatalf("a private tree under a temp directory: %v", err)
	}
	shared := filepath.Join(top, "shared")
	if err := os.Chmod(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := devstack.CheckPrivateDir(dir); err == nil || !strings.Contains(err.Error(), shared) {
		t.Errorf("under a directory others can write: %v", err)
	}
	if err := os.Chmod(shared, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	if err := devstack.CheckPrivateDir(dir); err != nil {
		t.Errorf("under a sticky directory (as /tmp): %v", err)
	}
}

// A stack on PostgreSQL keeps its record journal in a directory of its own
// per database (host, port, name: not the password) (catalog-svc refuses a kernel of another database on a
// journal directory), and one on the embedded store has none.
func TestJournalDirPerDatabase(t *testing.T) {
	a, b := devstack.JournalDir("/cache", "postgres://h/a"), devstack.JournalDir("/cache", "postgres://h/b")
	if a == b || a != devstack.JournalDir("/cache", "postgres://h/a") || !strings.HasPrefix(a, "/cache/sharedos/record-journal/") {
		t.Errorf("journal directories %s and %s: want one per URL under the cache", a, b)
	}
	// A new password or sslmode is the same database: the same directory.
	if c := devstack.JournalDir("/cache", "postgres://u:new@h/a?sslmode=disable"); c != a {
		t.Errorf("journal directory %s for another password of %s", c, a)
	}
	for _, s := range devstack.Services(devstack.Config{Root: "/repo"}) {
		if slices.Contains(s.Args, "--record-journal-dir") {
			t.Errorf("%s keeps a record journal on the embedded store: %v", s.Name, s.Args)
		}
	}
}
