package forward

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/sharedos/toolshare/bridge-svc/internal/protocol"
	"github.com/sharedos/toolshare/bridge-svc/internal/requeststate"
	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/mcpcontent"
	"github.com/sharedos/toolshare/services/contract/outcome"
	"github.com/sharedos/toolshare/services/contract/pinproof"
	"github.com/sharedos/toolshare/services/contract/toolname"
	"github.com/sharedos/toolshare/services/platform/grpcx"
	"github.com/sharedos/toolshare/services/platform/memrelief"
	"github.com/sharedos/toolshare/services/platform/telemetry"
)

// Invoker is the kernel call; sharedosv1.RuntimeServiceClient satisfies it.
type Invoker interface {
	InvokeTool(ctx context.Context, in *sharedosv1.ToolCall, opts ...grpc.CallOption) (*sharedosv1.ToolResult, error)
}

// StreamInvoker is an Invoker that can also relay a call's progress
// (RuntimeService.InvokeToolStream); the kernel client is one.
type StreamInvoker interface {
	Invoker
	InvokeToolStream(ctx context.Context, in *sharedosv1.ToolCall, opts ...grpc.CallOption) (grpc.ServerStreamingClient[sharedosv1.ToolEvent], error)
}

// HarnessInjectedKeys are argument keys harnesses add on their own. They are
// dropped only when the tool's inputSchema does not declare them.
var HarnessInjectedKeys = []string{
	// Gemini CLI adds wait_for_previous:boolean to every MCP tool's schema
	// and forwards it when the model sets it.
	"wait_for_previous",
}

// clientIDKeys are tools/call _meta keys whose values correlate a call with
// a harness's own ids; they are copied to the span, never to the ToolCall.
var clientIDKeys = []string{
	"claudecode/toolUseId", "callId", "threadId", "sessionId", "itemId", "progressToken",
}

// Tool is what forwarding needs to know about one pinned tool.
type Tool struct {
	// Name is the canonical (catalogue) name.
	Name string
	// properties reads its inputSchema's top-level property names once,
	// on the tool's first call: a turn of 10,000 tools parses none of their
	// schemas to open.
	properties func() map[string]bool
}

// Properties are the top-level property names of the tool's inputSchema.
func (t Tool) Properties() map[string]bool {
	if t.properties == nil {
		return nil
	}
	return t.properties()
}

// Turn is what forwarding needs from a lease; built once per cached server.
type Turn struct {
	TurnID string
	// Grant is the turn's grant from the kernel (ADR 0015), sent with every
	// call: the kernel takes the context and the pin from it alone.
	Grant string
	// CatalogHash is the turn's pinned catalogHash.
	CatalogHash string
	Harness     string
	// Tools by canonical name.
	Tools map[string]Tool
	// Portable maps a published portable name ("files_read") back to the
	// canonical one; nil when the turn does not publish portable names.
	Portable map[string]string
	// aliasKeys maps CollisionKey(name) → canonical name, for diagnostics.
	aliasKeys map[string]string
	// pins proves each pinned tool's and prompt's digest to the kernel under the root
	// its grant signs (nil when it could not be built: calls then go
	// without a proof, and a kernel that needs one refuses them);
	// resourcePins does the same for the concrete resource URIs.
	pins, resourcePins *pinproof.Tree
}

// proof is the pin proof of a call of kind for name (nil for an entry not
// pinned). A resource URI pinned itself proves its inclusion; any other
// proves its absence, and the kernel reads it through a template.
func (t *Turn) proof(kind sharedosv1.CallKind, name string) *sharedosv1.PinProof {
	var p *sharedosv1.PinProof
	switch {
	case kind == sharedosv1.CallKind_CALL_KIND_UNSPECIFIED && t.pins != nil:
		p, _ = t.pins.Prove(pinproof.Tool, name)
	case kind == sharedosv1.CallKind_CALL_KIND_PROMPT && t.pins != nil:
		p, _ = t.pins.Prove(pinproof.Prompt, name)
	case kind == sharedosv1.CallKind_CALL_KIND_RESOURCE && t.resourcePins != nil:
		var ok bool
		if p, ok = t.resourcePins.Prove(pinproof.Resource, name); !ok {
			p, _ = t.resourcePins.ProveAbsent(pinproof.Resource, name)
		}
	}
	return p
}

