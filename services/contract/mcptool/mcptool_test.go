package mcptool_test

import (
	"errors"
	"strings"
	"testing"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/mcptool"
)

func TestBuild(t *testing.T) {
	ok := &sharedosv1.PublishedTool{Name: "files.read", Description: "Read.",
		InputSchemaJson: []byte(`{"type":"object","properties":{"path":{"type":"string"}}}`),
		AnnotationsJson: []byte(`{"title":"Read","readOnlyHint":true,"openWorldHint":false}`)}
	tool, err := mcptool.Build(ok, "files_read")
	if err != nil || tool.Name != "files_read" || tool.Annotations.ReadOnlyHint == nil || !*tool.Annotations.ReadOnlyHint {
		t.Fatalf("Build = %+v, %v", tool, err)
	}
	for name, c := range map[string]struct {
		tool  *sharedosv1.PublishedTool
		field string
	}{
		"readOnlyHint a string": {&sharedosv1.PublishedTool{Name: "a.b", AnnotationsJson: []byte(`{"readOnlyHint":"yes"}`)}, "annotations"},
		"title a number":        {&sharedosv1.PublishedTool{Name: "a.b", AnnotationsJson: []byte(`{"title":7}`)}, "annotations"},
		"bad x-mcp-header":      {&sharedosv1.PublishedTool{Name: "a.b", InputSchemaJson: []byte(`{"type":"object","properties":{"q":{"type":"object","x-mcp-header":"Q"}}}`)}, "inputSchema"},
		// mcp-go reads the key case-blind and unescaped (encoding/json), and
		// panics in AddTool on what it reads: every spelling is checked.
		"bad X-MCP-Header":         {&sharedosv1.PublishedTool{Name: "a.b", InputSchemaJson: []byte(`{"type":"object","properties":{"q":{"type":"object","X-MCP-Header":"Q"}}}`)}, "inputSchema"},
		"bad x-mcp-header escaped": {&sharedosv1.PublishedTool{Name: "a.b", InputSchemaJson: []byte(`{"type":"object","properties":{"q":{"type":"object","x-mcp-head\u0065r":"Q"}}}`)}, "inputSchema"},
	} {
		_, err := mcptool.Build(c.tool, c.tool.Name)
		var e *mcptool.Error
		if !errors.As(err, &e) || e.Field != c.field || strings.TrimSpace(e.Detail) == "" {
			t.Errorf("%s: Build error = %v, want a %s error", name, err, c.field)
		}
	}
}
