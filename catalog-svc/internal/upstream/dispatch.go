package upstream

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/mcpcontent"

	"github.com/sharedos/toolshare/catalog-svc/internal/budget"
)

// HandlerClients is the kernel's view of handler targets
// (pipeline.HandlerClients).
type HandlerClients interface {
	Client(target string) (sharedosv1.ToolHandlerServiceClient, error)
}

// Handlers serves the targets "mcp:<namespace>" from the manager's
// upstreams and hands every other target to Next: an upstream is one more
// provider behind the same kernel call.
type Handlers struct {
	Upstreams *Manager
	Next      HandlerClients
}

// Client implements pipeline.HandlerClients.
func (h Handlers) Client(target string) (sharedosv1.ToolHandlerServiceClient, error) {
	if ns, ok := strings.CutPrefix(target, sourcePrefix); ok {
		c, err := h.Upstreams.conn(ns)
		if err != nil {
			return nil, err
		}
		return &provider{ns: ns, c: c, reg: h.Upstreams.cfg.Registry}, nil
	}
	return h.Next.Client(target)
}

// CancelTurn ends the upstream calls of turn that wait between the
// kernel's rounds (pipeline.TurnCanceller): its turn was closed or
// revoked, so no round of them will come. It returns how many.
func (h Handlers) CancelTurn(turn string) int {
	n := h.Upstreams.cancelTurn(turn)
	if tc, ok := h.Next.(interface{ CancelTurn(string) int }); ok {
		n += tc.CancelTurn(turn)
	}
	return n
}

// HeldTurns are the turns of the upstream calls parked between rounds
// (pipeline.TurnCanceller: swept for revocations the watch missed).
func (h Handlers) HeldTurns() []string {
	turns := h.Upstreams.heldTurns()
	if tc, ok := h.Next.(interface{ HeldTurns() []string }); ok {
		turns = append(turns, tc.HeldTurns()...)
	}
	return turns
}

// CancelRound ends turn's upstream call parked under a round's provider
// state (pipeline.RoundCanceller): its attempt ended at the edge, so no
// round of it will come. It reports whether there was one.
func (h Handlers) CancelRound(turn string, state []byte) bool {
	if h.Upstreams.cancelRound(turn, state) {
		return true
	}
	rc, ok := h.Next.(interface{ CancelRound(string, []byte) bool })
	return ok && rc.CancelRound(turn, state)
}

// provider is the provider contract (ToolHandlerService v1, v2, v4) spoken
// to one upstream: one tools/call per Handle, the upstream name being the
// tool's name without the namespace, the arguments the authorized bytes.
type provider struct {
	ns  string
	c   *conn
	reg Registry
}

var _ sharedosv1.ToolHandlerServiceClient = (*provider)(nil)

// Handle forwards the call. The upstream's isError is a result
// (is_error); an unreachable upstream or a protocol error is Unavailable;
// the caller's context ending cancels the upstream request (stdio:
// notifications/cancelled; HTTP: the request's stream is closed, and on a
// 2025-era session notifications/cancelled as well).
func (p *provider) Handle(ctx context.Context, req *sharedosv1.HandleRequest, _ ...grpc.CallOption) (*sharedosv1.HandleResponse, error) {
	return p.call(ctx, req, nil)
}

// call is one tools/call, or its next round; progress, when set, gets the
// upstream's progress reports for it.
func (p *provider) call(ctx context.Context, req *sharedosv1.HandleRequest, progress func(mcp.ProgressNotificationParams)) (*sharedosv1.HandleResponse, error) {
	name, ok := strings.CutPrefix(req.GetTool(), p.ns+".")
	if !ok {
		return nil, status.Errorf(codes.InvalidArgument, "tool %q is not in namespace %s", req.GetTool(), p.ns)
	}
	args := json.RawMessage(req.GetArgumentsJson()) // none: omitted
	body, in, err := p.run(ctx, req, progress, func(ctx context.Context, token string) (json.RawMessage, error) {
		return p.roundTrip(ctx, func(ctx context.Context, s session) (json.RawMessage, error) {
			var bound *mcp.Tool // Mcp-Param-* headers: 2026-07-28 only
			if mcp.RequiresStandardHeaders(s.info.protocol) {
				bound = headerBindings(ctx, p.reg, req.GetTool(), name)
			}
			return p.c.callTool(ctx, s, name, args, token, req.GetInputMethods(), bound)
		})
	})
	if in != nil {
		return &sharedosv1.HandleResponse{InputRequired: in}, nil
	}
	if err != nil {
		return nil, err
	}
	// Content and structuredContent are kept as slices of body, not
	// copied: a result may be up to 64 MiB (reliability row 48).
	var res struct {
		inputResult
		Content           mcpcontent.Raw `json:"content"`
		StructuredContent mcpcontent.Raw `json:"structuredContent"`
		IsError           bool           `json:"isError"`
	}
	if err := json.Unmarshal(body, &res); err != nil {
		return nil, status.Errorf(codes.Unavailable, "the upstream's result is not a tools/call result: %v", err)
	}
	if in := res.required(); in != nil {
		return &sharedosv1.HandleResponse{InputRequired: in}, nil
	}
	if err := checkContent(res.Content); err != nil {
		return nil, status.Errorf(codes.Unavailable, "the upstream's result: %v", err)
	}
	if err := checkStructured(json.RawMessage(res.StructuredContent)); err != nil {
		return nil, status.Errorf(codes.Unavailable, "the upstream's result: %v", err)
	}
	return &sharedosv1.HandleResponse{ContentJson: nonNull(json.RawMessage(res.Content)), StructuredContentJson: nonNull(json.RawMessage(res.StructuredContent)), IsError: res.IsError}, nil
}

