package upstream

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// startServer starts script as a stdio server (no handshake: the tests
// here look at its processes only), ended with the test.
func startServer(t *testing.T, script string, env ...string) *capturingStdio {
	t.Helper()
	c := newConn(t.Context(), nil, Guard{}, slog.New(slog.DiscardHandler), nil)
	t.Cleanup(c.close)
	tr, err := c.stdio([]string{"/bin/sh", "-c", script}, append([]string{"PATH=" + os.Getenv("PATH")}, env...))
	if err != nil {
		t.Fatal(err)
	}
	st := tr.(*capturingStdio)
	if err := st.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.kill(); _ = st.Close() })
	return st
}

// daemonScript daemonizes a helper the usual way (daemon(3), ssh-agent,
// git credential-cache): a child starts a session of its own and its
// parent exits, so the helper is adopted by catalog-svc and names its
// server by nothing. The helper's id is written to $OUT, then the script
// goes on as a server that reads its stdin.
const daemonScript = `(setsid sh -c 'echo $$ >"$OUT.new"; mv "$OUT.new" "$OUT"; exec sleep 1000' &); exec cat`

// startDaemonizing starts a server running daemonScript and returns it
// with its helper, once catalog-svc adopted the helper.
func startDaemonizing(t *testing.T) (*capturingStdio, int) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "daemon")
	st := startServer(t, daemonScript, "OUT="+out)
	waitFor(t, "the helper", func() bool { _, err := os.Stat(out); return err == nil })
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	d, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(d, syscall.SIGKILL) }) // a failed run leaves no sleep behind
	waitFor(t, "the helper to be adopted", func() bool { p, ok := stat(d); return ok && p.ppid == os.Getpid() })
	return st, d
}

// recordKills records the processes killLeft kills for the test.
func recordKills(t *testing.T) func(pid int) bool {
	var mu sync.Mutex
	killed := map[int]bool{}
	t.Cleanup(set(&killing, func(pid int) {
		mu.Lock()
		killed[pid] = true
		mu.Unlock()
	}))
	return func(pid int) bool {
		mu.Lock()
		defer mu.Unlock()
		return killed[pid]
	}
}

// One server's end leaves another's helpers running: killLeft killed
// every process catalog-svc adopted in a session of its own that no live
// server's session held, so ending server B (a crash, a bound, providers
// remove) killed the daemonized helper of server A, still running and
// still using it. Such a helper names no server, so it is killed only once
// no other server runs: here when A, the last, ends, and then it is
// reaped.
func TestOneServersEndLeavesAnotherServersDaemonRunning(t *testing.T) {
	killed := recordKills(t)
	a, d := startDaemonizing(t)
	b := startServer(t, `exec cat`)
	b.kill()
	_ = b.Close()
	if killed(d) {
		t.Fatalf("server B's teardown killed server A's helper %d", d)
	}
	if p, ok := stat(d); !ok || p.zombie {
		t.Fatalf("server A's helper %d is gone once B ended", d)
	}
	a.kill()
	_ = a.Close()
	if !killed(d) {
		t.Errorf("the last server's teardown left the helper %d it cannot be anyone else's", d)
	}
	waitFor(t, "the helper to be reaped", func() bool { _, ok := stat(d); return !ok })
}

// Servers ending together (the manager closing) kill what they left:
// each teardown that runs while another server is still alive spares
// adopted processes of unknown origin, but a server whose teardown began
// no longer counts as alive, so the last of them kills every helper.
func TestServersEndingTogetherKillTheirDaemons(t *testing.T) {
	a, da := startDaemonizing(t)
	b, db := startDaemonizing(t)
	var wg sync.WaitGroup
	for _, st := range []*capturingStdio{a, b} {
		wg.Go(func() { st.kill(); _ = st.Close() })
	}
	wg.Wait()
	for _, d := range []int{da, db} {
		waitFor(t, "a helper to be killed and reaped", func() bool { _, ok := stat(d); return !ok })
	}
}