// NewTurn builds a Turn from the pinned tools, prompts and resources.
func NewTurn(turnID, grant, catalogHash string, tools []*sharedosv1.PublishedTool, prompts []*sharedosv1.PublishedPrompt,
	resources []*sharedosv1.PublishedResource, harness string, portable bool) *Turn {
	t := &Turn{
		TurnID: turnID, Grant: grant, Harness: harness, CatalogHash: catalogHash,
		Tools:     make(map[string]Tool, len(tools)),
		aliasKeys: make(map[string]string, len(tools)),
	}
	if portable {
		t.Portable = make(map[string]string, len(tools))
	}
	pin := make(map[string]string, len(tools))
	for _, pt := range tools {
		pin[pt.GetName()] = pt.GetDigest()
		schema := pt.GetInputSchemaJson()
		t.Tools[pt.GetName()] = Tool{Name: pt.GetName(), properties: sync.OnceValue(func() map[string]bool { return schemaProperties(schema) })}
		t.aliasKeys[toolname.CollisionKey(pt.GetName())] = pt.GetName()
		if portable {
			t.Portable[PortableName(pt.GetName())] = pt.GetName()
		}
	}
	pinnedPrompts := make(map[string]string, len(prompts))
	for _, p := range prompts {
		pinnedPrompts[p.GetName()] = p.GetDigest()
	}
	t.pins, _ = pinproof.Build(pin, pinnedPrompts)
	pinnedResources := make(map[string]string, len(resources))
	for _, r := range resources {
		pinnedResources[r.GetUri()] = r.GetDigest()
	}
	t.resourcePins, _ = pinproof.BuildResources(pinnedResources)
	return t
}

// PortableName is the name published for name when a turn asks for portable
// names: "." and "-" become "_" (the catalogue refuses names that collide
// under this mapping, so it is reversible per catalogue).
func PortableName(name string) string { return toolname.CollisionKey(name) }

func schemaProperties(schema []byte) map[string]bool {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return nil
	}
	out := make(map[string]bool, len(s.Properties))
	for k := range s.Properties {
		out[k] = true
	}
	return out
}

// Request is one tools/call as it arrived.
type Request struct {
	// Name is the requested tool name, exactly as on the wire.
	Name string
	// Arguments is the raw arguments JSON (may be empty).
	Arguments json.RawMessage
	// JSONRPCID and Meta are recorded as diagnostics only.
	JSONRPCID any
	Meta      map[string]any
	// Progress, when set, receives the call's progress reports as the
	// kernel relays them, all before Call returns (the client sent a
	// progress token).
	Progress func(*sharedosv1.Progress)
	// Modern: the request is 2026-07-28, whose clients answer
	// input-required results (then InputMethods are what it declared it
	// can answer, protocol.InputMethods).
	Modern       bool
	InputMethods []string
	// InputResponses and RequestState are the request's inputResponses
	// and requestState, as sent (protocol.Parse checked their shape).
	InputResponses  json.RawMessage
	RequestState    string
	HasRequestState bool
	// Ask, on a 2025-era session, asks the client for a round's input on
	// the call's own stream (elicitation/create, sampling/createMessage,
	// roots/list requests) and returns its answers as an inputResponses
	// object; the bridge then continues the attempt itself. It gives up
	// at until, some time before the round expires (answerBy). nil: the
	// session cannot be asked.
	Ask func(ctx context.Context, inputRequests json.RawMessage, until time.Time) (json.RawMessage, error)
}

// Forwarder sends calls to the kernel.
type Forwarder struct {
	Invoker Invoker
	Logger  *slog.Logger
	// StreamTimeout bounds an InvokeToolStream as the kernel connection's
	// default deadline bounds a unary InvokeTool (streams get none of
	// their own); zero: unbounded.
	StreamTimeout time.Duration
	// States seals the requestState of input-required results; nil: a
	// key generated on first use, which only this process can open.
	States *requeststate.Sealer
	// Now replaces time.Now (tests).
	Now func() time.Time

	statesOnce sync.Once
	// notices counts the abandonment notices in flight in the background.
	notices atomic.Int32
}

