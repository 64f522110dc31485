package driver

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Tool is one tool of a turn's MCP catalogue, as tools/list lists it: the
// parts a vendor tool definition carries. InputSchema keeps the bytes the
// server sent. outputSchema, annotations, title and _meta have no place in
// any vendor's definition and are not kept.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
}

// ToolsPage is one tools/list result.
type ToolsPage struct {
	Tools      []Tool `json:"tools"`
	NextCursor string `json:"nextCursor,omitempty"`
}

// ParseToolsPage decodes a tools/list result ({"tools": [...], "nextCursor"})
// keeping each inputSchema's bytes.
func ParseToolsPage(result []byte) (ToolsPage, error) {
	var p ToolsPage
	if err := json.Unmarshal(result, &p); err != nil {
		return ToolsPage{}, fmt.Errorf("tools/list result: %w", err)
	}
	if p.Tools == nil {
		return ToolsPage{}, fmt.Errorf("tools/list result: field \"tools\": missing")
	}
	return p, nil
}

// defaultSchema is the inputSchema of a tool that lists none (the bridge's
// own default, contract/mcptool.Build).
var defaultSchema = json.RawMessage(`{"type":"object"}`)

// Catalogue is a turn's MCP catalogue rendered for one vendor: the tool
// definitions the model is given, and the bijection between canonical tool
// names and the names on the vendor's wire. It is immutable and safe for
// concurrent use.
type Catalogue struct {
	vendor      Vendor
	defs        []json.RawMessage
	toVendor    map[string]string // canonical → vendor name
	toCanonical map[string]string // vendor name → canonical
}

// NewCatalogue renders tools, in their order, as vendor v's tool
// definitions. A canonical name that fits the vendor rule
// (^[a-zA-Z0-9_-]{1,64}$) is used as it is; one that does not gets its
// portable spelling ('.' → '_', the bridge's rule). The mapping must be a
// bijection: a name longer than 64 characters, an empty name, a tool listed
// twice, or two tools with one vendor name is a *NameError naming the
// tools, and nothing is rendered.
func NewCatalogue(v Vendor, tools []Tool) (*Catalogue, error) {
	if err := v.check(); err != nil {
		return nil, err
	}
	c := &Catalogue{
		vendor:      v,
		defs:        make([]json.RawMessage, 0, len(tools)),
		toVendor:    make(map[string]string, len(tools)),
		toCanonical: make(map[string]string, len(tools)),
	}
	for _, t := range tools {
		name := t.Name
		if !fitsVendor(name) {
			name = portableName(t.Name)
		}
		switch {
		case t.Name == "":
			return nil, &NameError{Vendor: v, Tool: t.Name, VendorName: name, Detail: "empty tool name"}
		case !fitsVendor(name):
			return nil, &NameError{Vendor: v, Tool: t.Name, VendorName: name,
				Detail: fmt.Sprintf("%d characters, more than the %d of ^[a-zA-Z0-9_-]{1,%d}$", len(name), MaxNameLen, MaxNameLen)}
		}
		if _, dup := c.toVendor[t.Name]; dup {
			return nil, &NameError{Vendor: v, Tool: t.Name, VendorName: name, Detail: "the tool is listed twice"}
		}
		if other, taken := c.toCanonical[name]; taken {
			return nil, &NameError{Vendor: v, Tool: t.Name, Other: other, VendorName: name,
				Detail: "a vendor name must map back to one tool"}
		}
		c.toVendor[t.Name], c.toCanonical[name] = name, t.Name
		c.defs = append(c.defs, definition(v, name, t))
	}
	return c, nil
}

// definition is one tool in vendor v's definition shape. Description and
// schema are carried verbatim (the schema without surrounding whitespace);
// an empty description is left out where the vendor makes it optional.
func definition(v Vendor, name string, t Tool) json.RawMessage {
	schema := bytes.TrimSpace(t.InputSchema)
	if len(schema) == 0 || bytes.Equal(schema, []byte("null")) {
		schema = defaultSchema
	}
	var o object
	switch v {
	case Anthropic:
		o.str("name", name)
		if t.Description != "" {
			o.str("description", t.Description)
		}
		o.raw("input_schema", schema)
	case OpenAIResponses:
		o.str("type", "function").str("name", name)
		if t.Description != "" {
			o.str("description", t.Description)
		}
		// strict: false — a strict function schema must list every property
		// as required and forbid others, which would change the tool.
		o.raw("parameters", schema).boolean("strict", false)
	case Pi:
		// pi-ai's Tool.description is a required string.
		o.str("name", name).str("description", t.Description).raw("parameters", schema)
	}
	return o.bytes()
}

// Vendor is the vendor the catalogue was rendered for.
func (c *Catalogue) Vendor() Vendor { return c.vendor }

// Definitions are the tool definitions in the vendor's shape, one per tool,
// in catalogue order.
func (c *Catalogue) Definitions() []json.RawMessage {
	out := make([]json.RawMessage, len(c.defs))
	for i, d := range c.defs {
		out[i] = append(json.RawMessage(nil), d...)
	}
	return out
}

// DefinitionsJSON is Definitions as one JSON array (a request's "tools").
func (c *Catalogue) DefinitionsJSON() json.RawMessage { return array(c.defs) }

// VendorName is the vendor's name for the canonical tool name; ok is false
// for a tool not in the catalogue.
func (c *Catalogue) VendorName(tool string) (name string, ok bool) {
	name, ok = c.toVendor[tool]
	return name, ok
}

// ToolName is the canonical tool name the vendor name was rendered from; ok
// is false for a name the catalogue did not render (a call under such a
// name is still sent to the turn, under that exact name).
func (c *Catalogue) ToolName(vendorName string) (tool string, ok bool) {
	tool, ok = c.toCanonical[vendorName]
	return tool, ok
}
