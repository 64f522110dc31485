package verify

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestPostgresStopUnderLoad: `pg_ctl stop -m immediate` while ~20 calls/s
// run. No handler runs without a committed record; catalog-svc readiness
// (overall "") goes NOT_SERVING while liveness stays SERVING; after a
// restart calls succeed again within 10 s; no call id has two first rows.
func TestPostgresStopUnderLoad(t *testing.T) {
	s := startStack(t, stackOptions{})
	tr := s.open("alice")
	expectOutcome(t, mustCall(t, tr, "verify.echo", `{"path":"/public/x"}`), "succeeded", "")

	type attempt struct {
		at time.Time
		c  callResult
	}
	var mu sync.Mutex
	var attempts []attempt
	stopLoad := make(chan struct{})
	var wg sync.WaitGroup
	// 20 calls/s: one every 50 ms, each on its own goroutine (bounded by
	// the run time and a 10 s client timeout).
	wg.Go(func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for i := 0; i < 20*60; i++ { // hard cap: 60 s worth
			select {
			case <-stopLoad:
				return
			case <-tick.C:
			}
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				c := callTool(ctx, tr.URL, tr.Token, "verify.echo", fmt.Sprintf(`{"path":"/public/x","value":"n%d"}`, i))
				mu.Lock()
				attempts = append(attempts, attempt{time.Now(), c})
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

	time.Sleep(2 * time.Second)
	s.cluster.StopImmediate(t)
	downAt := time.Now()

	// Readiness must drop (followDatabase pings every second), liveness not.
	var notServingAfter time.Duration
	for time.Since(downAt) < 8*time.Second {
		if healthStatus(s.addr["catalog"], "") != serving {
			notServingAfter = time.Since(downAt)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if notServingAfter == 0 {
		t.Errorf("catalog-svc readiness still SERVING 8s into the PostgreSQL outage")
	} else {
		t.Logf("catalog-svc readiness NOT_SERVING %s after the stop", notServingAfter.Round(time.Millisecond))
	}
	if st := healthStatus(s.addr["catalog"], "liveness"); st != serving {
		t.Errorf("catalog-svc liveness = %s during the outage, want SERVING", st)
	}
	if st := healthStatus(s.bridgeGRPC[0], "liveness"); st != serving {
		t.Errorf("bridge-svc liveness = %s during the outage, want SERVING", st)
	}
	time.Sleep(2 * time.Second)

	s.cluster.Start(t)
	upAt := time.Now()
	var recovered time.Duration
	for time.Since(upAt) < 10*time.Second {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c := callTool(ctx, tr.URL, tr.Token, "verify.echo", `{"path":"/public/x","value":"probe"}`)
		cancel()
		if c.succeeded() && healthStatus(s.addr["catalog"], "") == serving {
			recovered = time.Since(upAt)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if recovered == 0 {
		t.Fatalf("no successful call and readiness SERVING within 10s of PostgreSQL restarting (readiness %s)", healthStatus(s.addr["catalog"], ""))
	}
	t.Logf("recovered %s after PostgreSQL restarted", recovered.Round(time.Millisecond))
	time.Sleep(time.Second)
	close(stopLoad)
	stopped = true
	wg.Wait()

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
	for _, h := range s.provider.snapshot() {
		if h.TurnID != tr.ID {
			continue
		}
		handledIDs++
		if st, ok := rows[h.CallID]; !ok {
			t.Errorf("handler ran call %s with no committed record", h.CallID)
		} else if st != "succeeded" && st != "pending" && st != "interrupted" {
			t.Errorf("handler ran call %s but its record says %s", h.CallID, st)
		}
	}
	var ok, refused, transport, other int
	for _, a := range attempts {
		switch {
		case a.c.succeeded():
			ok++
			if st := rows[a.c.outcome.CallID]; a.c.outcome.CallID != "" && st != "succeeded" {
				t.Errorf("client saw success for %s, record %q", a.c.outcome.CallID, st)
			}
		case a.c.resp.err != nil:
			transport++
		case a.c.msg.Result != nil && a.c.msg.Result.IsError, a.c.resp.status == 503:
			refused++
		default:
			other++
			t.Errorf("unexplained answer during the outage: %s", a.c)
		}
	}
	counts := s.outcomeCounts(tr.ID)
	if counts["succeeded/"] < ok+2 { // + warm-up + probe
		t.Errorf("clients saw %d successes but only %d succeeded records", ok+2, counts["succeeded/"])
	}
	t.Logf("attempts %d: succeeded %d, refused %d (503 or failed result), transport errors %d; handler ran %d; records %v",
		len(attempts), ok, refused, transport, handledIDs, counts)
	if refused == 0 {
		t.Errorf("no call was refused during a 4s PostgreSQL outage: the outage was not exercised")
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
	s.bridges[0].kill(t)
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
	u.Host = s.bridgeHTTP[1]
	other := turn{ID: tr.ID, URL: u.String(), Token: tr.Token}
	expectOutcome(t, mustCall(t, other, "verify.echo", `{"path":"/public/x"}`), "succeeded", "")
	if n := s.rowCount(tr.ID); n != 2 {
		t.Errorf("%d records after the call through bridge #1, want 2", n)
	}
	if !strings.Contains(other.URL, s.bridgeHTTP[1]) {
		t.Fatalf("second bridge URL %s", other.URL)
	}
}
