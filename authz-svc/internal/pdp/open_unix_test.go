//go:build unix

package pdp

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// A served file swapped for a FIFO or a link after the walk looked at it
// fails the read at once (review: a FIFO renamed over a policy file
// between the check and the read held the load, and the reload lock, for
// ever); a regular file reads as it is.
func TestReadRegularNeverWaitsOnWhatIsNoFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "p.rego")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	if _, err := readRegular(fifo); err == nil {
		t.Error("a FIFO was read")
	}
	target := filepath.Join(dir, "real.rego")
	if err := os.WriteFile(target, []byte("package x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.rego")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if _, err := readRegular(link); err == nil {
		t.Error("a link was followed")
	}
	if b, err := readRegular(target); err != nil || string(b) != "package x\n" {
		t.Errorf("a regular file: %q, %v", b, err)
	}
}
