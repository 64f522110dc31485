//go:build perf

package perf_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sharedos/toolshare/services/systemtest/launch"
)

// The knobs of `make profile` (environment, so make can pass them).
func knobs(t *testing.T) (seconds, callers int, modern bool, dir string, dsn string) {
	seconds, callers = 20, 16
	if v := os.Getenv("PROFILE_CONCURRENCY"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("PROFILE_CONCURRENCY=%q: want a positive number of callers", v)
		}
		callers = n
	}
	if v := os.Getenv("PROFILE_SECONDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("PROFILE_SECONDS=%q: want a positive number of seconds", v)
		}
		seconds = n
	}
	switch era := os.Getenv("PROFILE_ERA"); era {
	case "", "2026-07-28":
		modern = true
	case "2025-11-25":
	default:
		t.Fatalf("PROFILE_ERA=%q: want 2026-07-28 or 2025-11-25", era)
	}
	dir = os.Getenv("PROFILE_DIR")
	if dir == "" {
		dir = filepath.Join(launch.RepoRoot(t), "bin", "profiles")
	}
	return seconds, callers, modern, dir, os.Getenv("PROFILE_DATABASE_URL")
}

// services are the stack's binaries, each given a --debug-listen address.
var services = []string{"authz-svc", "files-provider", "catalog-svc", "bridge-svc"}

// TestProfileFullPath drives files.read on the demo turn (PROFILE_PATH
// files), or an upstream MCP server's tool (PROFILE_PATH upstream: plain
// mcp-go acquired as "everything", as make bench-upstream does), from
// PROFILE_CONCURRENCY (16) callers
// for PROFILE_SECONDS (20) while it takes a CPU profile and an allocation
// profile (a delta over the same window) of every service, and writes
// <service>.cpu.pprof and <service>.allocs.pprof under PROFILE_DIR
// (bin/profiles). It reports calls/s and the CPU per call of each process.
func TestProfileFullPath(t *testing.T) {
	seconds, callers, modern, dir, dsn := knobs(t)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	debug := map[string]string{}
	flags := map[string][]string{}
	addrs := launch.FreeAddrs(t, len(services))
	for i, s := range services {
		debug[s] = addrs[i]
		flags[s] = []string{"--debug-listen", addrs[i]}
	}
	st := launch.Start(t, launch.Options{DatabaseURL: dsn, Flags: flags})
	target := &launch.MCPTarget{URL: st.Demo.MCPURL, Token: st.Demo.Token, Modern: modern, Args: `{"path":"/public/a.txt"}`}
	tool := "files.read"
	switch path := os.Getenv("PROFILE_PATH"); path {
	case "", "files":
	case "upstream":
		target, tool = upstreamTarget(t, st, modern)
	default:
		t.Fatalf("PROFILE_PATH=%q: want files or upstream", path)
	}
	target.Init(t)
	target.CheckCall(t, tool)
	body := target.CallBody(tool)

	// Warm up (connections, caches, the policy's first evaluations) before
	// the window opens.
	for range 200 {
		if code, err := target.Post(body, "tools/call", tool); err != nil || code != 200 {
			t.Fatalf("warm-up call: %d %v", code, err)
		}
	}

	window := time.Duration(seconds) * time.Second
	var saves sync.WaitGroup
	errs := make(chan error, 2*len(services))
	for _, s := range services {
		for _, kind := range []string{"profile", "allocs"} {
			saves.Add(1)
			go func() {
				defer saves.Done()
				errs <- save(debug[s], kind, seconds, filepath.Join(dir, s+"."+map[string]string{"profile": "cpu", "allocs": "allocs"}[kind]+".pprof"))
			}()
		}
	}
	cpu := launch.NewCPUMeter(st.Demo.PIDs)
	load1 := launch.LoadAvg()
	var calls, failures atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), window)
	defer cancel()
	var running sync.WaitGroup
	start := time.Now()
	for range callers {
		running.Add(1)
		go func() {
			defer running.Done()
			for ctx.Err() == nil {
				if code, err := target.Post(body, "tools/call", tool); err != nil || code != 200 {
					failures.Add(1)
					continue
				}
				calls.Add(1)
			}
		}()
	}
	running.Wait()
	elapsed := time.Since(start)
	per, foreign := cpu.PerCall(int(calls.Load())), cpu.ForeignCores()
	saves.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if f := failures.Load(); f > 0 {
		t.Errorf("%d of %d calls failed", f, f+calls.Load())
	}
	era := "2026-07-28"
	if !modern {
		era = "2025-11-25"
	}
	mark := ""
	if foreign > 0.25 {
		mark = " (MARKED: more than 0.25 foreign cores)"
	}
	t.Logf("full path of %s, %s, c=%d, %s: %d calls, %.0f calls/s, load1 %.2f at the start, %.2f at the end, foreign CPU %.2f cores%s",
		tool, era, callers, elapsed.Round(time.Millisecond), calls.Load(), float64(calls.Load())/elapsed.Seconds(), load1, launch.LoadAvg(), foreign, mark)
	for _, name := range append([]string{"client"}, append(services, "all")...) {
		if v, ok := per[name]; ok {
			t.Logf("  CPU/call %-15s %6.0f µs", name, v)
		}
	}
	t.Logf("profiles in %s (go tool pprof -top -nodecount=25 %s)", dir, filepath.Join(dir, "catalog-svc.cpu.pprof"))
}

// save fetches /debug/pprof/<kind>?seconds=N from addr into file.
func save(addr, kind string, seconds int, file string) error {
	client := &http.Client{Timeout: time.Duration(seconds+30) * time.Second}
	resp, err := client.Get(fmt.Sprintf("http://%s/debug/pprof/%s?seconds=%d", addr, kind, seconds))
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%s: %s %s", file, resp.Status, b)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", file, err)
	}
	return f.Close()
}

// upstreamTarget is plain mcp-go (in this process) as the upstream
// "everything" of an integrator turn, as make bench-upstream has it.
func upstreamTarget(t *testing.T, st *launch.Stack, modern bool) (*launch.MCPTarget, string) {
	t.Helper()
	url, token := st.UpstreamTurn(t, launch.PlainMCP(t))
	return &launch.MCPTarget{URL: url, Token: token, Modern: modern}, "everything.notes.append"
}