// Call forwards req for turn and returns the MCP result; or the protocol
// error the request is answered with instead (the spec leaves no result
// form: a requestState that does not open, -32602; a 2026-07-28 tool
// needing a capability the client did not declare, -32021), every one
// recorded; or neither when the call was cancelled (the request is
// aborted: nothing is written for it). A refusal is a result, never a Go
// error (which mcp-go would turn into -32603).
func (f *Forwarder) Call(ctx context.Context, turn *Turn, req Request) (*mcp.CallToolResult, *protocol.RPCError) {
	span := trace.SpanFromContext(ctx)
	callID := NewCallID()
	tool, diag := turn.resolve(req.Name)
	args, stripped := stripInjected(req.Arguments, turn.Tools[tool])
	if len(bytes.TrimSpace(args)) == 0 {
		// MCP makes arguments optional; absent means no arguments, which the
		// kernel and providers see as the empty object.
		args = json.RawMessage(`{}`)
	}
	// The name, the id and the _meta values are the harness's strings: on
	// the span and in a log line only escaped and capped.
	shown := telemetry.EscapeValue(req.Name)
	span.SetAttributes(attribute.String(telemetry.AttrCallID, callID),
		attribute.String(telemetry.AttrToolRequested, shown),
		attribute.String(telemetry.AttrTurnID, turn.TurnID))
	if req.JSONRPCID != nil {
		span.SetAttributes(attribute.String(telemetry.AttrBridgeJSONRPCID, escapeAny(req.JSONRPCID)))
	}
	if ids := clientIDs(req.Meta); ids != "" {
		span.SetAttributes(attribute.String(telemetry.AttrBridgeClientCallIDs, ids))
	}
	if diag != "" {
		span.SetAttributes(attribute.String(telemetry.AttrBridgeAliasOf, diag))
		f.log().InfoContext(ctx, "harness alias recorded, raw name forwarded",
			slog.String(telemetry.LogTurnID, turn.TurnID), slog.String(telemetry.LogCallID, callID),
			slog.String(telemetry.LogTool, shown), slog.String("alias_of", diag))
	}
	if len(stripped) > 0 {
		span.SetAttributes(attribute.StringSlice(telemetry.AttrBridgeStrippedArgKeys, stripped))
		f.log().InfoContext(ctx, "harness-injected argument keys stripped",
			slog.String(telemetry.LogTurnID, turn.TurnID), slog.String(telemetry.LogCallID, callID),
			slog.String(telemetry.LogTool, shown), slog.Any("keys", stripped))
	}

	call := &sharedosv1.ToolCall{
		CallId:             callID,
		TurnId:             turn.TurnID,
		Tool:               tool,
		ArgumentsJson:      args,
		Grant:              turn.Grant,
		PinProof:           turn.proof(sharedosv1.CallKind_CALL_KIND_UNSPECIFIED, tool),
		Harness:            turn.Harness,
		InputRounds:        req.Modern,
		InputResponsesJson: req.InputResponses,
	}
	progress := req.Progress
	res, sealed, rerr, ok := f.attempt(ctx, turn, call, req, func(ctx context.Context, c *sharedosv1.ToolCall) (*sharedosv1.ToolResult, error) {
		return f.invoke(ctx, c, progress)
	})
	switch {
	case rerr != nil:
		return nil, rerr
	case !ok:
		return nil, nil // cancelled: the client closed the request
	case sealed != nil:
		return &mcp.CallToolResult{
			Result:               mcp.Result{ResultType: mcp.ResultTypeInputRequired},
			MultiRoundTripResult: mcp.MultiRoundTripResult{InputRequests: sealed.Requests, RequestState: sealed.State},
		}, nil
	}
	out, res := f.toMCP(ctx, res)
	recordOutcome(span, res)
	// A large result's copies are garbage once mcp-go has written it out
	// (the request's memrelief.Scope ends): given back to the operating
	// system then, not at the next collection of an idle process
	// (reliability row 48).
	memrelief.Add(ctx, len(res.GetContentJson())+len(res.GetStructuredContentJson()))
	return out, nil // no result when the kernel says cancelled, like a client cancellation
}

// rpc is one kernel call of an attempt (InvokeTool, GetPrompt, ReadResource).
type rpc func(ctx context.Context, call *sharedosv1.ToolCall) (*sharedosv1.ToolResult, error)

// Sealed is a 2026-07-28 input-required answer: the provider's requests
// and the round sealed as requestState.
type Sealed struct {
	Requests mcp.InputRequests
	State    string
}

// attempt runs call for req through send: its input rounds first — a
// requestState opened into the resumption it names (-32602 and recorded
// when it does not open), a 2025-era session asked for each round on this
// pod — then the kernel's result, recorded on the request's span. A
// protocol error answers the request instead (also an undeclared
// capability on 2026-07-28: -32021); ok is false when it was cancelled.
// An INPUT_REQUIRED result of a 2026-07-28 request comes back sealed.
func (f *Forwarder) attempt(ctx context.Context, turn *Turn, call *sharedosv1.ToolCall, req Request, send rpc) (*sharedosv1.ToolResult, *Sealed, *protocol.RPCError, bool) {
	span := trace.SpanFromContext(ctx)
	if req.Modern || req.Ask != nil {
		call.InputRounds, call.InputMethods = true, req.InputMethods
	}
	// Every round of the attempt goes to the kernel replica of its first
	// (a parked upstream call lives in that replica's memory, ADR 0019):
	// here while a 2025-era session is asked, through the sealed state
	// when a 2026-07-28 client retries, on whichever pod.
	kernel := ""
	if req.HasRequestState {
		resume, addr, rerr := f.resume(turn, req.RequestState, call)
		if rerr != nil {
			f.RejectKind(ctx, turn, call.GetKind(), req.Name, rerr.Message)
			return nil, nil, rerr, true
		}
		call.Resume, kernel = resume, addr
	}
	ctx, affinity := grpcx.WithAffinity(ctx, kernel)
	res, ok := f.run(ctx, call, send)
	// A 2025-era session's rounds are asked and continued here, on this
	// pod, while the client's request stays open.
	for ok && req.Ask != nil && res.GetStatus() == sharedosv1.OperationStatus_OPERATION_STATUS_INPUT_REQUIRED {
		res, ok = f.askRound(ctx, call, res, req, send)
	}
	if !ok {
		return nil, nil, nil, false
	}
	if req.Modern {
		switch {
		case res.GetStatus() == sharedosv1.OperationStatus_OPERATION_STATUS_INPUT_REQUIRED:
			sealed, err := f.seal(turn, call, res, affinity.Addr())
			if err == nil {
				recordOutcome(span, res)
				return res, sealed, nil, true
			}
			f.log().ErrorContext(ctx, "input-required result not handed out", slog.String(telemetry.LogCallID, call.GetCallId()),
				slog.String("error", err.Error()))
			f.giveUpRound(ctx, call, res, send)
			res = withCall(outcome.Failed(outcome.Internal, "the call asked for input the bridge could not pass on"), res)
		case res.GetCode() == outcome.MissingCapability && len(res.GetMissingInputMethods()) > 0:
			recordOutcome(span, res)
			return res, nil, protocol.MissingCapability(res.GetMissingInputMethods()), true
		}
	}
	return res, nil, nil, true
}

