package e2e

import (
	"github.com/sharedos/toolshare/services/systemtest/launch"

	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// referenced are the binaries whose flags docs/configuration.md documents,
// each printing its own table with `<binary> config-reference`.
var referenced = []struct{ binary, title, command string }{
	{"catalog-svc", "catalog-svc", "catalog-svc serve"},
	{"authz-svc", "authz-svc", "authz-svc serve"},
	{"bridge-svc", "bridge-svc", "bridge-svc serve"},
	{"files-provider", "files provider", "files-provider"},
}

const configHeader = `# Configuration reference

Generated from the code by ` + "`make docs`" + ` (each binary's ` + "`config-reference`" + ` command); a test fails
when this file and the flags disagree. Every flag can also be set by the environment variable
next to it; a flag on the command line wins. Secrets (database URLs, tokens) are printed redacted
at startup.

OpenTelemetry is configured by the standard ` + "`OTEL_*`" + ` variables (see docs/observability.md).
`

// TestConfigurationReferenceIsCurrent regenerates docs/configuration.md from
// the built binaries and compares; UPDATE_DOCS=1 rewrites it instead.
func TestConfigurationReferenceIsCurrent(t *testing.T) {
	root := launch.RepoRoot(t)
	var doc bytes.Buffer
	doc.WriteString(configHeader)
	for _, r := range referenced {
		out, err := exec.Command(filepath.Join(root, "bin", r.binary), "config-reference").Output()
		if err != nil {
			t.Fatalf("%s config-reference: %v (run `make build`)", r.binary, err)
		}
		doc.WriteString("\n## " + r.title + "\n\n`" + r.command + "`\n\n")
		doc.Write(out)
	}
	path := filepath.Join(root, "docs", "configuration.md")
	if os.Getenv("UPDATE_DOCS") == "1" {
		if err := os.WriteFile(path, doc.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	have, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v: run `make docs`", err)
	}
	if !bytes.Equal(have, doc.Bytes()) {
		t.Fatalf("docs/configuration.md is stale: run `make docs` and commit it")
	}
}
