package launch

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
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

// UpstreamTurn acquires the MCP server at url as the upstream "everything"
// (new tools approved, notes.append confirmed read-only, so a turn's calls
// of it run in parallel) and opens a turn of the example policy's
// integrator role: its MCP URL and bearer token. The upstream benchmarks
// and `make profile PROFILE_PATH=upstream` call notes.append there.
func (s *Stack) UpstreamTurn(tb testing.TB, url string) (mcpURL, token string) {
	tb.Helper()
	if out, errOut, code := s.Ctl(tb, "providers", "add", "--namespace", "everything", "--url", url,
		"--auto-approve-new", "--read-only", "everything.notes.append"); code != 0 {
		tb.Fatalf("providers add: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code := s.Ctl(tb, "turn", "open", "--principal", "bench", "--role", "integrator", "--ttl", "8h", "--harness", "bench")
	if code != 0 {
		tb.Fatalf("turn open: exit %d\n%s", code, errOut)
	}
	var turn struct{ McpURL, Token string }
	if err := json.Unmarshal([]byte(out), &turn); err != nil || turn.McpURL == "" {
		tb.Fatalf("turn open output: %v\n%s", err, out)
	}
	return turn.McpURL, turn.Token
}

// LegacyOnly serves next as a server of the 2025 eras only: server/discover
// is answered "method not found", so a client falls back to initialize and
// its session may carry server-to-client requests (elicitation, sampling).
func LegacyOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(body, &msg) == nil && msg.Method == "server/discover" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(msg.ID) + `,"error":{"code":-32601,"message":"Method not found"}}`))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
	})
}
