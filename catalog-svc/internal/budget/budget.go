// Package budget bounds the upstream result bytes a kernel holds at once
// (catalog-svc --upstream-result-budget, reliability row 48).
//
// One upstream response may be up to 64 MiB (upstream.maxResponseBytes),
// and holding it costs several times that while it is decoded, checked and
// sent on; without a bound on their sum, a few concurrent large results
// take the process out of memory. A Budget is that sum's bound, in bytes
// read from upstreams. Each upstream request takes a Lease: its response's
// bytes are taken from the budget as they are read, before they are read,
// and the whole lease goes back once the call's result has been handed on
// (the kernel's answer sent; see Scope) or the request failed.
//
// A lease that holds nothing may wait for room, until its context ends: it
// holds nothing anyone waits for, so the wait ends when a holder finishes
// or the caller's deadline passes. A lease that already holds bytes never
// waits: more room now, or ErrExhausted (the call fails
// upstream_unavailable). Waiting while holding would let two half-read
// responses wait on each other until both deadlines passed; failing the
// first request too would refuse calls a moment's wait would serve. Growing
// leases take free room ahead of the queue, so a response being read is
// never held up by one that has not started.
//
// A Share of a budget bounds a part of its holders (one upstream's calls)
// within it: their leases take from both, so one upstream that keeps its
// responses coming (padding a stream, parking a call on its harness) holds
// at most its share, and the rest stays for the others (attack run: four
// calls of one upstream held all 256 MiB, and another upstream's calls
// waited until their timeout).
package budget

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// DefaultSize is the budget when none is configured: four responses at
// the 64 MiB per-response cap.
const DefaultSize int64 = 256 << 20

// MinSize is the smallest budget catalog-svc takes: a response without a
// declared length is charged 64 KiB at a time, so a smaller one would
// refuse every such result.
const MinSize int64 = 1 << 20

// ErrExhausted is a lease's refusal to grow: the budget is in use.
var ErrExhausted = errors.New("upstream results in flight use the kernel's whole result budget")

// ErrWaitEnded is a wait for room that its context ended; the error wraps
// the context's cause too, so a caller tells its deadline (the budget held
// until then: a refusal of the kernel's) from its caller leaving.
var ErrWaitEnded = errors.New("the wait for room in the upstream result budget ended")

// Budget is a kernel-wide bound on bytes held; a nil *Budget bounds
// nothing.
type Budget struct {
	size int64
	// parent is the budget a share (Share) is part of: its leases take
	// from both. nil for a whole budget.
	parent *Budget
	// Released, when set, is told of every lease released with what it
	// held (after the budget's lock): the app gives the memory of a large
	// result back to the operating system (memrelief).
	Released func(n int64)

	mu      sync.Mutex
	used    int64
	waiters []*waiter // FIFO
	// inShares is how many leases wait in shares of b (Waiting counts them).
	inShares atomic.Int64
}

type waiter struct {
	n     int64
	ready chan struct{} // closed once n is granted
}

// New is a budget of size bytes (> 0).
func New(size int64) *Budget {
	return &Budget{size: size}
}

// Share is a budget of size bytes (at most b's) within b: what its leases
// take counts against both. nil when b is nil.
func (b *Budget) Share(size int64) *Budget {
	if b == nil {
		return nil
	}
	return &Budget{size: min(size, b.size), parent: b, Released: b.Released}
}

// Size is the bound in bytes.
func (b *Budget) Size() int64 {
	if b == nil {
		return 0
	}
	return b.size
}

// InUse is how many bytes leases hold now.
func (b *Budget) InUse() int64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// Waiting is how many leases wait for room, of b or of a share of it.
func (b *Budget) Waiting() int {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.waiters) + int(b.inShares.Load())
}

func (b *Budget) tooLarge(n int64) error {
	return fmt.Errorf("%w: %d bytes asked of %d (catalog-svc --upstream-result-budget)", ErrExhausted, n, b.size)
}

// acquire takes n, waiting for room in FIFO order until ctx ends: of b,
// then of the budget b is a share of (what b took goes back if that wait
// fails).
func (b *Budget) acquire(ctx context.Context, n int64) error {
	if err := b.acquireOwn(ctx, n); err != nil {
		return err
	}
	if b.parent != nil {
		if err := b.parent.acquire(ctx, n); err != nil {
			b.releaseOwn(n)
			return err
		}
	}
	return nil
}

func (b *Budget) acquireOwn(ctx context.Context, n int64) error {
	if n > b.size {
		return b.tooLarge(n)
	}
	b.mu.Lock()
	if len(b.waiters) == 0 && b.used+n <= b.size {
		b.used += n
		b.mu.Unlock()
		return nil
	}
	w := &waiter{n: n, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()
	if b.parent != nil {
		b.parent.inShares.Add(1)
		defer b.parent.inShares.Add(-1)
	}
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		b.mu.Lock()
		select {
		case <-w.ready: // granted meanwhile: give it back
			b.mu.Unlock()
			b.releaseOwn(n)
		default:
			for i, o := range b.waiters {
				if o == w {
					b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
					break
				}
			}
			b.grantLocked() // a large waiter leaving may let smaller ones in
			b.mu.Unlock()
		}
		what := "the budget"
		if b.parent != nil {
			what = "the upstream's share"
		}
		return fmt.Errorf("%w (%s: %d bytes in use of %d): %w", ErrWaitEnded, what, b.InUse(), b.size, context.Cause(ctx))
	}
}