// run sends call to the kernel and maps a transport failure to a result;
// false when the call was cancelled (no result). A call whose client left
// before it was surely in the kernel's hands — before it went out, or
// while it was on its way (a cancelled RPC may or may not have reached
// the kernel) — is sent again as abandoned: recorded once all the same
// (invariant 4), never run; so is one whose RPC failed (the bridge's
// deadline, the kernel unreachable), recorded as what its client was
// answered. A resumed round on its way is not: its
// attempt has its record already (waiting, it ends when its wait runs
// out), and a round the original took could not be told from one that
// was closed.
func (f *Forwarder) run(ctx context.Context, call *sharedosv1.ToolCall, send rpc) (*sharedosv1.ToolResult, bool) {
	if ctx.Err() != nil {
		f.abandon(ctx, call, send, "")
		return nil, false
	}
	res, err := send(ctx, call)
	if ctx.Err() != nil || status.Code(err) == codes.Canceled {
		if err != nil && call.GetResume() == nil {
			f.abandon(ctx, call, send, "")
		}
		return nil, false
	}
	if err != nil {
		f.log().ErrorContext(ctx, "InvokeTool failed", slog.String(telemetry.LogCallID, call.GetCallId()),
			slog.String("grpc.code", status.Code(err).String()))
		res = outcome.Failed(outcome.Internal, "the SharedOS kernel could not take the call")
		if status.Code(err) == codes.DeadlineExceeded {
			res = outcome.Failed(outcome.Timeout, "the call did not finish within the bridge's call timeout")
		}
		// The call may never have reached the kernel: recorded as what the
		// client was answered, unless it did — in the background, the
		// client waits for its answer.
		if call.GetResume() == nil {
			f.abandonLater(ctx, call, send, res.GetCode())
		}
	}
	if res.GetCallId() == "" {
		res.CallId = call.GetCallId()
	}
	return res, true
}

// maxNotices bounds the abandonment notices sent in the background at once:
// past it (the kernel unreachable under load) one is dropped, and logged.
const maxNotices = 256

// abandonLater is abandon, for a copy of call, in the background.
func (f *Forwarder) abandonLater(ctx context.Context, call *sharedosv1.ToolCall, send rpc, code string) {
	if f.notices.Add(1) > maxNotices {
		f.notices.Add(-1)
		f.log().ErrorContext(ctx, "abandoned call not recorded: too many notices in flight", slog.String(telemetry.LogCallID, call.GetCallId()))
		return
	}
	notice := proto.CloneOf(call)
	go func() {
		defer f.notices.Add(-1)
		f.abandon(ctx, notice, send, code)
	}()
}

// abandon tells the kernel the bridge gave up on call before it was surely
// in its hands — its client left (code ""), or the bridge answered it
// failed with code — and the kernel records that, unless it has the call
// (ToolCall.abandoned). It returns the kernel's answer (nil when none
// came): for a round given up, the outcome of the round's attempt.
func (f *Forwarder) abandon(ctx context.Context, call *sharedosv1.ToolCall, send rpc, code string) *sharedosv1.ToolResult {
	call.Abandoned, call.AbandonedCode = true, code
	rctx, cancel := recording(ctx)
	defer cancel()
	res, err := send(rctx, call)
	if err != nil {
		f.log().ErrorContext(ctx, "abandoned call not recorded", slog.String(telemetry.LogCallID, call.GetCallId()),
			slog.String("grpc.code", status.Code(err).String()))
		return nil
	}
	return res
}

// giveUpRound ends the attempt waiting in res's round, which the bridge
// could not hand out: its client, answered failed/internal, will never
// answer it, and left waiting it would end failed/timeout — a record that
// disagrees with the answer. The notice resumes the round as abandoned
// with that code, on the kernel replica that answered it (ctx's affinity),
// so the kernel ends the attempt failed/internal and lets go of anything
// held for the next round.
func (f *Forwarder) giveUpRound(ctx context.Context, call *sharedosv1.ToolCall, res *sharedosv1.ToolResult, send rpc) {
	in := res.GetInput()
	notice := proto.CloneOf(call)
	notice.CallId, notice.InputResponsesJson = NewCallID(), nil
	notice.Resume = &sharedosv1.Resume{AttemptId: in.GetAttemptId(), Round: in.GetRound(), RequestState: in.GetInput().GetRequestState()}
	f.abandon(ctx, notice, send, outcome.Internal)
}

