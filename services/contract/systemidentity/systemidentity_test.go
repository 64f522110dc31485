package systemidentity_test

import (
	"testing"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/systemidentity"
)

func TestPolicyDigest(t *testing.T) {
	strict := &sharedosv1.ToolPolicy{Mode: sharedosv1.PolicyMode_POLICY_MODE_STRICT, HarnessLocal: []string{"shell", "patch"}}
	// The canonical form, hashed by hand: sha256 of
	// {"externalDirect":[],"harnessLocal":["patch","shell"],"mode":"strict"}.
	const want = "sha256:8c4bb91e4ad01155bfa111e39981475754fc46bb8d87539ab63a20bc84594ce0"
	if got := systemidentity.PolicyDigest(strict); got != want {
		t.Errorf("PolicyDigest(strict) = %s, want %s", got, want)
	}
	same := &sharedosv1.ToolPolicy{Mode: sharedosv1.PolicyMode_POLICY_MODE_STRICT, HarnessLocal: []string{"patch", "shell", "patch"}}
	if got := systemidentity.PolicyDigest(same); got != want {
		t.Errorf("the same set in another order: %s, want %s", got, want)
	}
	for name, p := range map[string]*sharedosv1.ToolPolicy{
		"permissive": {Mode: sharedosv1.PolicyMode_POLICY_MODE_PERMISSIVE, HarnessLocal: []string{"patch", "shell"}},
		"other tool": {Mode: sharedosv1.PolicyMode_POLICY_MODE_STRICT, HarnessLocal: []string{"patch"}},
		"external":   {Mode: sharedosv1.PolicyMode_POLICY_MODE_STRICT, HarnessLocal: []string{"patch", "shell"}, ExternalDirect: []string{"jira"}},
	} {
		if got := systemidentity.PolicyDigest(p); got == want {
			t.Errorf("%s: same digest as the strict policy", name)
		}
	}
	if got := systemidentity.PolicyDigest(nil); got != "" {
		t.Errorf("PolicyDigest(nil) = %q, want empty", got)
	}
}

func TestMCPSupportNames(t *testing.T) {
	for _, s := range []sharedosv1.McpSupport{sharedosv1.McpSupport_MCP_SUPPORT_NATIVE, sharedosv1.McpSupport_MCP_SUPPORT_EXTENSION} {
		if got := systemidentity.ParseMCPSupport(systemidentity.MCPSupportName(s)); got != s {
			t.Errorf("round trip of %v = %v", s, got)
		}
	}
	if systemidentity.MCPSupportName(sharedosv1.McpSupport_MCP_SUPPORT_UNSPECIFIED) != "" ||
		systemidentity.ParseMCPSupport("builtin") != sharedosv1.McpSupport_MCP_SUPPORT_UNSPECIFIED {
		t.Error("unspecified support must have no name, and an unknown name no support")
	}
}
