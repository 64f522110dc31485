// Package memrelief gives the memory of large transient values back to
// the operating system once they are gone (reliability row 48).
//
// A process that has just handed on a result of tens of MiB holds its
// copies until the next collection, and an idle process collects only
// every two minutes; what a collection frees returns to the operating
// system only as the background scavenger gets to it; and pools
// (encoding/json's encoder states, grpc-go's buffers) keep buffers of that
// size through one more collection. So after one 60 MiB result catalog-svc
// stayed at ~470 MB RSS and bridge-svc at ~520 MB, a minute later still.
// Note, told of each large value let go (Scope, Add: once its request is
// done), collects twice and returns the free memory (debug.FreeOSMemory)
// a moment later — once for a burst of
// them, at most once per Delay. Values under Threshold do not count: a
// normal result (KiB) costs nothing here.
package memrelief

import (
	"context"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// Threshold is the smallest value Note counts (bytes).
const Threshold = 4 << 20

// Delay is how long after the first large value of a burst the memory is
// given back, and the least time between two reliefs.
var Delay = 2 * time.Second

var (
	mu      sync.Mutex
	pending bool
	last    time.Time
	runs    atomic.Int64
)

// Note tells that a value of n bytes was just let go (or is about to be:
// written out, sent on). Relief follows Delay later, unless one is already
// pending.
func Note(n int) {
	if n < Threshold {
		return
	}
	mu.Lock()
	defer mu.Unlock()
	if pending {
		return
	}
	pending = true
	wait := Delay
	if since := time.Since(last); since < Delay {
		wait += Delay - since
	}
	time.AfterFunc(wait, relieve)
}

func relieve() {
	mu.Lock()
	pending = false
	last = time.Now()
	mu.Unlock()
	// The first collection frees the values and moves pooled buffers to
	// the pools' victim caches; the second (inside FreeOSMemory) frees
	// those, and the free pages go back to the operating system.
	runtime.GC()
	debug.FreeOSMemory()
	runs.Add(1)
}

// Runs is how many reliefs have run (for tests).
func Runs() int64 { return runs.Load() }

type scopeKey struct{}

type scope struct{ n atomic.Int64 }

// Scope is ctx with a tally of the large values made for one request,
// and the function to call once the request is done with them (its answer
// written): it Notes their sum. A value is let go only then — pools such
// as encoding/json's take an encoder's buffer back once it is written —
// so a relief before it would free nothing of it.
func Scope(ctx context.Context) (context.Context, func()) {
	s := &scope{}
	return context.WithValue(ctx, scopeKey{}, s), func() { Note(int(s.n.Swap(0))) }
}

// Add counts a value of n bytes made for ctx's request: Noted when its
// Scope ends, or now when ctx has none.
func Add(ctx context.Context, n int) {
	if s, ok := ctx.Value(scopeKey{}).(*scope); ok {
		s.n.Add(int64(n))
		return
	}
	Note(n)
}
