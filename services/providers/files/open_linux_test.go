package files

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestOpenRefusesLinksItself (issue 17, item 18): the open, not only the
// walk before it, refuses a symbolic link on any component — the link an
// attacker swaps in after resolve's Lstat walk — and a path out of the root.
func TestOpenRefusesLinksItself(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"public", "private"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "private", "secret.txt"), []byte("SECRET"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../private", filepath.Join(root, "public", "swapped")); err != nil {
		t.Fatal(err)
	}
	p, err := New(root)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, rel := range []string{"public/swapped/secret.txt", "public/swapped"} {
		f, err := p.openBeneath(rel, os.O_RDONLY, 0)
		if err == nil {
			f.Close()
			t.Fatalf("openBeneath(%s) followed a symbolic link", rel)
		}
		if !errors.Is(err, syscall.ELOOP) {
			t.Errorf("openBeneath(%s) = %v, want ELOOP", rel, err)
		}
	}
	if f, err := p.openBeneath("../outside", os.O_RDONLY, 0); err == nil {
		f.Close()
		t.Fatal("openBeneath escaped the root")
	}
	f, err := p.openBeneath("private/secret.txt", os.O_RDONLY, 0)
	if err != nil {
		t.Fatalf("a plain path: %v", err)
	}
	f.Close()
}
