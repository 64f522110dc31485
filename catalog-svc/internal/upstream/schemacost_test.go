package upstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"

	"github.com/sharedos/toolshare/catalog-svc/internal/catalog"
	"github.com/sharedos/toolshare/catalog-svc/internal/store/memory"
)

// An upstream's tool whose schema would cost validation or compilation
// past the catalogue's bounds, or one declaring a dialect below its top,
// is skipped alone, in status.skipped naming the rule, as any schema the
// catalogue refuses: never acquired nor
// quarantined (attack run: a quarantined tool's `.{1000}` patterns took
// 1.38 GB at providers add; an acquired one's $ref graph 31 s a call).
// The upstream's other tools are acquired.
func TestAnUpstreamsCostlySchemasAreSkipped(t *testing.T) {
	var graph []string
	for i := range 24 {
		graph = append(graph, fmt.Sprintf(`"a%d":{"allOf":[{"$ref":"#/definitions/a%d"},{"$ref":"#/definitions/a%d"}]}`, i, i+1, i+1))
	}
	graph = append(graph, `"a24":{}`)
	costly := map[string]struct{ schema, rule string }{
		"graph": {`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","definitions":{` + strings.Join(graph, ",") + `},"$ref":"#/definitions/a0"}`,
			catalog.RuleValidationWork},
		"regex": {`{"type":"object","properties":{"s":{"type":"string","pattern":"` + strings.Repeat(`.{1000}`, 300) + `"}}}`,
			catalog.RuleRegexSize},
		// A 2020-12 resource inside a draft-07 schema.
		"dialect": {`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"x":{"$id":"urn:x","$schema":"https://json-schema.org/draft/2020-12/schema"}}}`,
			catalog.RuleNestedDialect},
	}
	s := server.NewMCPServer("costly", "1", server.WithToolCapabilities(true))
	answer := func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("ok"), nil
	}
	s.AddTool(mcp.NewTool("fine", mcp.WithDescription("A tool."), mcp.WithString("s")), answer)
	for name, c := range costly {
		s.AddTool(mcp.NewToolWithRawSchema(name, "A tool.", json.RawMessage(c.schema)), answer)
	}
	mem := memory.New()
	m := managerOver(t, mem, nil)
	rec, err := m.Add(t.Context(), &sharedosv1.UpstreamProvider{Namespace: "cost", Url: served(t, s), AutoApproveNew: true}, "op")
	if err != nil || rec.GetStatus().GetError() != "" {
		t.Fatalf("add: %v %s", err, rec.GetStatus().GetError())
	}
	if tools := rec.GetStatus().GetTools(); len(tools) != 1 || tools[0].GetName() != "cost.fine" {
		t.Errorf("acquired %v, want cost.fine alone", tools)
	}
	skipped := map[string]string{}
	for _, sk := range rec.GetStatus().GetSkipped() {
		skipped[sk.GetUpstreamName()] = sk.GetReason()
	}
	for name, c := range costly {
		if why, ok := skipped[name]; !ok || !strings.Contains(why, "violates "+c.rule) {
			t.Errorf("%s: skipped for %q, want a %s refusal", name, why, c.rule)
		}
		if _, _, err := newCatalog(t, mem).Get(t.Context(), "cost."+name); !errors.Is(err, catalog.ErrNotFound) {
			t.Errorf("cost.%s is in the catalogue: %v", name, err)
		}
	}
}