// checkContent refuses what mcp-go's typed result refuses: no content, or
// an item that is no MCP content. The content itself is kept as sent, and
// checked without a copy of it (mcpcontent).
func checkContent(content []byte) error {
	if content == nil {
		return errors.New("content is missing")
	}
	items, err := mcpcontent.Items(content)
	if err != nil {
		return fmt.Errorf("content: %w", err)
	}
	for i, item := range items {
		if err := mcpcontent.Check(item); err != nil {
			return fmt.Errorf("content[%d]: %w", i, err)
		}
	}
	return nil
}

// checkStructured refuses a structuredContent that is not a JSON object
// (MCP: an object, when present): passed on, the kernel would record the
// upstream's protocol error as the tool's (handler_error), not as
// upstream_unavailable.
func checkStructured(sc json.RawMessage) error {
	if t := nonNull(sc); t != nil && bytes.TrimSpace(t)[0] != '{' {
		return errors.New("structuredContent is not an object")
	}
	return nil
}

// run is one request that may span the kernel's rounds: a new one is sent
// by send (with a progress token when progress is set), a parked one named
// by the round's state gets the round's answers; either is then awaited.
// It returns the raw result, or the input the next round needs (the
// upstream's input_required as mcp-go's client reports it, or a 2025-era
// upstream's own requests to the client).
func (p *provider) run(ctx context.Context, req *sharedosv1.HandleRequest, progress func(mcp.ProgressNotificationParams),
	send func(ctx context.Context, token string) (json.RawMessage, error)) (json.RawMessage, *sharedosv1.InputRequired, error) {
	r, err := p.c.resumed(req, progress)
	if err != nil {
		return nil, nil, err
	}
	if r == nil {
		token := ""
		if progress != nil {
			token = progressToken()
		}
		r = p.c.start(withRound(ctx, req.GetInputResponsesJson(), string(req.GetRequestState())), req.GetTurnId(), token, progress, func(ctx context.Context) (json.RawMessage, error) {
			return send(ctx, token)
		})
	}
	body, in, err := p.c.await(ctx, r, req.GetRound(), req.GetInputMethods(), progress)
	if in != nil {
		return nil, in, nil
	}
	if ni := (*needsInput)(nil); errors.As(err, &ni) {
		in, err := ni.required(req.GetInputMethods())
		return nil, in, err
	}
	if in := inputRequired(body, err); in != nil {
		return nil, in, nil
	}
	return body, nil, err
}

// unavailable is err as the status the kernel reads: the result budget's
// refusal ResourceExhausted (the kernel's bound, not the upstream's fault
// nor its silence: a deadline spent waiting for room is the budget's
// refusal), the caller's own end as it is, anything else Unavailable
// (upstream_unavailable).
func unavailable(ctx context.Context, err error) error {
	switch {
	case errors.Is(err, budget.ErrExhausted),
		errors.Is(err, budget.ErrWaitEnded) && errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.ResourceExhausted, err.Error())
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	case ctx.Err() != nil:
		return status.Error(codes.Canceled, err.Error())
	}
	return status.Error(codes.Unavailable, fmt.Sprintf("upstream: %v", err))
}

