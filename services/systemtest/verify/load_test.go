//go:build verify

package verify

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// warmCalls is the size of the warm-up burst.
const warmCalls = 64

// procUsage is what a process holds: open fds, listening sockets, and
// connections to the database (the pgx pool: up to pgdb.DefaultMaxConns = 10
// per pool, kept idle for 5 min by design, so they are bounded, not compared
// with the baseline).
type procUsage struct{ fds, listeners, db int }

// maxDBConns bounds one process's database connections: one pgdb pool of
// at most 10, plus catalog-svc's two dedicated LISTEN connections (the
// catalogue feed, and turn revocations: ADR 0015).
const maxDBConns = 12

func usage(t testing.TB, pid, dbPort int) procUsage {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("read %s: %v", dir, err)
	}
	sockets := map[string]bool{}
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil {
			if ino, ok := strings.CutPrefix(l, "socket:["); ok {
				sockets[strings.TrimSuffix(ino, "]")] = true
			}
		}
	}
	u := procUsage{fds: len(ents)}
	for _, f := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, f))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fs := strings.Fields(line)
			if len(fs) <= 9 || !sockets[fs[9]] {
				continue
			}
			switch {
			case fs[3] == "0A":
				u.listeners++
			case strings.HasSuffix(fs[2], fmt.Sprintf(":%04X", dbPort)):
				u.db++
			}
		}
	}
	return u
}

func (s *stack) procs() []*proc {
	return append([]*proc{s.Authz, s.Files, s.Catalog}, s.Bridges...)
}

func (s *stack) usages() map[string]procUsage {
	out := map[string]procUsage{}
	for _, p := range s.procs() {
		out[p.Name] = usage(s.t, p.PID(), s.cluster.port)
	}
	return out
}

