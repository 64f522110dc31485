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
	if mayAnnotateHeaders(input) { // the only thing it checks
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

// headerKey is the annotation mcp-go's server checks (and binds headers
// from).
const headerKey = "x-mcp-header"

// mayAnnotateHeaders reports whether a schema may hold an x-mcp-header
// annotation as mcp-go reads it: encoding/json matches the key case-blind
// and after unescaping, so "X-MCP-Header" and "x-mcp-head\u0065r" are the
// annotation too. Only a schema with neither an escape nor the key in any
// case skips the check (most schemas: the check decodes the whole schema).
func mayAnnotateHeaders(input []byte) bool {
	if bytes.IndexByte(input, '\\') >= 0 {
		return true
	}
	for i := 0; i+len(headerKey) <= len(input); i++ {
		if c := input[i]; (c == 'x' || c == 'X') && bytes.EqualFold(input[i:i+len(headerKey)], []byte(headerKey)) {
			return true
		}
	}
	return false
}
