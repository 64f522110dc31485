package e2e

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"

	"github.com/sharedos/toolshare/services/platform/pgdb/pgtest"
	"github.com/sharedos/toolshare/services/systemtest/launch"
)

// noMigrate leaves the fresh database empty: the services' --migrate applies
// their own migrations, as `make run` with SHAREDOS_DATABASE_URL does.
func noMigrate(context.Context, string) error { return nil }

type attempt struct {
	tool         string
	args         map[string]any
	status, code string
}

func (a attempt) run(t *testing.T, ctx context.Context, c *client.Client) {
	t.Helper()
	text, isErr := call(t, ctx, c, a.tool, a.args)
	switch a.status {
	case "succeeded":
		if isErr {
			t.Errorf("%s %v: got refusal %q, want success", a.tool, a.args, text)
		}
	case "denied", "failed":
		if !isErr || !strings.HasPrefix(text, a.status+":") {
			t.Errorf("%s %v: isError=%v text=%q, want a %s: result", a.tool, a.args, isErr, text, a.status)
		}
	}
}

// TestKernelOnPostgres drives the kernel through the bridge with the real
// authz-svc (example policy), the real files provider and PostgreSQL, and
// checks that every attempt left exactly one record with the right outcome.
func TestKernelOnPostgres(t *testing.T) {
	s := startStack(t, launch.Options{DatabaseURL: pgtest.NewDatabase(t, noMigrate)})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := mcpClient(t, ctx, s.Demo.MCPURL, s.Demo.Token)

	read := func(p string) map[string]any { return map[string]any{"path": p} }
	attempts := []attempt{
		{"files.read", read("/public/a.txt"), "succeeded", ""},
		{"files.read", read("/private/a.txt"), "denied", "permission_denied"},
		// Traversal variants resolve to /private (or escape nothing) and are denied.
		{"files.read", read("/public/../private/a.txt"), "denied", "permission_denied"},
		{"files.read", read("/public/./..//private/a.txt"), "denied", "permission_denied"},
		{"files.read", read(`\public\..\private\a.txt`), "denied", "permission_denied"},
		{"files.read", read("/publicity/a.txt"), "denied", "permission_denied"},
		// The symlink under /public pointing into /private passes policy (its
		// path is under /public) and is refused by the provider itself.
		{"files.read", read("/public/link-to-private"), "failed", "handler_error"},
		// Unknown and malformed names: refused and recorded.
		{"files read", read("/public/a.txt"), "denied", "tool_unavailable"},
		{"fílés.read", read("/public/a.txt"), "denied", "tool_unavailable"},
		{strings.Repeat("a", 129), nil, "denied", "tool_unavailable"},
		{"github.delete_repo", map[string]any{"repo": "x"}, "denied", "tool_unavailable"},
		// Outside this turn's pin: files.write exists but engineer can't see it.
		{"files.write", map[string]any{"path": "/public/x.txt", "content": "x"}, "denied", "tool_unavailable"},
		// Schema violations: failed before authorization, handler not run.
		{"files.read", map[string]any{"path": 5}, "failed", "invalid_arguments"},
		{"files.read", map[string]any{}, "failed", "invalid_arguments"},
	}
	for _, a := range attempts {
		a.run(t, ctx, c)
	}

	// authz-svc hung past the kernel's deadline: fail closed (failed, never
	// succeeded or denied) and the handler does not run. (A stopped authz-svc
	// is the verify suite's.)
	s.Authz.Signal(t, syscall.SIGSTOP)
	hung := attempt{"files.read", read("/public/a.txt"), "failed", "authz_unavailable"}
	hung.run(t, ctx, c)
	s.Authz.Signal(t, syscall.SIGCONT)
	attempts = append(attempts, hung)

	var ops []struct{ CallID, Tool, Status, Code string }
	s.ctlJSON(t, &ops, "ops", "list", "--turn", s.Demo.TurnID)
	if len(ops) != len(attempts) {
		t.Fatalf("%d records for %d attempts: %+v", len(ops), len(attempts), ops)
	}
	for i, a := range attempts {
		o := ops[i]
		wantTool := a.tool
		if len(wantTool) > 100 {
			wantTool = o.Tool // capped/escaped form; checked by the kernel's own tests
		}
		if o.Status != a.status || o.Code != a.code || o.Tool != wantTool {
			t.Errorf("record %d = %+v, want tool %q %s/%s", i, o, a.tool, a.status, a.code)
		}
	}
}
