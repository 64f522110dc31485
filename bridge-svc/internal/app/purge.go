package app

import (
	"context"
	"log/slog"
	"time"
)

// leasePurger is the store role the retention purge needs (leases.Store
// has it).
type leasePurger interface {
	PurgeInactive(ctx context.Context, before time.Time) (int64, error)
}

// leasePurge is the sweeper's retention step (--lease-retention): it deletes
// the leases closed or expired more than retention ago, at most once every
// period, however often the sweeper runs.
type leasePurge struct {
	store     leasePurger
	retention time.Duration
	every     time.Duration
	now       func() time.Time
	log       *slog.Logger
	// last is when the step last purged (zero: not yet).
	last time.Time
}

// newLeasePurge returns the purge step for retention (0: it never purges)
// run by a sweeper that ticks every sweep.
func newLeasePurge(store leasePurger, retention, sweep time.Duration, log *slog.Logger) *leasePurge {
	return &leasePurge{store: store, retention: retention, every: purgeEvery(retention, sweep), now: time.Now, log: log}
}

// purgeEvery is how often the sweeper purges: hourly, or every retention/24
// when that is shorter (a lease then outlives its retention by at most
// about 4 %), and never more often than the sweeper ticks.
func purgeEvery(retention, sweep time.Duration) time.Duration {
	return max(min(time.Hour, retention/24), sweep)
}

// step purges when retention is on and the last purge is at least a period
// ago (the first tick purges at once). A failure is logged and retried a
// period later, not at the next tick: the sweeper goes on either way.
func (p *leasePurge) step(ctx context.Context) {
	if p.retention <= 0 {
		return
	}
	now := p.now()
	if !p.last.IsZero() && now.Sub(p.last) < p.every {
		return
	}
	p.last = now
	before := now.Add(-p.retention)
	n, err := p.store.PurgeInactive(ctx, before)
	switch {
	case err != nil:
		if ctx.Err() == nil {
			p.log.Warn("lease purge failed", slog.String("error", err.Error()))
		}
	case n > 0:
		p.log.Info("leases purged", slog.Int64("count", n), slog.Time("before", before))
	}
}
