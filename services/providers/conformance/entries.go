package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/resourceuri"
)

// Prompt and resource fixtures (contract v4, ADR 0018), named and shaped
// exactly as the suite gets and reads them.
const (
	PromptSimple        = "test_simple_prompt"
	PromptWithArguments = "test_prompt_with_arguments"
	PromptEmbedded      = "test_prompt_with_embedded_resource"
	PromptImage         = "test_prompt_with_image"
	PromptInputRequired = "test_input_required_result_prompt"

	ResourceText     = "test://static-text"
	ResourceBinary   = "test://static-binary"
	ResourceTemplate = "test://template/{id}/data"
	ResourceWatched  = "test://watched-resource"
)

type promptFixture struct {
	name, description string
	args              []*sharedosv1.PromptArgument
}

var promptFixtures = []promptFixture{
	{PromptSimple, "A simple prompt without arguments.", nil},
	{PromptWithArguments, "A prompt with two arguments.", []*sharedosv1.PromptArgument{
		{Name: "arg1", Description: "First test argument", Required: true}, {Name: "arg2", Description: "Second test argument", Required: true}}},
	{PromptEmbedded, "A prompt that embeds a resource.", []*sharedosv1.PromptArgument{
		{Name: "resourceUri", Description: "URI of the resource to embed", Required: true}}},
	{PromptImage, "A prompt with an image.", nil},
	{PromptInputRequired, "A prompt that asks for context first (input required).", nil},
}

type resourceFixture struct {
	uri, name, description, mimeType string
}

var resourceFixtures = []resourceFixture{
	{ResourceText, "static-text", "A static text resource.", "text/plain"},
	{ResourceBinary, "static-binary", "A static binary resource (a PNG).", "image/png"},
	{ResourceTemplate, "template-data", "Data for an id.", "application/json"},
	{ResourceWatched, "watched-resource", "A resource to subscribe to.", "text/plain"},
}

// PromptRegistrations are the catalogue registrations of the prompt
// fixtures, served by the provider at target.
func PromptRegistrations(target string) []*sharedosv1.PromptRegistration {
	out := make([]*sharedosv1.PromptRegistration, 0, len(promptFixtures))
	for _, p := range promptFixtures {
		out = append(out, &sharedosv1.PromptRegistration{Name: p.name, Description: p.description, Arguments: p.args,
			Metadata: &sharedosv1.ToolMetadata{Source: Source}, Handler: &sharedosv1.HandlerRef{Target: target, Timeout: durationpb.New(5e9)}})
	}
	return out
}

// ResourceRegistrations are the catalogue registrations of the resource
// fixtures, served by the provider at target.
func ResourceRegistrations(target string) []*sharedosv1.ResourceRegistration {
	out := make([]*sharedosv1.ResourceRegistration, 0, len(resourceFixtures))
	for _, r := range resourceFixtures {
		out = append(out, &sharedosv1.ResourceRegistration{Uri: r.uri, Name: r.name, Description: r.description, MimeType: r.mimeType,
			Metadata: &sharedosv1.ToolMetadata{Source: Source}, Handler: &sharedosv1.HandlerRef{Target: target, Timeout: durationpb.New(5e9)}})
	}
	return out
}

func messages(items ...map[string]any) []byte {
	out := make([]map[string]any, len(items))
	for i, c := range items {
		out[i] = map[string]any{"role": "user", "content": c}
	}
	b, _ := json.Marshal(out)
	return b
}

func textContent(s string) map[string]any { return map[string]any{"type": "text", "text": s} }

// GetPrompt implements sharedosv1.ToolHandlerServiceServer (contract v4).
func (p *Provider) GetPrompt(_ context.Context, req *sharedosv1.HandleRequest) (*sharedosv1.PromptResponse, error) {
	var args map[string]string
	_ = json.Unmarshal(req.GetArgumentsJson(), &args) // the kernel checked they are strings
	switch req.GetTool() {
	case PromptSimple:
		return &sharedosv1.PromptResponse{MessagesJson: messages(textContent("This is a simple prompt for testing."))}, nil
	case PromptWithArguments:
		return &sharedosv1.PromptResponse{MessagesJson: messages(textContent(
			fmt.Sprintf("Prompt with arguments: arg1='%s', arg2='%s'", args["arg1"], args["arg2"])))}, nil
	case PromptEmbedded:
		return &sharedosv1.PromptResponse{MessagesJson: messages(
			map[string]any{"type": "resource", "resource": map[string]any{"uri": args["resourceUri"], "mimeType": "text/plain",
				"text": "Embedded resource content for testing."}},
			textContent("Please process the embedded resource above."))}, nil
	case PromptImage:
		return &sharedosv1.PromptResponse{MessagesJson: messages(
			map[string]any{"type": "image", "data": redPixelPNG, "mimeType": "image/png"},
			textContent("Please analyze the image above."))}, nil
	case PromptInputRequired:
		var got map[string]json.RawMessage
		_ = json.Unmarshal(req.GetInputResponsesJson(), &got)
		if got["user_context"] == nil {
			return &sharedosv1.PromptResponse{InputRequired: &sharedosv1.InputRequired{InputRequestsJson: []byte(
				`{"user_context":{"method":"elicitation/create","params":{"message":"What context should the prompt use?","requestedSchema":{"type":"object","properties":{"context":{"type":"string"}},"required":["context"]}}}}`)}}, nil
		}
		return &sharedosv1.PromptResponse{MessagesJson: messages(textContent("Prompt with context: " + string(got["user_context"])))}, nil
	}
	return nil, status.Errorf(codes.NotFound, "conformance: no prompt %q", req.GetTool())
}

// ReadResource implements sharedosv1.ToolHandlerServiceServer (contract v4).
func (p *Provider) ReadResource(_ context.Context, req *sharedosv1.HandleRequest) (*sharedosv1.ResourceResponse, error) {
	uri := req.GetTool()
	var item map[string]any
	switch reg, _ := resourceuri.Match([]string{ResourceText, ResourceBinary, ResourceTemplate, ResourceWatched}, uri); reg {
	case ResourceText:
		item = map[string]any{"uri": uri, "mimeType": "text/plain", "text": "This is the content of the static text resource."}
	case ResourceWatched:
		item = map[string]any{"uri": uri, "mimeType": "text/plain", "text": "This resource is watched."}
	case ResourceBinary:
		item = map[string]any{"uri": uri, "mimeType": "image/png", "blob": redPixelPNG}
	case ResourceTemplate:
		id := strings.TrimSuffix(strings.TrimPrefix(uri, "test://template/"), "/data")
		data, _ := json.Marshal(map[string]any{"id": id, "templateTest": true, "data": "Data for ID: " + id})
		item = map[string]any{"uri": uri, "mimeType": "application/json", "text": string(data)}
	default:
		return nil, status.Errorf(codes.NotFound, "conformance: no resource %q", uri)
	}
	b, _ := json.Marshal([]map[string]any{item})
	return &sharedosv1.ResourceResponse{ContentsJson: b}, nil
}
