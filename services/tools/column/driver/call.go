package driver

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Call is one vendor tool call translated into an MCP tools/call.
type Call struct {
	Vendor Vendor
	// ID is the vendor's call id: a tool_use block's "id", a function_call
	// item's "call_id", a toolCall block's "id".
	ID string
	// VendorName is the tool name exactly as the model wrote it.
	VendorName string
	// Tool is the tools/call name: the canonical name VendorName was
	// rendered from, or VendorName itself when the catalogue did not render
	// it. An unknown name is still sent, under that exact name: the kernel
	// refuses it and records the attempt (ADR 0004); the driver drops
	// nothing.
	Tool string
	// Arguments are params.arguments: the bytes of the JSON object the model
	// wrote, never re-encoded ({} when it wrote none or null). For
	// openai-responses they are the content of the "arguments" string.
	Arguments json.RawMessage
}

// shape is where a vendor's tool-call item keeps its parts.
type shape struct {
	typ, id, args string
	// argsText: the arguments are JSON text inside a JSON string.
	argsText bool
}

var shapes = map[Vendor]shape{
	Anthropic:       {typ: "tool_use", id: "id", args: "input"},
	OpenAIResponses: {typ: "function_call", id: "call_id", args: "arguments", argsText: true},
	Pi:              {typ: "toolCall", id: "id", args: "arguments"},
}

// ParseCall translates one tool-call item of the catalogue's vendor — an
// Anthropic tool_use content block, a Responses function_call output item,
// a pi toolCall content block — into the MCP call to make. Fields other
// than the type, id, name and arguments (a function_call's "id" and
// "status", a toolCall's "thoughtSignature") are ignored.
//
// An item that is not of the vendor's shape is a *ShapeError (nothing can
// be answered). Arguments that are not a JSON object are an
// *ArgumentsError (errors.Is ErrInvalidArguments) returned with the Call
// filled in but for Arguments: the call must not be sent, and
// RenderInvalidArguments is the answer to give the model.
func (c *Catalogue) ParseCall(item []byte) (Call, error) {
	sh := shapes[c.vendor]
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(item, &fields); err != nil || fields == nil {
		detail := "null"
		if err != nil {
			detail = err.Error()
		}
		return Call{}, &ShapeError{Vendor: c.vendor, Detail: "not a JSON object: " + detail}
	}
	typ, err := c.stringField(fields, "type")
	if err != nil {
		return Call{}, err
	}
	if typ != sh.typ {
		return Call{}, &ShapeError{Vendor: c.vendor, Field: "type", Detail: fmt.Sprintf("%q, want %q", typ, sh.typ)}
	}
	call := Call{Vendor: c.vendor}
	if call.ID, err = c.stringField(fields, sh.id); err != nil {
		return Call{}, err
	}
	if call.ID == "" {
		return Call{}, &ShapeError{Vendor: c.vendor, Field: sh.id, Detail: "empty: a result could not be matched to the call"}
	}
	if call.VendorName, err = c.stringField(fields, "name"); err != nil {
		return Call{}, err
	}
	call.Tool = call.VendorName
	if tool, ok := c.toCanonical[call.VendorName]; ok {
		call.Tool = tool
	}

	raw := fields[sh.args]
	if sh.argsText && len(raw) > 0 && raw[0] == '"' {
		var text string
		if err := json.Unmarshal(raw, &text); err != nil {
			return call, &ArgumentsError{Vendor: c.vendor, CallID: call.ID, Field: sh.args, Detail: err.Error()}
		}
		raw = json.RawMessage(text)
	} else if sh.argsText && len(raw) > 0 && !bytes.Equal(raw, []byte("null")) {
		return call, &ArgumentsError{Vendor: c.vendor, CallID: call.ID, Field: sh.args,
			Detail: "a JSON " + kind(raw) + ", want a string holding a JSON object"}
	}
	args, detail := objectArguments(raw)
	if detail != "" {
		return call, &ArgumentsError{Vendor: c.vendor, CallID: call.ID, Field: sh.args, Detail: detail}
	}
	call.Arguments = args
	return call, nil
}

func (c *Catalogue) stringField(fields map[string]json.RawMessage, name string) (string, error) {
	raw, ok := fields[name]
	if !ok {
		return "", &ShapeError{Vendor: c.vendor, Field: name, Detail: "missing"}
	}
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", &ShapeError{Vendor: c.vendor, Field: name, Detail: "a JSON " + kind(raw) + ", want a string"}
	}
	return s, nil
}

// objectArguments checks that raw is one JSON object and returns its bytes
// without surrounding whitespace; no arguments (empty or null) are {}.
// detail says what is wrong otherwise.
func objectArguments(raw []byte) (json.RawMessage, string) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return json.RawMessage(`{}`), ""
	}
	var v json.RawMessage
	if err := json.Unmarshal(t, &v); err != nil {
		return nil, "not JSON: " + err.Error()
	}
	if t[0] != '{' {
		return nil, "a JSON " + kind(t) + ", want an object"
	}
	return json.RawMessage(t), ""
}

// kind names the JSON value raw begins.
func kind(raw []byte) string {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return "nothing"
	}
	switch t[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	default:
		return "number"
	}
}

// CallItem writes a tool call as the vendor's model would — an Anthropic
// tool_use block, a Responses function_call item (the arguments as JSON
// text), a pi toolCall block — under the vendor's name for tool (a name
// the catalogue did not render, as given) and with args byte for byte:
// what a scripted column's model says. ParseCall reads it back exactly.
func (c *Catalogue) CallItem(id, tool string, args json.RawMessage) json.RawMessage {
	name, ok := c.VendorName(tool)
	if !ok {
		name = tool
	}
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage(`{}`)
	}
	sh := shapes[c.vendor]
	o := &object{}
	o.str("type", sh.typ).str(sh.id, id).str("name", name)
	if sh.argsText {
		o.str(sh.args, string(args))
	} else {
		o.raw(sh.args, args)
	}
	return o.bytes()
}
