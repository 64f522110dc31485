package providertest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
)

// Case is one provider-specific call and its expected answer.
type Case struct {
	Name string
	Tool string
	// Args is the arguments JSON, sent byte for byte.
	Args string
	// WantError expects an is_error result (a tool-level failure).
	WantError bool
	// WantText must appear in the concatenated text content.
	WantText string
	// NotText must not appear in it (e.g. a secret's content).
	NotText string
}

// UnknownTool is the name the suite uses for "no such tool".
const UnknownTool = "providertest.no_such_tool"

// Run runs the contract checks and cases against client.
func Run(t *testing.T, client sharedosv1.ToolHandlerServiceClient, cases []Case) {
	t.Helper()
	t.Run("UnknownToolRefused", func(t *testing.T) {
		expectRefused(t, client, UnknownTool, []byte(`{}`))
	})
	tools := map[string]bool{}
	for _, c := range cases {
		tools[c.Tool] = true
	}
	names := make([]string, 0, len(tools))
	for n := range tools {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, tool := range names {
		for _, bad := range []string{``, `null`, `[]`, `"x"`, `42`, `{`, `{"a":1}{}`} {
			t.Run(fmt.Sprintf("NonObjectArguments/%s/%q", tool, bad), func(t *testing.T) {
				expectRefused(t, client, tool, []byte(bad))
			})
		}
	}
	for _, c := range cases {
		t.Run("Case/"+c.Name, func(t *testing.T) {
			resp, err := call(t, client, c.Tool, []byte(c.Args))
			if err != nil {
				t.Fatalf("Handle: %v", err)
			}
			if resp.GetIsError() != c.WantError {
				t.Fatalf("is_error = %v, want %v; content %s", resp.GetIsError(), c.WantError, resp.GetContentJson())
			}
			text := Text(resp)
			if c.WantText != "" && !strings.Contains(text, c.WantText) {
				t.Errorf("text %q does not contain %q", text, c.WantText)
			}
			if c.NotText != "" && strings.Contains(text, c.NotText) {
				t.Errorf("text %q contains %q", text, c.NotText)
			}
		})
	}
}

func call(t *testing.T, client sharedosv1.ToolHandlerServiceClient, tool string, args []byte) (*sharedosv1.HandleResponse, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := client.Handle(ctx, &sharedosv1.HandleRequest{
		CallId: "providertest-" + t.Name(), TurnId: "providertest", Tool: tool, ArgumentsJson: args,
		Context: &sharedosv1.AccessContext{Principal: "providertest"}, DecisionId: "providertest",
	})
	if err == nil {
		if cerr := CheckResponse(resp); cerr != nil {
			t.Fatalf("contract: %v", cerr)
		}
	}
	return resp, err
}

func expectRefused(t *testing.T, client sharedosv1.ToolHandlerServiceClient, tool string, args []byte) {
	t.Helper()
	resp, err := call(t, client, tool, args)
	if err != nil {
		switch status.Code(err) {
		case codes.InvalidArgument, codes.NotFound, codes.Unimplemented:
			return
		}
		t.Fatalf("refusal must be InvalidArgument, NotFound, Unimplemented or is_error; got %v", err)
	}
	if !resp.GetIsError() {
		t.Fatalf("%s(%q) succeeded: %s", tool, args, resp.GetContentJson())
	}
}

// CheckResponse checks the MCP shape of a handler answer.
func CheckResponse(resp *sharedosv1.HandleResponse) error {
	if err := CheckContent(resp.GetContentJson()); err != nil {
		return err
	}
	if sc := bytes.TrimSpace(resp.GetStructuredContentJson()); len(sc) > 0 {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(sc, &obj); err != nil || obj == nil {
			return fmt.Errorf("structured_content_json: must be a JSON object")
		}
	}
	return nil
}

// CheckContent checks that b is an MCP content array.
func CheckContent(b []byte) error {
	var items []map[string]json.RawMessage
	if err := json.Unmarshal(b, &items); err != nil || items == nil {
		return fmt.Errorf("content_json: must be a JSON array of content objects")
	}
	str := func(i int, item map[string]json.RawMessage, key string) error {
		var s string
		if err := json.Unmarshal(item[key], &s); err != nil {
			return fmt.Errorf("content_json[%d].%s: must be a string", i, key)
		}
		return nil
	}
	for i, item := range items {
		if item == nil {
			return fmt.Errorf("content_json[%d]: must be an object", i)
		}
		var typ string
		if err := json.Unmarshal(item["type"], &typ); err != nil {
			return fmt.Errorf("content_json[%d].type: must be a string", i)
		}
		var keys []string
		switch typ {
		case "text":
			keys = []string{"text"}
		case "image", "audio":
			keys = []string{"data", "mimeType"}
		case "resource_link":
			keys = []string{"uri", "name"}
		case "resource":
			var r map[string]json.RawMessage
			if err := json.Unmarshal(item["resource"], &r); err != nil || r == nil {
				return fmt.Errorf("content_json[%d].resource: must be an object", i)
			}
			if err := str(i, r, "uri"); err != nil {
				return err
			}
		default:
			return fmt.Errorf("content_json[%d].type: unknown content type %q", i, typ)
		}
		for _, k := range keys {
			if err := str(i, item, k); err != nil {
				return err
			}
		}
	}
	return nil
}

// Text concatenates the text items of a response's content (newline-joined).
func Text(resp *sharedosv1.HandleResponse) string {
	var items []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(resp.GetContentJson(), &items)
	var parts []string
	for _, it := range items {
		if it.Type == "text" {
			parts = append(parts, it.Text)
		}
	}
	return strings.Join(parts, "\n")
}
