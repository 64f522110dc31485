package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/sharedos/toolshare/services/contract/cataloghash"
	"github.com/sharedos/toolshare/services/contract/projection"
	"github.com/sharedos/toolshare/services/stacktest"
)

// stack is a running `make run` stack (services/stacktest) with the
// sharedosctl helpers of these tests.
type stack struct{ *stacktest.Stack }

// startStack starts the stack; extraEnv (KEY=VALUE) reaches every service.
func startStack(t *testing.T, extraEnv ...string) *stack {
	t.Helper()
	return &stack{stacktest.Start(t, extraEnv...)}
}

// ctl runs bin/sharedosctl against the stack and returns stdout and the exit code.
func (s *stack) ctl(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(filepath.Join(s.Bin, "sharedosctl"), args...)
	cmd.Env = append(os.Environ(),
		"SHAREDOS_CATALOG_ADDR="+s.Addrs["catalog"], "SHAREDOS_AUTHZ_ADDR="+s.Addrs["authz"],
		"SHAREDOS_BRIDGE_ADDR="+s.Addrs["bridge"], "SHAREDOS_FILES_ADDR="+s.Addrs["files"])
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if code != 0 {
		t.Logf("sharedosctl %s: exit %d, stderr: %s", strings.Join(args, " "), code, stderr.String())
	}
	return stdout.String(), code
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

func TestMakeRunStack(t *testing.T) {
	s := startStack(t)
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
		seen[o.CallID] = true
	}

	var check struct{ Decision, Reason, DecisionID, PolicyRevision string }
	s.ctlJSON(t, &check, "authz", "check", "--principal", "alice", "--role", "engineer", "--tool", "files.read", "--args", `{"path":"/public/../private/a.txt"}`)
	if check.Decision != "deny" || check.DecisionID == "" || check.PolicyRevision == "" {
		t.Fatalf("authz check of a traversal = %+v, want a deny with decision id and revision", check)
	}

	// Ctrl-C stops everything and leaves no listening port behind.
	if err := s.Dev.Stop(syscall.SIGINT, 30*time.Second); err != nil {
		t.Fatalf("sharedos-dev after SIGINT: %v\n%s", err, s.Dev.Log)
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
