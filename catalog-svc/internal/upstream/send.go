package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// A tools/call is sent on the session's transport by SharedOS itself, not
// through mcp-go's typed CallTool: that one encodes the params three times
// over (its per-request _meta and its standard headers each re-encode
// them) and types a result the provider then reads raw — ≈ 60 µs of
// catalog-svc's CPU per call (issue 19, item 9). The request is the one
// mcp-go's client would send: the same _meta, the same Mcp-Method, Mcp-Name
// and Mcp-Param-* headers (from the published definition, where mcp-go's
// client had them only from a listing on the same session), the same
// cancellation. Everything else (the
// handshake, listings, prompts/get, resources/read) stays on the client.

// session is one live MCP session with an upstream: mcp-go's client, the
// transport under it (a tools/call is sent there directly), what the
// handshake said, and the _meta each request carries.
type session struct {
	cl   *client.Client
	tr   transport.Interface
	info serverInfo
	// meta is the _meta every request carries on a 2026-07-28 session
	// (protocol version, capabilities, client info); nil on an earlier
	// era, whose handshake said them once.
	meta json.RawMessage
	// notifies: cancelling a request is a notifications/cancelled (stdio);
	// over HTTP the request's stream ending is the cancellation.
	notifies bool
}

func newSession(cl *client.Client, tr transport.Interface, info serverInfo) (session, error) {
	s := session{cl: cl, tr: tr, info: info}
	_, isHTTP := tr.(transport.HTTPConnection)
	s.notifies = !isHTTP
	if mcp.IsModernProtocol(info.protocol) {
		meta, err := json.Marshal(map[string]any{
			mcp.MetaKeyProtocolVersion:    info.protocol,
			mcp.MetaKeyClientCapabilities: capabilities,
			mcp.MetaKeyClientInfo:         clientInfo,
		})
		if err != nil {
			return session{}, err
		}
		s.meta = meta
	}
	return s, nil
}

// metaWith is the request's _meta: the session's, with token as the
// progress token when set.
func (s session) metaWith(token string) (json.RawMessage, error) {
	if token == "" {
		return s.meta, nil
	}
	t, err := json.Marshal(token)
	if err != nil {
		return nil, err
	}
	m := append([]byte(`{"progressToken":`), t...)
	if len(s.meta) > len("{}") { // an object with members, as json.Marshal wrote it
		return append(append(m, ','), s.meta[1:]...), nil
	}
	return append(m, '}'), nil
}

// callParams are a tools/call's params.
type callParams struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Meta      json.RawMessage `json:"_meta,omitempty"`
}

// directIDs keeps the ids of requests sent directly apart from those
// mcp-go's client numbers on the same session (from 1 up).
const directIDs = 1 << 40

// cancelNotice bounds sending a notifications/cancelled.
const cancelNotice = 5 * time.Second

// callTool sends one tools/call of the upstream tool name with args (the
// authorized bytes) on s and returns its raw result; bound, when set, is
// the tool's definition whose x-mcp-header bindings become Mcp-Param-*
// headers. A failure to get an answer is a transport.Error
// (isTransportError); a JSON-RPC error is the error mcp-go makes of it.
func (c *conn) callTool(ctx context.Context, s session, name string, args json.RawMessage, token string, bound *mcp.Tool) (json.RawMessage, error) {
	meta, err := s.metaWith(token)
	if err != nil {
		return nil, err
	}
	params, err := json.Marshal(callParams{Name: name, Arguments: args, Meta: meta})
	if err != nil {
		return nil, fmt.Errorf("tools/call params: %w", err)
	}
	var header http.Header
	if mcp.RequiresStandardHeaders(s.info.protocol) {
		header = http.Header{}
		header.Set(mcp.HeaderMethod, string(mcp.MethodToolsCall))
		if v, ok := mcp.EncodeHeaderValue(name); ok {
			header.Set(mcp.HeaderName, v)
		}
		if bound != nil {
			for k, v := range mcp.GenerateParamHeaders(bound, params) {
				header.Set(k, v)
			}
		}
	}
	req := transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(directIDs + c.ids.Add(1)),
		Method: string(mcp.MethodToolsCall), Params: json.RawMessage(params), Header: header}
	if err := ctx.Err(); err != nil {
		return nil, transport.NewError(err)
	}
	resp, err := s.tr.SendRequest(ctx, req)
	if err != nil {
		if ctx.Err() != nil && s.notifies {
			s.cancelled(ctx, req.ID)
		}
		return nil, transport.NewError(err)
	}
	if resp.Error != nil {
		return nil, resp.Error.AsError()
	}
	return resp.Result, nil
}

// cancelled tells the upstream to stop the request id, whose caller left:
// off the caller's path, best effort, as mcp-go's client does.
func (s session) cancelled(ctx context.Context, id mcp.RequestId) {
	n := mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION, Notification: mcp.Notification{
		Method: string(mcp.MethodNotificationCancelled),
		Params: mcp.NotificationParams{AdditionalFields: map[string]any{"requestId": id, "reason": ctx.Err().Error()}},
	}}
	ctx = context.WithoutCancel(ctx)
	go func() {
		ctx, cancel := context.WithTimeout(ctx, cancelNotice)
		defer cancel()
		_ = s.tr.SendNotification(ctx, n)
	}()
}

// headerBindings is the published definition of tool (the upstream's name
// for it: name) when its input schema binds arguments to headers
// (x-mcp-header): the definition the upstream had when it was approved,
// the same on every replica whether or not it listed the upstream itself.
// nil when it binds none, or is no longer published.
func headerBindings(ctx context.Context, reg Registry, tool, name string) *mcp.Tool {
	res, err := reg.Resolve(ctx, tool)
	if err != nil {
		return nil
	}
	schema := res.Registration.GetInputSchemaJson()
	if !bytes.Contains(schema, []byte("x-mcp-header")) {
		return nil
	}
	t := &mcp.Tool{Name: name, RawInputSchema: schema}
	if len(mcp.ExtractParamHeaderBindings(t)) == 0 {
		return nil
	}
	return t
}
