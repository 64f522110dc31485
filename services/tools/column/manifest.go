package column

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	"google.golang.org/protobuf/encoding/protojson"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/outcome"
	"github.com/sharedos/toolshare/services/contract/systemidentity"
	"github.com/sharedos/toolshare/services/tools/regfile"
)

// Manifest is one column's committed declaration (YAML or JSON).
type Manifest struct {
	// Context is the AccessContext the turn opens under.
	Context *sharedosv1.AccessContext
	// Policy is the run's ToolPolicy.
	Policy *sharedosv1.ToolPolicy
	// Prompt is what the harness (mcp) or model (live) is asked.
	Prompt string
	// Script is the scripted column's tool calls, in order.
	Script []ScriptCall
	// Attempts are the declared attempts the column is graded on.
	Attempts []Attempt
}

// ScriptCall is one tool call the scripted column makes in the vendor's
// shape.
type ScriptCall struct {
	// ID is the call's id as the vendor's model would mint it.
	ID string `json:"id"`
	// Tool is the canonical tool name (the driver renders the vendor's).
	Tool string `json:"tool"`
	// Arguments are the call's arguments, byte for byte: a string holding
	// the JSON object text, or an object (then as the YAML decoder wrote it).
	Arguments json.RawMessage `json:"arguments"`
}

// Attempt is a declared attempt: the call the column is expected to make
// and the outcome SharedOS is expected to give it.
type Attempt struct {
	Tool string `json:"tool"`
	// Resource is what the call acts on, as one of its argument values
	// (a path for files.read).
	Resource string `json:"resource"`
	// Expected is an outcome status: succeeded, denied or failed.
	Expected string `json:"expected"`
	// Call names the script call that makes the attempt (scripted only).
	Call string `json:"call,omitempty"`
}

type manifestFile struct {
	Context  json.RawMessage       `json:"context"`
	Policy   systemidentity.Policy `json:"toolPolicy"`
	Prompt   string                `json:"prompt"`
	Script   []ScriptCall          `json:"script"`
	Attempts []Attempt             `json:"attempts"`
}

// ReadManifest reads and checks a manifest file. An error names the field
// and the rule.
func ReadManifest(path string) (*Manifest, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	m, err := ParseManifest(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// ParseManifest parses and checks a manifest (YAML or JSON).
func ParseManifest(b []byte) (*Manifest, error) {
	var f manifestFile
	if err := regfile.DecodeStrict(b, &f); err != nil {
		return nil, err
	}
	m := &Manifest{Context: &sharedosv1.AccessContext{}, Prompt: f.Prompt, Script: f.Script, Attempts: f.Attempts}
	if len(f.Context) == 0 {
		return nil, fmt.Errorf("context: required (principal, roles, tenant, attributes)")
	}
	if err := protojson.Unmarshal(f.Context, m.Context); err != nil {
		return nil, fmt.Errorf("context: %w", err)
	}
	if m.Context.GetPrincipal() == "" {
		return nil, fmt.Errorf("context.principal: required")
	}
	p, err := f.Policy.Proto()
	if err != nil {
		return nil, fmt.Errorf("toolPolicy: %w", err)
	}
	m.Policy = p
	ids := map[string]bool{}
	for i := range m.Script {
		c := &m.Script[i]
		switch {
		case c.ID == "":
			return nil, fmt.Errorf("script[%d].id: required", i)
		case ids[c.ID]:
			return nil, fmt.Errorf("script[%d].id: %q is used twice", i, c.ID)
		case c.Tool == "":
			return nil, fmt.Errorf("script[%d].tool: required", i)
		}
		ids[c.ID] = true
		args, err := scriptArguments(c.Arguments)
		if err != nil {
			return nil, fmt.Errorf("script[%d].arguments: %w", i, err)
		}
		c.Arguments = args
	}
	if len(m.Attempts) == 0 {
		return nil, fmt.Errorf("attempts: at least one declared attempt is required")
	}
	for i, a := range m.Attempts {
		switch {
		case a.Tool == "":
			return nil, fmt.Errorf("attempts[%d].tool: required", i)
		case a.Resource == "":
			return nil, fmt.Errorf("attempts[%d].resource: required", i)
		case !expectable(a.Expected):
			return nil, fmt.Errorf("attempts[%d].expected: must be succeeded, denied or failed, not %q", i, a.Expected)
		case a.Call != "" && !ids[a.Call]:
			return nil, fmt.Errorf("attempts[%d].call: %q is not a script call's id", i, a.Call)
		}
	}
	return m, nil
}

func expectable(s string) bool {
	for _, st := range []sharedosv1.OperationStatus{sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED,
		sharedosv1.OperationStatus_OPERATION_STATUS_DENIED, sharedosv1.OperationStatus_OPERATION_STATUS_FAILED} {
		if s == outcome.StatusName(st) {
			return true
		}
	}
	return false
}

// scriptArguments is the JSON object text of a script call's arguments:
// a string's content, or the object itself.
func scriptArguments(raw json.RawMessage) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return json.RawMessage(`{}`), nil
	}
	if raw[0] == '"' {
		var text string
		if err := json.Unmarshal(raw, &text); err != nil {
			return nil, err
		}
		raw = json.RawMessage(text)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return nil, fmt.Errorf("must be a JSON object (or a string holding one)")
	}
	return raw, nil
}