// unavailable is err as the status the kernel reads, for a request on c:
// closing c ends its requests as their caller's end would. A call's or a
// prompt's context (start) ends with c's too, but only once its AfterFunc
// has run, which may be after the request failed on c's end; a resource
// read runs on its caller's context, and is Canceled by the close alike.
func (c *conn) unavailable(ctx context.Context, err error) error {
	if ctx.Err() == nil && c.life.Err() != nil {
		return status.Error(codes.Canceled, err.Error())
	}
	return unavailable(ctx, err)
}

// isTransportError: the request did not get an answer (a JSON-RPC error
// is an answer: the session itself is fine).
func isTransportError(err error) bool {
	var te *transport.Error
	return errors.As(err, &te)
}

// sessionLost: err ended s, or may have, so the next request connects
// again. Over stdio that is any failure to get an answer (the server's
// pipes are the session). Over HTTP a failed request is that request's
// alone — a proxy's 502 or a refused connection ends no other call on the
// session — unless the upstream no longer knows the session (404),
// answered with an error that answers no request (no id: a restarted
// server refusing the old session with a 400), or refused the session's
// credential (401: rotated in its file, an OAuth token revoked; the next
// session resolves the references and fetches a token anew) — a request
// it never ran, which roundTrip sends once more on the next session
// (notRun).
func sessionLost(s session, err error) bool {
	if !isTransportError(err) {
		return false
	}
	if _, overHTTP := s.tr.(transport.HTTPConnection); !overHTTP {
		return true
	}
	return refusedSession(err)
}

// refusedSession: over HTTP, the upstream refused the request for its
// session (404, an error with no id) or its credential (401).
func refusedSession(err error) bool {
	return errors.Is(err, transport.ErrSessionTerminated) || errors.Is(err, errUnmatched) ||
		errors.Is(err, transport.ErrAuthorizationRequired)
}

// Invoke (v2) is the call with a progress token: the upstream's
// notifications/progress for it are streamed ahead of the one result.
func (p *provider) Invoke(ctx context.Context, req *sharedosv1.HandleRequest, _ ...grpc.CallOption) (grpc.ServerStreamingClient[sharedosv1.HandleEvent], error) {
	events := make(chan *sharedosv1.HandleEvent, 64)
	st := &eventStream{ctx: ctx, events: events}
	go func() {
		resp, err := p.call(ctx, req, func(n mcp.ProgressNotificationParams) {
			ev := &sharedosv1.HandleEvent{Event: &sharedosv1.HandleEvent_Progress{Progress: &sharedosv1.Progress{
				Progress: n.Progress, Total: n.Total, Message: n.Message}}}
			select {
			case events <- ev:
			default: // a client that reads slowly misses a report, never the result
			}
		})
		st.finish(resp, err)
	}()
	return st, nil
}

// progressToken is a call's progress token: random, unique per upstream
// session, and naming nothing of the call (its call id is the bridge's,
// and the upstream sees the calls of every turn using it).
func progressToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "sharedos-" + hex.EncodeToString(b[:])
}

// eventStream is an Invoke stream served in process: progress events, then
// the result (or the error) once.
type eventStream struct {
	grpc.ClientStream
	ctx    context.Context
	events chan *sharedosv1.HandleEvent

	mu   sync.Mutex
	done chan struct{}
	res  *sharedosv1.HandleResponse
	err  error
}

func (s *eventStream) finish(res *sharedosv1.HandleResponse, err error) {
	s.mu.Lock()
	s.res, s.err = res, err
	if s.done == nil {
		s.done = make(chan struct{})
	}
	close(s.done)
	s.mu.Unlock()
}

func (s *eventStream) doneCh() chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done == nil {
		s.done = make(chan struct{})
	}
	return s.done
}

// Recv implements grpc.ServerStreamingClient: queued progress first, then
// the result; io.EOF after it.
func (s *eventStream) Recv() (*sharedosv1.HandleEvent, error) {
	for {
		select {
		case ev := <-s.events:
			return ev, nil
		default:
		}
		select {
		case ev := <-s.events:
			return ev, nil
		case <-s.doneCh():
			select {
			case ev := <-s.events:
				return ev, nil
			default:
			}
			s.mu.Lock()
			res, err := s.res, s.err
			s.res, s.err = nil, io.EOF
			s.mu.Unlock()
			if err != nil {
				return nil, err
			}
			return &sharedosv1.HandleEvent{Event: &sharedosv1.HandleEvent_Result{Result: res}}, nil
		}
	}
}

// Context implements grpc.ClientStream.
func (s *eventStream) Context() context.Context { return s.ctx }

