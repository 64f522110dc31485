package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/cataloghash"
	"github.com/sharedos/toolshare/services/contract/projection"
	"github.com/sharedos/toolshare/services/contract/systemidentity"
	"github.com/sharedos/toolshare/services/systemtest/launch"
	"github.com/sharedos/toolshare/services/tools/devstack"
)

// stack is a running stack (services/systemtest/launch) with the
// sharedosctl helpers of these tests.
type stack struct{ *launch.Stack }

// startStack starts the make-run stack composition from bin/ (embedded store
// unless o.DatabaseURL is set).
func startStack(t *testing.T, o launch.Options) *stack {
	t.Helper()
	return &stack{launch.Start(t, o)}
}

// ctl runs bin/sharedosctl against the stack and returns stdout and the exit code.
func (s *stack) ctl(t *testing.T, args ...string) (string, int) {
	t.Helper()
	stdout, stderr, code := s.Ctl(t, args...)
	if code != 0 {
		t.Logf("sharedosctl %s: exit %d, stderr: %s", strings.Join(args, " "), code, stderr)
	}
	return stdout, code
}

func (s *stack) ctlJSON(t *testing.T, v any, args ...string) {
	t.Helper()
	out, code := s.ctl(t, args...)
	if code != 0 {
		t.Fatalf("sharedosctl %s: exit %d", strings.Join(args, " "), code)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("sharedosctl %s: output is not JSON: %v\n%s", strings.Join(args, " "), err, out)
	}
}

type listedTool struct {
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema"`
	Annotations  json.RawMessage `json:"annotations"`
	Metadata     *struct {
		Namespace string `json:"namespace"`
		Source    string `json:"source"`
	} `json:"metadata"`
}

type listed struct {
	CatalogHash string       `json:"catalogHash"`
	Tools       []listedTool `json:"tools"`
}

func names(l listed) []string {
	var n []string
	for _, t := range l.Tools {
		n = append(n, t.Name)
	}
	return n
}

// recomputeHash recomputes catalogHash from the listed tools with the kernel
// library, the way any independent implementation of the spec would.
func recomputeHash(t *testing.T, l listed) string {
	t.Helper()
	var entries []cataloghash.Entry
	for _, lt := range l.Tools {
		pt := projection.Tool{Name: lt.Name, Description: lt.Description, InputSchema: lt.InputSchema, OutputSchema: lt.OutputSchema, Annotations: lt.Annotations}
		if lt.Metadata != nil {
			pt.Namespace, pt.Source = lt.Metadata.Namespace, lt.Metadata.Source
		}
		c, err := projection.Canonical(pt)
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, cataloghash.Entry{Name: lt.Name, Canonical: c})
	}
	return cataloghash.Sum(entries)
}

func mcpClient(t *testing.T, ctx context.Context, url, token string, opts ...transport.StreamableHTTPCOption) *client.Client {
	t.Helper()
	opts = append([]transport.StreamableHTTPCOption{transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token})}, opts...)
	tr, err := transport.NewStreamableHTTP(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr)
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
		ProtocolVersion: "2025-11-25", ClientInfo: mcp.Implementation{Name: "e2e", Version: "0"},
	}}); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	return c
}

func call(t *testing.T, ctx context.Context, c *client.Client, tool string, args map[string]any) (text string, isError bool) {
	t.Helper()
	res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: tool, Arguments: args}})
	if err != nil {
		t.Fatalf("tools/call %s: JSON-RPC error %v (a refusal must be a result)", tool, err)
	}
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			text += tc.Text
		}
	}
	return text, res.IsError
}

