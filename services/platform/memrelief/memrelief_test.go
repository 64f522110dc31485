package memrelief_test

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/sharedos/toolshare/services/platform/memrelief"
)

var sink []byte

// A large value let go is given back to the operating system soon after,
// not at the next collection (an idle process collects every two minutes):
// the heap's released pages cover it without any allocation to trigger a
// collection. Values under the threshold cause none. Before, nothing
// collected or released it (reliability row 48).
func TestALargeValueIsGivenBack(t *testing.T) {
	defer func(d time.Duration) { memrelief.Delay = d }(memrelief.Delay)
	memrelief.Delay = 10 * time.Millisecond
	defer debug.SetGCPercent(debug.SetGCPercent(-1)) // only the relief collects

	runs := memrelief.Runs()
	memrelief.Note(memrelief.Threshold - 1)
	memrelief.Note(1 << 10)

	const size = 64 << 20
	sink = make([]byte, size)
	for i := range sink {
		sink[i] = 1 // touched: resident
	}
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	sink = nil
	for range 3 { // a burst: one relief
		memrelief.Note(size)
	}
	for memrelief.Runs() == runs {
		select {
		case <-t.Context().Done():
			t.Fatal("no relief after a large value was let go")
		case <-time.After(time.Millisecond):
		}
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if after.HeapAlloc > before.HeapAlloc-size/2 {
		t.Errorf("heap in use %d after the relief, %d before: the value was not collected", after.HeapAlloc, before.HeapAlloc)
	}
	if after.HeapReleased < before.HeapReleased+size/2 {
		t.Errorf("released %d bytes to the OS after, %d before: the value's pages were kept", after.HeapReleased, before.HeapReleased)
	}
}

// A request's large values are Noted when its scope ends — once its answer
// is written and pooled encoder buffers are back in their pools — not when
// they are made: a relief before that would free nothing of them.
func TestAScopeNotesWhenItEnds(t *testing.T) {
	defer func(d time.Duration) { memrelief.Delay = d }(memrelief.Delay)
	memrelief.Delay = time.Millisecond
	ctx, end := memrelief.Scope(t.Context())
	runs := memrelief.Runs()
	memrelief.Add(ctx, memrelief.Threshold/2)
	memrelief.Add(ctx, memrelief.Threshold/2) // together: large
	end()
	for memrelief.Runs() == runs {
		select {
		case <-t.Context().Done():
			t.Fatal("no relief once the scope ended")
		case <-time.After(time.Millisecond):
		}
	}
}
