package budget_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/sharedos/toolshare/services/platform/testwait"

	"github.com/sharedos/toolshare/catalog-svc/internal/budget"
)

// A lease that holds nothing waits for room and gets it once a holder
// releases; the budget is back to zero after.
func TestBudgetAnEmptyLeaseWaitsForRoom(t *testing.T) {
	b := budget.New(100)
	first := b.Lease()
	if err := first.Take(t.Context(), 60); err != nil {
		t.Fatal(err)
	}
	second := b.Lease()
	got := make(chan error, 1)
	go func() { got <- second.Take(t.Context(), 60) }()
	testwait.Until(t, "the second lease waits", func() bool { return b.Waiting() == 1 })
	select {
	case err := <-got:
		t.Fatalf("the second lease got room beside the first: %v", err)
	default:
	}
	first.Release()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if n := b.InUse(); n != 60 {
		t.Errorf("in use %d, want 60", n)
	}
	second.Release()
	second.Release() // again: nothing more
	if n := b.InUse(); n != 0 {
		t.Errorf("in use %d after every release, want 0", n)
	}
}

// A wait its context ends says so (ErrWaitEnded) and keeps the cause, so
// the kernel records a deadline spent waiting for the budget as the
// budget's refusal, not as a tool that did not answer; in a share, too.
func TestBudgetAnEndedWaitSaysWhy(t *testing.T) {
	b := budget.New(100)
	hog := b.Lease()
	if err := hog.Take(t.Context(), 100); err != nil {
		t.Fatal(err)
	}
	defer hog.Release()
	past, cancel := context.WithDeadline(t.Context(), time.Unix(1, 0))
	defer cancel()
	for _, l := range []*budget.Lease{b.Lease(), b.Share(50).Lease()} {
		err := l.Take(past, 10)
		if !errors.Is(err, budget.ErrWaitEnded) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a wait its deadline ended: %v, want ErrWaitEnded and DeadlineExceeded", err)
		}
	}
	if n := b.Waiting(); n != 0 {
		t.Errorf("%d still waiting", n)
	}
}

// A lease that holds bytes never waits for more: it takes free room, even
// ahead of a waiter, or fails at once with ErrExhausted — two half-read
// responses never wait on each other.
func TestBudgetAGrowingLeaseNeverWaits(t *testing.T) {
	b := budget.New(100)
	a, c := b.Lease(), b.Lease()
	if err := a.Take(t.Context(), 40); err != nil {
		t.Fatal(err)
	}
	if err := c.Take(t.Context(), 40); err != nil {
		t.Fatal(err)
	}
	waiter := b.Lease()
	got := make(chan error, 1)
	go func() { got <- waiter.Take(t.Context(), 30) }()
	testwait.Until(t, "a waiter queued", func() bool { return b.Waiting() == 1 })
	if err := a.Take(t.Context(), 10); err != nil { // free room, ahead of the waiter
		t.Fatalf("a growing lease was refused free room: %v", err)
	}
	if err := c.Take(t.Context(), 20); !errors.Is(err, budget.ErrExhausted) {
		t.Fatalf("growing past the budget: %v, want ErrExhausted at once", err)
	}
	if n := c.Held(); n != 40 {
		t.Errorf("the refused lease holds %d, want its 40", n)
	}
	a.Release()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	c.Release()
	waiter.Release()
	if n := b.InUse(); n != 0 {
		t.Errorf("in use %d, want 0", n)
	}
}

// A wait ends with its context, taking nothing; more than the whole
// budget fails at once; a released lease takes nothing more.
func TestBudgetRefusals(t *testing.T) {
	b := budget.New(100)
	holder := b.Lease()
	if err := holder.Take(t.Context(), 90); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	w := b.Lease()
	got := make(chan error, 1)
	go func() { got <- w.Take(ctx, 20) }()
	testwait.Until(t, "the lease waits", func() bool { return b.Waiting() == 1 })
	cancel()
	if err := <-got; !errors.Is(err, context.Canceled) {
		t.Fatalf("wait ended by its context: %v, want Canceled", err)
	}
	if n, q := b.InUse(), b.Waiting(); n != 90 || q != 0 || w.Held() != 0 {
		t.Errorf("after the cancelled wait: in use %d, waiting %d, held %d; want 90, 0, 0", n, q, w.Held())
	}
	if err := b.Lease().Take(t.Context(), 101); !errors.Is(err, budget.ErrExhausted) {
		t.Errorf("more than the budget: %v, want ErrExhausted", err)
	}
	holder.Release()
	if err := holder.Take(t.Context(), 1); err == nil {
		t.Error("a released lease took more")
	}
	if n := b.InUse(); n != 0 {
		t.Errorf("in use %d, want 0", n)
	}
	var nilLease *budget.Lease // no budget: takes and holds nothing
	if err := nilLease.Take(t.Context(), 1<<40); err != nil || nilLease.Held() != 0 {
		t.Errorf("nil lease: %v, held %d", err, nilLease.Held())
	}
	nilLease.Release()
}

