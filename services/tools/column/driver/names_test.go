package driver_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/outcome"
	"github.com/sharedos/toolshare/services/tools/column/driver"
)

func tools(names ...string) []driver.Tool {
	out := make([]driver.Tool, len(names))
	for i, n := range names {
		out[i] = driver.Tool{Name: n, InputSchema: json.RawMessage(`{"type":"object"}`)}
	}
	return out
}

// TestPortableNames: names that fit are kept, names that do not get the
// bridge's portable spelling, and the mapping goes both ways.
func TestPortableNames(t *testing.T) {
	long64 := strings.Repeat("a", 60) + ".bcd" // 64 characters once '.' → '_'
	cases := map[string]string{
		"files.read":    "files_read",
		"github.search": "github_search",
		"a.b-c":         "a_b_c", // the bridge's rule: '-' too once the name needs rewriting
		"notes-append":  "notes-append",
		"Echo_2":        "Echo_2",
		long64:          strings.Repeat("a", 60) + "_bcd",
	}
	for _, v := range driver.Vendors() {
		for canonical, want := range cases {
			c, err := driver.NewCatalogue(v, tools(canonical))
			if err != nil {
				t.Fatalf("%s %s: %v", v, canonical, err)
			}
			if got, _ := c.VendorName(canonical); got != want {
				t.Errorf("%s: %s → %q, want %q", v, canonical, got, want)
			}
			if back, ok := c.ToolName(want); !ok || back != canonical {
				t.Errorf("%s: %q maps back to %q (%v), want %s", v, want, back, ok, canonical)
			}
			call, err := c.ParseCall(vendorCall(v, want))
			if err != nil || call.Tool != canonical || call.VendorName != want {
				t.Errorf("%s: call of %q → %+v, %v; want tool %s", v, want, call, err, canonical)
			}
		}
	}
}

func vendorCall(v driver.Vendor, name string) []byte {
	q, _ := json.Marshal(name)
	switch v {
	case driver.Anthropic:
		return []byte(`{"type":"tool_use","id":"t1","name":` + string(q) + `,"input":{}}`)
	case driver.OpenAIResponses:
		return []byte(`{"type":"function_call","call_id":"t1","name":` + string(q) + `,"arguments":"{}"}`)
	default:
		return []byte(`{"type":"toolCall","id":"t1","name":` + string(q) + `,"arguments":{}}`)
	}
}

// TestNamesThatCannotBeRendered: a collision names both tools, in either
// order; an overlong vendor name, an empty name and a tool listed twice
// name the tool. Nothing is rendered.
func TestNamesThatCannotBeRendered(t *testing.T) {
	cases := []struct {
		names            []string
		tool, other, vnm string
		detail           string
	}{
		{[]string{"a.b", "a_b"}, "a_b", "a.b", "a_b", "map back to one tool"},
		{[]string{"a_b", "a.b"}, "a.b", "a_b", "a_b", "map back to one tool"},
		{[]string{"x", "files.read", "files-read", "files_read"}, "files_read", "files.read", "files_read", "map back to one tool"},
		{[]string{strings.Repeat("n", 65)}, strings.Repeat("n", 65), "", strings.Repeat("n", 65), "65 characters"},
		{[]string{"ns." + strings.Repeat("n", 125)}, "ns." + strings.Repeat("n", 125), "", "ns_" + strings.Repeat("n", 125), "128 characters"},
		{[]string{""}, "", "", "", "empty"},
		{[]string{"clock", "clock"}, "clock", "", "clock", "listed twice"},
	}
	for _, v := range driver.Vendors() {
		for _, tc := range cases {
			c, err := driver.NewCatalogue(v, tools(tc.names...))
			var ne *driver.NameError
			if c != nil || !errors.As(err, &ne) {
				t.Fatalf("%s %q: catalogue %v, error %v; want a *NameError", v, tc.names, c, err)
			}
			if ne.Vendor != v || ne.Tool != tc.tool || ne.Other != tc.other || ne.VendorName != tc.vnm || !strings.Contains(ne.Error(), tc.detail) {
				t.Errorf("%s %q: %+v (%v); want tool %q other %q vendor name %q, %q", v, tc.names, ne, err, tc.tool, tc.other, tc.vnm, tc.detail)
			}
			for _, n := range []string{tc.tool, tc.other} {
				if n != "" && !strings.Contains(err.Error(), `"`+n+`"`) {
					t.Errorf("%s: error %q does not name %q", v, err, n)
				}
			}
		}
	}
}

func TestUnknownVendor(t *testing.T) {
	if _, err := driver.NewCatalogue("gemini", tools("x")); err == nil || !strings.Contains(err.Error(), `"gemini"`) {
		t.Errorf("NewCatalogue(gemini) error = %v, want one naming the vendor", err)
	}
	for _, v := range driver.Vendors() {
		if !v.Valid() {
			t.Errorf("%s is not Valid", v)
		}
	}
}