// GetPrompt (v4) is one prompts/get of the prompt's upstream name with
// the authorized arguments (an object of strings); the messages as sent.
func (p *provider) GetPrompt(ctx context.Context, req *sharedosv1.HandleRequest, _ ...grpc.CallOption) (*sharedosv1.PromptResponse, error) {
	name, ok := strings.CutPrefix(req.GetTool(), p.ns+".")
	if !ok {
		return nil, status.Errorf(codes.InvalidArgument, "prompt %q is not in namespace %s", req.GetTool(), p.ns)
	}
	var args map[string]string
	if len(req.GetArgumentsJson()) > 0 {
		if err := json.Unmarshal(req.GetArgumentsJson(), &args); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "prompt arguments: %v", err)
		}
	}
	get := mcp.GetPromptRequest{}
	get.Params.Name, get.Params.Arguments = name, args
	body, in, err := p.run(ctx, req, nil, func(ctx context.Context, _ string) (json.RawMessage, error) {
		return p.roundTrip(ctx, viaClient(string(mcp.MethodPromptsGet), req.GetInputMethods(), func(ctx context.Context, cl *client.Client) error {
			_, err := cl.GetPrompt(ctx, get)
			return err
		}))
	})
	if in != nil {
		return &sharedosv1.PromptResponse{InputRequired: in}, nil
	}
	if err != nil {
		return nil, err
	}
	var res struct {
		Description string         `json:"description"`
		Messages    mcpcontent.Raw `json:"messages"` // a slice of body, not a copy
	}
	if err := json.Unmarshal(body, &res); err != nil {
		return nil, status.Errorf(codes.Unavailable, "the upstream's result is not JSON: %v", err)
	}
	if err := checkMessages(res.Messages); err != nil {
		return nil, status.Errorf(codes.Unavailable, "the upstream's result: %v", err)
	}
	return &sharedosv1.PromptResponse{Description: res.Description, MessagesJson: nonNull(json.RawMessage(res.Messages))}, nil
}

// checkMessages refuses what the bridge cannot serve of a prompt's
// messages, as checkContent does a call's content: none, or an item that
// is no MCP prompt message (mcpcontent.CheckMessage). mcp-go's client
// takes more — a number as a text, an audience that is no array, a _meta
// that is no object — which the bridge then refused while the record said
// succeeded (attack run C2). Checked without a copy of them.
func checkMessages(messages []byte) error {
	if nonNull(messages) == nil {
		return errors.New("messages is missing")
	}
	items, err := mcpcontent.Items(messages)
	if err != nil {
		return fmt.Errorf("messages: %w", err)
	}
	for i, item := range items {
		if _, err := mcpcontent.CheckMessage(item); err != nil {
			return fmt.Errorf("messages[%d]: %w", i, err)
		}
	}
	return nil
}

// ReadResource (v4) is one resources/read of the concrete URI; the
// contents as sent. The upstream's "not found" is NotFound. A read has no
// input rounds (contract v4), so it declares no capability that answers
// input, and an upstream that needs one is Unavailable.
func (p *provider) ReadResource(ctx context.Context, req *sharedosv1.HandleRequest, _ ...grpc.CallOption) (*sharedosv1.ResourceResponse, error) {
	read := mcp.ReadResourceRequest{}
	read.Params.URI = req.GetTool()
	// Its contents count in the result budget as a call's do (review: a
	// read ran under no lease, so nothing bounded several at once); the
	// lease goes back once the kernel's answer is sent, or now.
	lease := p.c.budget.Lease()
	ctx = budget.WithLease(ctx, lease)
	body, err := p.roundTrip(ctx, viaClient(string(mcp.MethodResourcesRead), nil, func(ctx context.Context, cl *client.Client) error {
		_, err := cl.ReadResource(ctx, read)
		return err
	}))
	if err != nil {
		lease.Release()
	} else {
		budget.Keep(ctx, lease)
	}
	if ni := (*needsInput)(nil); errors.As(err, &ni) {
		return nil, status.Errorf(codes.Unavailable, "upstream: %v (a resource read has no input rounds)", ni)
	}
	if err != nil {
		return nil, err
	}
	var res struct {
		Contents json.RawMessage `json:"contents"`
	}
	if err := json.Unmarshal(body, &res); err != nil {
		return nil, status.Errorf(codes.Unavailable, "the upstream's result is not JSON: %v", err)
	}
	return &sharedosv1.ResourceResponse{ContentsJson: nonNull(res.Contents)}, nil
}