// ErrBridgeStopping is what Request.Ask returns when its pod began to shut
// down while the client was asked (mcpserver's StopAsking).
var ErrBridgeStopping = errors.New("the bridge is shutting down")

// RoundAnswerMargin is how long before a round expires (on the kernel's
// store's clock) the bridge stops waiting for a 2025-era client's answers:
// its resumption, with the answers or refusing the round, must reach the
// kernel while the round is open, also when this pod's clock runs behind
// the store's (grants allow as much skew) and the resumption is slow on
// its way. Waiting to the expiry itself, the refusal always came after it,
// when the attempt had ended failed/timeout or was about to.
const RoundAnswerMargin = 30 * time.Second

// answerBy is when a client asked for a round expiring at expires is
// given up: RoundAnswerMargin before, but never more than a tenth of the
// time left, so a short round still gives its client most of it.
func (f *Forwarder) answerBy(expires time.Time) time.Time {
	return expires.Add(-min(RoundAnswerMargin, max(expires.Sub(f.now()), 0)/10))
}

// ErrSessionEnded is what Request.Ask returns when the client ended its
// 2025-era session with DELETE while it was asked: none of its answers is
// taken from then on.
var ErrSessionEnded = errors.New("the client ended its session")

// askRound asks a 2025-era client for the input of res's round and
// continues the attempt with its answers (a resumption under a new call
// id, as a 2026-07-28 client's retry would be). A client that does not
// answer — it refused, the round is about to expire — ends the attempt
// failed/invalid_request, recorded at once; one that cancelled the call,
// left, or ended its session with DELETE ends it cancelled, as any call
// its client gave up (the round's notice, abandon). A round its pod
// stopped waiting for, shutting down, ends failed/internal, answered and
// recorded so.
func (f *Forwarder) askRound(ctx context.Context, first *sharedosv1.ToolCall, res *sharedosv1.ToolResult, req Request, send rpc) (*sharedosv1.ToolResult, bool) {
	in := res.GetInput()
	next := &sharedosv1.ToolCall{
		CallId: NewCallID(), TurnId: first.GetTurnId(), Tool: first.GetTool(), ArgumentsJson: first.GetArgumentsJson(),
		Grant: first.GetGrant(), PinProof: first.GetPinProof(), Harness: first.GetHarness(), InputRounds: true, InputMethods: first.GetInputMethods(), Kind: first.GetKind(),
		Resume: &sharedosv1.Resume{AttemptId: in.GetAttemptId(), Round: in.GetRound(), RequestState: in.GetInput().GetRequestState()},
	}
	answers, err := req.Ask(ctx, in.GetInput().GetInputRequestsJson(), f.answerBy(in.GetExpiresAt().AsTime()))
	if err == nil {
		next.InputResponsesJson = answers
		return f.run(ctx, next, send)
	}
	if errors.Is(ctx.Err(), context.Canceled) || errors.Is(err, ErrSessionEnded) {
		f.abandon(ctx, next, send, "")
		return nil, false
	}
	if errors.Is(err, ErrBridgeStopping) {
		// Not the client's doing: the attempt ends failed/internal, as
		// the client is answered — or, when its round had ended before the
		// notice came (it ran out, the turn was closed), the client is
		// answered with the outcome the attempt ended with.
		out := f.abandon(ctx, next, send, outcome.Internal)
		if (outcome.IsRefusal(out) && out.GetCode() != outcome.Internal) ||
			out.GetStatus() == sharedosv1.OperationStatus_OPERATION_STATUS_CANCELLED {
			return out, true
		}
		return withCall(outcome.Failed(outcome.Internal, "the bridge shut down while the tool's input request waited for its answer: call the tool again"), out), true
	}
	next.EdgeRejection = "the client did not answer the tool's input request: " + err.Error()
	rctx := ctx
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		rctx, cancel = recording(ctx) // the record, though nobody waits
		defer cancel()
	}
	out, rerr := send(rctx, next)
	if rerr != nil {
		f.log().ErrorContext(ctx, "unanswered input round not recorded", slog.String(telemetry.LogCallID, next.GetCallId()),
			slog.String("grpc.code", status.Code(rerr).String()))
		out = outcome.Failed(outcome.Internal, "the SharedOS kernel could not take the call")
	}
	if ctx.Err() != nil {
		return nil, false
	}
	if out.GetCallId() == "" {
		out.CallId = next.GetCallId()
	}
	return out, true
}

// errNoResult: the kernel's stream ended without a result.
var errNoResult = status.Error(codes.Internal, "the kernel's stream ended without a result")

