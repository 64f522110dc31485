package house_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sharedos/toolshare/services/systemtest/launch"
)

// owners: each fact that crosses services, how a definition of it looks in
// Go source, and the only files allowed to hold one (relative to the repo
// root). Generated code and npm packages are not searched; tests only for
// the facts marked tests.
var owners = []struct {
	fact    string
	pattern *regexp.Regexp
	owners  []string
	tests   bool
}{
	// One stack composition and one launcher (ADR 0011): only devstack
	// writes the services' command lines, and no test starts a service of
	// the stack by its binary's name: services/systemtest/launch does.
	{"the stack's composition (a service's command line)", regexp.MustCompile(`"--(kernel|policy-dir)"`),
		[]string{"services/tools/devstack/devstack.go"}, true},
	{"a stack service started outside services/systemtest/launch",
		regexp.MustCompile(`Join\([^)]*"(catalog-svc|authz-svc|bridge-svc|files-provider)"`), nil, true},
	{"the liveness health service name", regexp.MustCompile(`"liveness"`),
		[]string{"services/platform/grpcx/health.go"}, false},
	{"the google.rpc.ErrorInfo helper", regexp.MustCompile(`errdetails\.ErrorInfo\{`),
		[]string{"services/platform/grpcx/errors.go"}, false},
	{"the JSON nesting, argument size and number length and exponent limits", regexp.MustCompile(`(?i)max\w*(depth|argumentsbytes|jsonbytes|numberchars|numberexponent)\s*=\s*\d`),
		[]string{"services/contract/jsonlimits/jsonlimits.go",
			"services/contract/canonjson/canonjson.go",        // registrations' canonical JSON (catalogHash spec), not requests
			"catalog-svc/internal/catalog/schema.go"}, false}, // a registration's inputSchema, not requests
	{"the AccessContext limits (bridge, kernel, catalogue and authz-svc refuse by one check)",
		regexp.MustCompile(`(?i)max\w*(roles|context\w*bytes)\s*=\s*\d`),
		[]string{"services/contract/accesscontext/accesscontext.go"}, false},
	{"authz-svc's error domain and evaluation-error reason (the kernel reads them)", regexp.MustCompile(`"(authz\.sharedos\.io|AUTHZ_EVAL_ERROR)"`),
		[]string{"services/contract/outcome/outcome.go"}, false},
	{"the sha256: digest form", regexp.MustCompile(`"sha256:"`),
		[]string{"services/contract/redact/redact.go", "authz-svc/internal/pdp/load.go"}, false}, // arguments; policy revision
	{"the action set", regexp.MustCompile(`"(list|read|write|search|call|execute)"\s*$|=\s*"execute"`),
		[]string{"services/contract/requirement/actions.go"}, false},
	{"the folded tool-name key", regexp.MustCompile(`ToLower\((toolname\.)?CollisionKey`),
		[]string{"services/contract/toolname/toolname.go"}, false},
	// No owner: log keys are telemetry.Log* constants, never a span
	// attribute name or a literal.
	{"a log key outside telemetry.Log*", regexp.MustCompile(`slog\.\w+\((telemetry\.Attr|"(turn_id|call_id|attempt_id|tool|catalog_hash|harness)")`), nil, false},
}

func TestOneOwnerPerFact(t *testing.T) {
	root := launch.RepoRoot(t)
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "bin", "testdata":
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, ".pb.go") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 100 {
		t.Fatalf("only %d Go files under %s: wrong root?", len(files), root)
	}
	for _, o := range owners {
		found := 0
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") && !o.tests {
				continue
			}
			rel, _ := filepath.Rel(root, f)
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for i, line := range strings.Split(string(b), "\n") {
				if strings.HasPrefix(strings.TrimSpace(line), "//") || !o.pattern.MatchString(line) {
					continue
				}
				if contains(o.owners, rel) {
					found++
					continue
				}
				owner := "none: it must not appear"
				if len(o.owners) > 0 {
					owner = o.owners[0]
				}
				t.Errorf("%s:%d defines %s again (its owner: %s): %s", rel, i+1, o.fact, owner, strings.TrimSpace(line))
			}
		}
		if found == 0 && len(o.owners) > 0 {
			t.Errorf("%s: no definition found in %v; update this test with the move", o.fact, o.owners)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
