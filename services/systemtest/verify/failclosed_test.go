//go:build verify

package verify

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/health/grpc_health_v1"
)

// failMargin is what a refused call may take beyond the authz timeout:
// bridge, kernel and two record writes on a shared 2-core box under load.
// A call that waited on the PDP instead would run to its client's deadline
// (20 s and more), so the check still tells the two apart.
const failMargin = 5 * time.Second

// TestFailClosedAuthzKilled: with authz-svc SIGKILLed every call of an
// allowed tool is failed/authz_unavailable, never succeeded, and no handler
// runs (neither the counting provider nor files.write's side effect); one
// record per attempt.
func TestFailClosedAuthzKilled(t *testing.T) {
	s := startStack(t, stackOptions{authzTimeout: time.Second})
	tr := s.open("alice")
	expectOutcome(t, mustCall(t, tr, "verify.echo", `{"path":"/public/x","value":"warm"}`), "succeeded", "")
	before := s.provider.handled.Load()

	s.Authz.Kill(t)
	const n = 10
	for i := range n {
		start := time.Now()
		var c callResult
		if i%2 == 0 {
			c = mustCall(t, tr, "verify.echo", `{"path":"/public/x"}`)
		} else {
			c = mustCall(t, tr, "files.write", `{"path":"/public/written-while-authz-down.txt","content":"must not exist"}`)
		}
		expectOutcome(t, c, "failed", "authz_unavailable")
		// Bounded by the authz timeout, with a margin for a loaded machine
		// (a call that waited on the dead PDP would run to its own deadline).
		if d := time.Since(start); d > time.Second+failMargin {
			t.Errorf("call %d took %s with authz-svc dead, want < authz-timeout 1s + %s", i, d, failMargin)
		}
	}
	if got := s.provider.handled.Load() - before; got != 0 {
		t.Errorf("handler ran %d times while authz-svc was dead", got)
	}
	if _, err := os.Stat(filepath.Join(s.fileRoot, "public", "written-while-authz-down.txt")); err == nil {
		t.Errorf("files.write took effect while authz-svc was dead")
	}
	want := map[string]int{"succeeded/": 1, "failed/authz_unavailable": n}
	assertCounts(t, s.outcomeCounts(tr.ID), want)
	// The same through sharedosctl: one record per attempt, none succeeded
	// after the kill.
	rows := s.ops(tr.ID)
	if len(rows) != n+1 {
		t.Fatalf("sharedosctl ops list: %d records, want %d", len(rows), n+1)
	}
	for _, r := range rows[1:] {
		if r.Status != "failed" || r.Code != "authz_unavailable" {
			t.Errorf("record %+v, want failed/authz_unavailable", r)
		}
	}

	// Recovery: authz-svc restarted, the same turn succeeds again; every
	// probe on the way is one more record, none lost.
	s.restart(s.Authz, s.Addrs["authz"])
	start, probes := time.Now(), 0
	for {
		probes++
		c := mustCall(t, tr, "verify.echo", `{"path":"/public/x"}`)
		if c.succeeded() {
			break
		}
		expectOutcome(t, c, "failed", "authz_unavailable")
		if time.Since(start) > 15*time.Second {
			t.Fatalf("no successful call within 15s of authz-svc restarting")
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("calls succeed again %s after authz-svc restarted (%d probes)", time.Since(start).Round(time.Millisecond), probes)
	assertCounts(t, s.outcomeCounts(tr.ID), map[string]int{"succeeded/": 2, "failed/authz_unavailable": n + probes - 1})
}

// TestFailClosedAuthzHung: authz-svc SIGSTOPped (accepts connections, never
// answers) → failed/authz_unavailable within --authz-timeout plus a margin,
// concurrent calls included; nothing runs.
func TestFailClosedAuthzHung(t *testing.T) {
	const authzTimeout = 500 * time.Millisecond
	s := startStack(t, stackOptions{authzTimeout: authzTimeout})
	tr := s.open("alice")
	expectOutcome(t, mustCall(t, tr, "verify.echo", `{"path":"/public/x"}`), "succeeded", "")
	before := s.provider.handled.Load()

	s.Authz.Signal(t, syscall.SIGSTOP)
	defer s.Authz.Signal(t, syscall.SIGCONT)
	const n = 8
	var wg sync.WaitGroup
	results := make([]callResult, n)
	for i := range n {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			results[i] = callTool(ctx, tr.URL, tr.Token, "verify.echo", `{"path":"/public/x"}`)
		})
	}
	wg.Wait()
	for i, c := range results {
		expectOutcome(t, c, "failed", "authz_unavailable")
		if c.resp.elapsed > authzTimeout+failMargin {
			t.Errorf("call %d answered after %s, want within authz-timeout %s + %s", i, c.resp.elapsed, authzTimeout, failMargin)
		}
	}
	if got := s.provider.handled.Load() - before; got != 0 {
		t.Errorf("handler ran %d times while authz-svc hung", got)
	}
	assertCounts(t, s.outcomeCounts(tr.ID), map[string]int{"succeeded/": 1, "failed/authz_unavailable": n})

	// Recovery: after SIGCONT the same turn works again.
	s.Authz.Signal(t, syscall.SIGCONT)
	deadline := time.Now().Add(10 * time.Second)
	for !mustCall(t, tr, "verify.echo", `{"path":"/public/x"}`).succeeded() {
		if time.Now().After(deadline) {
			t.Fatal("no successful call within 10s of authz-svc resuming")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestFailClosedPolicyError: a policy evaluation error is failed/authz_error
// — never denied, never allowed — and the handler does not run.
func TestFailClosedPolicyError(t *testing.T) {
	s := startStack(t, stackOptions{})
	tr := s.open("alice")
	for range 3 {
		expectOutcome(t, mustCall(t, tr, "verify.boom", `{"path":"/public/x"}`), "failed", "authz_error")
	}
	if got := s.provider.handled.Load(); got != 0 {
		t.Errorf("handler ran %d times on a policy evaluation error", got)
	}
	assertCounts(t, s.outcomeCounts(tr.ID), map[string]int{"failed/authz_error": 3})
}

// TestFailClosedCatalogKilled: with catalog-svc (catalogue + kernel) dead, a
// new turn is refused (sharedosctl exits non-zero) and calls on an open turn
// never succeed and run nothing; after a restart the open turn works.
func TestFailClosedCatalogKilled(t *testing.T) {
	s := startStack(t, stackOptions{})
	tr := s.open("alice")
	expectOutcome(t, mustCall(t, tr, "verify.echo", `{"path":"/public/x"}`), "succeeded", "")
	before := s.provider.handled.Load()

	s.Catalog.Kill(t)
	out, errOut, code := s.ctl("turn", "open", "--principal", "bob", "--role", "verify", "--harness", "verify")
	if code == 0 {
		t.Errorf("sharedosctl turn open succeeded with catalog-svc dead: %s", out)
	}
	t.Logf("turn open with catalog-svc dead: exit %d: %s", code, strings.TrimSpace(errOut))

	const n = 5
	for i := range n {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		c := callTool(ctx, tr.URL, tr.Token, "verify.echo", `{"path":"/public/x"}`)
		cancel()
		if c.succeeded() {
			t.Errorf("call %d succeeded with catalog-svc dead: %s", i, c)
		}
		if c.resp.status >= 500 {
			t.Errorf("call %d: HTTP %d, want a failed result (isError), not a 5xx", i, c.resp.status)
		}
		if i == 0 {
			t.Logf("bridge answer with catalog-svc dead: %s (outcome %+v)", c, c.outcome)
		}
		if c.msg.Result != nil && !(c.msg.Result.IsError && strings.HasPrefix(c.msg.text(), "failed:")) {
			t.Errorf("call %d: %s, want a failed: refusal", i, c)
		}
	}
	if got := s.provider.handled.Load() - before; got != 0 {
		t.Errorf("handler ran %d times with catalog-svc dead", got)
	}
	// The kernel was never reached: nothing recorded for these attempts.
	assertCounts(t, s.outcomeCounts(tr.ID), map[string]int{"succeeded/": 1})

	s.restart(s.Catalog, s.Addrs["catalog"])
	deadline := time.Now().Add(15 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c := callTool(ctx, tr.URL, tr.Token, "verify.echo", `{"path":"/public/x"}`)
		cancel()
		if c.succeeded() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("open turn did not recover within 15s of catalog-svc restarting: %s", c)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if _, _, code := s.ctl("turn", "open", "--principal", "bob", "--role", "verify", "--harness", "verify"); code != 0 {
		t.Errorf("turn open after catalog-svc restart: exit %d", code)
	}
}

func assertCounts(t testing.TB, got, want map[string]int) {
	t.Helper()
	for k, w := range want {
		if got[k] != w {
			t.Errorf("records %s = %d, want %d (all: %v)", k, got[k], w, got)
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected records %s = %d (all: %v)", k, g, got)
		}
	}
}

// healthStatus is the health status of addr as a string, an error included.
func (s *stack) healthStatus(addr, service string) string {
	st, err := s.Health(addr, service)
	if err != nil {
		return "error: " + err.Error()
	}
	return st.String()
}

var serving = grpc_health_v1.HealthCheckResponse_SERVING.String()
