package launch

import (
	"fmt"
	"os"
	"strings"
	"testing"
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
	return m
}

// Report adds "<process>-cpu-µs/call" and "all-cpu-µs/call" metrics (10 ms
// tick resolution: read them only over thousands of calls).
func (m *CPUMeter) Report(b *testing.B, calls int) {
	var total int64
	for name, pid := range m.pids {
		d := procCPU(pid) - m.before[name]
		total += d
		b.ReportMetric(float64(d)*1e4/float64(calls), name+"-cpu-µs/call")
	}
	b.ReportMetric(float64(total)*1e4/float64(calls), "all-cpu-µs/call")
}
