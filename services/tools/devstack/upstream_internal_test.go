package devstack

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// make run lets catalog-svc start npx by name, so docs/upstreams.md's
// `--command 'npx -y …'` is accepted against it (the name also allows the
// path it is found at, which the example upstream itself uses).
func TestExampleUpstreamAllowsNpxByName(t *testing.T) {
	dir := t.TempDir()
	npx := filepath.Join(dir, "npx")
	if err := os.WriteFile(npx, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	cfg := Config{}
	path, why := exampleUpstream(&cfg)
	if path != npx || why != "" {
		t.Fatalf("exampleUpstream = %q, %q; want %q", path, why, npx)
	}
	flags := cfg.Flags["catalog-svc"]
	i := slices.Index(flags, "--upstream-commands")
	if i < 0 || i+1 >= len(flags) || flags[i+1] != "npx" {
		t.Errorf("catalog-svc flags %v, want --upstream-commands npx", flags)
	}
}
