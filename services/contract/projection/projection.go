package projection

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/canonjson"
	"github.com/sharedos/toolshare/services/contract/toolname"
)

// Tool is the part of a tool definition that may cross the boundary. It has
// no field for anything else on purpose; see the package comment.
type Tool struct {
	Name         string
	Description  string
	InputSchema  json.RawMessage // a JSON object (JSON Schema 2020-12), or absent
	OutputSchema json.RawMessage // a JSON object, or absent
	Annotations  json.RawMessage // a JSON object of MCP tool annotations, or absent
	Namespace    string          // metadata.namespace: the provider
	Source       string          // metadata.source: where the definition came from
}

// CatalogHashFields returns the keys a projected tool may hold
// (CATALOG_HASH_FIELDS), in canonical order.
func CatalogHashFields() []string {
	return []string{"annotations", "description", "inputSchema", "metadata", "name", "outputSchema"}
}

// MetadataFields returns the keys the projected metadata object may hold.
func MetadataFields() []string { return []string{"namespace", "source"} }

// UpstreamSourcePrefix starts the metadata.source of every tool, prompt and
// resource acquired from an upstream MCP server: "mcp:<namespace>"
// (ADR 0019).
const UpstreamSourcePrefix = "mcp:"

// Rules named in errors.
const (
	RuleJSON       = "RFC 8785 JSON"
	RuleJSONObject = "JSON object"
	RuleUTF8       = "UTF-8 text"
	RuleRequired   = "required"
	RuleString     = "JSON string"
)

// Error names the field of a tool that was refused and the rule it broke.
type Error struct {
	Field  string // "inputSchema", "metadata.source", ...
	Rule   string // one of the Rule* constants, or toolname's rule names
	Detail string
	Err    error // the underlying error, if any
}

func (e *Error) Error() string {
	if e.Detail == "" && e.Err != nil {
		return fmt.Sprintf("projection: %s: violates %s: %v", e.Field, e.Rule, e.Err)
	}
	return fmt.Sprintf("projection: %s: violates %s: %s", e.Field, e.Rule, e.Detail)
}

func (e *Error) Unwrap() error { return e.Err }