// invoke sends call to the kernel: as InvokeToolStream, relaying progress,
// when progress is wanted and the invoker can stream; else InvokeTool.
func (f *Forwarder) invoke(ctx context.Context, call *sharedosv1.ToolCall, progress func(*sharedosv1.Progress)) (*sharedosv1.ToolResult, error) {
	si, ok := f.Invoker.(StreamInvoker)
	if progress == nil || !ok {
		return f.Invoker.InvokeTool(ctx, call)
	}
	var cancel context.CancelFunc
	if f.StreamTimeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, f.StreamTimeout)
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	defer cancel() // ends the stream
	stream, err := si.InvokeToolStream(ctx, call)
	if err != nil {
		return nil, err
	}
	for {
		ev, err := stream.Recv()
		switch {
		case errors.Is(err, io.EOF):
			return nil, errNoResult
		case err != nil:
			return nil, err
		case ev.GetResult() != nil:
			return ev.GetResult(), nil
		case ev.GetProgress() != nil:
			progress(ev.GetProgress())
		}
	}
}

// Reject records an attempt the bridge refused as a protocol error before
// dispatch (reason says why): the kernel writes its record and runs nothing.
// The client is answered with the protocol error, not with this result.
func (f *Forwarder) Reject(ctx context.Context, turn *Turn, name, reason string) {
	f.RejectKind(ctx, turn, sharedosv1.CallKind_CALL_KIND_UNSPECIFIED, name, reason)
}

// RejectKind is Reject for an attempt of any kind (a prompts/get or
// resources/read refused as a protocol error).
func (f *Forwarder) RejectKind(ctx context.Context, turn *Turn, kind sharedosv1.CallKind, name, reason string) {
	callID := NewCallID()
	span := trace.SpanFromContext(ctx)
	span.SetAttributes(attribute.String(telemetry.AttrCallID, callID),
		attribute.String(telemetry.AttrToolRequested, telemetry.EscapeValue(name)),
		attribute.String(telemetry.AttrTurnID, turn.TurnID))
	call := &sharedosv1.ToolCall{
		CallId: callID, TurnId: turn.TurnID, Tool: name, ArgumentsJson: []byte(`{}`),
		Grant: turn.Grant, Harness: turn.Harness, EdgeRejection: reason, Kind: kind,
	}
	// The refusal is recorded whether or not the client stayed for its
	// answer (a body cut short ends the request's context): invariant 4.
	rctx, cancel := recording(ctx)
	defer cancel()
	res, err := f.entryRPC(kind)(rctx, call)
	if err != nil {
		f.log().ErrorContext(ctx, "refused request not recorded", slog.String(telemetry.LogCallID, callID),
			slog.String("grpc.code", status.Code(err).String()))
		return
	}
	recordOutcome(span, res)
}

// rejectRecordTimeout bounds recording a refused request.
const rejectRecordTimeout = 5 * time.Second

// recording is ctx for writing a record whether or not the client is
// still there: ctx's values, not its end, within rejectRecordTimeout.
func recording(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), rejectRecordTimeout)
}

// ClientLeftReason is the record's reason for a request whose client
// closed its connection before mcp-go handed it over.
const ClientLeftReason = "the client closed the connection before the request was sent on: not run"

// recordOutcome puts the outcome the harness sees on the tools/call span.
// Only a failed outcome makes the span Error: a denial is a correct answer
// (ADR 0014's outcome table), and a success whose handler reported isError
// is still the tool's own answer.
func recordOutcome(span trace.Span, res *sharedosv1.ToolResult) {
	span.SetAttributes(attribute.String(telemetry.AttrOutcomeStatus, outcome.StatusName(res.GetStatus())),
		attribute.String(telemetry.AttrOutcomeCode, res.GetCode()))
	if res.GetStatus() == sharedosv1.OperationStatus_OPERATION_STATUS_FAILED {
		span.SetStatus(otelcodes.Error, res.GetCode())
	}
}

func (f *Forwarder) log() *slog.Logger {
	if f.Logger == nil {
		return slog.Default()
	}
	return f.Logger
}

// resolve maps a requested name to the name put on the ToolCall. Portable
// names map back to canonical ones (the turn published them); anything else
// is forwarded raw, and a harness alias of a pinned tool is only noted.
func (t *Turn) resolve(requested string) (tool, aliasOf string) {
	if _, ok := t.Tools[requested]; ok {
		return requested, ""
	}
	if canon, ok := t.Portable[requested]; ok {
		return canon, ""
	}
	return requested, t.aliasOf(requested)
}

// aliasOf recognises the shapes CLIs give a tool (mcp__server__files_read,
// mcp_server_files.read, server_files_read, files_read) and names the pinned
// tool it stands for, or "".
func (t *Turn) aliasOf(name string) string {
	candidates := []string{name}
	for _, prefix := range []string{"mcp__", "mcp_"} {
		if rest, ok := strings.CutPrefix(name, prefix); ok {
			sep := prefix[len("mcp"):] // "__" for Claude's shape, "_" for Gemini's
			if _, after, ok := strings.Cut(rest, sep); ok {
				candidates = append(candidates, after)
			}
		}
	}
	if _, after, ok := strings.Cut(name, "_"); ok {
		candidates = append(candidates, after)
	}
	for _, c := range candidates {
		if canon, ok := t.aliasKeys[toolname.CollisionKey(c)]; ok && canon != name {
			return canon
		}
	}
	return ""
}

