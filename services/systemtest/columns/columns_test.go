//go:build column

package columns

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sharedos/toolshare/services/systemtest/launch"
	"github.com/sharedos/toolshare/services/tools/column"
)

func ctlJSON(t *testing.T, s *launch.Stack, v any, args ...string) {
	t.Helper()
	out, stderr, code := s.Ctl(t, args...)
	if code != 0 {
		t.Fatalf("sharedosctl %s: exit %d: %s", strings.Join(args, " "), code, stderr)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("sharedosctl %s: output is not JSON: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// TestColumns runs every column against the make run stack with
// deploy/columns' manifest and host configuration — the four installed
// CLIs (mcp), each vendor shape (scripted) and the driver's turn loop with
// each harness (live) — the host's model endpoint moved to the fake model
// this test started. Each report must show the public read exercised and
// succeeded and the private read exercised and denied, matched to its own
// record; the reports go to bin/columns/ and are compared side by side.
func TestColumns(t *testing.T) {
	root := launch.RepoRoot(t)
	fake := filepath.Join(filepath.Dir(root), "shared", "tools", "harness-column", "fake-model.mjs")
	if _, err := os.Stat(fake); err != nil {
		t.Fatalf("the scripted fake model: %v (it is used from ../shared/tools/harness-column beside the repository)", err)
	}
	base := startFakeModel(t, nodeBinary(t, root), fake)
	s := launch.Start(t, launch.Options{})

	// The reports and the host file (the fake model's port in it) live in
	// bin/columns: two levels down, as deploy/columns, so the host file's
	// relative executable paths hold.
	out := filepath.Join(root, "bin", "columns")
	if err := os.RemoveAll(out); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	hostYAML, err := os.ReadFile(filepath.Join(root, "deploy", "columns", "host.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	host := filepath.Join(out, "host.yaml")
	if err := os.WriteFile(host, []byte(strings.ReplaceAll(string(hostYAML), "http://127.0.0.1:18600", base)), 0o600); err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(root, "deploy", "columns", "demo-manifest.yaml")

	var reports []string
	for _, kind := range []string{column.KindScripted, column.KindLive, column.KindMCP} {
		for _, harness := range column.Harnesses[kind] {
			name := kind + "-" + harness
			t.Run(name, func(t *testing.T) {
				report := filepath.Join(out, name+".json")
				stdout, stderr, code := s.Ctl(t, "column", "run", "--kind", kind, "--harness", harness,
					"--manifest", manifest, "--host-config", host, "--out", report, "--timeout", "4m")
				if code != 0 || strings.TrimSpace(stdout) != report {
					t.Fatalf("column run exit %d, stdout %q, stderr %s", code, stdout, stderr)
				}
				rep, err := column.ReadReport(report)
				if err != nil {
					t.Fatal(err)
				}
				reports = append(reports, report)
				for _, n := range rep.Notes {
					t.Logf("note: %s", n)
				}
				if len(rep.Attempts) != 2 {
					t.Fatalf("%d graded attempts, want the manifest's 2: %+v", len(rep.Attempts), rep.Attempts)
				}
				for i, want := range []struct{ resource, status, code string }{
					{"/public/a.txt", "succeeded", ""}, {"/private/a.txt", "denied", "permission_denied"},
				} {
					a := rep.Attempts[i]
					if a.Resource != want.resource || a.Grade != column.Exercised || a.Observed == nil ||
						a.Observed.Status != want.status || a.Observed.Code != want.code {
						t.Errorf("attempt %d = %+v, want %s exercised %s/%s (operations %+v)", i, a, want.resource,
							want.status, want.code, rep.Operations)
					}
				}
				id := rep.SystemIdentity
				if id.CatalogHash != s.Demo.CatalogHash || id.Harness != harness || id.ToolPolicy == "" {
					t.Errorf("systemIdentity = %+v", id)
				}
				if kind == column.KindMCP && harness == "pi" && (id.MCPSupport != "extension" || id.Extension == "") {
					t.Errorf("pi's mcp column: systemIdentity = %+v, want its extension", id)
				}
				for _, o := range rep.Operations {
					if o.SystemIdentity != id {
						t.Errorf("record %s carries %+v, the run is %+v", o.CallID, o.SystemIdentity, id)
					}
				}
			})
		}
	}
	stdout, stderr, code := s.Ctl(t, append([]string{"column", "compare"}, reports...)...)
	if code != 0 {
		t.Fatalf("column compare: exit %d: %s", code, stderr)
	}
	if err := os.WriteFile(filepath.Join(out, "compare.txt"), []byte(stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("column compare (bin/columns/compare.txt):\n%s", stdout)
}
