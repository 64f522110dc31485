package upstream_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/inputround"
)

// A tools/call to a 2026-07-28 upstream declares the capabilities of the
// input its harness can answer, no more (a request's capabilities are the
// client's for that request alone): an upstream that needs more says so
// with -32021, which the provider hands the kernel as a round of the input
// the harness cannot give (the kernel records missing_capability); an
// upstream claiming to need what the call declared is in error itself.
func TestCallDeclaresTheHarnessCapabilities(t *testing.T) {
	var mu sync.Mutex
	var seen []string // the capabilities each call of "look" declared
	srv := server.NewMCPServer("caps", "1", server.WithToolCapabilities(true))
	srv.AddTool(mcp.NewTool("look"), func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		info := server.RequestProtocolInfoFromContext(ctx)
		if info == nil || info.ClientCapabilities == nil {
			return mcp.NewToolResultError("no per-request capabilities"), nil
		}
		b, _ := json.Marshal(info.ClientCapabilities)
		var caps map[string]json.RawMessage
		if err := json.Unmarshal(b, &caps); err != nil {
			return nil, err
		}
		mu.Lock()
		seen = append(seen, strings.Join(slices.Sorted(maps.Keys(caps)), ","))
		mu.Unlock()
		return mcp.NewToolResultText("ok"), nil
	})
	srv.AddTool(mcp.NewTool("strict"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("the client can elicit"), nil
	})
	srv.AddTool(mcp.NewTool("liar"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("unreachable"), nil
	})
	hs := httptest.NewServer(needsElicitation(server.NewStreamableHTTPServer(srv)))
	t.Cleanup(hs.Close)
	c, _, _ := upstreamAt(t, "cp", hs.URL+"/mcp")
	call := func(tool string, methods ...string) (*sharedosv1.HandleResponse, error) {
		return c.Handle(t.Context(), &sharedosv1.HandleRequest{Tool: "cp." + tool, ArgumentsJson: []byte(`{}`), InputMethods: methods})
	}

	// None, each one alone (every input request has its capability
	// declared), two, all.
	sets := [][]string{nil}
	want := []string{""}
	for _, m := range inputround.Methods {
		sets, want = append(sets, []string{m.Name}), append(want, m.Capability)
	}
	sets = append(sets, []string{"roots/list", "sampling/createMessage"}, inputround.Names())
	want = append(want, "roots,sampling", "elicitation,roots,sampling")
	for _, methods := range sets {
		if _, err := call("look", methods...); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	got := slices.Clone(seen)
	mu.Unlock()
	if !slices.Equal(got, want) {
		t.Errorf("the upstream was told capabilities\n%v\nwant\n%v", got, want)
	}

	// A harness that can elicit gets the tool's answer.
	res, err := call("strict", "elicitation/create")
	if err != nil || !strings.Contains(string(res.GetContentJson()), "the client can elicit") {
		t.Fatalf("strict with elicitation: %v %v", res, err)
	}
	// One that cannot: a round of the input it cannot give, which the
	// kernel refuses as missing_capability.
	for _, methods := range [][]string{nil, {"sampling/createMessage"}} {
		res, err = call("strict", methods...)
		if err != nil {
			t.Fatal(err)
		}
		var reqs map[string]struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if err := json.Unmarshal(res.GetInputRequired().GetInputRequestsJson(), &reqs); err != nil || len(reqs) != 1 {
			t.Fatalf("strict without elicitation (%v): %v %v", methods, res, err)
		}
		for _, r := range reqs {
			if r.Method != "elicitation/create" || string(r.Params) != `{}` {
				t.Errorf("the round asks %s %s", r.Method, r.Params)
			}
		}
		if len(res.GetInputRequired().GetRequestState()) != 0 {
			t.Error("a refused round carries provider state")
		}
	}
	// An upstream that asks for a capability the call declared.
	if _, err := call("liar", "elicitation/create"); status.Code(err) != codes.Unavailable {
		t.Errorf("liar: %v, want Unavailable", err)
	}
}

// needsElicitation stands in front of next like an upstream whose tool or
// prompt "strict" (and resource note://strict) needs elicitation: a
// tools/call, prompts/get or resources/read of it without that capability
// declared gets -32021 naming it (data.requiredCapabilities); "liar"
// always gets -32021 for elicitation, in mcp-go's form (data.capability).
func needsElicitation(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name string `json:"name"`
				Meta struct {
					Caps map[string]json.RawMessage `json:"io.modelcontextprotocol/clientCapabilities"`
				} `json:"_meta"`
			} `json:"params"`
		}
		_ = json.Unmarshal(body, &msg)
		var data any
		switch {
		case msg.Method == "resources/read" && strings.Contains(string(body), "note://strict") && msg.Params.Meta.Caps["elicitation"] == nil:
			data = map[string]any{"requiredCapabilities": map[string]any{"elicitation": map[string]any{}}}
		case msg.Method != "tools/call" && msg.Method != "prompts/get":
		case msg.Params.Name == "liar":
			data = map[string]any{"capability": "elicitation"}
		case msg.Params.Name == "strict" && msg.Params.Meta.Caps["elicitation"] == nil:
			data = map[string]any{"requiredCapabilities": map[string]any{"elicitation": map[string]any{}}}
		}
		if data == nil {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": msg.ID,
			"error": map[string]any{"code": mcp.MISSING_REQUIRED_CLIENT_CAPABILITY, "message": "missing required client capability", "data": data}})
	})
}