// TestMakeRunStack runs `make run` itself (bin/sharedos-dev): the demo
// stack answers sharedosctl and an MCP client, and Ctrl-C leaves nothing.
func TestMakeRunStack(t *testing.T) {
	s, dev := startMakeRun(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	if _, code := s.ctl(t, "status"); code != 0 {
		t.Fatalf("status exit %d, want 0", code)
	}

	var alice listed
	s.ctlJSON(t, &alice, "tools", "list", "--principal", "alice", "--role", "engineer")
	got := names(alice)
	if !slices.Contains(got, "files.read") || !slices.Contains(got, "files.search") || slices.Contains(got, "files.write") {
		t.Fatalf("alice/engineer sees %v, want files.read and files.search but not files.write", got)
	}
	if h := recomputeHash(t, alice); h != alice.CatalogHash {
		t.Fatalf("listed catalogHash %s, recomputed from the listed tools %s", alice.CatalogHash, h)
	}
	if s.Demo.CatalogHash != alice.CatalogHash {
		t.Fatalf("demo turn catalogHash %s != alice's listing %s", s.Demo.CatalogHash, alice.CatalogHash)
	}

	var bob listed
	s.ctlJSON(t, &bob, "tools", "list", "--principal", "bob")
	if len(bob.Tools) != 0 {
		t.Fatalf("bob with no roles sees %v, want none", names(bob))
	}

	c := mcpClient(t, ctx, s.Demo.MCPURL, s.Demo.Token)
	if text, isErr := call(t, ctx, c, "files.read", map[string]any{"path": "/public/a.txt"}); isErr || text == "" {
		t.Fatalf("public read: isError=%v text=%q", isErr, text)
	}
	if text, isErr := call(t, ctx, c, "files.read", map[string]any{"path": "/private/a.txt"}); !isErr || !strings.HasPrefix(text, "denied:") {
		t.Fatalf("private read: isError=%v text=%q, want a denied: result", isErr, text)
	}
	if text, isErr := call(t, ctx, c, "github.delete_repo", map[string]any{"repo": "x"}); !isErr || !strings.HasPrefix(text, "denied:") {
		t.Fatalf("unknown tool: isError=%v text=%q, want a denied: result", isErr, text)
	}

	var ops []struct {
		CallID, Tool, Status, Code string
		SystemIdentity             struct{ CatalogHash, Harness, MCPSupport, DeclaredModel, ToolPolicy string }
	}
	s.ctlJSON(t, &ops, "ops", "list", "--turn", s.Demo.TurnID)
	want := []struct{ tool, status, code string }{
		{"files.read", "succeeded", ""},
		{"files.read", "denied", "permission_denied"},
		{"github.delete_repo", "denied", "tool_unavailable"},
	}
	if len(ops) != len(want) {
		t.Fatalf("ops list has %d records, want %d (one per attempt): %+v", len(ops), len(want), ops)
	}
	seen := map[string]bool{}
	for i, w := range want {
		o := ops[i]
		if o.Tool != w.tool || o.Status != w.status || o.Code != w.code {
			t.Errorf("record %d = %+v, want %+v", i, o, w)
		}
		if o.CallID == "" || seen[o.CallID] {
			t.Errorf("record %d has empty or repeated callId %q", i, o.CallID)
		}
		// The run's SystemIdentity, from the turn's grant (ADR 0014): the
		// demo turn's permissive policy, the "demo" harness, native MCP.
		if id := o.SystemIdentity; id.CatalogHash != s.Demo.CatalogHash || id.Harness != "demo" || id.MCPSupport != "native" ||
			id.ToolPolicy != systemidentity.PolicyDigest(&sharedosv1.ToolPolicy{Mode: sharedosv1.PolicyMode_POLICY_MODE_PERMISSIVE}) {
			t.Errorf("record %d systemIdentity = %+v (turn's catalogHash %s)", i, id, s.Demo.CatalogHash)
		}
		seen[o.CallID] = true
	}

	var check struct{ Decision, Reason, DecisionID, PolicyRevision string }
	// Authorize is the kernel's to call: the check asks authz-svc with make
	// run's catalog identity.
	kernel := devstack.TLSFiles(s.PKIDir, "catalog")
	s.ctlJSON(t, &check, "authz", "check", "--kernel-tls-cert", kernel.Cert, "--kernel-tls-key", kernel.Key, "--principal", "alice", "--role", "engineer", "--tool", "files.read", "--args", `{"path":"/public/../private/a.txt"}`)
	if check.Decision != "deny" || check.DecisionID == "" || check.PolicyRevision == "" {
		t.Fatalf("authz check of a traversal = %+v, want a deny with decision id and revision", check)
	}

	// Ctrl-C stops everything and leaves no listening port behind.
	if err := dev.Stop(syscall.SIGINT, 30*time.Second); err != nil {
		t.Fatalf("sharedos-dev after SIGINT: %v\n%s", err, dev.Log)
	}
	for name, addr := range s.Addrs {
		if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			conn.Close()
			t.Errorf("%s still listening on %s after Ctrl-C", name, addr)
		}
	}
	assertNoChildren(t, s.Demo.PIDs)
}

// assertNoChildren checks that no process sharedos-dev started survives.
func assertNoChildren(t *testing.T, pids map[string]int) {
	t.Helper()
	if len(pids) == 0 {
		t.Fatal("sharedos-dev reported no child pids")
	}
	for name, pid := range pids {
		b, err := os.ReadFile(filepath.Join("/proc", fmt.Sprint(pid), "stat"))
		if err != nil {
			continue // gone
		}
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) > 0 && f[0] != "Z" {
			t.Errorf("%s (pid %d) survived Ctrl-C", name, pid)
		}
	}
}

// startMakeRun starts bin/sharedos-dev (what `make run` runs) on free ports
// and waits for its demo turn; its Proc is stopped with SIGINT in cleanup.
func startMakeRun(t *testing.T) (*stack, *launch.Proc) {
	t.Helper()
	root := launch.RepoRoot(t)
	bin := filepath.Join(root, "bin")
	a := launch.FreeAddrs(t, 5)
	s := &stack{&launch.Stack{Root: root, Bin: bin, Addrs: map[string]string{
		"catalog": a[0], "authz": a[1], "bridge": a[2], "files": a[3], "mcp": a[4],
	}}}
	ready := filepath.Join(t.TempDir(), "ready.json")
	pkiDir := filepath.Join(t.TempDir(), "pki")
	dev := &launch.Proc{Name: "sharedos-dev", Path: filepath.Join(bin, "sharedos-dev"),
		Args: []string{"--bin", bin, "--root", root,
			"--catalog-addr", a[0], "--authz-addr", a[1], "--bridge-addr", a[2], "--files-addr", a[3], "--mcp-addr", a[4],
			"--ready-file", ready, "--pki-dir", pkiDir},
		Env: []string{"SHAREDOS_DATABASE_URL="}}
	dev.Start(t)
	t.Cleanup(func() {
		if err := dev.Stop(syscall.SIGINT, 20*time.Second); err != nil {
			t.Logf("sharedos-dev exit after SIGINT: %v", err)
		}
	})
	deadline := time.Now().Add(90 * time.Second)
	for {
		if b, err := os.ReadFile(ready); err == nil && len(b) > 0 {
			if err := json.Unmarshal(b, &s.Demo); err != nil {
				t.Fatalf("ready file: %v", err)
			}
			s.UsePKI(t, pkiDir)
			return s, dev
		}
		select {
		case <-dev.Done():
			t.Fatalf("sharedos-dev exited before ready (%v):\n%s", dev.Err(), dev.Log)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("sharedos-dev not ready after 90s:\n%s", dev.Log)
		}
	}
}
