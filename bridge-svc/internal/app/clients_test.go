package app_test

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"testing"

	mcpclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// toolView and callView are what the tests compare, whichever client.
type toolView struct {
	Name string
	Meta map[string]any
}

type callView struct {
	IsError    bool
	Text       string
	Meta       map[string]any
	Structured any
}

type mcpClient interface {
	List(ctx context.Context) (tools []toolView, meta map[string]any, err error)
	Call(ctx context.Context, name string, args map[string]any) (*callView, error)
	Close()
}

// era names a protocol generation a client is pinned to.
type era struct {
	name    string
	version string // "" = 2026-07-28 via server/discover
}

// The two oldest are what mcp-go negotiates too (docs/mcp-surface.md).
var eras = []era{{"2026-07-28", ""}, {"2025-11-25", "2025-11-25"}, {"2025-06-18", "2025-06-18"},
	{"2025-03-26", "2025-03-26"}, {"2024-11-05", "2024-11-05"}}

type clientKind struct {
	name    string
	connect func(t *testing.T, url, token string, e era, seen *headerLog) mcpClient
}

var clientKinds = []clientKind{{"mcp-go", connectMCPGo}, {"go-sdk", connectGoSDK}}

// headerLog records the protocol version headers a client sent.
type headerLog struct {
	mu       sync.Mutex
	versions map[string]bool
}

func (h *headerLog) add(v string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.versions == nil {
		h.versions = map[string]bool{}
	}
	h.versions[v] = true
}

func (h *headerLog) saw(v string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.versions[v]
}

type authTransport struct {
	token string
	seen  *headerLog
}

func (a *authTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+a.token)
	if a.seen != nil {
		a.seen.add(r.Header.Get("Mcp-Protocol-Version"))
	}
	return http.DefaultTransport.RoundTrip(r)
}

// --- mark3labs/mcp-go client ---

type mcpGoClient struct{ c *mcpclient.Client }

func connectMCPGo(t *testing.T, url, token string, e era, seen *headerLog) mcpClient {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(url,
		transport.WithHTTPBasicClient(&http.Client{Transport: &authTransport{token: token, seen: seen}}))
	if err != nil {
		t.Fatal(err)
	}
	var opts []mcpclient.ClientOption
	if e.version != "" {
		opts = append(opts, mcpclient.WithProtocolVersion(e.version))
	}
	c := mcpclient.NewClient(tr, opts...)
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatalf("mcp-go Start: %v", err)
	}
	req := mcp.InitializeRequest{}
	req.Params.ClientInfo = mcp.Implementation{Name: "bridge-test", Version: "1"}
	req.Params.ProtocolVersion = e.version
	if e.version == "" {
		req.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	}
	if _, err := c.Initialize(ctx, req); err != nil {
		t.Fatalf("mcp-go Initialize (%s): %v", e.name, err)
	}
	return &mcpGoClient{c: c}
}

func (m *mcpGoClient) List(ctx context.Context) ([]toolView, map[string]any, error) {
	res, err := m.c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		return nil, nil, err
	}
	var out []toolView
	for _, t := range res.Tools {
		v := toolView{Name: t.Name}
		if t.Meta != nil {
			v.Meta = t.Meta.AdditionalFields
		}
		out = append(out, v)
	}
	var meta map[string]any
	if res.Meta != nil {
		meta = res.Meta.AdditionalFields
	}
	return out, meta, nil
}

func (m *mcpGoClient) Call(ctx context.Context, name string, args map[string]any) (*callView, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := m.c.CallTool(ctx, req)
	if err != nil {
		return nil, err
	}
	v := &callView{IsError: res.IsError, Structured: res.StructuredContent}
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			v.Text += tc.Text
		}
	}
	if res.Meta != nil {
		v.Meta = res.Meta.AdditionalFields
	}
	return v, nil
}

func (m *mcpGoClient) Close() { _ = m.c.Close() }

// --- official go-sdk client ---

type goSDKClient struct{ cs *sdk.ClientSession }

func connectGoSDK(t *testing.T, url, token string, e era, seen *headerLog) mcpClient {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "bridge-test", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{
		Endpoint:             url,
		HTTPClient:           &http.Client{Transport: &authTransport{token: token, seen: seen}},
		DisableStandaloneSSE: true,
		MaxRetries:           -1,
	}, &sdk.ClientSessionOptions{ProtocolVersion: e.version})
	if err != nil {
		t.Fatalf("go-sdk Connect (%s): %v", e.name, err)
	}
	return &goSDKClient{cs: cs}
}

func (g *goSDKClient) List(ctx context.Context) ([]toolView, map[string]any, error) {
	res, err := g.cs.ListTools(ctx, nil)
	if err != nil {
		return nil, nil, err
	}
	var out []toolView
	for _, t := range res.Tools {
		out = append(out, toolView{Name: t.Name, Meta: t.Meta})
	}
	return out, res.Meta, nil
}

func (g *goSDKClient) Call(ctx context.Context, name string, args map[string]any) (*callView, error) {
	res, err := g.cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return nil, err
	}
	v := &callView{IsError: res.IsError, Meta: res.Meta, Structured: res.StructuredContent}
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			v.Text += tc.Text
		}
	}
	return v, nil
}

func (g *goSDKClient) Close() { _ = g.cs.Close() }

// asMap normalises a decoded _meta value for comparison.
func asMap(v any) map[string]any {
	b, _ := json.Marshal(v)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}
