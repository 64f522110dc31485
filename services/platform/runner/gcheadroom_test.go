package runner

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestGCPercentFor(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live, headroom uint64
		want           int
	}{
		{live: 8 * mib, headroom: 64 * mib, want: 400},   // 800 % asked, bounded
		{live: 32 * mib, headroom: 64 * mib, want: 200},  // the headroom exactly
		{live: 64 * mib, headroom: 64 * mib, want: 100},  // the base
		{live: 512 * mib, headroom: 64 * mib, want: 100}, // a large heap keeps the base
		{live: 0, headroom: 64 * mib, want: 400},         // nothing live yet
		{live: 48 * mib, headroom: 64 * mib, want: 134},  // 133.3 rounded up: at least the headroom
		{live: mib, headroom: 1 << 62, want: 400},        // headroom*100 past 64 bits
		{live: mib, headroom: ^uint64(0), want: 400},
	} {
		if got := gcPercentFor(c.live, c.headroom, 100, 400); got != c.want {
			t.Errorf("gcPercentFor(%d MiB live, %d MiB headroom) = %d, want %d", c.live/mib, c.headroom/mib, got, c.want)
		}
	}
}

// TestGCTunerKeepsAHighBase: a base above the ceiling is the floor and the
// ceiling both.
func TestGCTunerKeepsAHighBase(t *testing.T) {
	before := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(before) })
	tu := startGCTuner(1<<40, 800, 400)
	defer tu.stop()
	collectUntil(t, func() bool { return tu.applied.Load() == 800 })
}

// TestGCTunerFollowsTheLiveHeap: after collections the tuner has set the
// percent the live heap asks for (this test binary's few megabytes: the
// maximum with a huge headroom, the base with a tiny one), and stop puts
// the base back.
func TestGCTunerFollowsTheLiveHeap(t *testing.T) {
	before := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(before) })

	for _, c := range []struct {
		name     string
		headroom uint64
		want     int32
	}{
		{"huge headroom", 1 << 40, 400},
		{"tiny headroom", 1, 150},
	} {
		t.Run(c.name, func(t *testing.T) {
			tu := startGCTuner(c.headroom, 150, 400)
			collectUntil(t, func() bool { return tu.applied.Load() == c.want })
			if got := debug.SetGCPercent(-1); got != int(c.want) {
				t.Errorf("GOGC is %d, want %d", got, c.want)
			}
			debug.SetGCPercent(int(c.want))
			tu.stop()
			if got := debug.SetGCPercent(100); got != 150 {
				t.Errorf("after stop GOGC is %d, want the base 150", got)
			}
		})
	}
}

// TestGCTunerTracksEveryCycle: the tuner acts after every collection, not
// the first only — the percent goes down while 64 MiB more are live and up
// again once they are not — and sets it anew each time, whatever else set
// it meanwhile.
func TestGCTunerTracksEveryCycle(t *testing.T) {
	before := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(before) })
	tu := startGCTuner(32<<20, 100, 400)
	defer tu.stop()
	collectUntil(t, func() bool { return tu.applied.Load() == 400 })

	held := make([]byte, 64<<20)
	for i := range held {
		held[i] = byte(i) // pages touched, the slice live until KeepAlive
	}
	collectUntil(t, func() bool { return tu.applied.Load() == 100 })
	runtime.KeepAlive(held)
	collectUntil(t, func() bool { return tu.applied.Load() == 400 })

	tu.mu.Lock()            // no cycle between the other setter and the count
	debug.SetGCPercent(250) // another setter
	seen := tu.cycles.Load()
	tu.mu.Unlock()
	collectUntil(t, func() bool { return tu.cycles.Load() > seen })
	if got := debug.SetGCPercent(400); got != 400 {
		t.Errorf("GOGC %d after a cycle, want the tuner's 400 again", got)
	}
}

// TestGCHeadroomDefersToGOGC: GOGC in the environment is the operator's,
// and no headroom is no tuner.
func TestGCHeadroomDefersToGOGC(t *testing.T) {
	if tu := headroomTuner(0, 100); tu != nil {
		tu.stop()
		t.Error("a tuner started for no headroom")
	}
	t.Setenv("GOGC", "100")
	if tu := headroomTuner(1<<40, 100); tu != nil {
		tu.stop()
		t.Error("a tuner started with GOGC set")
	}
}

// collectUntil runs collections until ok holds (a cleanup runs on its own
// goroutine after the collection that freed its object).
func collectUntil(t *testing.T, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal("the tuner did not act on 30 s of collections")
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
}
