package launch

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// LoadAvg is the 1-minute load average (-1 when unknown), reported with
// every benchmark run: this box is shared.
func LoadAvg() float64 {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	var l float64
	if _, err := fmt.Sscan(string(raw), &l); err != nil {
		return -1
	}
	return l
}

// procCPU is the user+system CPU time of process pid ("self" for this one)
// from /proc, in clock ticks (USER_HZ, 100 per second on Linux).
func procCPU(pid string) int64 {
	raw, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0
	}
	s := string(raw)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // fields from 3 (state) on
	if len(f) < 13 {
		return 0
	}
	var u, k int64
	_, _ = fmt.Sscan(f[11], &u) // utime, field 14
	_, _ = fmt.Sscan(f[12], &k) // stime, field 15
	return u + k
}

// CPUMeter samples the CPU time of the stack's processes and of this one;
// Report divides the difference by the number of calls.
type CPUMeter struct {
	pids   map[string]string
	before map[string]int64
	// busy is the machine's busy time (every CPU) at the start, and start
	// the wall clock, for ForeignCores.
	busy  int64
	start time.Time
}

// NewCPUMeter starts measuring the processes pids (by name; Demo.PIDs) and
// this process, reported as "client".
func NewCPUMeter(pids map[string]int) *CPUMeter {
	m := &CPUMeter{pids: map[string]string{"client": "self"}, before: map[string]int64{}}
	for name, pid := range pids {
		m.pids[name] = fmt.Sprint(pid)
	}
	for name, pid := range m.pids {
		m.before[name] = procCPU(pid)
	}
	m.busy, m.start = machineBusy(), time.Now()
	return m
}

// machineBusy is the time every CPU of the machine spent busy (user, nice,
// system, irq, softirq, steal) from /proc/stat, in clock ticks.
func machineBusy() int64 {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	var busy int64
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		if i < len(f) {
			var v int64
			_, _ = fmt.Sscan(f[i], &v)
			busy += v
		}
	}
	return busy
}

// ForeignCores is the CPU the machine spent on other processes than the
// measured ones (and this one) since NewCPUMeter, in cores: a figure
// measured with more than 0.25 of them is marked (docs/benchmarks.md).
func (m *CPUMeter) ForeignCores() float64 {
	ours := int64(0)
	for name, pid := range m.pids {
		ours += procCPU(pid) - m.before[name]
	}
	elapsed := time.Since(m.start).Seconds()
	if elapsed <= 0 {
		return 0
	}
	foreign := float64(machineBusy()-m.busy-ours) / 100 / elapsed
	return max(foreign, 0)
}

// PerCall is the CPU time per call of each process since NewCPUMeter, in
// µs, and of all of them under "all" (10 ms tick resolution: read it only
// over thousands of calls).
func (m *CPUMeter) PerCall(calls int) map[string]float64 {
	out := map[string]float64{}
	var total int64
	for name, pid := range m.pids {
		d := procCPU(pid) - m.before[name]
		total += d
		out[name] = float64(d) * 1e4 / float64(calls)
	}
	out["all"] = float64(total) * 1e4 / float64(calls)
	return out
}

// Report adds PerCall as "<process>-cpu-µs/call" and "all-cpu-µs/call"
// metrics.
func (m *CPUMeter) Report(b *testing.B, calls int) {
	for name, v := range m.PerCall(calls) {
		b.ReportMetric(v, name+"-cpu-µs/call")
	}
	b.ReportMetric(m.ForeignCores(), "foreign-cores")
}
