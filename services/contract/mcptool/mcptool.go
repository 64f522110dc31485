package mcptool

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
)

// Error says which part of a tool MCP cannot carry, and why.
type Error struct {
	// Field is "annotations" or "inputSchema".
	Field  string
	Detail string
}

func (e *Error) Error() string { return e.Field + ": " + e.Detail }

// Build returns pt as the MCP tool named name (its published name, or the
// portable spelling): description and schemas verbatim, annotations decoded
// into MCP's types (readOnlyHint must be a boolean, title a string, …), and
// the inputSchema's x-mcp-header annotations checked as mcp-go's server
// checks them (it panics on a bad one).
func Build(pt *sharedosv1.PublishedTool, name string) (mcp.Tool, error) {
	input := json.RawMessage(pt.GetInputSchemaJson())
	if len(input) == 0 {
		input = json.RawMessage(`{"type":"object"}`)
	}
	tool := mcp.NewToolWithRawSchema(name, pt.GetDescription(), input)
	if out := pt.GetOutputSchemaJson(); len(out) > 0 {
		tool.RawOutputSchema = json.RawMessage(out)
	}
	if a := pt.GetAnnotationsJson(); len(a) > 0 {
		if err := json.Unmarshal(a, &tool.Annotations); err != nil {
			return tool, &Error{Field: "annotations", Detail: fmt.Sprintf("not MCP tool annotations: %v", err)}
		}
	}
	if bytes.Contains(input, []byte("x-mcp-header")) { // the only thing it checks
		if err := mcp.ValidateParamHeaderAnnotations(&tool); err != nil {
			return tool, &Error{Field: "inputSchema", Detail: err.Error()}
		}
	}
	return tool, nil
}

// Check reports whether the bridge can serve pt (Build's checks).
func Check(pt *sharedosv1.PublishedTool) error {
	_, err := Build(pt, pt.GetName())
	return err
}
