//go:build verify

package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestPostgresStopUnderLoad: `pg_ctl stop -m immediate` while ~20 calls/s
// run. No handler runs without a committed record; catalog-svc readiness
// (overall "") goes NOT_SERVING while liveness stays SERVING; after a
// restart calls succeed again within 10 s; no call id has two first rows.
// And the record never disagrees with the answer (ADR 0007): every success a
// client saw has a succeeded record, and once PostgreSQL is back no record is
// left pending or called interrupted — the kernel knew every outcome.
// Every phase waits for a condition (n successes, readiness, n refusals), not
// for a duration.
func TestPostgresStopUnderLoad(t *testing.T) {
	s := startStack(t, stackOptions{})
	tr := s.open("alice")
	expectOutcome(t, mustCall(t, tr, "verify.echo", `{"path":"/public/x"}`), "succeeded", "")

	type attempt struct {
		at    time.Time
		value string
		c     callResult
	}
	var mu sync.Mutex
	var attempts []attempt
	count := func(since time.Time, pred func(callResult) bool) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, a := range attempts {
			if a.at.After(since) && pred(a.c) {
				n++
			}
		}
		return n
	}
	refusedAnswer := func(c callResult) bool {
		return c.resp.err == nil && !c.succeeded() && ((c.msg.Result != nil && c.msg.Result.IsError) || c.resp.status == 503)
	}
	// waitFor polls cond until it holds; limit only bounds a broken run.
	waitFor := func(what string, limit time.Duration, cond func() bool) time.Duration {
		t.Helper()
		start := time.Now()
		for !cond() {
			if time.Since(start) > limit {
				t.Fatalf("%s: not within %s", what, limit)
			}
			time.Sleep(20 * time.Millisecond)
		}
		return time.Since(start)
	}

	stopLoad := make(chan struct{})
	var wg sync.WaitGroup
	// 20 calls/s: one every 50 ms, each on its own goroutine (bounded by
	// the hard cap and a 10 s client timeout).
	wg.Go(func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for i := 0; i < 20*120; i++ { // hard cap: 120 s worth
			select {
			case <-stopLoad:
				return
			case <-tick.C:
			}
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				// Every fourth call holds its handler for 300 ms, so calls are
				// in flight when PostgreSQL stops: their handlers finish in
				// the outage and the journal backs their answers. The path
				// names the attempt (the handler sees it).
				v := fmt.Sprintf("/public/load/n%d", i)
				tool, args := "verify.echo", fmt.Sprintf(`{"path":%q}`, v)
				if i%4 == 0 {
					tool, args = "verify.slow", fmt.Sprintf(`{"path":%q,"ms":300}`, v)
				}
				c := callTool(ctx, tr.URL, tr.Token, tool, args)
				mu.Lock()
				attempts = append(attempts, attempt{time.Now(), v, c})
				mu.Unlock()
			})
		}
	})
	stopped := false
	defer func() {
		if !stopped {
			close(stopLoad)
		}
		wg.Wait()
	}()

	loadStart := time.Now()
	waitFor("20 successes under load before the outage", 30*time.Second, func() bool {
		return count(loadStart, callResult.succeeded) >= 20
	})
	s.cluster.StopImmediate(t)
	downAt := time.Now()

	// Readiness must drop (followDatabase pings every second), liveness not.
	notServingAfter := waitFor("catalog-svc readiness NOT_SERVING in the PostgreSQL outage", 8*time.Second, func() bool {
		return s.healthStatus(s.Addrs["catalog"], "") != serving
	})
	t.Logf("catalog-svc readiness NOT_SERVING %s after the stop", notServingAfter.Round(time.Millisecond))
	if st := s.healthStatus(s.Addrs["catalog"], "liveness"); st != serving {
		t.Errorf("catalog-svc liveness = %s during the outage, want SERVING", st)
	}
	if st := s.healthStatus(s.BridgeGRPC[0], "liveness"); st != serving {
		t.Errorf("bridge-svc liveness = %s during the outage, want SERVING", st)
	}
	// The outage is exercised once calls have been refused because of it
	// (about a second of load at 20 calls/s).
	waitFor("20 calls refused during the outage", 30*time.Second, func() bool {
		return count(downAt, refusedAnswer) >= 20
	})

	s.cluster.Start(t)
	upAt := time.Now()
	t.Logf("PostgreSQL down for %s", upAt.Sub(downAt).Round(time.Millisecond))
	// Every record begun before the stop is completed: how long after the
	// restart the last of them was (journaled completions are written then).
	waitFor("records begun before the outage completed", 30*time.Second, func() bool {
		return s.pendingStartedBefore(tr.ID, downAt) == 0
	})
	lastCompletion := time.Since(upAt)
	t.Logf("last record begun before the outage completed %s after PostgreSQL restarted", lastCompletion.Round(time.Millisecond))
	var recovered time.Duration
	for time.Since(upAt) < 10*time.Second {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c := callTool(ctx, tr.URL, tr.Token, "verify.echo", `{"path":"/public/x","value":"probe"}`)
		cancel()
		if c.succeeded() && s.healthStatus(s.Addrs["catalog"], "") == serving {
			recovered = time.Since(upAt)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if recovered == 0 {
		t.Fatalf("no successful call and readiness SERVING within 10s of PostgreSQL restarting (readiness %s)", s.healthStatus(s.Addrs["catalog"], ""))
	}
	t.Logf("recovered %s after PostgreSQL restarted", recovered.Round(time.Millisecond))
	recoveredAt := time.Now()
	waitFor("20 successes after recovery", 30*time.Second, func() bool {
		return count(recoveredAt, callResult.succeeded) >= 20
	})
	close(stopLoad)
	stopped = true
	wg.Wait()
	s.waitSettled(tr.ID, 30*time.Second)

	// Nothing lost: every call the handler ran has a committed record.
	rows := map[string]string{}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	q, err := s.db.Query(ctx, `SELECT call_id, status FROM catalog.operations WHERE turn_id = $1`, tr.ID)
	if err != nil {
		t.Fatal(err)
	}
	for q.Next() {
		var id, st string
		if err := q.Scan(&id, &st); err != nil {
			t.Fatal(err)
		}
		if _, dup := rows[id]; dup {
			t.Errorf("call %s has two records", id)
		}
		rows[id] = st
	}
	q.Close()
	handledIDs := 0
	callOf := map[string]string{} // path argument → call id, from what the handler received
	for _, h := range s.provider.snapshot() {
		if h.TurnID != tr.ID {
			continue
		}
		handledIDs++
		var a struct{ Path string }
		_ = json.Unmarshal(h.Args, &a)
		callOf[a.Path] = h.CallID
		if st, ok := rows[h.CallID]; !ok {
			t.Errorf("handler ran call %s with no committed record", h.CallID)
		} else if st != "succeeded" {
			t.Errorf("handler ran call %s (and answered) but its record says %s", h.CallID, st)
		}
	}
	var ok, refused, transport int
	for _, a := range attempts {
		switch {
		case a.c.succeeded():
			ok++
			id, ran := callOf[a.value]
			if !ran {
				t.Errorf("client saw success for %s but the handler never ran it", a.value)
			} else if st := rows[id]; st != "succeeded" {
				t.Errorf("client saw success for %s (call %s), record %q", a.value, id, st)
			}
		case a.c.resp.err != nil:
			transport++
		case refusedAnswer(a.c):
			refused++
			// A refusal the kernel recorded says on record what it said to
			// the client (a 503 or a call the kernel never took has none).
			if id := a.c.outcome.CallID; id != "" {
				if st, ok := rows[id]; ok && st != a.c.outcome.Status {
					t.Errorf("client was answered %s/%s for %s, record says %s", a.c.outcome.Status, a.c.outcome.Code, id, st)
				}
			}
		default:
			t.Errorf("unexplained answer during the outage: %s", a.c)
		}
	}
	counts := s.outcomeCounts(tr.ID)
	if counts["succeeded/"] < ok+2 { // + warm-up + probe
		t.Errorf("clients saw %d successes but only %d succeeded records", ok+2, counts["succeeded/"])
	}
	for k, n := range counts {
		if strings.HasPrefix(k, "pending/") || strings.HasPrefix(k, "interrupted/") {
			t.Errorf("%d records %s after PostgreSQL came back: the kernel knew every outcome", n, k)
		}
	}
	// How many answers the journal backed (calls in flight at the stop).
	journaled := strings.Count(s.Catalog.Log.String(), "operation record completion journaled")
	t.Logf("outage %s; attempts %d: succeeded %d, refused %d (503 or failed result), transport errors %d; handler ran %d; records %v; journaled completions %d; last completion %s after restart",
		upAt.Sub(downAt).Round(time.Millisecond), len(attempts), ok, refused, transport, handledIDs, counts,
		journaled, lastCompletion.Round(time.Millisecond))
	if refused == 0 {
		t.Errorf("no call was refused during the PostgreSQL outage: the outage was not exercised")
	}
}

// TestBridgeKilledMidCall: two bridge processes share the lease store. A
// call in flight through bridge #0 when it is SIGKILLed leaves a record that
// ends cancelled/interrupted or completed — never missing or pending for
// good — and the same turn continues through bridge #1.
func TestBridgeKilledMidCall(t *testing.T) {
	s := startStack(t, stackOptions{bridges: 2})
	tr := s.open("alice")
	done := make(chan callResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		done <- callTool(ctx, tr.URL, tr.Token, "verify.slow", `{"path":"/public/x","ms":5000}`)
	}()
	select {
	case <-s.provider.started:
	case <-time.After(15 * time.Second):
		t.Fatal("verify.slow never reached the handler")
	}
	s.Bridges[0].Kill(t)
	if c := <-done; c.succeeded() {
		t.Errorf("the call through the killed bridge reported success: %s", c)
	}
	// Settles within the handler's own duration plus a margin.
	s.waitSettled(tr.ID, 15*time.Second)
	counts := s.outcomeCounts(tr.ID)
	if n := s.rowCount(tr.ID); n != 1 {
		t.Fatalf("%d records for the one interrupted attempt, want 1: %v", n, counts)
	}
	t.Logf("record of the call cut by the bridge kill: %v", counts)

	u, err := url.Parse(tr.URL)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = s.BridgeHTTP[1]
	other := turn{ID: tr.ID, URL: u.String(), Token: tr.Token}
	expectOutcome(t, mustCall(t, other, "verify.echo", `{"path":"/public/x"}`), "succeeded", "")
	if n := s.rowCount(tr.ID); n != 2 {
		t.Errorf("%d records after the call through bridge #1, want 2", n)
	}
	if !strings.Contains(other.URL, s.BridgeHTTP[1]) {
		t.Fatalf("second bridge URL %s", other.URL)
	}
}

// TestJournaledCompletionSurvivesKernelKill: a call whose handler finishes
// while PostgreSQL is down is answered succeeded on the strength of the
// durable journal (ADR 0007); catalog-svc is then SIGKILLed before
// PostgreSQL returns. The restarted catalog-svc adopts the journal it left
// and the record says succeeded — never pending, never interrupted.
func TestJournaledCompletionSurvivesKernelKill(t *testing.T) {
	s := startStack(t, stackOptions{})
	tr := s.open("alice")
	expectOutcome(t, mustCall(t, tr, "verify.echo", `{"path":"/public/x"}`), "succeeded", "")

	done := make(chan callResult, 1)
	release := s.provider.hold()
	defer release()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		done <- callTool(ctx, tr.URL, tr.Token, "verify.slow", `{"path":"/public/x","ms":1500}`)
	}()
	var callID string
	select {
	case callID = <-s.provider.started:
	case <-time.After(15 * time.Second):
		t.Fatal("verify.slow never reached the handler")
	}
	s.cluster.StopImmediate(t) // while the handler runs; its record is pending
	release()                  // the handler finishes during the outage
	if c := <-done; !c.succeeded() {
		t.Fatalf("call whose handler finished during the outage: %s, want succeeded (backed by the journal)", c)
	}
	if n := journaledLines(t, s.journalDir); n != 1 {
		t.Fatalf("%d completions in the journal after the answer, want 1", n)
	}

	s.Catalog.Kill(t)
	s.cluster.Start(t)
	s.restart(s.Catalog, s.Addrs["catalog"])
	s.waitSettled(tr.ID, 30*time.Second)

	var st string
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.db.QueryRow(ctx, `SELECT status FROM catalog.operations WHERE turn_id = $1 AND call_id = $2`,
		tr.ID, callID).Scan(&st); err != nil {
		t.Fatal(err)
	}
	if st != "succeeded" {
		t.Errorf("record of the call answered succeeded = %s after the kernel was killed and restarted", st)
	}
	assertCounts(t, s.outcomeCounts(tr.ID), map[string]int{"succeeded/": 2})
	if n := journaledLines(t, s.journalDir); n != 0 {
		t.Errorf("%d completions still in the journal after they were written", n)
	}
}

