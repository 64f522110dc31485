package conformance_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"slices"
	"strings"
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
	if len(tools) != 22 {
		t.Fatalf("%d fixtures, want 22", len(tools))
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

// TestInputRounds (contract v3): the input fixtures ask exactly the suite's
// keys, carry their state between rounds, and answer once answered.
func TestInputRounds(t *testing.T) {
	client := serve(t)
	call := func(tool string, round int32, state, answers string, methods ...string) *sharedosv1.HandleResponse {
		t.Helper()
		resp, err := client.Handle(context.Background(), &sharedosv1.HandleRequest{CallId: "c", TurnId: "t", Tool: tool,
			ArgumentsJson: []byte(`{}`), Round: round, RequestState: []byte(state), InputResponsesJson: []byte(answers),
			InputMethods: methods})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	keys := func(resp *sharedosv1.HandleResponse) []string {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(resp.GetInputRequired().GetInputRequestsJson(), &m); err != nil {
			t.Fatalf("input requests %s: %v", resp.GetInputRequired().GetInputRequestsJson(), err)
		}
		out := make([]string, 0, len(m))
		for k := range m {
			out = append(out, k)
		}
		slices.Sort(out)
		return out
	}
	all := []string{"elicitation/create", "roots/list", "sampling/createMessage"}

	first := call(conformance.ToolInputElicitation, 0, "", "", all...)
	if k := keys(first); !slices.Equal(k, []string{"user_name"}) {
		t.Fatalf("elicitation asks %v", k)
	}
	if got := call(conformance.ToolInputElicitation, 0, "", `{"wrong_key":{"action":"accept"}}`, all...); got.GetInputRequired() == nil {
		t.Error("a wrong key did not ask again")
	}
	done := call(conformance.ToolInputElicitation, 1, "", `{"user_name":{"action":"accept","content":{"name":"Ada"}}}`, all...)
	if !strings.Contains(string(done.GetContentJson()), "Hello, Ada!") {
		t.Errorf("elicitation answered %s", done.GetContentJson())
	}

	r1 := call(conformance.ToolInputMultiRound, 0, "", "", all...)
	r2 := call(conformance.ToolInputMultiRound, 1, string(r1.GetInputRequired().GetRequestState()), `{"step1":{"action":"accept"}}`, all...)
	if k := keys(r2); !slices.Equal(k, []string{"step2"}) {
		t.Fatalf("round 2 asks %v", k)
	}
	r3 := call(conformance.ToolInputMultiRound, 2, string(r2.GetInputRequired().GetRequestState()), `{"step2":{"action":"accept"}}`, all...)
	if r3.GetInputRequired() != nil || len(r3.GetContentJson()) == 0 {
		t.Errorf("round 3: %v", r3)
	}

	st := call(conformance.ToolInputRequestState, 0, "", "", all...)
	ok := call(conformance.ToolInputRequestState, 1, string(st.GetInputRequired().GetRequestState()), `{"confirm":{"action":"accept"}}`, all...)
	if !strings.Contains(string(ok.GetContentJson()), "state-ok") {
		t.Errorf("request state round 2: %s", ok.GetContentJson())
	}
	if again := call(conformance.ToolInputRequestState, 1, "forged", `{"confirm":{"action":"accept"}}`, all...); again.GetInputRequired() == nil {
		t.Error("an unknown state was accepted")
	}

	if k := keys(call(conformance.ToolInputMultiple, 0, "", "", all...)); !slices.Equal(k, []string{"client_roots", "greeting", "user_name"}) {
		t.Errorf("multiple asks %v", k)
	}
	if k := keys(call(conformance.ToolInputCapabilities, 0, "", "", "sampling/createMessage")); !slices.Equal(k, []string{"capital_question"}) {
		t.Errorf("capabilities with sampling only asks %v", k)
	}
	if k := keys(call(conformance.ToolMissingCapability, 0, "", "")); !slices.Equal(k, []string{"capital_question"}) {
		t.Errorf("missing capability asks %v", k)
	}
}
