package upstream

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
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

// A server that keeps leaving short-lived orphans costs catalog-svc a scan
// per reapGap at most: each orphan's exit is a SIGCHLD, and each SIGCHLD
// read every process's stat (under the lock a server's start takes), a
// core's worth of catalog-svc's time. Counted, not timed: scans that begin
// reapGap apart at the least fit (elapsed / reapGap) + 1 into any span,
// however loaded the machine.
func TestOrphanExitsAreReapedInCoalescedScans(t *testing.T) {
	startServer(t, `while :; do (sleep 0.005 &); sleep 0.002; done`)
	waitFor(t, "a scan", func() bool { return reapScans.Load() > 0 })
	start, from := time.Now(), reapScans.Load()
	waitFor(t, "ten scans", func() bool { return reapScans.Load() >= from+10 })
	elapsed, n := time.Since(start), reapScans.Load()-from
	if limit := int64(elapsed/reapGap) + 1; n > limit {
		t.Errorf("%d scans in %v: more than one each %v", n, elapsed, reapGap)
	}
}

// children lists this process's children from each thread's list, as a
// scan of every process finds them: a child started by any goroutine (so
// by any thread) is there.
func TestChildrenAreListedFromEveryThread(t *testing.T) {
	var cmds []*exec.Cmd
	var wg sync.WaitGroup
	var mu sync.Mutex
	for range 4 {
		wg.Go(func() {
			cmd := exec.Command("sleep", "60")
			if err := cmd.Start(); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			cmds = append(cmds, cmd)
			mu.Unlock()
		})
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, cmd := range cmds {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	listed := map[int]bool{}
	for _, pid := range children() {
		listed[pid] = true
	}
	for _, pid := range ownOf(scan()) {
		if !listed[pid] {
			t.Errorf("child %d, found by a scan, is not listed", pid)
		}
	}
	for _, cmd := range cmds {
		if !listed[cmd.Process.Pid] {
			t.Errorf("child %d is not listed", cmd.Process.Pid)
		}
	}
}

// threads is how many OS threads this process runs.
func threads(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Threads:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no Threads: in /proc/self/status")
	return 0
}

// A running stdio server holds no OS thread of catalog-svc's: the wait
// for its exit blocked in waitid, one thread each (37 threads with 31
// servers); it waits on a pidfd through Go's poller. Go keeps a few
// threads of its own besides, so the count may grow some, not by one
// per server.
func TestRunningStdioServersHoldNoThreadEach(t *testing.T) {
	startServer(t, `exec cat`)
	waitFor(t, "the first server's wait", func() bool { return awaiting.Load() >= 1 })
	before := threads(t)
	const servers = 24
	for range servers {
		startServer(t, `exec cat`)
	}
	waitFor(t, "every server's wait", func() bool { return awaiting.Load() >= servers+1 })
	if grown := threads(t) - before; grown >= servers/2 {
		t.Errorf("%d servers more, %d threads more", servers, grown)
	}
	exited := startServer(t, `exit 0`)
	waitFor(t, "an exited server's wait to end", func() bool {
		select {
		case <-exited.exited:
			return true
		default:
			return false
		}
	})
}