// journaledLines counts the completions in catalog-svc's journal directory.
func journaledLines(t testing.TB, dir string) int {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.completions.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		n += bytes.Count(b, []byte("\n"))
	}
	return n
}

// TestPostgresHung (issue 17, item 13): every process of PostgreSQL
// SIGSTOPped — a hung database, its sockets open. A call on an open turn is
// answered failed: within the bridge's call deadline (5 s here) and its
// handler never runs; the first request of a turn this pod has not cached
// is a 503 within the lease read deadline (3 s); nothing waits for ever.
// After SIGCONT both turns serve again.
func TestPostgresHung(t *testing.T) {
	const callTimeout = 5 * time.Second
	s := startStack(t, stackOptions{env: []string{"SHAREDOS_CALL_TIMEOUT=" + callTimeout.String()}})
	cached, cold := s.open("alice"), s.open("bob")
	expectOutcome(t, mustCall(t, cached, "verify.echo", `{"path":"/public/x"}`), "succeeded", "")
	handled := s.provider.handled.Load()

	s.cluster.Signal(t, syscall.SIGSTOP)
	stopped := true
	defer func() {
		if stopped {
			s.cluster.Signal(t, syscall.SIGCONT)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	start := time.Now()
	c := callTool(ctx, cached.URL, cached.Token, "verify.echo", `{"path":"/public/x"}`)
	d := time.Since(start)
	t.Logf("call on the cached turn: %s after %s", c, d.Round(time.Millisecond))
	if c.resp.err != nil || c.succeeded() || c.msg.Result == nil || !c.msg.Result.IsError || c.outcome.Status != "failed" {
		t.Errorf("call during the hang = %s, want a failed: result", c)
	}
	if d > callTimeout+3*time.Second {
		t.Errorf("answered after %s, want within the %s call deadline (+3 s)", d, callTimeout)
	}

	start = time.Now()
	r := send(ctx, rawReq{url: cold.URL, token: cold.Token, body: `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + modernMeta + `}}`, modern: true})
	d = time.Since(start)
	t.Logf("first request of an uncached turn: HTTP %d after %s", r.status, d.Round(time.Millisecond))
	if r.err != nil || r.status != 503 {
		t.Errorf("uncached turn during the hang = %d %v, want 503", r.status, r.err)
	}
	if d > 3*time.Second+2*time.Second {
		t.Errorf("answered after %s, want within the 3 s lease read deadline (+2 s)", d)
	}
	if n := s.provider.handled.Load(); n != handled {
		t.Errorf("a handler ran %d times while the database was hung", n-handled)
	}

	s.cluster.Signal(t, syscall.SIGCONT)
	stopped = false
	start = time.Now()
	for {
		c := callTool(ctx, cached.URL, cached.Token, "verify.echo", `{"path":"/public/x"}`)
		r := send(ctx, rawReq{url: cold.URL, token: cold.Token, body: `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + modernMeta + `}}`, modern: true})
		if c.succeeded() && r.status == 200 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("not recovered after SIGCONT: call %s, list %d", c, r.status)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("recovered %s after SIGCONT", time.Since(start).Round(time.Millisecond))
	// The refused call's insert may have run when the server resumed (it
	// had read it): then its record says what happened — failed, not run —
	// from the kernel's journal, never pending or interrupted.
	s.waitSettled(cached.ID, 10*time.Second)
	got := s.outcomeCounts(cached.ID)
	t.Logf("records of the cached turn: %v", got)
	for k, n := range got {
		if k != "succeeded/" && (k != "failed/record_unavailable" || n > 1) {
			t.Errorf("records %v: want only successes and at most one failed/record_unavailable", got)
			break
		}
	}
}
