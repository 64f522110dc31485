package upstream_test

import (
	"context"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sharedos/toolshare/catalog-svc/internal/upstream"
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
	h, marks := stdioUpstream(t, 0, "/bin/sh", "-c", `setsid /bin/sh -c 'echo $$ >"$UPSTREAM_TEST_MARKS/left.new" && mv "$UPSTREAM_TEST_MARKS/left.new" "$UPSTREAM_TEST_MARKS/left"; exec sleep 1000' & exec "$0"`)
	pid := stdioPid(t, h)
	left := readPid(t, filepath.Join(marks, "left"))
	t.Cleanup(func() {
		if t.Failed() {
			_ = syscall.Kill(left, syscall.SIGKILL)
		}
	})
	c, err := h.h.Client(upstream.Target("sx"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := <-handleInBackground(ctx, c, "sx.exit", `{}`); status.Code(err) != codes.Unavailable {
		t.Errorf("the call that ended the server: %v, want Unavailable", err)
	}
	waitReaped(t, pid)
	waitReaped(t, left)
	if resp, err := h.call("sx", "sx.echo", `{"text":"next"}`); err != nil || !strings.Contains(string(resp.GetContentJson()), "next") {
		t.Errorf("the next call: %v, %v", resp, err)
	}
}