// backToBaseline waits (≤ limit) until every process holds at most 5 more fds
// than at baseline, not counting database connections (which must stay
// within the pool bound), and the same listeners (±5).
func (s *stack) backToBaseline(base map[string]procUsage, limit time.Duration) {
	s.t.Helper()
	httpTransport.CloseIdleConnections()
	start := time.Now()
	var now map[string]procUsage
	for {
		now = s.usages()
		ok := true
		for name, b := range base {
			n := now[name]
			if n.fds-n.db > b.fds-b.db+5 || n.db > maxDBConns || n.listeners > b.listeners+5 || n.listeners < b.listeners-5 {
				ok = false
			}
		}
		if ok {
			s.t.Logf("fds/listeners back to baseline after %s: baseline %v, now %v", time.Since(start).Round(time.Millisecond), base, now)
			return
		}
		if time.Since(start) > limit {
			s.t.Errorf("fds/listeners not back to baseline ±5 within %s: baseline %v, now %v", limit, base, now)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(float64(len(s)-1) * p)
	return s[i]
}

// countFor is outcomeCounts over several turns.
func (s *stack) countFor(turns []turn) map[string]int {
	s.t.Helper()
	ids := make([]string, len(turns))
	for i, tr := range turns {
		ids[i] = tr.ID
	}
	return s.countOutcomes(`SELECT status, code, count(*) FROM catalog.operations WHERE turn_id = ANY($1) GROUP BY 1, 2`, ids)
}

// warmBaseline runs a concurrent burst first, so every lazily built
// connection exists and the database pools (pgdb: up to 10 connections,
// idle for 5 min) have reached their steady size, then measures the
// per-process baseline: growth after that is a leak, not warm-up.
func warmBaseline(t *testing.T, s *stack) map[string]procUsage {
	w := s.open("warmup")
	var wg sync.WaitGroup
	for range warmCalls {
		wg.Go(func() {
			expectOutcome(t, mustCall(t, w, "verify.echo", `{"path":"/public/x"}`), "succeeded", "")
		})
	}
	wg.Wait()
	s.closeTurn(w.ID)
	httpTransport.CloseIdleConnections()
	time.Sleep(time.Second)
	return s.usages()
}

// TestLoadConcurrentTurns: 200 concurrent turns × 10 calls. Zero
// unexplained failures, records == calls, and afterwards every process's
// fds and listeners (and this process's goroutines) are back to baseline
// within 5 s of the last turn closing.
func TestLoadConcurrentTurns(t *testing.T) {
	s := startStack(t, stackOptions{})
	base := warmBaseline(t, s)
	leakOpts := goleak.IgnoreCurrent()

	const nTurns, perTurn = 200, 10
	turns := make([]turn, nTurns)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	errs := make(chan error, nTurns)
	openStart := time.Now()
	for i := range nTurns {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			tr, err := s.openTurn(ctx, fmt.Sprintf("load-%d", i), []string{"verify"}, 10*time.Minute)
			turns[i] = tr
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("open turn: %v", err)
	}
	t.Logf("opened %d turns in %s", nTurns, time.Since(openStart).Round(time.Millisecond))

	lat := make([][]time.Duration, nTurns)
	var failures atomic.Int64
	start := time.Now()
	for i := range nTurns {
		wg.Go(func() {
			for j := range perTurn {
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				c := callTool(ctx, turns[i].URL, turns[i].Token, "verify.echo", fmt.Sprintf(`{"path":"/public/x","value":"%d-%d"}`, i, j))
				cancel()
				lat[i] = append(lat[i], c.resp.elapsed)
				if !c.succeeded() {
					if failures.Add(1) <= 5 {
						t.Errorf("turn %d call %d: %s", i, j, c)
					}
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	t.Logf("LOAD 200x10: %d calls in %s (%.0f calls/s), failures %d, p50 %s, p99 %s, max %s",
		len(all), elapsed.Round(time.Millisecond), float64(len(all))/elapsed.Seconds(), failures.Load(),
		percentile(all, .5).Round(time.Microsecond), percentile(all, .99).Round(time.Microsecond), percentile(all, 1).Round(time.Microsecond))
	if f := failures.Load(); f != 0 {
		t.Errorf("%d of %d calls failed", f, len(all))
	}
	s.waitSettledAll(30 * time.Second)
	assertCounts(t, s.countFor(turns), map[string]int{"succeeded/": nTurns * perTurn})
	if got := int64(len(s.provider.snapshot())); got != warmCalls+nTurns*perTurn {
		t.Errorf("handler ran %d times, want %d", got, warmCalls+nTurns*perTurn)
	}

	for _, tr := range turns {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			s.closeTurn(tr.ID)
		})
	}
	wg.Wait()
	s.backToBaseline(base, 5*time.Second)
	goleak.VerifyNone(t, leakOpts)
}

// TestSustainedLoad: 200 calls/s for VERIFY_SUSTAINED_SECONDS (default 60)
// over 20 turns: zero unexplained failures, records == calls, fds back to
// baseline within 5 s.
func TestSustainedLoad(t *testing.T) {
	secs := 60
	if v := os.Getenv("VERIFY_SUSTAINED_SECONDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 600 {
			t.Fatalf("VERIFY_SUSTAINED_SECONDS=%q: want 1..600", v)
		}
		secs = n
	}
	const rate, nTurns, maxInFlight = 200, 20, 400
	s := startStack(t, stackOptions{})
	base := warmBaseline(t, s)
	turns := make([]turn, nTurns)
	for i := range turns {
		turns[i] = s.open(fmt.Sprintf("sustained-%d", i))
	}
	var (
		mu       sync.Mutex
		lat      []time.Duration
		failures atomic.Int64
		inFlight atomic.Int64
		sent     int
		wg       sync.WaitGroup
	)
	tick := time.NewTicker(time.Second / rate)
	start := time.Now()
	for sent = 0; sent < rate*secs; sent++ {
		<-tick.C
		if inFlight.Load() >= maxInFlight {
			t.Fatalf("%d calls in flight after %s: the system does not keep up with %d calls/s", maxInFlight, time.Since(start), rate)
		}
		inFlight.Add(1)
		tr := turns[sent%nTurns]
		wg.Go(func() {
			defer inFlight.Add(-1)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c := callTool(ctx, tr.URL, tr.Token, "verify.echo", `{"path":"/public/x"}`)
			mu.Lock()
			lat = append(lat, c.resp.elapsed)
			mu.Unlock()
			if !c.succeeded() && failures.Add(1) <= 5 {
				t.Errorf("call: %s", c)
			}
		})
	}
	tick.Stop()
	wg.Wait()
	elapsed := time.Since(start)
	t.Logf("SUSTAINED: %d calls in %s (%.1f calls/s offered %d/s), failures %d, p50 %s, p99 %s, max %s",
		sent, elapsed.Round(time.Millisecond), float64(sent)/elapsed.Seconds(), rate, failures.Load(),
		percentile(lat, .5).Round(time.Microsecond), percentile(lat, .99).Round(time.Microsecond), percentile(lat, 1).Round(time.Microsecond))
	if f := failures.Load(); f != 0 {
		t.Errorf("%d of %d calls failed", f, sent)
	}
	s.waitSettledAll(30 * time.Second)
	assertCounts(t, s.countFor(turns), map[string]int{"succeeded/": sent})
	for _, tr := range turns {
		s.closeTurn(tr.ID)
	}
	s.backToBaseline(base, 5*time.Second)
}

// waitSettledAll waits until no record at all is pending.
func (s *stack) waitSettledAll(limit time.Duration) {
	s.t.Helper()
	s.waitSettled("", limit)
}
