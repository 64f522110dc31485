package driver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sync"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// Options configure Open. The zero value is usable.
type Options struct {
	// HTTPClient carries the MCP requests (nil: a client on
	// http.DefaultTransport). Its Transport is wrapped, never modified.
	HTTPClient *http.Client
	// ProtocolVersion pins the MCP protocol version. "" is mcp-go's default:
	// 2026-07-28 (server/discover), falling back to initialize on a server
	// that predates it.
	ProtocolVersion string
	// ClientName and ClientVersion identify the client to the server
	// (default "sharedos-column-driver", "1").
	ClientName, ClientVersion string
}

// Turn is an MCP client on one turn's endpoint (mark3labs/mcp-go, Streamable
// HTTP, Authorization: Bearer), with the catalogue its tools/list gave.
// Every call goes bridge → kernel → record like any harness's. It is safe
// for concurrent use.
type Turn struct {
	client *client.Client
	tools  []Tool
}

// Open connects to a turn's MCP URL with its bearer token: it initializes
// (in the protocol era Options choose) and lists the tools, every page.
// The catalogue is read from the tools/list answer's own bytes, so each
// inputSchema is what the server sent rather than mcp-go's re-encoding of
// it.
func Open(ctx context.Context, url, token string, o Options) (*Turn, error) {
	hc := &http.Client{}
	if o.HTTPClient != nil {
		copied := *o.HTTPClient
		hc = &copied
	}
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	hc.Transport = &captureTransport{base: base}

	topts := []transport.StreamableHTTPCOption{transport.WithHTTPBasicClient(hc)}
	if token != "" {
		topts = append(topts, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token}))
	}
	tr, err := transport.NewStreamableHTTP(url, topts...)
	if err != nil {
		return nil, fmt.Errorf("turn %s: %w", url, err)
	}
	var copts []client.ClientOption
	if o.ProtocolVersion != "" {
		copts = append(copts, client.WithProtocolVersion(o.ProtocolVersion))
	}
	c := client.NewClient(tr, copts...)
	if err := c.Start(ctx); err != nil {
		return nil, fmt.Errorf("turn %s: start: %w", url, err)
	}
	name, version := o.ClientName, o.ClientVersion
	if name == "" {
		name = "sharedos-column-driver"
	}
	if version == "" {
		version = "1"
	}
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = o.ProtocolVersion
	req.Params.ClientInfo = mcp.Implementation{Name: name, Version: version}
	if _, err := c.Initialize(ctx, req); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("turn %s: initialize: %w", url, err)
	}
	tools, err := listTools(ctx, c)
	if err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("turn %s: %w", url, err)
	}
	return &Turn{client: c, tools: tools}, nil
}

// Tools is the turn's catalogue as its tools/list gave it, in order.
func (t *Turn) Tools() []Tool { return append([]Tool(nil), t.tools...) }

// ProtocolVersion is the MCP protocol version in effect.
func (t *Turn) ProtocolVersion() string { return t.client.ProtocolVersion() }

// Catalogue renders the turn's tools for vendor v (NewCatalogue).
func (t *Turn) Catalogue(v Vendor) (*Catalogue, error) { return NewCatalogue(v, t.tools) }

// Call sends call as a tools/call on the turn: call.Tool as the name and
// call.Arguments as params.arguments. mcp-go's client encodes the request
// with encoding/json, which sends the arguments' JSON value with its keys,
// numbers and string escapes as written but compacts whitespace outside
// strings and writes "<", ">", "&", U+2028 and U+2029 inside strings as
// \u escapes (ARCHITECTURE.md, invariant 8, says the same of the kernel's
// own MCP client). A refusal is a result, never an error; an error here
// means the request could not be processed (a JSON-RPC error, a transport
// failure, or a call cancelled with nothing answered).
func (t *Turn) Call(ctx context.Context, call Call) (*mcp.CallToolResult, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name = call.Tool
	req.Params.Arguments = call.Arguments
	if len(call.Arguments) == 0 {
		req.Params.Arguments = json.RawMessage(`{}`)
	}
	res, err := t.client.CallTool(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("tools/call %q (vendor call %q): %w", call.Tool, call.ID, err)
	}
	return res, nil
}

// Execute runs one vendor tool-call item on the turn: ParseCall, Call,
// RenderResult and Observe. It returns the result to give the model and
// what the call did.
//
// For arguments that are not a JSON object it sends nothing and returns
// RenderInvalidArguments' result, an Observation without a Status, and the
// *ArgumentsError (errors.Is ErrInvalidArguments): the result is still the
// answer to give the model. Any other error (*ShapeError, a failed
// request) comes with no result.
func (t *Turn) Execute(ctx context.Context, cat *Catalogue, item []byte) (json.RawMessage, Observation, error) {
	call, err := cat.ParseCall(item)
	var ae *ArgumentsError
	if errors.As(err, &ae) {
		return cat.RenderInvalidArguments(call, ae), Observation{VendorCallID: call.ID, Tool: call.Tool}, err
	}
	if err != nil {
		return nil, Observation{}, err
	}
	res, err := t.Call(ctx, call)
	if err != nil {
		return nil, Observation{VendorCallID: call.ID, Tool: call.Tool}, err
	}
	return cat.RenderResult(call, res), Observe(call, res), nil
}