// wire is the projected tool. Its fields are declared in lexicographic key
// order and its tags are exactly CATALOG_HASH_FIELDS: it is the only shape
// the projection can write, so no other key can appear.
type wire struct {
	Annotations  json.RawMessage `json:"annotations,omitempty"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"inputSchema,omitempty"`
	Metadata     *wireMetadata   `json:"metadata,omitempty"`
	Name         string          `json:"name,omitempty"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
}

type wireMetadata struct {
	Namespace string `json:"namespace,omitempty"`
	Source    string `json:"source,omitempty"`
}

// project validates t and returns its projection with canonical JSON values;
// nil RawMessages are omitted fields.
func project(t Tool) (wire, error) {
	if err := toolname.Validate(t.Name); err != nil {
		var te *toolname.Error
		if errors.As(err, &te) {
			return wire{}, &Error{Field: te.Field, Rule: te.Rule, Detail: te.Detail, Err: err}
		}
		return wire{}, fmt.Errorf("projection: %w", err)
	}
	for _, f := range [...]struct{ field, v string }{
		{"description", t.Description}, {"metadata.namespace", t.Namespace}, {"metadata.source", t.Source},
	} {
		if !utf8.ValidString(f.v) {
			return wire{}, &Error{Field: f.field, Rule: RuleUTF8, Detail: "holds bytes that are not UTF-8"}
		}
	}
	w := wire{Name: t.Name, Description: t.Description}
	var err error
	if w.InputSchema, err = object("inputSchema", t.InputSchema, false); err != nil {
		return wire{}, err
	}
	if w.OutputSchema, err = object("outputSchema", t.OutputSchema, false); err != nil {
		return wire{}, err
	}
	if w.Annotations, err = object("annotations", t.Annotations, true); err != nil {
		return wire{}, err
	}
	if t.Namespace != "" || t.Source != "" {
		w.Metadata = &wireMetadata{Namespace: t.Namespace, Source: t.Source}
	}
	return w, nil
}

// object canonicalizes a JSON-valued field. It returns nil for a value the
// projection omits (absent, null, "", and {} when emptyIsAbsent) and
// refuses anything that is not a JSON object.
func object(field string, raw json.RawMessage, emptyIsAbsent bool) (json.RawMessage, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	c, err := canonjson.Canonicalize(raw)
	if err != nil {
		return nil, &Error{Field: field, Rule: RuleJSON, Err: err}
	}
	switch string(c) {
	case "null", `""`:
		return nil, nil
	case "{}":
		if emptyIsAbsent {
			return nil, nil
		}
		return c, nil
	}
	if c[0] != '{' {
		return nil, &Error{Field: field, Rule: RuleJSONObject, Detail: "must be a JSON object, got " + kind(c[0])}
	}
	return c, nil
}

func kind(first byte) string {
	switch first {
	case '{':
		return "an object"
	case 'n':
		return "null"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	default:
		return "a number"
	}
}

// Canonical returns the RFC 8785 bytes of t's catalog-hash projection. It
// refuses a name outside ToolNameSchema, non-UTF-8 text, and JSON-valued
// fields that are not JSON objects.
func Canonical(t Tool) ([]byte, error) {
	w, err := project(t)
	if err != nil {
		return nil, err
	}
	return canonical(w)
}

func canonical(w wire) ([]byte, error) {
	b, err := json.Marshal(w)
	if err != nil {
		return nil, fmt.Errorf("projection: encode: %w", err)
	}
	// encoding/json escapes <, >, & and U+2028 in strings; JCS does not.
	c, err := canonjson.Canonicalize(b)
	if err != nil {
		return nil, fmt.Errorf("projection: canonicalize: %w", err)
	}
	return c, nil
}

// Publish validates t and returns the PublishedTool a harness receives,
// with canonical_json filled. JSON-valued fields are kept verbatim as
// registered, because the bridge emits them verbatim; a value the
// projection omits (null, "", {} annotations) is published empty, so what a
// harness is shown and what catalogHash covers never disagree. An
// inputSchema is required: MCP has no tool without one.
func Publish(t Tool) (*sharedosv1.PublishedTool, error) {
	w, err := project(t)
	if err != nil {
		return nil, err
	}
	if w.InputSchema == nil {
		return nil, &Error{Field: "inputSchema", Rule: RuleRequired, Detail: "a published tool must declare an input schema (a JSON object)"}
	}
	c, err := canonical(w)
	if err != nil {
		return nil, err
	}
	return &sharedosv1.PublishedTool{
		Name:             t.Name,
		Description:      t.Description,
		InputSchemaJson:  verbatim(t.InputSchema, w.InputSchema),
		OutputSchemaJson: verbatim(t.OutputSchema, w.OutputSchema),
		AnnotationsJson:  verbatim(t.Annotations, w.Annotations),
		Metadata:         &sharedosv1.ToolMetadata{Namespace: t.Namespace, Source: t.Source},
		CanonicalJson:    c,
		Digest:           Digest(c),
	}, nil
}

func verbatim(raw, projected json.RawMessage) []byte {
	if projected == nil {
		return nil
	}
	return bytes.Clone(raw)
}

// FromPublished is the inverse of Publish for the projected fields. The
// JSON fields alias p's byte slices. A nil p gives the zero Tool.
func FromPublished(p *sharedosv1.PublishedTool) Tool {
	return Tool{
		Name:         p.GetName(),
		Description:  p.GetDescription(),
		InputSchema:  p.GetInputSchemaJson(),
		OutputSchema: p.GetOutputSchemaJson(),
		Annotations:  p.GetAnnotationsJson(),
		Namespace:    p.GetMetadata().GetNamespace(),
		Source:       p.GetMetadata().GetSource(),
	}
}

// FromJSON reads a tool definition written as a JSON object — an MCP Tool,
// a registration, or a catalog-hash vector — into a Tool. Keys outside
// CATALOG_HASH_FIELDS (and outside namespace/source in metadata) are
// ignored: that is the projection. Duplicate keys are refused, since a
// registry and this package could otherwise read different values.
func FromJSON(raw []byte) (Tool, error) {
	c, err := canonjson.Canonicalize(raw)
	if err != nil {
		return Tool{}, &Error{Field: "tool", Rule: RuleJSON, Err: err}
	}
	if c[0] != '{' {
		return Tool{}, &Error{Field: "tool", Rule: RuleJSONObject, Detail: "must be a JSON object, got " + kind(c[0])}
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(c, &top); err != nil {
		return Tool{}, fmt.Errorf("projection: decode tool: %w", err)
	}
	var t Tool
	if t.Name, err = str("name", top["name"]); err != nil {
		return Tool{}, err
	}
	if t.Description, err = str("description", top["description"]); err != nil {
		return Tool{}, err
	}
	t.InputSchema, t.OutputSchema, t.Annotations = top["inputSchema"], top["outputSchema"], top["annotations"]
	if md := top["metadata"]; md != nil && string(md) != "null" && string(md) != `""` {
		if md[0] != '{' {
			return Tool{}, &Error{Field: "metadata", Rule: RuleJSONObject, Detail: "must be a JSON object, got " + kind(md[0])}
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(md, &m); err != nil {
			return Tool{}, fmt.Errorf("projection: decode metadata: %w", err)
		}
		if t.Namespace, err = str("metadata.namespace", m["namespace"]); err != nil {
			return Tool{}, err
		}
		if t.Source, err = str("metadata.source", m["source"]); err != nil {
			return Tool{}, err
		}
	}
	return t, nil
}

// str decodes an optional JSON string; absent and null are "".
func str(field string, raw json.RawMessage) (string, error) {
	if raw == nil || string(raw) == "null" {
		return "", nil
	}
	if raw[0] != '"' {
		return "", &Error{Field: field, Rule: RuleString, Detail: "must be a string, got " + kind(raw[0])}
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("projection: decode %s: %w", field, err)
	}
	return s, nil
}

// Digest is the lowercase hex SHA-256 of canonical bytes, e.g. of one
// tool's Canonical output.
func Digest(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:])
}