// stripInjected drops harness-injected keys the tool does not declare,
// keeping every other member's bytes and order as sent.
func stripInjected(args json.RawMessage, tool Tool) (json.RawMessage, []string) {
	trimmed := bytes.TrimSpace(args)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return args, nil
	}
	needle := false
	for _, k := range HarnessInjectedKeys {
		if bytes.Contains(trimmed, []byte(k)) {
			needle = true
		}
	}
	if !needle {
		return args, nil
	}
	declared := tool.Properties()
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	if _, err := dec.Token(); err != nil {
		return args, nil
	}
	var out bytes.Buffer
	var stripped []string
	out.WriteByte('{')
	first := true
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return args, nil
		}
		key, _ := kt.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return args, nil
		}
		if isInjected(key) && !declared[key] {
			stripped = append(stripped, key)
			continue
		}
		if !first {
			out.WriteByte(',')
		}
		first = false
		kb, _ := json.Marshal(key)
		out.Write(kb)
		out.WriteByte(':')
		out.Write(v)
	}
	out.WriteByte('}')
	if len(stripped) == 0 {
		return args, nil
	}
	return out.Bytes(), stripped
}

func isInjected(key string) bool {
	for _, k := range HarnessInjectedKeys {
		if k == key {
			return true
		}
	}
	return false
}

// clientIDs renders the client ids of a tools/call's _meta for its span:
// key=value for each of clientIDKeys present, each value escaped and
// capped (escapeAny), so the whole is bounded whatever the client sent.
func clientIDs(meta map[string]any) string {
	var parts []string
	for _, k := range clientIDKeys {
		if v, ok := meta[k]; ok {
			parts = append(parts, k+"="+escapeAny(v))
		}
	}
	return strings.Join(parts, ",")
}

// escapeAny renders v, a JSON value a client chose (a JSON-RPC id, a _meta
// member), as telemetry.EscapeValue does a string. A string is escaped
// without a copy of it; anything else (a number, or an object of any size)
// is printed first.
func escapeAny(v any) string {
	if s, ok := v.(string); ok {
		return telemetry.EscapeValue(s)
	}
	return telemetry.EscapeValue(fmt.Sprint(v))
}

var callIDEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// NewCallID is a fresh random 128-bit call id: unique within any turn
// without coordination between pods, and never the client's JSON-RPC id
// (clients reuse those).
func NewCallID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	return "c" + strings.ToLower(callIDEncoding.EncodeToString(b[:]))
}

// toMCP maps a kernel result per the architecture's outcome table. It also
// returns the result the harness is answered with: a malformed success or
// an unknown status becomes a failure. The MCP result is nil for a
// cancelled call.
func (f *Forwarder) toMCP(ctx context.Context, res *sharedosv1.ToolResult) (*mcp.CallToolResult, *sharedosv1.ToolResult) {
	switch res.GetStatus() {
	case sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED:
		out, err := contentResult(res)
		if err != nil {
			f.log().ErrorContext(ctx, "handler content is not MCP content", slog.String(telemetry.LogCallID, res.GetCallId()),
				slog.String("error", err.Error()))
			failed := withCall(outcome.Failed(outcome.HandlerError, "the tool answered with content that is not MCP content"), res)
			return Refusal(failed), failed
		}
		return out, res
	case sharedosv1.OperationStatus_OPERATION_STATUS_DENIED, sharedosv1.OperationStatus_OPERATION_STATUS_FAILED:
		out := Refusal(res)
		if res.GetHandlerIsError() {
			// The tool itself reported the error: the model reads "failed: ..."
			// first (the text must carry the meaning where isError is
			// dropped), then the tool's own account of it.
			if own, err := contentResult(res); err == nil {
				out.Content = append(out.Content, own.Content...)
				out.StructuredContent, out.RawStructuredContent = own.StructuredContent, own.RawStructuredContent
			} else {
				f.log().WarnContext(ctx, "tool error content is not MCP content", slog.String(telemetry.LogCallID, res.GetCallId()),
					slog.String("error", err.Error()))
			}
		}
		return out, res
	case sharedosv1.OperationStatus_OPERATION_STATUS_CANCELLED:
		return nil, res
	default:
		failed := withCall(outcome.Failed(outcome.Internal,
			"the SharedOS kernel answered with status "+outcome.StatusName(res.GetStatus())), res)
		return Refusal(failed), failed
	}
}

func withCall(r, from *sharedosv1.ToolResult) *sharedosv1.ToolResult {
	r.CallId, r.DecisionId = from.GetCallId(), from.GetDecisionId()
	return r
}

