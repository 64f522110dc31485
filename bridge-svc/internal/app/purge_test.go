package app

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// fakePurger records every PurgeInactive cutoff and answers n, err.
type fakePurger struct {
	calls []time.Time
	n     int64
	err   error
}

func (f *fakePurger) PurgeInactive(_ context.Context, before time.Time) (int64, error) {
	f.calls = append(f.calls, before)
	return f.n, f.err
}

// testPurge is a purge step on a settable clock, logging into the returned
// buffer.
func testPurge(store leasePurger, retention, sweep time.Duration) (*leasePurge, *time.Time, *bytes.Buffer) {
	var logs bytes.Buffer
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	p := newLeasePurge(store, retention, sweep, slog.New(slog.NewTextHandler(&logs, nil)))
	p.now = func() time.Time { return now }
	return p, &now, &logs
}

// TestLeasePurgeCadence: the first sweep purges with before = now −
// retention; later sweeps purge only once a period has passed since.
func TestLeasePurgeCadence(t *testing.T) {
	store := &fakePurger{n: 3}
	p, now, logs := testPurge(store, 168*time.Hour, 5*time.Second)
	start := *now
	p.step(context.Background())
	if len(store.calls) != 1 || !store.calls[0].Equal(start.Add(-168*time.Hour)) {
		t.Fatalf("first sweep purged %v, want once before %v", store.calls, start.Add(-168*time.Hour))
	}
	if out := logs.String(); !strings.Contains(out, "level=INFO") || !strings.Contains(out, "leases purged") || !strings.Contains(out, "count=3") {
		t.Errorf("log = %q, want an Info line with count=3", out)
	}
	for _, d := range []time.Duration{5 * time.Second, 30 * time.Minute, time.Hour - time.Nanosecond} {
		*now = start.Add(d)
		p.step(context.Background())
	}
	if len(store.calls) != 1 {
		t.Fatalf("sweeps within the hour purged again: %v", store.calls)
	}
	*now = start.Add(time.Hour)
	p.step(context.Background())
	if len(store.calls) != 2 || !store.calls[1].Equal(now.Add(-168*time.Hour)) {
		t.Fatalf("sweep an hour later purged %v, want a second purge before %v", store.calls, now.Add(-168*time.Hour))
	}
}

// TestLeasePurgeDisabled: retention 0 never reaches the store.
func TestLeasePurgeDisabled(t *testing.T) {
	store := &fakePurger{}
	p, now, _ := testPurge(store, 0, 5*time.Second)
	for range 3 {
		p.step(context.Background())
		*now = now.Add(24 * time.Hour)
	}
	if len(store.calls) != 0 {
		t.Errorf("retention 0 purged: %v", store.calls)
	}
}

// TestLeasePurgeQuietAndFailing: nothing purged logs nothing; a failure is
// logged and retried a period later, not at the next sweep.
func TestLeasePurgeQuietAndFailing(t *testing.T) {
	store := &fakePurger{}
	p, now, logs := testPurge(store, time.Hour, 5*time.Second)
	p.step(context.Background())
	if logs.Len() != 0 {
		t.Errorf("a purge of nothing logged %q", logs.String())
	}
	store.err = errors.New("store down")
	*now = now.Add(purgeEvery(time.Hour, 5*time.Second))
	p.step(context.Background())
	if out := logs.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "store down") {
		t.Errorf("log = %q, want a Warn line with the error", out)
	}
	*now = now.Add(5 * time.Second)
	p.step(context.Background())
	if len(store.calls) != 2 {
		t.Errorf("failed purge retried at the next sweep: %d calls, want 2", len(store.calls))
	}
}

func TestPurgeEvery(t *testing.T) {
	for _, c := range []struct{ retention, sweep, want time.Duration }{
		{168 * time.Hour, 5 * time.Second, time.Hour},
		{24 * time.Hour, 5 * time.Second, time.Hour},
		{time.Hour, 5 * time.Second, 150 * time.Second},
		{time.Minute, 5 * time.Second, 5 * time.Second},
		{168 * time.Hour, 2 * time.Hour, 2 * time.Hour},
	} {
		if got := purgeEvery(c.retention, c.sweep); got != c.want {
			t.Errorf("purgeEvery(%s, %s) = %s, want %s", c.retention, c.sweep, got, c.want)
		}
	}
}

// TestCompleteWiresLeasePurge: the App purges its own store with the
// configured retention, on the defaulted sweep interval.
func TestCompleteWiresLeasePurge(t *testing.T) {
	c := Config{Listen: "127.0.0.1:0", HTTPListen: "127.0.0.1:0", Catalog: "127.0.0.1:1",
		MaxBodyBytes: 1024, DefaultTTL: time.Minute, LeaseRetention: 48 * time.Hour}
	a, err := c.Complete(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer a.close()
	if a.purge.store != a.store || a.purge.retention != 48*time.Hour || a.purge.every != time.Hour {
		t.Errorf("purge = %+v, want the app's store, 48h retention, hourly", a.purge)
	}
}