// Close ends the MCP connection (the turn itself stays open: its host
// closes it).
func (t *Turn) Close() error { return t.client.Close() }

// listTools lists every page of the catalogue. mcp-go's ListToolsByPage
// speaks the protocol (either era); the page is read from the answer's own
// bytes, which the capture on the request's context kept, because mcp-go
// decodes an inputSchema into a struct that drops and reorders keywords.
func listTools(ctx context.Context, c *client.Client) ([]Tool, error) {
	var tools []Tool
	seen := map[string]bool{}
	cursor := ""
	for {
		cp := &capture{}
		req := mcp.ListToolsRequest{}
		req.Params.Cursor = mcp.Cursor(cursor)
		typed, err := c.ListToolsByPage(context.WithValue(ctx, captureKey{}, cp), req)
		if err != nil {
			return nil, fmt.Errorf("tools/list: %w", err)
		}
		raw, err := cp.result()
		if err != nil {
			return nil, fmt.Errorf("tools/list: %w", err)
		}
		page, err := ParseToolsPage(raw)
		if err != nil {
			return nil, err
		}
		listed := make(map[string]bool, len(page.Tools))
		for _, tl := range page.Tools {
			listed[tl.Name] = true
		}
		for _, tl := range typed.Tools {
			if !listed[tl.Name] {
				return nil, fmt.Errorf("tools/list: the answer's bytes do not list %q, which mcp-go decoded from it", tl.Name)
			}
		}
		tools = append(tools, page.Tools...)
		if page.NextCursor == "" {
			return tools, nil
		}
		if seen[page.NextCursor] {
			return nil, fmt.Errorf("tools/list: nextCursor %q repeats", page.NextCursor)
		}
		seen[page.NextCursor], cursor = true, page.NextCursor
	}
}

// captureKey marks a request context whose HTTP answer is kept.
type captureKey struct{}

// capture keeps the body of an HTTP answer as mcp-go reads it.
type capture struct {
	mu          sync.Mutex
	contentType string
	body        bytes.Buffer
}

func (c *capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.body.Write(p)
}

// result is the JSON-RPC result in the kept answer: a JSON body, or the
// event of an event stream that carries a result.
func (c *capture) result() (json.RawMessage, error) {
	c.mu.Lock()
	ct, body := c.contentType, append([]byte(nil), c.body.Bytes()...)
	c.mu.Unlock()
	mt, _, _ := mime.ParseMediaType(ct)
	var messages [][]byte
	switch mt {
	case "application/json":
		messages = [][]byte{body}
	case "text/event-stream":
		messages = sseData(body)
	default:
		return nil, fmt.Errorf("answer of Content-Type %q kept for the catalogue", ct)
	}
	for _, m := range messages {
		var msg struct {
			Result json.RawMessage `json:"result"`
		}
		if err := json.NewDecoder(bytes.NewReader(m)).Decode(&msg); err == nil && len(msg.Result) > 0 {
			return msg.Result, nil
		}
	}
	return nil, errors.New("no JSON-RPC result in the answer")
}

// sseData is the data of each event in an event stream.
func sseData(body []byte) [][]byte {
	var out [][]byte
	var cur []byte
	has := false
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 64*1024), len(body)+1)
	for sc.Scan() {
		line := bytes.TrimSuffix(sc.Bytes(), []byte{'\r'})
		switch {
		case len(line) == 0:
			if has {
				out = append(out, cur)
			}
			cur, has = nil, false
		case bytes.HasPrefix(line, []byte("data:")):
			d := bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" "))
			if has {
				cur = append(cur, '\n')
			}
			cur, has = append(cur, d...), true
		}
	}
	if has {
		out = append(out, cur)
	}
	return out
}

// captureTransport tees the body of a POST's answer into the capture its
// request context carries.
type captureTransport struct{ base http.RoundTripper }

func (t *captureTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	cp, ok := r.Context().Value(captureKey{}).(*capture)
	if err != nil || !ok || r.Method != http.MethodPost {
		return resp, err
	}
	cp.mu.Lock()
	cp.contentType = resp.Header.Get("Content-Type")
	cp.body.Reset()
	cp.mu.Unlock()
	resp.Body = &teeBody{ReadCloser: resp.Body, w: cp}
	return resp, nil
}

type teeBody struct {
	io.ReadCloser
	w io.Writer
}

func (b *teeBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		_, _ = b.w.Write(p[:n])
	}
	return n, err
}
