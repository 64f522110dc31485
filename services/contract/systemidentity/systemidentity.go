package systemidentity

import (
	"fmt"
	"slices"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/canonjson"
	"github.com/sharedos/toolshare/services/contract/redact"
)

// Names of McpSupport, as records and reports write them.
const (
	Native    = "native"
	Extension = "extension"
)

// MCPSupportName is "native", "extension", or "" when unspecified.
func MCPSupportName(s sharedosv1.McpSupport) string {
	switch s {
	case sharedosv1.McpSupport_MCP_SUPPORT_NATIVE:
		return Native
	case sharedosv1.McpSupport_MCP_SUPPORT_EXTENSION:
		return Extension
	default:
		return ""
	}
}

// ParseMCPSupport is MCPSupportName's inverse; any other string is
// unspecified.
func ParseMCPSupport(name string) sharedosv1.McpSupport {
	switch name {
	case Native:
		return sharedosv1.McpSupport_MCP_SUPPORT_NATIVE
	case Extension:
		return sharedosv1.McpSupport_MCP_SUPPORT_EXTENSION
	default:
		return sharedosv1.McpSupport_MCP_SUPPORT_UNSPECIFIED
	}
}

// PolicyModeName is "strict", "permissive", or "" when unspecified.
func PolicyModeName(m sharedosv1.PolicyMode) string {
	switch m {
	case sharedosv1.PolicyMode_POLICY_MODE_STRICT:
		return "strict"
	case sharedosv1.PolicyMode_POLICY_MODE_PERMISSIVE:
		return "permissive"
	default:
		return ""
	}
}

// PolicyDigest is "sha256:<lowercase hex>" of the policy's canonical JSON
// (RFC 8785): {"externalDirect":[…],"harnessLocal":[…],"mode":"strict"|
// "permissive"|""}, each list sorted and without repeats — a policy names
// sets, so two declarations of one set have one digest. A nil policy has
// no digest ("").
func PolicyDigest(p *sharedosv1.ToolPolicy) string {
	if p == nil {
		return ""
	}
	b, err := canonjson.Marshal(map[string]any{
		"mode":           PolicyModeName(p.GetMode()),
		"harnessLocal":   set(p.GetHarnessLocal()),
		"externalDirect": set(p.GetExternalDirect()),
	})
	if err != nil {
		// Strings and lists of strings always encode; a name that is not
		// UTF-8 is encoded with replacement characters by encoding/json.
		panic("systemidentity: policy digest: " + err.Error())
	}
	return redact.SHA256(b)
}

func set(names []string) []string {
	out := slices.Clone(names)
	slices.Sort(out)
	out = slices.Compact(out)
	if out == nil {
		out = []string{}
	}
	return out
}

// Policy is a ToolPolicy as files declare it (sharedosctl --policy, column
// manifests): {"mode": "strict"|"permissive", "harnessLocal": […],
// "externalDirect": […]}.
type Policy struct {
	Mode           string   `json:"mode"`
	HarnessLocal   []string `json:"harnessLocal,omitempty"`
	ExternalDirect []string `json:"externalDirect,omitempty"`
}

// Proto is the policy as OpenTurn takes it; a mode other than strict or
// permissive is an error (the bridge checks the rest of the policy).
func (p Policy) Proto() (*sharedosv1.ToolPolicy, error) {
	out := &sharedosv1.ToolPolicy{HarnessLocal: p.HarnessLocal, ExternalDirect: p.ExternalDirect}
	switch p.Mode {
	case PolicyModeName(sharedosv1.PolicyMode_POLICY_MODE_STRICT):
		out.Mode = sharedosv1.PolicyMode_POLICY_MODE_STRICT
	case PolicyModeName(sharedosv1.PolicyMode_POLICY_MODE_PERMISSIVE):
		out.Mode = sharedosv1.PolicyMode_POLICY_MODE_PERMISSIVE
	default:
		return nil, fmt.Errorf("mode must be strict or permissive, not %q", p.Mode)
	}
	return out, nil
}
