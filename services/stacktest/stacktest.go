package stacktest

import (
	"bytes"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Demo is the demo turn sharedos-dev opens (its --ready-file).
type Demo struct {
	TurnID      string         `json:"turnId"`
	MCPURL      string         `json:"mcpUrl"`
	Token       string         `json:"token"`
	CatalogHash string         `json:"catalogHash"`
	Tools       []string       `json:"tools"`
	PIDs        map[string]int `json:"pids"`
}

// Stack is a running stack.
type Stack struct {
	Root, Bin string
	// Addrs by service: catalog, authz, bridge, files, mcp.
	Addrs map[string]string
	Demo  Demo
	// Dev is the sharedos-dev process (its Log: the stack's combined output).
	Dev *Proc
}

// Output is a buffer safe to read while the process writes to it.
type Output struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// RepoRoot is the directory holding go.work above the working directory.
func RepoRoot(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatal("repository root (go.work) not found")
		}
		dir = parent
	}
}

// FreeAddrs returns n loopback addresses that were free a moment ago.
func FreeAddrs(tb testing.TB, n int) []string {
	tb.Helper()
	var ls []net.Listener
	var out []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().String())
	}
	for _, l := range ls {
		_ = l.Close()
	}
	return out
}

// Binaries the stack needs in bin/ (`make build`).
var Binaries = []string{"sharedos-dev", "sharedosctl", "catalog-svc", "authz-svc", "bridge-svc", "files-provider"}

// Start starts bin/sharedos-dev and waits for its demo turn. extraEnv
// (KEY=VALUE) is added to its environment, which the services inherit; the
// embedded store is used unless it sets SHAREDOS_DATABASE_URL.
func Start(tb testing.TB, extraEnv ...string) *Stack {
	tb.Helper()
	return StartFrom(tb, RepoRoot(tb), extraEnv...)
}

// StartFrom is Start for the checkout at root (its bin/, deploy/ and
// policies): a benchmark runs a baseline build beside the current one.
func StartFrom(tb testing.TB, root string, extraEnv ...string) *Stack {
	tb.Helper()
	bin := filepath.Join(root, "bin")
	for _, b := range Binaries {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			tb.Fatalf("%s is not built: run `make build` (make test does it first)", filepath.Join(bin, b))
		}
	}
	a := FreeAddrs(tb, 5)
	s := &Stack{Root: root, Bin: bin, Addrs: map[string]string{
		"catalog": a[0], "authz": a[1], "bridge": a[2], "files": a[3], "mcp": a[4],
	}}
	ready := filepath.Join(tb.TempDir(), "ready.json")
	s.Dev = &Proc{Name: "sharedos-dev", Path: filepath.Join(bin, "sharedos-dev"),
		Args: []string{"--bin", bin, "--root", root,
			"--catalog-addr", a[0], "--authz-addr", a[1], "--bridge-addr", a[2], "--files-addr", a[3], "--mcp-addr", a[4],
			"--ready-file", ready},
		Env: append([]string{"SHAREDOS_DATABASE_URL="}, extraEnv...)}
	s.Dev.Start(tb)
	tb.Cleanup(func() {
		if err := s.Dev.Stop(syscall.SIGINT, 20*time.Second); err != nil {
			tb.Logf("sharedos-dev exit after SIGINT: %v", err)
		}
	})
	deadline := time.Now().Add(90 * time.Second)
	for {
		if b, err := os.ReadFile(ready); err == nil && len(b) > 0 {
			if err := json.Unmarshal(b, &s.Demo); err != nil {
				tb.Fatalf("ready file: %v", err)
			}
			return s
		}
		select {
		case <-s.Dev.Done():
			tb.Fatalf("sharedos-dev exited before ready (%v):\n%s", s.Dev.Err(), s.Dev.Log)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			tb.Fatalf("stack not ready after 90s:\n%s", s.Dev.Log)
		}
	}
}
