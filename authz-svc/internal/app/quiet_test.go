package app_test

import (
	"strconv"
	"sync"
	"time"

	"github.com/sharedos/toolshare/services/systemtest/launch"
)

// The benchmark quiet gate. The box is shared: before a measurement the
// benchmark waits (up to 60 s) until processes other than its own use less
// than quietCores, and it reports the CPU other processes used during the
// measurement as "foreign-cores" (launch.CPUMeter, the one meter of every
// benchmark), so contaminated rows can be told apart.

const (
	quietCores   = 0.25
	quietMaxWait = 60 * time.Second
)

// ownPIDs are the servers the benchmark started (the benchmark process
// itself is always counted by launch.CPUMeter).
type ownPIDs struct {
	mu   sync.Mutex
	pids []int
}

var benchPIDs = &ownPIDs{}

func (o *ownPIDs) add(pid int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.pids = append(o.pids, pid)
}

func (o *ownPIDs) byName() map[string]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make(map[string]int, len(o.pids))
	for _, p := range o.pids {
		out["pid-"+strconv.Itoa(p)] = p
	}
	return out
}

// startCPU starts measuring the CPU other processes use.
func startCPU() *launch.CPUMeter { return launch.NewCPUMeter(benchPIDs.byName()) }

// waitQuiet waits until other processes use less than quietCores over a
// 1 s window, or quietMaxWait passes.
func waitQuiet() {
	deadline := time.Now().Add(quietMaxWait)
	for time.Now().Before(deadline) {
		m := startCPU()
		time.Sleep(time.Second)
		if m.ForeignCores() < quietCores {
			return
		}
	}
}