// A share's leases take from the share and from its budget: they hold at
// most the share, waiting in it (counted by the budget's Waiting) or
// refused growth there while the budget has room; another share takes the
// rest; every release gives back to both.
func TestBudgetShares(t *testing.T) {
	b := budget.New(100)
	a, c := b.Share(60), b.Share(60)
	first := a.Lease()
	if err := first.Take(t.Context(), 50); err != nil {
		t.Fatal(err)
	}
	if err := first.Take(t.Context(), 20); !errors.Is(err, budget.ErrExhausted) {
		t.Fatalf("growing past the share while the budget has room: %v, want ErrExhausted", err)
	}
	waiting := a.Lease()
	got := make(chan error, 1)
	go func() { got <- waiting.Take(t.Context(), 20) }()
	testwait.Until(t, "a lease waits in its share", func() bool { return b.Waiting() == 1 && a.Waiting() == 1 })
	other := c.Lease()
	if err := other.Take(t.Context(), 50); err != nil {
		t.Fatalf("another share beside a full one: %v", err)
	}
	if n, na, nc := b.InUse(), a.InUse(), c.InUse(); n != 100 || na != 50 || nc != 50 {
		t.Fatalf("in use %d (shares %d, %d), want 100 (50, 50)", n, na, nc)
	}
	first.Release()
	other.Release()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	waiting.Release()
	if n, na, nc, w := b.InUse(), a.InUse(), c.InUse(), b.Waiting(); n != 0 || na != 0 || nc != 0 || w != 0 {
		t.Errorf("after every release: in use %d (shares %d, %d), waiting %d; want 0", n, na, nc, w)
	}
	if s := b.Share(500); s.Size() != 100 {
		t.Errorf("a share larger than its budget is %d, want the budget's 100", s.Size())
	}
	var none *budget.Budget
	if none.Share(10) != nil {
		t.Error("a share of no budget bounds something")
	}
}

// A lease kept in a call's scope is held until the scope ends (the answer
// sent); without a scope, or after it ended, Keep releases at once.
func TestBudgetScopeHoldsUntilTheAnswerIsSent(t *testing.T) {
	b := budget.New(100)
	ctx, end := budget.WithScope(t.Context())
	l := b.Lease()
	if err := l.Take(ctx, 50); err != nil {
		t.Fatal(err)
	}
	budget.Keep(ctx, l)
	if n := b.InUse(); n != 50 {
		t.Fatalf("kept in the scope: in use %d, want 50", n)
	}
	end()
	if n := b.InUse(); n != 0 {
		t.Fatalf("scope ended: in use %d, want 0", n)
	}
	late := b.Lease()
	if err := late.Take(ctx, 10); err != nil {
		t.Fatal(err)
	}
	budget.Keep(ctx, late) // the scope ended: released now
	unscoped := b.Lease()
	if err := unscoped.Take(t.Context(), 10); err != nil {
		t.Fatal(err)
	}
	budget.Keep(t.Context(), unscoped)
	if n := b.InUse(); n != 0 {
		t.Fatalf("kept after the end, or without a scope: in use %d, want 0", n)
	}
	if budget.LeaseOf(budget.WithLease(t.Context(), l)) != l || budget.LeaseOf(t.Context()) != nil {
		t.Error("LeaseOf does not find the lease WithLease put")
	}
}

// Many calls taking, growing, giving up and releasing at once: none waits
// for ever (each wait is bounded by its own context only to fail the test),
// and the budget is back to zero — no byte leaks on any path.
func TestBudgetUnderConcurrentLargeResults(t *testing.T) {
	b := budget.New(1000)
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(i), 7))
			for range 200 {
				l := b.Lease()
				ctx, cancel := context.WithCancel(t.Context())
				if r.IntN(8) == 0 {
					cancel() // a caller that left
				}
				if err := l.Take(ctx, int64(1+r.IntN(400))); err == nil {
					for range r.IntN(4) {
						_ = l.Take(ctx, int64(1+r.IntN(200))) // growth: room now, or ErrExhausted
					}
				}
				if n := b.InUse(); n > b.Size() {
					t.Errorf("in use %d over the budget %d", n, b.Size())
				}
				l.Release()
				cancel()
			}
		}()
	}
	wg.Wait()
	if n, q := b.InUse(), b.Waiting(); n != 0 || q != 0 {
		t.Errorf("after every call: in use %d, waiting %d; want 0, 0", n, q)
	}
}