// Refusal is the MCP result of a denied or failed outcome.
func Refusal(res *sharedosv1.ToolResult) *mcp.CallToolResult {
	r := mcp.NewToolResultError(outcome.Text(res))
	r.Meta = &mcp.Meta{AdditionalFields: map[string]any{outcome.MetaKey: outcome.Meta(res)}}
	return r
}

var errNotArray = errors.New("content_json is not a JSON array")

func contentResult(res *sharedosv1.ToolResult) (*mcp.CallToolResult, error) {
	out := &mcp.CallToolResult{IsError: res.GetHandlerIsError(), Content: []mcp.Content{}}
	if c := bytes.TrimSpace(res.GetContentJson()); len(c) > 0 {
		items, err := mcpcontent.Items(c) // slices of c, not copies (reliability row 48)
		if err != nil {
			return nil, errNotArray
		}
		for i, item := range items {
			ct, err := mcp.UnmarshalContent(item)
			if err != nil {
				return nil, fmt.Errorf("content[%d]: %w", i, err)
			}
			out.Content = append(out.Content, ct)
		}
	}
	if sc := bytes.TrimSpace(res.GetStructuredContentJson()); len(sc) > 0 {
		if !json.Valid(sc) {
			return nil, errors.New("structured_content_json is not JSON")
		}
		out.RawStructuredContent = json.RawMessage(sc)
	}
	// Every answer names its record: a success as a refusal does (issue 21:
	// a column matches each answer to its record by call id).
	out.Meta = &mcp.Meta{AdditionalFields: map[string]any{outcome.MetaKey: outcome.Meta(res)}}
	return out, nil
}

// EntryInvoker is an Invoker that also gets prompts and reads resources
// (RuntimeService.GetPrompt, ReadResource); the kernel client is one.
type EntryInvoker interface {
	Invoker
	GetPrompt(ctx context.Context, in *sharedosv1.ToolCall, opts ...grpc.CallOption) (*sharedosv1.ToolResult, error)
	ReadResource(ctx context.Context, in *sharedosv1.ToolCall, opts ...grpc.CallOption) (*sharedosv1.ToolResult, error)
}

// errNoEntries: the kernel client serves no prompts or resources.
var errNoEntries = status.Error(codes.Unimplemented, "the kernel client gets no prompts and reads no resources")

// entryRPC is the kernel method of an attempt of kind.
func (f *Forwarder) entryRPC(kind sharedosv1.CallKind) rpc {
	ei, ok := f.Invoker.(EntryInvoker)
	switch {
	case kind == sharedosv1.CallKind_CALL_KIND_UNSPECIFIED:
		return func(ctx context.Context, c *sharedosv1.ToolCall) (*sharedosv1.ToolResult, error) {
			return f.Invoker.InvokeTool(ctx, c)
		}
	case !ok:
		return func(context.Context, *sharedosv1.ToolCall) (*sharedosv1.ToolResult, error) { return nil, errNoEntries }
	case kind == sharedosv1.CallKind_CALL_KIND_PROMPT:
		return func(ctx context.Context, c *sharedosv1.ToolCall) (*sharedosv1.ToolResult, error) {
			return ei.GetPrompt(ctx, c)
		}
	default:
		return func(ctx context.Context, c *sharedosv1.ToolCall) (*sharedosv1.ToolResult, error) {
			return ei.ReadResource(ctx, c)
		}
	}
}

// Entry gets a prompt (kind PROMPT: key its name, args its arguments) or
// reads a resource (kind RESOURCE: key its URI) for turn, with req's input
// rounds: the kernel's result (denied and failed included), a sealed
// input-required answer (2026-07-28), or the protocol error the request is
// answered with; ok is false when it was cancelled.
func (f *Forwarder) Entry(ctx context.Context, turn *Turn, kind sharedosv1.CallKind, key string, args json.RawMessage, req Request) (*sharedosv1.ToolResult, *Sealed, *protocol.RPCError, bool) {
	span := trace.SpanFromContext(ctx)
	callID := NewCallID()
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage(`{}`)
	}
	span.SetAttributes(attribute.String(telemetry.AttrCallID, callID), attribute.String(telemetry.AttrToolRequested, telemetry.EscapeValue(key)),
		attribute.String(telemetry.AttrTurnID, turn.TurnID))
	req.Name = key
	call := &sharedosv1.ToolCall{CallId: callID, TurnId: turn.TurnID, Tool: key, ArgumentsJson: args, Grant: turn.Grant,
		PinProof: turn.proof(kind, key), Harness: turn.Harness, InputResponsesJson: req.InputResponses, Kind: kind}
	res, sealed, rerr, ok := f.attempt(ctx, turn, call, req, f.entryRPC(kind))
	if ok && rerr == nil && sealed == nil {
		if res.GetCallId() == "" {
			res.CallId = callID
		}
		recordOutcome(span, res)
	}
	return res, sealed, rerr, ok
}
