package conformance_test

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/toolname"
	"github.com/sharedos/toolshare/services/providers/conformance"
	"github.com/sharedos/toolshare/services/providers/providertest"
)

// serve runs the provider on a loopback port and returns a client of it.
func serve(t *testing.T) sharedosv1.ToolHandlerServiceClient {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	sharedosv1.RegisterToolHandlerServiceServer(s, &conformance.Provider{})
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return sharedosv1.NewToolHandlerServiceClient(cc)
}

func TestProviderContract(t *testing.T) {
	providertest.Run(t, serve(t), []providertest.Case{
		{Name: "simple text", Tool: conformance.ToolSimpleText, Args: `{}`, WantText: "simple text response"},
		{Name: "image", Tool: conformance.ToolImage, Args: `{}`},
		{Name: "audio", Tool: conformance.ToolAudio, Args: `{}`},
		{Name: "embedded resource", Tool: conformance.ToolEmbeddedResource, Args: `{}`},
		{Name: "mixed", Tool: conformance.ToolMixedContent, Args: `{}`, WantText: "Multiple content types"},
		{Name: "error", Tool: conformance.ToolError, Args: `{}`, WantError: true, WantText: "intentionally returns an error"},
		{Name: "json schema 2020-12", Tool: conformance.ToolJSONSchema202012, Args: `{"name":"x","email":"x@example.com"}`},
		{Name: "custom header", Tool: conformance.ToolCustomHeader, Args: `{"region":"eu"}`, WantText: "Custom header tool called"},
		{Name: "progress, called unary", Tool: conformance.ToolWithProgress, Args: `{}`, WantText: "Progress test completed"},
	})
}

// TestInvokeStreamsProgress: Invoke (contract v2) reports the progress
// fixture's three steps in order, then its one result, then ends; any other
// fixture is just its result.
func TestInvokeStreamsProgress(t *testing.T) {
	client := serve(t)
	for tool, want := range map[string][]float64{conformance.ToolWithProgress: {0, 50, 100}, conformance.ToolSimpleText: nil} {
		stream, err := client.Invoke(context.Background(), &sharedosv1.HandleRequest{CallId: "c", TurnId: "t", Tool: tool, ArgumentsJson: []byte(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		var got []float64
		var result *sharedosv1.HandleResponse
		for {
			ev, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", tool, err)
			}
			switch {
			case result != nil:
				t.Fatalf("%s: an event after the result: %v", tool, ev)
			case ev.GetProgress() != nil:
				got = append(got, ev.GetProgress().GetProgress())
			default:
				result = ev.GetResult()
			}
		}
		if !slices.Equal(got, want) || result == nil || result.GetIsError() {
			t.Errorf("%s: progress %v then %v, want %v then a result", tool, got, result, want)
		}
	}
}

func TestToolsArePublishable(t *testing.T) {
	tools := conformance.Tools()
	if len(tools) != 9 {
		t.Fatalf("%d fixtures, want 9", len(tools))
	}
	for i, tool := range tools {
		if err := toolname.Validate(tool.Name); err != nil {
			t.Errorf("%s: %v", tool.Name, err)
		}
		if i > 0 && tools[i-1].Name >= tool.Name {
			t.Errorf("not sorted at %s", tool.Name)
		}
	}
	for _, r := range conformance.Registrations("127.0.0.1:7405") {
		if r.GetHandler().GetTarget() != "127.0.0.1:7405" || r.GetRequirement().GetAction() == "" {
			t.Errorf("registration %s incomplete", r.GetName())
		}
	}
}
