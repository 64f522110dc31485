package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/inputround"

	"github.com/sharedos/toolshare/catalog-svc/internal/budget"
)

// A tools/call is sent on the session's transport by SharedOS itself, not
// through mcp-go's typed CallTool: that one encodes the params three times
// over (its per-request _meta and its standard headers each re-encode
// them) and types a result the provider then reads raw — ≈ 60 µs of
// catalog-svc's CPU per call (issue 19, item 9). The request is the one
// mcp-go's client would send — the same Mcp-Method, Mcp-Name and
// Mcp-Param-* headers (from the published definition, where mcp-go's
// client had them only from a listing on the same session), the same
// cancellation (stdio: notifications/cancelled, which the client sends
// for its own requests; HTTP: the request's stream closing, and on a
// 2025-era session a notifications/cancelled the capturing transport
// sends for every request) — but for its _meta's capabilities: those of
// the input the call's harness can answer, not every one (newSession).
// Listings are sent directly too (acquire.go). The handshake, prompts/get
// and resources/read stay on the client; prompts/get and resources/read get
// their capabilities set in the capturing transport (viaClient).

// session is one live MCP session with an upstream: mcp-go's client, the
// transport under it (a tools/call is sent there directly), what the
// handshake said, and the _meta each request carries.
type session struct {
	cl   *client.Client
	tr   transport.Interface
	info serverInfo
	// metas are the _meta a tools/call carries on a 2026-07-28 session
	// (protocol version, capabilities, client info), one per set of input
	// requests its harness can answer (metaWith); nil on an earlier era,
	// whose handshake said them once.
	metas []json.RawMessage
	// stdio: cancelling a request is a notifications/cancelled, sent here
	// for a tools/call (over HTTP the request's stream closing, and on a
	// 2025-era session the notification capturingHTTP sends), and each
	// message is one line, so a call's arguments go without their line
	// breaks (oneLine).
	stdio bool
}

func newSession(cl *client.Client, tr transport.Interface, info serverInfo) (session, error) {
	s := session{cl: cl, tr: tr, info: info}
	_, isHTTP := tr.(transport.HTTPConnection)
	s.stdio = !isHTTP
	if mcp.IsModernProtocol(info.protocol) {
		// A request's capabilities are the client's for that request
		// alone (2026-07-28): a call declares what its harness can answer,
		// so an upstream that needs more can say so (-32021) or do without,
		// rather than ask for input no one will give. One _meta per subset
		// of the input requests, made once per session.
		s.metas = make([]json.RawMessage, 1<<len(inputround.Methods))
		for set := range s.metas {
			meta, err := json.Marshal(map[string]any{
				mcp.MetaKeyProtocolVersion:    info.protocol,
				mcp.MetaKeyClientCapabilities: capabilitiesFor(inputSet(set)),
				mcp.MetaKeyClientInfo:         clientInfo,
			})
			if err != nil {
				return session{}, err
			}
			s.metas[set] = meta
		}
	}
	return s, nil
}

// inputSet is the set of input requests numbered set: bit i stands for
// inputround.Methods[i].
func inputSet(set int) []string {
	var out []string
	for i, m := range inputround.Methods {
		if set&(1<<i) != 0 {
			out = append(out, m.Name)
		}
	}
	return out
}

// setOf is the number of the set of input requests among methods.
func setOf(methods []string) int {
	set := 0
	for i, m := range inputround.Methods {
		if slices.Contains(methods, m.Name) {
			set |= 1 << i
		}
	}
	return set
}

// metaWith is the _meta of a request whose harness can answer the input
// requests methods, with token as the progress token when set; nil on an
// earlier era without a token.
func (s session) metaWith(token string, methods []string) (json.RawMessage, error) {
	var meta json.RawMessage
	if s.metas != nil {
		meta = s.metas[setOf(methods)]
	}
	if token == "" {
		return meta, nil
	}
	t, err := json.Marshal(token)
	if err != nil {
		return nil, err
	}
	m := append([]byte(`{"progressToken":`), t...)
	if len(meta) > len("{}") { // an object with members, as json.Marshal wrote it
		return append(append(m, ','), meta[1:]...), nil
	}
	return append(m, '}'), nil
}

// callParams are a tools/call's params: on a resumed round (SEP-2322)
// with the client's answers and the upstream's state of its last round.
type callParams struct {
	Name           string          `json:"name"`
	Arguments      json.RawMessage `json:"arguments,omitempty"`
	Meta           json.RawMessage `json:"_meta,omitempty"`
	InputResponses json.RawMessage `json:"inputResponses,omitempty"`
	RequestState   string          `json:"requestState,omitempty"`
}

// exactParams are p, a tools/call's params, with p.Arguments as they are
// (see exact.go); every other member as json.Marshal writes it in p.
func exactParams(p callParams) ([]byte, error) {
	rest, err := json.Marshal(callParams{Meta: p.Meta, InputResponses: p.InputResponses, RequestState: p.RequestState})
	if err != nil {
		return nil, err
	}
	n, err := json.Marshal(p.Name)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, len(n)+len(p.Arguments)+len(rest)+32)
	b = append(append(append(b, `{"name":`...), n...), `,"arguments":`...)
	b = append(b, p.Arguments...)
	// rest is {"name":"",…} with the members after the arguments, if any.
	rest = rest[len(`{"name":""`):]
	if len(rest) > 1 {
		return append(b, rest...), nil // ,… and its closing brace
	}
	return append(b, '}'), nil
}

// directIDs keeps the ids of requests sent directly apart from those
// mcp-go's client numbers on the same session (from 1 up).
const directIDs = 1 << 40