// tryAcquire takes n if there is room now, ahead of any waiter, in b and
// in the budget b is a share of.
func (b *Budget) tryAcquire(n int64) bool {
	if !b.tryAcquireOwn(n) {
		return false
	}
	if b.parent != nil && !b.parent.tryAcquire(n) {
		b.releaseOwn(n)
		return false
	}
	return true
}

func (b *Budget) tryAcquireOwn(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.size {
		return false
	}
	b.used += n
	return true
}

// release gives n back to b and to the budget b is a share of.
func (b *Budget) release(n int64) {
	b.releaseOwn(n)
	if b.parent != nil {
		b.parent.release(n)
	}
}

func (b *Budget) releaseOwn(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	if b.used < 0 {
		panic("budget: released more than held")
	}
	b.grantLocked()
	b.mu.Unlock()
}

// grantLocked lets in the waiters at the head of the queue that fit.
func (b *Budget) grantLocked() {
	for len(b.waiters) > 0 {
		w := b.waiters[0]
		if b.used+w.n > b.size {
			return
		}
		b.used += w.n
		close(w.ready)
		b.waiters = b.waiters[1:]
	}
}

// Lease is what one upstream request holds of a Budget. A nil *Lease (no
// budget) takes and holds nothing.
type Lease struct {
	b *Budget

	mu       sync.Mutex
	held     int64
	released bool
	// waiting is set while Take waits for room (Waiting).
	waiting atomic.Bool
}

// Lease is a new, empty lease of b; nil when b is nil.
func (b *Budget) Lease() *Lease {
	if b == nil {
		return nil
	}
	return &Lease{b: b}
}

// Take adds n bytes to the lease. A lease holding nothing waits for room
// until ctx ends; one holding some takes room that is free now or fails
// with ErrExhausted. More than the whole budget fails at once, and so does
// a lease already released.
func (l *Lease) Take(ctx context.Context, n int64) error {
	if l == nil || n <= 0 {
		return nil
	}
	l.mu.Lock()
	released, empty := l.released, l.held == 0
	l.mu.Unlock()
	if released {
		return errors.New("upstream result budget: the call's lease was already released")
	}
	if empty {
		l.waiting.Store(true)
		err := l.b.acquire(ctx, n)
		l.waiting.Store(false)
		if err != nil {
			return err
		}
	} else if !l.b.tryAcquire(n) {
		return fmt.Errorf("%w (%d bytes in use of %d; this call holds %d and needs %d more; catalog-svc --upstream-result-budget)",
			ErrExhausted, l.b.InUse(), l.b.size, l.Held(), n)
	}
	l.mu.Lock()
	if l.released { // released while it waited
		l.mu.Unlock()
		l.b.release(n)
		return errors.New("upstream result budget: the call's lease was released")
	}
	l.held += n
	l.mu.Unlock()
	return nil
}

// Waiting reports whether a Take of the lease waits for room now: a call
// whose caller's deadline passes then was refused by the budget, not left
// unanswered by its upstream.
func (l *Lease) Waiting() bool {
	return l != nil && l.waiting.Load()
}

// Held is what the lease holds now.
func (l *Lease) Held() int64 {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held
}

// Release gives everything the lease holds back; it takes nothing after.
// Calling it again does nothing.
func (l *Lease) Release() {
	if l == nil {
		return
	}
	l.mu.Lock()
	n := l.held
	l.held, l.released = 0, true
	l.mu.Unlock()
	l.b.release(n)
	if f := l.b.Released; f != nil && n > 0 {
		f(n)
	}
}

type leaseKey struct{}

// WithLease is ctx carrying l: the lease an upstream response read under
// ctx is charged to.
func WithLease(ctx context.Context, l *Lease) context.Context {
	if l == nil {
		return ctx
	}
	return context.WithValue(ctx, leaseKey{}, l)
}

// LeaseOf is the lease ctx carries, or nil.
func LeaseOf(ctx context.Context) *Lease {
	l, _ := ctx.Value(leaseKey{}).(*Lease)
	return l
}

// Scope collects the leases of one kernel call's results so that they are
// released once the call's answer has been handed on (End), not when the
// provider returned it: the kernel's own copies of it count until then.
type Scope struct {
	mu     sync.Mutex
	leases []*Lease
	ended  bool
}

type scopeKey struct{}

// WithScope is ctx with a new scope, and the function that ends it
// (releasing every lease kept in it; call it once the answer is sent,
// whatever became of the call).
func WithScope(ctx context.Context) (context.Context, func()) {
	s := &Scope{}
	return context.WithValue(ctx, scopeKey{}, s), s.end
}

func (s *Scope) end() {
	s.mu.Lock()
	leases := s.leases
	s.leases, s.ended = nil, true
	s.mu.Unlock()
	for _, l := range leases {
		l.Release()
	}
}

// Keep hands l to ctx's scope, released when the scope ends; without a
// scope (or once it ended) l is released now.
func Keep(ctx context.Context, l *Lease) {
	if l == nil {
		return
	}
	if s, ok := ctx.Value(scopeKey{}).(*Scope); ok {
		s.mu.Lock()
		if !s.ended {
			s.leases = append(s.leases, l)
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
	}
	l.Release()
}