// TestObserveReadsOutcomeMeta: Observe reads exactly what the bridge writes
// with outcome.Meta (the contract's key and shape), for a denied and a
// failed result; an error result without it has no status.
func TestObserveReadsOutcomeMeta(t *testing.T) {
	call := driver.Call{ID: "toolu_9", VendorName: "files_read", Tool: "files.read"}
	for _, r := range []*sharedosv1.ToolResult{
		outcome.Denied(outcome.PermissionDenied, "role engineer may not read /private/a.txt"),
		outcome.Failed(outcome.AuthzUnavailable, "policy decision point unreachable"),
	} {
		r.CallId, r.DecisionId = "c-"+r.GetCode(), "d-"+r.GetCode()
		// Through JSON, as a client receives it.
		res := mcp.NewToolResultError(outcome.Text(r))
		res.Meta = &mcp.Meta{AdditionalFields: map[string]any{outcome.MetaKey: outcome.Meta(r)}}
		b, err := json.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		raw := json.RawMessage(b)
		got, err := mcp.ParseCallToolResult(&raw)
		if err != nil {
			t.Fatal(err)
		}
		obs := driver.Observe(call, got)
		want := driver.Observation{VendorCallID: "toolu_9", Tool: "files.read", Arguments: call.Arguments,
			Status: outcome.StatusName(r.GetStatus()), Code: r.GetCode(), CallID: r.GetCallId(), DecisionID: r.GetDecisionId(), Outcome: true}
		if !reflect.DeepEqual(obs, want) {
			t.Errorf("Observe = %+v, want %+v", obs, want)
		}
	}
	if obs := driver.Observe(call, mcp.NewToolResultError("boom")); obs.Status != "" || obs.Outcome {
		t.Errorf("an error without an outcome observed as %+v", obs)
	}
	if obs := driver.Observe(call, mcp.NewToolResultText("ok")); obs.Status != "succeeded" || obs.CallID != "" {
		t.Errorf("a success without an outcome observed as %+v", obs)
	}
}

// TestContentByPointer: content held by pointer renders like content held
// by value.
func TestContentByPointer(t *testing.T) {
	c, err := driver.NewCatalogue(driver.Pi, tools("files.read"))
	if err != nil {
		t.Fatal(err)
	}
	call := driver.Call{ID: "p1", VendorName: "files_read", Tool: "files.read"}
	byValue := &mcp.CallToolResult{Content: []mcp.Content{
		mcp.TextContent{Type: "text", Text: "t"}, mcp.ImageContent{Type: "image", Data: "AA==", MIMEType: "image/png"},
		mcp.EmbeddedResource{Type: "resource", Resource: mcp.TextResourceContents{URI: "file:///a", Text: "x"}},
	}}
	byPointer := &mcp.CallToolResult{Content: []mcp.Content{
		&mcp.TextContent{Type: "text", Text: "t"}, &mcp.ImageContent{Type: "image", Data: "AA==", MIMEType: "image/png"},
		&mcp.EmbeddedResource{Type: "resource", Resource: &mcp.TextResourceContents{URI: "file:///a", Text: "x"}},
	}}
	if a, b := c.RenderResult(call, byValue), c.RenderResult(call, byPointer); string(a) != string(b) {
		t.Errorf("by value %s\nby pointer %s", a, b)
	}
}

// TestCallItemRoundTrip: what CallItem writes as a vendor's model would,
// ParseCall reads back exactly — the name mapped both ways, the arguments
// byte for byte (the scripted column's translation).
func TestCallItemRoundTrip(t *testing.T) {
	tools := []driver.Tool{{Name: "files.read", InputSchema: json.RawMessage(`{"type":"object"}`)}}
	for _, v := range driver.Vendors() {
		cat, err := driver.NewCatalogue(v, tools)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct{ tool, args, want string }{
			{"files.read", `{"path":"/public/a.txt"}`, `{"path":"/public/a.txt"}`},
			{"files.read", `{ "b": 12345678901234567890, "a": "\u00e9 \"<&>\" \\ \n", "n": {"x": [1e400, -0.0]} }`, ""},
			{"github.search", `{"q":"x"}`, ""},
			{"files.read", ``, `{}`},
		} {
			item := cat.CallItem("id-1", tc.tool, json.RawMessage(tc.args))
			call, err := cat.ParseCall(item)
			want := tc.want
			if want == "" {
				want = tc.args
			}
			if err != nil || call.ID != "id-1" || call.Tool != tc.tool || string(call.Arguments) != want {
				t.Errorf("%s: %s → %+v (%v), want %s %s", v, item, call, err, tc.tool, want)
			}
		}
	}
}