// direct is a request SharedOS sends on a session's transport itself (a
// tools/call, a listing's page), with an id of its own (directIDs).
func (c *conn) direct(method string, params []byte, header http.Header) transport.JSONRPCRequest {
	return transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(directIDs + c.ids.Add(1)),
		Method: method, Params: json.RawMessage(params), Header: header}
}

// send sends req, a direct request, on s. A failure to get an answer is a
// transport.Error; a caller that left first is told to the stdio server
// (notifications/cancelled; over HTTP the capturing transport does).
func (c *conn) send(ctx context.Context, s session, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, transport.NewError(err)
	}
	resp, err := s.tr.SendRequest(ctx, req)
	if err != nil {
		if ctx.Err() != nil && s.stdio {
			cancelled(ctx, s.tr, req.ID)
		}
		return nil, transport.NewError(err)
	}
	return resp, nil
}

// cancelNotice bounds sending a notifications/cancelled.
const cancelNotice = 5 * time.Second

// callTool sends one tools/call of the upstream tool name with args (the
// authorized bytes) on s and returns its raw result; bound, when set, is
// the tool's definition whose x-mcp-header bindings become Mcp-Param-*
// headers. A failure to get an answer is a transport.Error
// (isTransportError); a JSON-RPC error is the error mcp-go makes of it.
func (c *conn) callTool(ctx context.Context, s session, name string, args json.RawMessage, token string, methods []string, bound *mcp.Tool) (json.RawMessage, error) {
	meta, err := s.metaWith(token, methods)
	if err != nil {
		return nil, err
	}
	if s.stdio {
		args = oneLine(args)
	}
	// A resumed round's answers and state go in the params here, before
	// the exact request is registered, not in the transport (capture): a
	// request changed after its registration would go as mcp-go writes it.
	cp := callParams{Name: name, Arguments: args, Meta: meta}
	if rt := roundOf(ctx); rt != nil {
		cp.InputResponses, cp.RequestState = rt.responses, rt.state
		ctx = withoutRound(ctx)
	}
	params, err := json.Marshal(cp)
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
	req := c.direct(string(mcp.MethodToolsCall), params, header)
	if marshalChanges(args) {
		exactP, err := exactParams(cp)
		if err != nil {
			return nil, fmt.Errorf("tools/call params: %w", err)
		}
		if wire, exact, ok := exactRequest(req, params, exactP); ok {
			defer c.exact.add(wire, exact)()
		}
	}
	resp, err := c.send(ctx, s, req)
	if err != nil {
		return nil, err
	}
	if s.stdio {
		// A stdio server's line is read before its request is known (one
		// line at a time per server, at most maxResponseBytes): its result
		// is charged to the call's lease once it arrived.
		if err := budget.LeaseOf(ctx).Take(ctx, int64(len(resp.Result))); err != nil {
			return nil, err
		}
	}
	if resp.Error != nil {
		if ni := needsInputOf(resp.Error); ni != nil {
			return nil, ni
		}
		return nil, resp.Error.AsError()
	}
	return resp.Result, nil
}

// needsInput is an upstream's -32021 (missing required client
// capability) naming capabilities that answer input requests: the tool
// needs input its harness did not declare it can give.
type needsInput struct {
	methods []string // the input requests those capabilities answer
	message string
}

func (e *needsInput) Error() string {
	return fmt.Sprintf("the upstream needs a client that answers %s: %s", strings.Join(e.methods, ", "), e.message)
}

// needsInputOf reads a -32021 error's data: a ClientCapabilities object
// under requiredCapabilities, or mcp-go's one capability name; nil when it
// is another error or names no capability that answers input.
func needsInputOf(e *mcp.JSONRPCErrorDetails) *needsInput {
	if e.Code != mcp.MISSING_REQUIRED_CLIENT_CAPABILITY || e.Data == nil {
		return nil
	}
	raw, err := json.Marshal(e.Data)
	if err != nil {
		return nil
	}
	var data struct {
		RequiredCapabilities map[string]json.RawMessage `json:"requiredCapabilities"`
		Capability           string                     `json:"capability"`
	}
	if json.Unmarshal(raw, &data) != nil {
		return nil
	}
	caps := []string{data.Capability}
	for c := range data.RequiredCapabilities {
		caps = append(caps, c)
	}
	methods := inputround.Answerable(caps)
	if len(methods) == 0 {
		return nil
	}
	return &needsInput{methods: methods, message: e.Message}
}

// required is e as the kernel's input round that ends the call with
// missing_capability: one request per input method, with no params. An
// upstream that claims to need what the call declared it can answer
// (answerable) is in error itself: Unavailable.
func (e *needsInput) required(answerable []string) (*sharedosv1.InputRequired, error) {
	reqs := map[string]any{}
	for _, m := range e.methods {
		if slices.Contains(answerable, m) {
			return nil, status.Errorf(codes.Unavailable, "upstream: %v, which the call declared", e)
		}
		reqs[m] = map[string]any{"method": m, "params": map[string]any{}}
	}
	b, err := json.Marshal(reqs)
	if err != nil {
		return nil, err
	}
	return &sharedosv1.InputRequired{InputRequestsJson: b}, nil
}

// cancelled tells the upstream on tr to stop the request id, whose caller
// left: off the caller's path, best effort, as mcp-go's client does.
func cancelled(ctx context.Context, tr transport.Interface, id mcp.RequestId) {
	n := mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION, Notification: mcp.Notification{
		Method: string(mcp.MethodNotificationCancelled),
		Params: mcp.NotificationParams{AdditionalFields: map[string]any{"requestId": id, "reason": ctx.Err().Error()}},
	}}
	ctx = context.WithoutCancel(ctx)
	go func() {
		ctx, cancel := context.WithTimeout(ctx, cancelNotice)
		defer cancel()
		_ = tr.SendNotification(ctx, n)
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