// A prompts/get declares the capabilities of the input its harness can
// answer, as a tools/call does, and its -32021 is the same round of the
// input the harness cannot give; a resources/read, which has no input
// rounds, declares none, and its -32021 is the upstream's failure.
func TestPromptsAndResourcesDeclareWhatTheHarnessCanAnswer(t *testing.T) {
	var mu sync.Mutex
	var seen []string // the capabilities each request declared
	record := func(ctx context.Context) error {
		info := server.RequestProtocolInfoFromContext(ctx)
		if info == nil || info.ClientCapabilities == nil {
			return errors.New("no per-request capabilities")
		}
		b, _ := json.Marshal(info.ClientCapabilities)
		var caps map[string]json.RawMessage
		if err := json.Unmarshal(b, &caps); err != nil {
			return err
		}
		mu.Lock()
		seen = append(seen, strings.Join(slices.Sorted(maps.Keys(caps)), ","))
		mu.Unlock()
		return nil
	}
	srv := server.NewMCPServer("caps", "1", server.WithPromptCapabilities(true), server.WithResourceCapabilities(false, false))
	for _, name := range []string{"look", "strict"} {
		srv.AddPrompt(mcp.NewPrompt(name), func(ctx context.Context, _ mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			if err := record(ctx); err != nil {
				return nil, err
			}
			return mcp.NewGetPromptResult(name, []mcp.PromptMessage{mcp.NewPromptMessage(mcp.RoleUser, mcp.NewTextContent("the prompt "+name))}), nil
		})
	}
	for _, uri := range []string{"note://look", "note://strict"} {
		srv.AddResource(mcp.NewResource(uri, uri), func(ctx context.Context, _ mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			if err := record(ctx); err != nil {
				return nil, err
			}
			return []mcp.ResourceContents{mcp.TextResourceContents{URI: uri, Text: "a note"}}, nil
		})
	}
	hs := httptest.NewServer(needsElicitation(server.NewStreamableHTTPServer(srv)))
	t.Cleanup(hs.Close)
	c, _, _ := upstreamAt(t, "cp", hs.URL+"/mcp")
	prompt := func(name string, methods ...string) (*sharedosv1.PromptResponse, error) {
		return c.GetPrompt(t.Context(), &sharedosv1.HandleRequest{Tool: "cp." + name, InputMethods: methods})
	}
	read := func(uri string, methods ...string) (*sharedosv1.ResourceResponse, error) {
		return c.ReadResource(t.Context(), &sharedosv1.HandleRequest{Tool: uri, InputMethods: methods})
	}

	for _, methods := range [][]string{nil, {"elicitation/create"}, {"roots/list", "sampling/createMessage"}} {
		if res, err := prompt("look", methods...); err != nil || res.GetInputRequired() != nil {
			t.Fatalf("look %v: %v %v", methods, res, err)
		}
	}
	if res, err := read("note://look", inputround.Names()...); err != nil || !strings.Contains(string(res.GetContentsJson()), "a note") {
		t.Fatalf("read: %v %v", res, err)
	}
	mu.Lock()
	got := slices.Clone(seen)
	mu.Unlock()
	if want := []string{"", "elicitation", "roots,sampling", ""}; !slices.Equal(got, want) {
		t.Errorf("the upstream was told capabilities\n%v\nwant\n%v", got, want)
	}

	res, err := prompt("strict", "elicitation/create")
	if err != nil || !strings.Contains(string(res.GetMessagesJson()), "the prompt strict") {
		t.Fatalf("strict with elicitation: %v %v", res, err)
	}
	res, err = prompt("strict", "roots/list")
	if err != nil {
		t.Fatal(err)
	}
	if got := string(res.GetInputRequired().GetInputRequestsJson()); got != `{"elicitation/create":{"method":"elicitation/create","params":{}}}` {
		t.Errorf("strict without elicitation: the round asks %s", got)
	}
	if _, err := read("note://strict", inputround.Names()...); status.Code(err) != codes.Unavailable {
		t.Errorf("a read the upstream refuses -32021: %v, want Unavailable", err)
	}
}
