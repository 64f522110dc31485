package pipeline

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/santhosh-tekuri/jsonschema/v6"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/jsonlimits"
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
// Its numbers are held first to what the arguments are
// (jsonlimits.CheckNumber): the validator reads each number it checks
// exactly, and a tool's result is no more trusted than a model's call.
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
	// The schema's validation work is bounded for values nested to
	// MaxDepth (catalog's max_validation_work, as arguments are): deeper,
	// a chain of 64 plain levels led to what the count never saw (review:
	// a 66-deep answer took 1.27 s to validate). Scanned before any parse.
	if depth, _ := jsonlimits.Scan(sc, jsonlimits.MaxDepth); depth > jsonlimits.MaxDepth {
		return outcome.Failed(code, who+fmt.Sprintf(" answered outside the kernel's bounds: its structuredContent is nested deeper than %d levels", jsonlimits.MaxDepth))
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(sc))
	obj, ok := doc.(map[string]any)
	if err != nil || !ok {
		return outcome.Failed(code, who+" answered outside the protocol: its structuredContent could not be read as a JSON object")
	}
	// Before the validator reads any number exactly: an upstream's 400 of
	// 1e-999999 cost it 6.7 s, and 1e-1000001 a panic (attack run F2).
	if err := checkNumbers(obj); err != nil {
		return outcome.Failed(code, who+" answered outside the kernel's bounds: its structuredContent holds "+err.Error())
	}
	if _, record, ok := validateSchema(schema, obj); !ok {
		return outcome.Failed(code, who+" answered outside the protocol: its structuredContent does not match the tool's output schema "+record)
	}
	return nil
}

// checkNumbers is jsonlimits.CheckNumber's refusal of the first number in
// v (decoded with json.Number) it refuses, or nil.
func checkNumbers(v any) error {
	switch x := v.(type) {
	case json.Number:
		return jsonlimits.CheckNumber(string(x))
	case map[string]any:
		for _, e := range x {
			if err := checkNumbers(e); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range x {
			if err := checkNumbers(e); err != nil {
				return err
			}
		}
	}
	return nil
}
