package launch

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// PlainMCP starts plain mcp-go (a StreamableHTTPServer, both eras) in this
// process with in-process echo tools named notes.append and files.read, and
// returns its MCP URL: the baseline every full-path figure is a ratio to.
func PlainMCP(tb testing.TB) string {
	tb.Helper()
	s := server.NewMCPServer("plain", "1", server.WithToolCapabilities(false))
	for _, name := range []string{"notes.append", "files.read"} {
		s.AddTool(mcp.NewToolWithRawSchema(name, "echo", []byte(`{"type":"object"}`)),
			func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultText(string(req.Params.RawArguments)), nil
			})
	}
	ts := httptest.NewServer(server.NewStreamableHTTPServer(s, server.WithDisableStreaming(true)))
	tb.Cleanup(ts.Close)
	return ts.URL + "/mcp"
}
