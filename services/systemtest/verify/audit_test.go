//go:build verify

package verify

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// attemptKind is one line of the audit script.
type attemptKind struct {
	name    string
	n       int
	outcome string // "status/code" recorded and shown; "" = refused before any record
	run     func(ctx context.Context, i int) callResult
}

// TestAuditCompleteness: a scripted mix of 1,000 attempts with known
// outcomes (every recorded outcome the system has, plus refusals at the
// edge). Every client sees its expected outcome, and
// SELECT status, code, count(*) equals the expected table exactly; the
// table is append-only even for the database owner.
func TestAuditCompleteness(t *testing.T) {
	s := startStack(t, stackOptions{})
	tr := s.open("auditor")
	closed := s.open("closed")
	s.closeTurn(closed.ID)

	call := func(tool, args string) func(context.Context, int) callResult {
		return func(ctx context.Context, _ int) callResult { return callTool(ctx, tr.URL, tr.Token, tool, args) }
	}
	raw := func(r rawReq) func(context.Context, int) callResult {
		return func(ctx context.Context, _ int) callResult {
			resp := send(ctx, r)
			c := callResult{resp: resp}
			c.msg, c.ok = resp.rpc()
			return c
		}
	}
	good := modernCall(1, "verify.echo", `{"path":"/public/x"}`)
	concurrent := []attemptKind{
		{"allowed", 375, "succeeded/", call("verify.echo", `{"path":"/public/x","value":"ok"}`)},
		{"policy deny", 150, "denied/permission_denied", call("verify.echo", `{"path":"/private/a.txt"}`)},
		{"unknown tool", 60, "denied/tool_unavailable", call("nope.tool", `{}`)},
		{"malformed name", 40, "denied/tool_unavailable", call("files read", `{"path":"/public/a.txt"}`)},
		{"missing argument", 50, "failed/invalid_arguments", call("verify.echo", `{}`)},
		{"wrong type", 50, "failed/invalid_arguments", call("verify.echo", `{"path":42}`)},
		{"handler error", 50, "failed/handler_error", call("verify.echo", `{"path":"/public/x","value":"fail"}`)},
		{"policy evaluation error", 50, "failed/authz_error", call("verify.boom", `{"path":"/public/x"}`)},
		{"handler timeout", 25, "failed/timeout", call("verify.sleepy", `{"path":"/public/x","ms":5000}`)},
		{"closed turn", 25, "", raw(rawReq{url: closed.URL, token: closed.Token, body: good, modern: true})},
		{"bad token", 25, "", raw(rawReq{url: tr.URL, token: "not-a-token", body: good, modern: true})},
		{"truncated JSON", 25, "", raw(rawReq{url: tr.URL, token: tr.Token, body: good[:40], modern: true})},
	}
	const authzDown, cancelled = 50, 25
	var script []attemptKind
	expected := map[string]int{"failed/authz_unavailable": authzDown, "cancelled/cancelled": cancelled}
	total := authzDown + cancelled
	for _, k := range concurrent {
		for range k.n {
			script = append(script, k)
		}
		if k.outcome != "" {
			expected[k.outcome] += k.n
		}
		total += k.n
	}
	if total != 1000 {
		t.Fatalf("script has %d attempts, want 1000", total)
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(script), func(i, j int) { script[i], script[j] = script[j], script[i] })

	mismatch := func(k attemptKind, c callResult) bool {
		if k.outcome == "" {
			return c.resp.err != nil || c.resp.status < 400 || c.resp.status >= 500
		}
		if k.outcome == "succeeded/" {
			return !c.succeeded()
		}
		return c.msg.Result == nil || c.outcome.Status+"/"+c.outcome.Code != k.outcome
	}
	var mu sync.Mutex
	bad := 0
	report := func(k attemptKind, c callResult) {
		if mismatch(k, c) {
			mu.Lock()
			bad++
			if bad <= 10 {
				t.Errorf("%s: want %q, got %s (outcome %+v)", k.name, k.outcome, c, c.outcome)
			}
			mu.Unlock()
		}
	}

	// Phase 1: the concurrent mix, 16 at a time.
	start := time.Now()
	work := make(chan int)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := range work {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				report(script[i], script[i].run(ctx, i))
				cancel()
			}
		})
	}
	for i := range script {
		work <- i
	}
	close(work)
	wg.Wait()

	// Phase 2: authz-svc dead.
	s.Authz.Kill(t)
	k := attemptKind{"authz dead", authzDown, "failed/authz_unavailable", call("verify.echo", `{"path":"/public/x"}`)}
	for i := range authzDown {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		report(k, k.run(ctx, i))
		cancel()
	}
	s.restart(s.Authz, s.Addrs["authz"])
	s.waitAuthzReachable(30 * time.Second)

	// Phase 3: the client gives up while the handler runs.
	for range cancelled {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan callResult, 1)
		go func() { done <- callTool(ctx, tr.URL, tr.Token, "verify.slow", `{"path":"/public/x","ms":10000}`) }()
		select {
		case <-s.provider.started:
		case <-time.After(10 * time.Second):
			t.Fatal("verify.slow did not start")
		}
		cancel()
		if c := <-done; c.succeeded() {
			t.Errorf("a cancelled call succeeded")
		}
	}
	t.Logf("AUDIT: %d attempts in %s", total, time.Since(start).Round(time.Millisecond))

	s.waitSettledAll(30 * time.Second)
	if d := os.Getenv("VERIFY_LOG_DIR"); d != "" {
		s.dumpLogs(d)
	}
	got := s.outcomeCounts("")
	assertCounts(t, got, expected)
	sum, denied, failed := 0, 0, 0
	for k, n := range got {
		sum += n
		switch {
		case strings.HasPrefix(k, "denied/"):
			denied += n
		case strings.HasPrefix(k, "failed/"):
			failed += n
		}
	}
	t.Logf("AUDIT table (%d records, denied %d, failed %d): %v", sum, denied, failed, got)
	if denied != 250 || failed != 275 {
		t.Errorf("denied %d / failed %d, want 250 / 275 counted separately", denied, failed)
	}
	if n := s.rowCount(closed.ID); n != 0 {
		t.Errorf("closed turn has %d records", n)
	}

	// Append-only, even for the database owner.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, q := range []string{
		`UPDATE catalog.operations SET status = 'succeeded', code = '' WHERE status = 'denied'`,
		`UPDATE catalog.operations SET reason = 'rewritten' WHERE status = 'succeeded'`,
		`DELETE FROM catalog.operations WHERE status = 'failed'`,
		`TRUNCATE catalog.operations`,
	} {
		if _, err := s.db.Exec(ctx, q); err == nil {
			t.Errorf("%s succeeded: the record table is not append-only", q)
		}
	}
	assertCounts(t, s.outcomeCounts(""), expected)
	if bad > 0 {
		t.Errorf("%d attempts did not see their expected outcome", bad)
	}
}

// dumpLogs writes every service log to dir (debugging aid on failure).
func (s *stack) dumpLogs(dir string) {
	for _, p := range s.procs() {
		_ = os.WriteFile(filepath.Join(dir, p.Name+".log"), []byte(p.Log.String()), 0o644)
	}
}
