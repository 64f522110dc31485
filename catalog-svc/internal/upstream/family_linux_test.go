package upstream_test

import (
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// A process a stdio server started in a session of its own, which ignores
// SIGTERM, ends with the server's provider: the server's process group
// alone was killed, and the process lived on, re-parented to init, as
// catalog-svc's user. It is killed (found among the server's descendants)
// and reaped by catalog-svc (no zombie, nothing left to init).
func TestWhatAStdioServerLeftInASessionOfItsOwnEndsWithIt(t *testing.T) {
	h, marks := stdioUpstream(t, 0, "/bin/sh", "-c", `setsid /bin/sh -c 'trap "" TERM; echo $$ >"$UPSTREAM_TEST_MARKS/left.new" && mv "$UPSTREAM_TEST_MARKS/left.new" "$UPSTREAM_TEST_MARKS/left"; exec sleep 1000' </dev/null >/dev/null 2>&1 & exec "$0"`)
	pid := stdioPid(t, h)
	left := readPid(t, filepath.Join(marks, "left"))
	t.Cleanup(func() { // a failed run leaves no sleep behind
		if t.Failed() {
			_ = syscall.Kill(left, syscall.SIGKILL)
		}
	})
	if sid, err := unix.Getsid(left); err != nil || sid != left {
		t.Fatalf("the process left is in session %d (%v), want one of its own", sid, err)
	}
	if err := h.m.Remove(t.Context(), "sx"); err != nil {
		t.Fatal(err)
	}
	waitReaped(t, pid)
	waitReaped(t, left)
}

// A stdio server that exits leaving a child in a session of its own that
// holds its stdout open loses its session at once, and the child, adopted
// by catalog-svc once its server exited, is killed and reaped.
func TestAStdioServerThatExitsLeavingASessionOfItsOwnIsDropped(t *testing.T) {
	h, pid, left := exitLeaving(t, `setsid /bin/sh -c 'echo $$ >"$UPSTREAM_TEST_MARKS/left.new" && mv "$UPSTREAM_TEST_MARKS/left.new" "$UPSTREAM_TEST_MARKS/left"; exec sleep 1000' & exec "$0"`, "left")
	waitReaped(t, pid)
	waitReaped(t, left)
	wantNextCall(t, h)
}
