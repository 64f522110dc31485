package app_test

import (
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sharedos/toolshare/services/platform/runner"

	"github.com/sharedos/toolshare/catalog-svc/internal/app"
)

// serve with --upstream-commands makes the process non-dumpable before
// anything else, even a config it then refuses: its stdio upstreams, its
// children of its user, cannot read its /proc/<pid>/environ or memory
// (upstream's TestAStdioServerCannotReadTheKernel shows what that closes).
// Without, it starts no child and stays as it was.
func TestServeIsNotDumpable(t *testing.T) {
	dumpable := func() int {
		n, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	setDumpable := func(v uintptr) {
		if err := unix.Prctl(unix.PR_SET_DUMPABLE, v, 0, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	setDumpable(1)
	t.Cleanup(func() { setDumpable(1) }) // the rest of this test binary as it was
	if _, err := app.Command.Complete(t.Context(), app.Config{}, runner.Env{}); err == nil {
		t.Fatal("an empty config completed")
	}
	if n := dumpable(); n != 1 {
		t.Errorf("after serve's Complete without upstream commands: dumpable %d, want 1", n)
	}
	withStdio := app.Config{}
	withStdio.Upstreams.Commands = []string{"npx"}
	if _, err := app.Command.Complete(t.Context(), withStdio, runner.Env{}); err == nil {
		t.Fatal("a config without listen address completed")
	}
	if n := dumpable(); n != 0 {
		t.Errorf("after serve's Complete with upstream commands: dumpable %d, want 0", n)
	}
}
