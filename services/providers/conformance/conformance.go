package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
)

// Fixture tool names, exactly as the suite calls them.
const (
	ToolSimpleText       = "test_simple_text"
	ToolImage            = "test_image_content"
	ToolAudio            = "test_audio_content"
	ToolEmbeddedResource = "test_embedded_resource"
	ToolMixedContent     = "test_multiple_content_types"
	ToolError            = "test_error_handling"
	ToolJSONSchema202012 = "json_schema_2020_12_tool"
	ToolWithProgress     = "test_tool_with_progress"
	ToolCustomHeader     = "test_custom_header"
)

// progressSteps are what ToolWithProgress reports, ProgressInterval apart
// (the suite: 0, 50 and 100 of 100, ~50 ms apart).
var progressSteps = []float64{0, 50, 100}

// ProgressInterval is the pause between ToolWithProgress's steps.
const ProgressInterval = 50 * time.Millisecond

// Source is the metadata source of every fixture tool.
const Source = "provider:conformance"

// Minimal media the suite only checks for presence and MIME type.
const (
	redPixelPNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"
	silentWAV   = "UklGRiwAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQgAAACAgICAgICAgA=="
)

const emptyObject = `{"type":"object","properties":{},"additionalProperties":false}`

// jsonSchema202012 is the suite's SEP-1613 / SEP-2106 schema, exactly:
// $schema, $defs with an $anchor, allOf/anyOf, if/then/else and
// additionalProperties must survive publication verbatim.
const jsonSchema202012 = `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","$defs":{"address":{"$anchor":"addressDef","type":"object","properties":{"street":{"type":"string"},"city":{"type":"string"}}}},"properties":{"name":{"type":"string"},"address":{"$ref":"#/$defs/address"},"contactMethod":{"type":"string","enum":["phone","email"]},"phone":{"type":"string"},"email":{"type":"string"}},"allOf":[{"anyOf":[{"required":["phone"]},{"required":["email"]}]}],"if":{"properties":{"contactMethod":{"const":"phone"}},"required":["contactMethod"]},"then":{"required":["phone"]},"else":{"required":["email"]},"additionalProperties":false}`

// customHeaderSchema mirrors its string argument in an Mcp-Param-Region
// header (SEP-2243): the suite checks the server validates it.
const customHeaderSchema = `{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}},"required":["region"],"additionalProperties":false}`

type fixture struct {
	name, description, input string
	content                  []map[string]any
	isError                  bool
}

var resource = map[string]any{"type": "resource", "resource": map[string]any{
	"uri": "test://embedded-resource", "mimeType": "text/plain", "text": "This is an embedded resource content.",
}}

var fixtures = []fixture{
	{ToolSimpleText, "Returns simple text content.", emptyObject,
		[]map[string]any{{"type": "text", "text": "This is a simple text response for testing."}}, false},
	{ToolImage, "Returns a 1x1 PNG image.", emptyObject,
		[]map[string]any{{"type": "image", "data": redPixelPNG, "mimeType": "image/png"}}, false},
	{ToolAudio, "Returns a short WAV clip.", emptyObject,
		[]map[string]any{{"type": "audio", "data": silentWAV, "mimeType": "audio/wav"}}, false},
	{ToolEmbeddedResource, "Returns an embedded text resource.", emptyObject,
		[]map[string]any{resource}, false},
	{ToolMixedContent, "Returns text, image and resource content.", emptyObject,
		[]map[string]any{
			{"type": "text", "text": "Multiple content types test:"},
			{"type": "image", "data": redPixelPNG, "mimeType": "image/png"},
			resource,
		}, false},
	{ToolError, "Always answers with a tool error.", emptyObject,
		[]map[string]any{{"type": "text", "text": "This tool intentionally returns an error for testing"}}, true},
	{ToolJSONSchema202012, "Tool with JSON Schema 2020-12 features", jsonSchema202012,
		[]map[string]any{{"type": "text", "text": "JSON Schema 2020-12 tool called"}}, false},
	{ToolWithProgress, "Reports progress 0, 50 and 100 of 100, then answers.", emptyObject,
		[]map[string]any{{"type": "text", "text": "Progress test completed."}}, false},
	{ToolCustomHeader, "Takes a region that travels in the Mcp-Param-Region header too.", customHeaderSchema,
		[]map[string]any{{"type": "text", "text": "Custom header tool called."}}, false},
}

// Tool is one fixture tool's published fields.
type Tool struct {
	Name        string
	Description string
	InputSchema json.RawMessage
}

