package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sharedos/toolshare/services/systemtest/launch"
	"github.com/sharedos/toolshare/services/tools/column"
)

// TestScriptedColumns runs the scripted column of every vendor shape with
// deploy/columns' example manifest and host configuration against the make
// run stack, as a user would (`sharedosctl column run`), then compares the
// reports (issue 21): the public read exercised and succeeded, the private
// read exercised and denied, each matched to its own record, one record
// per attempt, the run's SystemIdentity on the report and on every record.
func TestScriptedColumns(t *testing.T) {
	s := startStack(t, launch.Options{})
	root := launch.RepoRoot(t)
	manifest := filepath.Join(root, "deploy", "columns", "demo-manifest.yaml")
	host := filepath.Join(root, "deploy", "columns", "host.yaml")
	dir := t.TempDir()
	var paths []string
	for _, vendor := range column.Harnesses[column.KindScripted] {
		out := filepath.Join(dir, vendor+".json")
		stdout, stderr, code := s.Ctl(t, "column", "run", "--kind", "scripted", "--harness", vendor,
			"--manifest", manifest, "--host-config", host, "--out", out)
		if code != 0 || strings.TrimSpace(stdout) != out {
			t.Fatalf("%s: column run exit %d, stdout %q (want the report path), stderr %s", vendor, code, stdout, stderr)
		}
		paths = append(paths, out)
		rep, err := column.ReadReport(out)
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Attempts) != 2 {
			t.Fatalf("%s: %d graded attempts, want 2: %+v", vendor, len(rep.Attempts), rep.Attempts)
		}
		for i, want := range []struct{ resource, status, code string }{
			{"/public/a.txt", "succeeded", ""}, {"/private/a.txt", "denied", "permission_denied"},
		} {
			a := rep.Attempts[i]
			if a.Resource != want.resource || a.Grade != column.Exercised || a.Observed == nil ||
				a.Observed.Status != want.status || a.Observed.Code != want.code {
				t.Errorf("%s: attempt %d = %+v, want %s exercised %s/%s", vendor, i, a, want.resource, want.status, want.code)
			}
		}
		if len(rep.Operations) != 2 || rep.Counts != (column.Counts{Succeeded: 1, Denied: 1}) ||
			rep.Attempts[0].CallID != rep.Operations[0].CallID || rep.Attempts[1].CallID != rep.Operations[1].CallID {
			t.Errorf("%s: operations %+v, counts %+v, attempts %+v", vendor, rep.Operations, rep.Counts, rep.Attempts)
		}
		id := rep.SystemIdentity
		if id.CatalogHash != s.Demo.CatalogHash || id.Harness != vendor || id.MCPSupport != "native" ||
			id.DeclaredModel != "scripted" || !strings.HasPrefix(id.ToolPolicy, "sha256:") {
			t.Errorf("%s: systemIdentity = %+v", vendor, id)
		}
		for _, o := range rep.Operations {
			if o.SystemIdentity != id {
				t.Errorf("%s: record %s carries %+v, the run is %+v", vendor, o.CallID, o.SystemIdentity, id)
			}
		}
		// The column's turn is closed once the run is over.
		if _, code := s.ctl(t, "turn", "get", rep.TurnID); code != 0 {
			t.Errorf("%s: turn get %s exit %d", vendor, rep.TurnID, code)
		}
		var turn struct{ State string }
		s.ctlJSON(t, &turn, "turn", "get", rep.TurnID)
		if turn.State != "TURN_STATE_CLOSED" {
			t.Errorf("%s: the column's turn is %s after the run, want closed", vendor, turn.State)
		}
	}

	table, stderr, code := s.Ctl(t, append([]string{"column", "compare"}, paths...)...)
	if code != 0 || strings.Count(table, "exercised: succeeded") != 3 || strings.Count(table, "exercised: denied/permission_denied") != 3 {
		t.Fatalf("column compare exit %d:\n%s%s", code, table, stderr)
	}

	// A column given another tool set is not compared: the refusal names
	// the tool that differs.
	b, err := os.ReadFile(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	var other map[string]any
	if err := json.Unmarshal(b, &other); err != nil {
		t.Fatal(err)
	}
	other["systemIdentity"].(map[string]any)["catalogHash"] = strings.Repeat("0", 64)
	other["tools"].(map[string]any)["files.write"] = strings.Repeat("1", 64)
	b, _ = json.Marshal(other)
	drifted := filepath.Join(dir, "drifted.json")
	if err := os.WriteFile(drifted, b, 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr, code = s.Ctl(t, "column", "compare", paths[1], drifted)
	if code == 0 || !strings.Contains(stderr, "not given the same tool set") || !strings.Contains(stderr, "files.write only in the second") {
		t.Errorf("compare across tool sets: exit %d, stderr %s", code, stderr)
	}
}

// TestMCPColumnDeadline: an mcp column's harness that does not finish
// before --timeout meets a closed door — its turn is closed, then its
// process group is stopped — and the run still reports, with every
// declared attempt not_exercised (nothing is made up for a harness that
// made no call). The stand-in CLI records its pid and waits.
func TestMCPColumnDeadline(t *testing.T) {
	s := startStack(t, launch.Options{})
	root := launch.RepoRoot(t)
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "cli.pid")
	cli := filepath.Join(dir, "cli.sh")
	if err := os.WriteFile(cli, []byte("#!/bin/sh\necho $$ > "+pidFile+"\nexec sleep 600\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	rep := runMCPColumn(t, s, root, "claude-code:\n    executable: "+cli+"\n    declaredModel: none\n", "8s")
	if len(rep.Operations) != 0 || len(rep.Attempts) != 2 || rep.Attempts[0].Grade != column.NotExercised ||
		rep.Attempts[1].Grade != column.NotExercised || len(rep.Notes) != 1 || !strings.Contains(rep.Notes[0], "did not finish before the deadline") {
		t.Fatalf("report = %+v", rep)
	}
	var turn struct{ State string }
	s.ctlJSON(t, &turn, "turn", "get", rep.TurnID)
	if turn.State != "TURN_STATE_CLOSED" {
		t.Errorf("the column's turn is %s after its harness timed out, want closed", turn.State)
	}
	pid, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatalf("the stand-in CLI never ran: %v", err)
	}
	// column run returned after waiting for the stopped process group.
	if _, err := os.Stat("/proc/" + strings.TrimSpace(string(pid))); !os.IsNotExist(err) {
		t.Errorf("the harness (pid %s) is still running after column run returned (%v)", strings.TrimSpace(string(pid)), err)
	}
}

// TestMCPColumnCalls runs an mcp column whose harness is a stand-in CLI
// (testdata/standin-cli.mjs on the pinned Node): it reads the MCP server
// SharedOS wrote into its own configuration and makes the demo manifest's
// two calls. Through the column's pass-through, each call is matched to
// its own record on tool and resource, and the turn is closed once the CLI
// exits.
func TestMCPColumnCalls(t *testing.T) {
	s := startStack(t, launch.Options{})
	root := launch.RepoRoot(t)
	node := filepath.Join(npmDir(t, root), "node_modules", ".bin", "node")
	standin, err := filepath.Abs(filepath.Join("testdata", "standin-cli.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	rep := runMCPColumn(t, s, root, "claude-code:\n    executable: "+node+"\n    args: ["+standin+"]\n    version: standin\n    declaredModel: none\n", "2m")
	if len(rep.Notes) != 0 || len(rep.Attempts) != 2 || len(rep.Operations) != 2 {
		t.Fatalf("report = %+v", rep)
	}
	for i, want := range []struct{ status, code string }{{"succeeded", ""}, {"denied", "permission_denied"}} {
		a := rep.Attempts[i]
		if a.Grade != column.Exercised || a.Observed == nil || a.Observed.Status != want.status || a.Observed.Code != want.code ||
			a.CallID != rep.Operations[i].CallID {
			t.Errorf("attempt %d = %+v, want exercised %s/%s on record %s", i, a, want.status, want.code, rep.Operations[i].CallID)
		}
	}
	if id := rep.SystemIdentity; id.Harness != "claude-code" || id.HarnessVersion != "standin" || id.MCPSupport != "native" {
		t.Errorf("systemIdentity = %+v", id)
	}
	var turn struct{ State string }
	s.ctlJSON(t, &turn, "turn", "get", rep.TurnID)
	if turn.State != "TURN_STATE_CLOSED" {
		t.Errorf("the column's turn is %s after its harness exited, want closed", turn.State)
	}
}

// runMCPColumn runs the demo manifest's mcp column of the claude-code
// harness a host file section (harness: …) configures, as a user would, and
// returns its report.
func runMCPColumn(t *testing.T, s *stack, root, harness, timeout string) *column.Report {
	t.Helper()
	dir := t.TempDir()
	host := filepath.Join(dir, "host.yaml")
	if err := os.WriteFile(host, []byte("mcp:\n  "+harness), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "report.json")
	stdout, stderr, code := s.Ctl(t, "column", "run", "--kind", "mcp", "--harness", "claude-code", "--timeout", timeout,
		"--manifest", filepath.Join(root, "deploy", "columns", "demo-manifest.yaml"), "--host-config", host, "--out", out)
	if code != 0 || strings.TrimSpace(stdout) != out {
		t.Fatalf("column run exit %d, stdout %q, stderr %s", code, stdout, stderr)
	}
	rep, err := column.ReadReport(out)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}
