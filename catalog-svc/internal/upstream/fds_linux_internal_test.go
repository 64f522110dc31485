package upstream

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// A stdio server gets its stdin, stdout and stderr, and none of the
// descriptors catalog-svc inherited without close-on-exec (a launching
// shell's: here a pipe made as one makes it, with no O_CLOEXEC): every
// server got them, the write end of a pipe its shell waits on among them.
func TestAStdioServerInheritsNoDescriptors(t *testing.T) {
	var p [2]int
	if err := syscall.Pipe(p[:]); err != nil { // pipe2(0): inheritable, as a shell's
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = syscall.Close(p[0]), syscall.Close(p[1]) })
	out := filepath.Join(t.TempDir(), "fds")
	c := newConn(t.Context(), nil, Guard{}, slog.New(slog.DiscardHandler), nil)
	t.Cleanup(c.close)
	tr, err := c.stdio([]string{"/bin/sh", "-c", `ls /proc/$$/fd >"$OUT.new" && mv "$OUT.new" "$OUT"; exec cat`},
		[]string{"PATH=" + os.Getenv("PATH"), "OUT=" + out})
	if err != nil {
		t.Fatal(err)
	}
	st := tr.(*capturingStdio)
	if err := st.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.kill(); _ = st.Close() })
	waitFor(t, "the server to list its descriptors", func() bool { _, err := os.Stat(out); return err == nil })
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	fds := strings.Fields(string(b))
	t.Logf("the server's descriptors: %v", fds)
	for _, fd := range p {
		for _, got := range fds {
			if got == strconv.Itoa(fd) {
				t.Errorf("the server holds descriptor %d, catalog-svc's (its descriptors: %v)", fd, fds)
			}
		}
	}
	// Still open here: close-on-exec keeps them from a program executed only.
	if _, err := syscall.Write(p[1], []byte("x")); err != nil {
		t.Errorf("the inherited pipe was closed here: %v", err)
	}
}

// A descriptor is kept from the servers when close_range is refused, as a
// seccomp profile refuses it (EPERM): only ENOSYS and EINVAL fell back to
// the walk of /proc/self/fd, any other error left every descriptor
// inheritable.
func TestDescriptorsAreKeptFromServersWhenCloseRangeIsRefused(t *testing.T) {
	t.Cleanup(set(&closeRange, func(uint, uint, uint) error { return syscall.EPERM }))
	var p [2]int
	if err := syscall.Pipe(p[:]); err != nil { // pipe2(0): inheritable
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = syscall.Close(p[0]), syscall.Close(p[1]) })
	if err := inheritNoFiles(); err != nil {
		t.Fatal(err)
	}
	for _, fd := range p {
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err != nil || flags&unix.FD_CLOEXEC == 0 {
			t.Errorf("descriptor %d: flags %#x (%v), want close-on-exec", fd, flags, err)
		}
	}
}