// Tools lists the fixture tools, sorted by name.
func Tools() []Tool {
	out := make([]Tool, 0, len(fixtures)+len(inputFixtures))
	for _, f := range fixtures {
		out = append(out, Tool{Name: f.name, Description: f.description, InputSchema: json.RawMessage(f.input)})
	}
	out = append(out, inputFixtures...)
	sortTools(out)
	return out
}

func sortTools(ts []Tool) {
	for i := 1; i < len(ts); i++ {
		for j := i; j > 0 && ts[j].Name < ts[j-1].Name; j-- {
			ts[j], ts[j-1] = ts[j-1], ts[j]
		}
	}
}

// Registrations are the catalogue registrations of the fixtures, served by
// the provider at target. The requirement is one fixed resource: the
// fixtures take no arguments and touch nothing.
func Registrations(target string) []*sharedosv1.ToolRegistration {
	var out []*sharedosv1.ToolRegistration
	for _, t := range Tools() {
		out = append(out, &sharedosv1.ToolRegistration{
			Name:            t.Name,
			Description:     t.Description,
			InputSchemaJson: t.InputSchema,
			AnnotationsJson: []byte(`{"readOnlyHint":true,"openWorldHint":false}`),
			Metadata:        &sharedosv1.ToolMetadata{Source: Source},
			Class:           sharedosv1.ToolClass_TOOL_CLASS_MANAGED,
			Requirement: &sharedosv1.Requirement{
				Action: "call", Resource: "conformance:fixture", PathCleaning: sharedosv1.PathCleaning_PATH_CLEANING_NONE,
			},
			Handler: &sharedosv1.HandlerRef{Target: target, Timeout: durationpb.New(5e9)},
		})
	}
	return out
}

// Provider serves the fixtures.
type Provider struct {
	sharedosv1.UnimplementedToolHandlerServiceServer
}

var _ sharedosv1.ToolHandlerServiceServer = (*Provider)(nil)

// Invoke implements sharedosv1.ToolHandlerServiceServer (contract v2; the
// input-round fixtures answer as in Handle, contract v3):
// ToolWithProgress reports its steps before its result; every other
// fixture answers as Handle does.
func (p *Provider) Invoke(req *sharedosv1.HandleRequest, stream grpc.ServerStreamingServer[sharedosv1.HandleEvent]) error {
	ctx := stream.Context()
	if req.GetTool() == ToolWithProgress {
		for i, v := range progressSteps {
			if i > 0 {
				if err := pause(ctx); err != nil {
					return err
				}
			}
			ev := &sharedosv1.HandleEvent{Event: &sharedosv1.HandleEvent_Progress{Progress: &sharedosv1.Progress{Progress: v, Total: 100}}}
			if err := stream.Send(ev); err != nil {
				return err
			}
		}
	}
	resp, err := p.answer(req)
	if err != nil {
		return err
	}
	return stream.Send(&sharedosv1.HandleEvent{Event: &sharedosv1.HandleEvent_Result{Result: resp}})
}

func pause(ctx context.Context) error {
	t := time.NewTimer(ProgressInterval)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	case <-t.C:
		return nil
	}
}

// Handle implements sharedosv1.ToolHandlerServiceServer. Without a progress
// request ToolWithProgress still takes its steps' time.
func (p *Provider) Handle(ctx context.Context, req *sharedosv1.HandleRequest) (*sharedosv1.HandleResponse, error) {
	if req.GetTool() == ToolWithProgress {
		for range len(progressSteps) - 1 {
			if err := pause(ctx); err != nil {
				return nil, err
			}
		}
	}
	return p.answer(req)
}

// answer is a fixture's result.
func (p *Provider) answer(req *sharedosv1.HandleRequest) (*sharedosv1.HandleResponse, error) {
	args := bytes.TrimSpace(req.GetArgumentsJson())
	if len(args) == 0 || args[0] != '{' || !json.Valid(args) {
		return nil, status.Error(codes.InvalidArgument, "conformance: arguments must be one JSON object")
	}
	if resp := roundAnswer(req); resp != nil {
		return resp, nil
	}
	for _, f := range fixtures {
		if f.name == req.GetTool() {
			b, err := json.Marshal(f.content)
			if err != nil {
				return nil, status.Error(codes.Internal, "conformance: encode fixture")
			}
			return &sharedosv1.HandleResponse{ContentJson: b, IsError: f.isError}, nil
		}
	}
	return nil, status.Errorf(codes.InvalidArgument, "conformance: unknown tool %q", req.GetTool())
}
