package runner

import (
	"math/bits"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// A service whose live heap grows with its state (bridge-svc's turn cache)
// cannot serve with a fixed high GOGC: the heap would grow to several times
// a large live size. With Go's default of 100 and a small live heap it
// collects every few megabytes of allocation instead — ≈ 12 % of
// bridge-svc's CPU in the c=16 profile (docs/benchmarks.md), where mcp-go
// alone allocates ≈ 9 KB per request for its ephemeral session. So such a
// service keeps GOGC 100 as its floor and lets the heap grow at least
// Command.GCHeadroom bytes over the live heap before the next collection,
// up to gcHeadroomMaxPercent: after every collection the percent is set
// anew from the live heap that collection found.

// gcHeadroomMaxPercent bounds the percent the headroom may ask for: a heap
// of a few megabytes collects no less often than at GOGC 400, what the
// services with a small live heap serve with (Command.GCPercent).
const gcHeadroomMaxPercent = 400

// gcPercentFor is the GOGC that lets a heap of live bytes grow by at least
// headroom bytes before the next collection, never below base and never
// above ceiling.
func gcPercentFor(live, headroom uint64, base, ceiling int) int {
	hi, lo := bits.Mul64(headroom, 100)
	if hi >= live { // no live heap, or a percent past 64 bits
		return ceiling
	}
	p, rem := bits.Div64(hi, lo, live)
	if rem != 0 {
		p++ // at least headroom
	}
	switch {
	case p >= uint64(ceiling):
		return ceiling
	case p <= uint64(base):
		return base
	default:
		return int(p)
	}
}

// gcTuner re-sets GOGC after every collection (a cleanup on a sentinel
// that each collection frees) from the live heap that collection marked.
type gcTuner struct {
	headroom      uint64
	base, ceiling int
	applied       atomic.Int32 // the percent last set, for tests
	cycles        atomic.Int64 // collections seen, for tests

	mu      sync.Mutex // orders a cycle's setting against stop
	stopped bool
	sample  []metrics.Sample
}

// sentinel is a heap object freed by the next collection; it holds a
// pointer so that it is never one of the runtime's combined tiny
// allocations, whose cleanups may not run.
type sentinel struct{ _ *int }

// ApplyGCHeadroom keeps GOGC at base (Go's default when 0) or above, so
// that the heap may grow by headroom bytes over its live size before a
// collection, up to GOGC 400. It does nothing when headroom is 0 or the
// environment sets GOGC (the operator's value stands). stop ends it.
func ApplyGCHeadroom(headroom uint64, base int) (stop func()) {
	if t := headroomTuner(headroom, base); t != nil {
		return t.stop
	}
	return func() {}
}

// headroomTuner is the tuner ApplyGCHeadroom starts; nil when it starts
// none.
func headroomTuner(headroom uint64, base int) *gcTuner {
	if gogcSet() || headroom == 0 {
		return nil
	}
	return startGCTuner(headroom, base, gcHeadroomMaxPercent)
}

func startGCTuner(headroom uint64, base, ceiling int) *gcTuner {
	if base <= 0 {
		base = 100
	}
	ceiling = max(ceiling, base) // a binary's own GOGC above 400 stays its floor
	t := &gcTuner{headroom: headroom, base: base, ceiling: ceiling,
		sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
	t.arm()
	return t
}

func (t *gcTuner) arm() {
	s := &sentinel{}
	runtime.AddCleanup(s, func(t *gcTuner) { t.collected() }, t)
}

// collected runs after a collection freed the sentinel: it sets the
// percent for the next cycle and arms the next sentinel.
func (t *gcTuner) collected() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return
	}
	metrics.Read(t.sample)
	var live uint64
	if t.sample[0].Value.Kind() == metrics.KindUint64 {
		live = t.sample[0].Value.Uint64()
	}
	// Set every cycle, not only when it changes: the tuner owns GOGC while
	// it runs, whatever else set it since.
	p := gcPercentFor(live, t.headroom, t.base, t.ceiling)
	debug.SetGCPercent(p)
	t.applied.Store(int32(p))
	t.cycles.Add(1)
	t.arm()
}

// stop ends the tuning and restores base.
func (t *gcTuner) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.stopped {
		t.stopped = true
		debug.SetGCPercent(t.base)
	}
}
