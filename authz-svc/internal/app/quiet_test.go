package app_test

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// CPU accounting for the benchmark quiet gate. The box is shared: before a
// measurement the benchmark waits (up to 60 s) until processes other than
// its own use less than quietCores, and it reports the CPU other processes
// used during the measurement as "foreign-cores", so contaminated rows can
// be told apart. Times are in clock ticks (USER_HZ = 100 on Linux).

const (
	quietCores   = 0.25
	quietMaxWait = 60 * time.Second
	clockTick    = 10 * time.Millisecond
)

// ownPIDs are the benchmark process and the servers it started.
type ownPIDs struct {
	mu   sync.Mutex
	pids []int
}

var benchPIDs = &ownPIDs{pids: []int{os.Getpid()}}

func (o *ownPIDs) add(pid int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.pids = append(o.pids, pid)
}

func (o *ownPIDs) ticks() int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	var sum int64
	for _, p := range o.pids {
		sum += pidTicks(p)
	}
	return sum
}

// systemBusyTicks is the busy time of all CPUs from /proc/stat.
func systemBusyTicks() int64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	var busy int64
	// user nice system idle iowait irq softirq steal
	for i, v := range f[1:] {
		if i == 3 || i == 4 || i >= 8 {
			continue
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		busy += n
	}
	return busy
}

// pidTicks is utime+stime of pid (0 when it has exited).
func pidTicks(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return u + st
}

// cpuMeter measures foreign CPU between start and stop.
type cpuMeter struct {
	t0         time.Time
	busy0, own int64
}

func startCPU() cpuMeter {
	return cpuMeter{t0: time.Now(), busy0: systemBusyTicks(), own: benchPIDs.ticks()}
}

// foreignCores is the average number of cores other processes used.
func (m cpuMeter) foreignCores() float64 {
	el := time.Since(m.t0)
	busy := systemBusyTicks() - m.busy0
	own := benchPIDs.ticks() - m.own
	f := float64(busy-own) * float64(clockTick) / float64(el)
	if f < 0 {
		f = 0
	}
	return f
}

// waitQuiet waits until other processes use less than quietCores over a
// 1 s window, or quietMaxWait passes.
func waitQuiet() {
	deadline := time.Now().Add(quietMaxWait)
	for time.Now().Before(deadline) {
		m := startCPU()
		time.Sleep(time.Second)
		if m.foreignCores() < quietCores {
			return
		}
	}
}