// inputRequired is the upstream's input_required result as mcp-go's
// client reports it (one round at a time: ErrMaxInputRoundTripsExceeded,
// the raw result kept) as contract v3's InputRequired; nil for any other
// outcome.
func inputRequired(body json.RawMessage, err error) *sharedosv1.InputRequired {
	if body == nil || !errors.Is(err, client.ErrMaxInputRoundTripsExceeded) {
		return nil
	}
	var res inputResult
	if json.Unmarshal(body, &res) != nil {
		return nil
	}
	return res.required()
}

// inputResult is the part of a result that asks for input (SEP-2322).
type inputResult struct {
	ResultType    string          `json:"resultType"`
	InputRequests json.RawMessage `json:"inputRequests"`
	RequestState  string          `json:"requestState"`
}

// required is r as contract v3's InputRequired (its inputRequests as
// sent, its requestState as the provider state the kernel hands back on
// the next round); nil when r asks for nothing.
func (r inputResult) required() *sharedosv1.InputRequired {
	if r.ResultType != string(mcp.ResultTypeInputRequired) {
		return nil
	}
	return &sharedosv1.InputRequired{InputRequestsJson: nonNull(r.InputRequests), RequestState: []byte(r.RequestState)}
}

// notRun: err says the upstream never ran the request, over HTTP: it no
// longer knows the session (404: a restarted upstream; or the session
// had ended before the request went out), it refused the request with
// an error that answers no request (errUnmatched), or it refused its
// credential (401) — and the POST the
// request went out in was itself answered so (p): not a stream that broke
// after a 2xx (mcp-go's resumption ends in the same errors), not a 5xx
// whose body has no id, either of which may follow the tool's run. The
// request can be sent again on a new session, and runs once.
func notRun(s session, err error, p *posted) bool {
	if _, overHTTP := s.tr.(transport.HTTPConnection); !overHTTP || !isTransportError(err) {
		return false
	}
	return refusedSession(err) && p.refusedUnrun()
}

// roundTrip runs one request on the live session and returns its raw
// result: the caller's end as Canceled/DeadlineExceeded, the upstream's
// "not found" as NotFound, anything else Unavailable. A request the
// upstream never ran, having lost the session (notRun), is sent once
// more on a new session, within the caller's own end.
func (p *provider) roundTrip(ctx context.Context, send func(context.Context, session) (json.RawMessage, error)) (json.RawMessage, error) {
	for again := true; ; again = false {
		s, err := p.c.session(ctx)
		if err != nil {
			return nil, p.c.unavailable(ctx, err)
		}
		pctx, post := withPosted(ctx)
		body, err := send(pctx, s)
		if err == nil {
			if body == nil {
				return nil, status.Error(codes.Unavailable, errNoRaw.Error())
			}
			return body, nil
		}
		if ctx.Err() == nil && sessionLost(s, err) {
			p.c.broken(s.cl)
			if again && notRun(s, err, post) {
				continue
			}
		}
		if errors.Is(err, client.ErrMaxInputRoundTripsExceeded) {
			return body, err // an input_required result (inputRequired reads it)
		}
		if ni := (*needsInput)(nil); errors.As(err, &ni) {
			return nil, err // the upstream's -32021 (run reads it)
		}
		if errors.Is(err, mcp.ErrResourceNotFound) {
			return nil, status.Error(codes.NotFound, err.Error())
		}
		return nil, p.c.unavailable(ctx, err)
	}
}

// viaClient sends a request of method through mcp-go's client (send) and
// returns the raw result the transport saw. On a 2026-07-28 session the
// request declares the capabilities of the input requests methods (those
// its harness can answer), as a tools/call does (send.go), not every one
// mcp-go's client would; an upstream's -32021 naming one it lacks is a
// needsInput.
func viaClient(method string, methods []string, send func(context.Context, *client.Client) error) func(context.Context, session) (json.RawMessage, error) {
	return func(ctx context.Context, s session) (json.RawMessage, error) {
		rctx, raw := withRaw(ctx, method)
		if s.metas != nil {
			caps, err := json.Marshal(capabilitiesFor(methods))
			if err != nil {
				return nil, err
			}
			raw.caps = caps
		}
		err := send(rctx, s.cl)
		if ni := raw.needsInput(); ni != nil {
			return nil, ni
		}
		body := raw.get()
		if err == nil && s.stdio {
			// As callTool's: a stdio line is charged to the request's
			// lease (a prompts/get's, a resources/read's) once it arrived;
			// a listing has none.
			if err := budget.LeaseOf(ctx).Take(ctx, int64(len(body))); err != nil {
				return nil, err
			}
		}
		return body, err
	}
}
