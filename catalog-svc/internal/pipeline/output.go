package pipeline

import (
	"bytes"

	"github.com/santhosh-tekuri/jsonschema/v6"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/outcome"
)

// checkOutput holds the successful result of a tool that declares an
// output schema to it: MCP (2025-06-18 on) has such a tool return
// structuredContent that conforms, and clients refuse a result that does
// not (the Python and TypeScript SDKs alike), so passed on it would reach
// the harness as an error while the record said succeeded. It returns the
// failed outcome that replaces the result, nil when the result may pass.
// Only a tool with an output schema is checked (its schema compiled once,
// by the catalogue), and never an isError result, which MCP does not hold
// to the schema.
//
// The reason names where the content fails and the keyword it breaks,
// never a value: the content is the tool's, and its keys that the schema
// does not declare appear only by their digest (validateSchema's record
// form).
func checkOutput(schema *jsonschema.Schema, structured []byte, acquired bool) *sharedosv1.ToolResult {
	code, who := outcome.HandlerError, "the tool's provider"
	if acquired {
		// An upstream's answer outside the protocol, as a structuredContent
		// that is no object is (upstream.checkStructured).
		code, who = outcome.UpstreamUnavailable, "the tool's upstream MCP server"
	}
	sc := bytes.TrimSpace(structured) // none, or an object (isJSONObjectOrEmpty)
	if len(sc) == 0 {
		return outcome.Failed(code, who+" answered outside the protocol: the tool declares an output schema and its result has no structuredContent")
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(sc))
	obj, ok := doc.(map[string]any)
	if err != nil || !ok {
		return outcome.Failed(code, who+" answered outside the protocol: its structuredContent could not be read as a JSON object")
	}
	if _, record, ok := validateSchema(schema, obj); !ok {
		return outcome.Failed(code, who+" answered outside the protocol: its structuredContent does not match the tool's output schema "+record)
	}
	return nil
}
