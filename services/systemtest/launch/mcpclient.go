package launch

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// MCPTarget is one MCP endpoint driven by a raw keep-alive HTTP JSON-RPC
// client — what a benchmark user writes, with no SDK cost on the client's
// side — in either era: 2026-07-28 (stateless, the _meta and Mcp-* headers
// on every request) or 2025-11-25 (initialize first, then the session id).
// Benchmarks and `make profile` drive the full path and their baselines
// with the same one.
type MCPTarget struct {
	URL, Token string
	Modern     bool
	// Args are the tools/call arguments ({"text":"hello"} when empty).
	Args    string
	session string
}

// MCPClient is the HTTP client every MCPTarget shares (keep-alive, room
// for 16 concurrent callers and more).
var MCPClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, MaxConnsPerHost: 64}}

// ModernMeta is the _meta every 2026-07-28 request of the raw client
// carries.
const ModernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"}}`

// ModernCall is a 2026-07-28 tools/call request.
func ModernCall(id int, name, args string) string {
	q, _ := json.Marshal(name)
	return `{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"tools/call","params":{"name":` + string(q) +
		`,"arguments":` + args + `,` + ModernMeta + `}}`
}

// LegacyInit is a 2025-11-25 initialize request declaring no capabilities.
const LegacyInit = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// request builds a POST of body with the era's headers.
func (m *MCPTarget) request(body, method, name string) *http.Request {
	req, _ := http.NewRequest(http.MethodPost, m.URL, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if m.Token != "" {
		req.Header.Set("Authorization", "Bearer "+m.Token)
	}
	if m.Modern {
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", method)
		if name != "" {
			req.Header.Set("Mcp-Name", name)
		}
	} else if m.session != "" {
		req.Header.Set("Mcp-Session-Id", m.session)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	return req
}

// Post sends body and reads the whole answer; it returns the HTTP status.
// The first answer's Mcp-Session-Id becomes the session of a 2025 target.
func (m *MCPTarget) Post(body, method, name string) (int, error) {
	resp, err := MCPClient.Do(m.request(body, method, name))
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if m.session == "" && !m.Modern {
		m.session = resp.Header.Get("Mcp-Session-Id")
	}
	return resp.StatusCode, nil
}

// CallBody is the tools/call request for tool with the target's arguments.
func (m *MCPTarget) CallBody(tool string) string {
	args := m.Args
	if args == "" {
		args = `{"text":"hello"}`
	}
	if m.Modern {
		return ModernCall(1, tool, args)
	}
	return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `}}`
}

// Init opens a 2025 target's session (initialize, notifications/initialized);
// a 2026-07-28 target has none.
func (m *MCPTarget) Init(tb testing.TB) {
	tb.Helper()
	if m.Modern {
		return
	}
	if st, err := m.Post(LegacyInit, "initialize", ""); err != nil || st != 200 || m.session == "" {
		tb.Fatalf("initialize: %d %v", st, err)
	}
	_, _ = m.Post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, "", "")
}

// CheckCall makes one call and fails unless it is a successful result
// (not a refusal, not a JSON-RPC error): the path measured really runs.
func (m *MCPTarget) CheckCall(tb testing.TB, tool string) {
	tb.Helper()
	resp, err := MCPClient.Do(m.request(m.CallBody(tool), "tools/call", tool))
	if err != nil {
		tb.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"result"`) || strings.Contains(string(body), `"isError":true`) {
		tb.Fatalf("tools/call %s: %d %s", tool, resp.StatusCode, body)
	}
}
