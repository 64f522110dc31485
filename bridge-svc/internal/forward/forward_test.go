package forward_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	otelcodes "go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/sharedos/toolshare/bridge-svc/internal/forward"
	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/outcome"
	"github.com/sharedos/toolshare/services/contract/pinproof"
	"github.com/sharedos/toolshare/services/platform/telemetry"
)

type stubInvoker struct {
	got  *sharedosv1.ToolCall
	res  *sharedosv1.ToolResult
	err  error
	hook func(ctx context.Context)
}

func (s *stubInvoker) InvokeTool(ctx context.Context, in *sharedosv1.ToolCall, _ ...grpc.CallOption) (*sharedosv1.ToolResult, error) {
	s.got = in
	if s.hook != nil {
		s.hook(ctx)
	}
	return s.res, s.err
}

func turn(portable bool) *forward.Turn {
	tools := []*sharedosv1.PublishedTool{
		{Name: "files.read", Digest: strings.Repeat("a", 64), InputSchemaJson: []byte(`{"type":"object","properties":{"path":{"type":"string"}}}`)},
		{Name: "notes.append", Digest: strings.Repeat("b", 64), InputSchemaJson: []byte(`{"type":"object","properties":{"wait_for_previous":{"type":"boolean"}}}`)},
	}
	return forward.NewTurn("t1", "grant-of-t1", "h", tools, nil, nil, "gemini", portable)
}

func text(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func TestCallBuildsToolCall(t *testing.T) {
	inv := &stubInvoker{res: &sharedosv1.ToolResult{Status: sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED,
		ContentJson: []byte(`[{"type":"text","text":"ok"}]`), StructuredContentJson: []byte(`{"n":12345678901234567890}`)}}
	f := &forward.Forwarder{Invoker: inv}
	args := `{"path":"/public/a.txt",  "wait_for_previous":true,"big":12345678901234567890}`
	res, _ := f.Call(context.Background(), turn(false), forward.Request{Name: "files.read", Arguments: json.RawMessage(args), JSONRPCID: 7})
	c := inv.got
	if c.GetTool() != "files.read" || c.GetTurnId() != "t1" || c.GetHarness() != "gemini" || c.GetGrant() != "grant-of-t1" {
		t.Errorf("ToolCall = %v", c)
	}
	if got := string(c.GetArgumentsJson()); got != `{"path":"/public/a.txt","big":12345678901234567890}` {
		t.Errorf("arguments = %s, want wait_for_previous stripped and the rest byte-exact", got)
	}
	// The call proves its one tool's pinned digest under the root the
	// grant signs (the kernel builds the same tree from the same pin).
	tree, err := pinproof.Build(map[string]string{"files.read": strings.Repeat("a", 64), "notes.append": strings.Repeat("b", 64)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := pinproof.Check(tree.Root(), tree.Size(), pinproof.Tool, "files.read", c.GetPinProof()); err != nil || d != strings.Repeat("a", 64) {
		t.Errorf("pin proof %v: %q, %v", c.GetPinProof(), d, err)
	}
	// A name outside the turn goes to the kernel too, with the same grant
	// and no proof: the kernel refuses it as outside the pin and records it.
	f.Call(context.Background(), turn(false), forward.Request{Name: "nope.tool", Arguments: json.RawMessage(`{}`)})
	if inv.got.GetTool() != "nope.tool" || inv.got.GetGrant() != "grant-of-t1" || inv.got.GetPinProof() != nil {
		t.Errorf("ToolCall of an unpinned name = %v", inv.got)
	}
	if !strings.HasPrefix(c.GetCallId(), "c") || len(c.GetCallId()) != 27 {
		t.Errorf("call id %q", c.GetCallId())
	}
	if res.IsError || text(res) != "ok" || string(res.RawStructuredContent) != `{"n":12345678901234567890}` {
		t.Errorf("result = %+v", res)
	}
	// Declared in the schema: kept.
	f.Call(context.Background(), turn(false), forward.Request{Name: "notes.append", Arguments: json.RawMessage(`{"wait_for_previous":true}`)})
	if string(inv.got.GetArgumentsJson()) != `{"wait_for_previous":true}` {
		t.Errorf("declared key stripped: %s", inv.got.GetArgumentsJson())
	}
	// Absent arguments are the empty object.
	f.Call(context.Background(), turn(false), forward.Request{Name: "files.read"})
	if string(inv.got.GetArgumentsJson()) != `{}` {
		t.Errorf("absent arguments = %q", inv.got.GetArgumentsJson())
	}
}

func TestNamesForwardedRaw(t *testing.T) {
	inv := &stubInvoker{res: outcome.Denied(outcome.ToolUnavailable, "not in catalogue")}
	f := &forward.Forwarder{Invoker: inv}
	for _, name := range []string{"mcp__sharedos__files_read", "mcp_sharedos_files.read", "files_read", "files read", "", "fílés.read"} {
		f.Call(context.Background(), turn(false), forward.Request{Name: name, Arguments: json.RawMessage(`{}`)})
		if inv.got.GetTool() != name {
			t.Errorf("requested %q reached the kernel as %q", name, inv.got.GetTool())
		}
	}
	// A portable-names turn maps its own published names back.
	f.Call(context.Background(), turn(true), forward.Request{Name: "files_read", Arguments: json.RawMessage(`{}`)})
	if inv.got.GetTool() != "files.read" {
		t.Errorf("portable files_read reached the kernel as %q", inv.got.GetTool())
	}
}

func TestOutcomeMapping(t *testing.T) {
	denied := outcome.Denied(outcome.PermissionDenied, "alice may not read /private")
	denied.DecisionId = "d9"
	// The kernel's answer when the handler itself reported an error.
	toolErr := outcome.Failed(outcome.HandlerError, "the tool reported an error")
	toolErr.ContentJson, toolErr.HandlerIsError = []byte(`[{"type":"text","text":"boom"}]`), true
	cases := []struct {
		name     string
		res      *sharedosv1.ToolResult
		err      error
		isError  bool
		prefix   string
		code     string
		nilReply bool
	}{
		{"denied", denied, nil, true, "denied: alice may not read", outcome.PermissionDenied, false},
		{"failed", outcome.Failed(outcome.AuthzUnavailable, "policy decision point unreachable"), nil, true, "failed: policy", outcome.AuthzUnavailable, false},
		{"handler tool error", &sharedosv1.ToolResult{Status: sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED,
			ContentJson: []byte(`[{"type":"text","text":"boom"}]`), HandlerIsError: true}, nil, true, "boom", "", false},
		{"tool-reported error keeps the tool's text after failed:", toolErr, nil, true, "failed: the tool reported an errorboom", outcome.HandlerError, false},
		{"content not MCP", &sharedosv1.ToolResult{Status: sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED,
			ContentJson: []byte(`[{"type":"hologram"}]`)}, nil, true, "failed: ", outcome.HandlerError, false},
		{"kernel unreachable", nil, status.Error(codes.Unavailable, "dial tcp 10.0.0.9:7401: refused"), true, "failed: ", outcome.Internal, false},
		{"kernel deadline", nil, status.Error(codes.DeadlineExceeded, "deadline"), true, "failed: ", outcome.Timeout, false},
		{"cancelled result", outcome.CancelledResult("client went away"), nil, false, "", "", true},
		{"cancelled rpc", nil, status.Error(codes.Canceled, "context canceled"), false, "", "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := &forward.Forwarder{Invoker: &stubInvoker{res: tc.res, err: tc.err}}
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			ctx, sp := tp.Tracer("test").Start(context.Background(), "tools/call files.read")
			res, _ := f.Call(ctx, turn(false), forward.Request{Name: "files.read", Arguments: json.RawMessage(`{}`)})
			sp.End()
			checkSpanOutcome(t, rec.Ended()[0], tc.code, tc.nilReply)
			if tc.nilReply {
				if res != nil {
					t.Fatalf("cancellation answered %+v, want no result", res)
				}
				return
			}
			if res == nil || res.IsError != tc.isError || !strings.HasPrefix(text(res), tc.prefix) {
				t.Fatalf("result = %+v (text %q)", res, text(res))
			}
			if strings.Contains(text(res), "10.0.0.9") {
				t.Errorf("transport detail leaked: %q", text(res))
			}
			if tc.code != "" {
				m, _ := res.Meta.AdditionalFields[outcome.MetaKey].(map[string]any)
				if m["code"] != tc.code || m["callId"] == "" {
					t.Errorf("_meta = %v", res.Meta.AdditionalFields)
				}
			}
		})
	}
	// A client that went away while the kernel ran gets nothing, even if the
	// kernel still answered.
	ctx, cancel := context.WithCancel(context.Background())
	f := &forward.Forwarder{Invoker: &stubInvoker{res: denied, hook: func(context.Context) { cancel() }}}
	if res, _ := f.Call(ctx, turn(false), forward.Request{Name: "files.read"}); res != nil {
		t.Errorf("cancelled call answered %+v", res)
	}
}

// checkSpanOutcome: the tools/call span carries the outcome code the
// harness saw, and is Error exactly for failed outcomes: never for a
// denial, a success (even a handler's isError) or a cancellation.
func checkSpanOutcome(t *testing.T, sp sdktrace.ReadOnlySpan, code string, cancelled bool) {
	t.Helper()
	attrs := map[string]string{}
	for _, kv := range sp.Attributes() {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	if !cancelled && attrs[telemetry.AttrOutcomeCode] != code {
		t.Errorf("span %s = %q, want %q", telemetry.AttrOutcomeCode, attrs[telemetry.AttrOutcomeCode], code)
	}
	wantError := code != "" && code != outcome.PermissionDenied
	if got := sp.Status().Code == otelcodes.Error; got != wantError {
		t.Errorf("span status %v (%s=%s), want Error=%v", sp.Status(), telemetry.AttrOutcomeStatus, attrs[telemetry.AttrOutcomeStatus], wantError)
	}
}

// hangingStream is a StreamInvoker whose streams never answer: a hung
// kernel.
type hangingStream struct{ stubInvoker }

func (h *hangingStream) InvokeToolStream(ctx context.Context, _ *sharedosv1.ToolCall, _ ...grpc.CallOption) (grpc.ServerStreamingClient[sharedosv1.ToolEvent], error) {
	return hungClient{ctx: ctx}, nil
}

type hungClient struct {
	grpc.ClientStream
	ctx context.Context
}

func (c hungClient) Recv() (*sharedosv1.ToolEvent, error) {
	<-c.ctx.Done()
	return nil, status.FromContextError(c.ctx.Err()).Err()
}

// TestStreamHasTheCallDeadline: a call with progress is bounded by
// StreamTimeout as a unary one is by the connection's default deadline:
// a hung kernel is failed/timeout, never a wait for ever.
func TestStreamHasTheCallDeadline(t *testing.T) {
	f := &forward.Forwarder{Invoker: &hangingStream{}, StreamTimeout: 50 * time.Millisecond}
	res, _ := f.Call(context.Background(), turn(false), forward.Request{Name: "files.read", Progress: func(*sharedosv1.Progress) {}})
	if res == nil || !res.IsError || !strings.Contains(fmt.Sprint(res.Content), "timeout") {
		t.Fatalf("result %+v, want failed: timeout", res)
	}
}

// entryStub is a kernel client serving prompts and resources too.
type entryStub struct{ stubInvoker }

func (s *entryStub) GetPrompt(ctx context.Context, in *sharedosv1.ToolCall, o ...grpc.CallOption) (*sharedosv1.ToolResult, error) {
	return s.InvokeTool(ctx, in, o...)
}

func (s *entryStub) ReadResource(ctx context.Context, in *sharedosv1.ToolCall, o ...grpc.CallOption) (*sharedosv1.ToolResult, error) {
	return s.InvokeTool(ctx, in, o...)
}

// TestReadProvesItsURI: a read of a pinned URI proves it pinned under the
// resource root the grant signs; a read of any other URI proves it absent
// (the kernel then reads it through the first template it matches).
func TestReadProvesItsURI(t *testing.T) {
	inv := &entryStub{stubInvoker{res: &sharedosv1.ToolResult{Status: sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED,
		ContentJson: []byte(`[]`)}}}
	f := &forward.Forwarder{Invoker: inv}
	resources := []*sharedosv1.PublishedResource{
		{Uri: "test://a", Digest: strings.Repeat("a", 64)},
		{Uri: "test://c", Digest: strings.Repeat("c", 64)},
		{Uri: "test://t/{id}", Digest: strings.Repeat("f", 64)},
	}
	tr := forward.NewTurn("t1", "grant-of-t1", "h", nil, nil, resources, "gemini", false)
	// The kernel's tree: the concrete URIs only.
	tree, err := pinproof.BuildResources(map[string]string{"test://a": strings.Repeat("a", 64), "test://c": strings.Repeat("c", 64)})
	if err != nil {
		t.Fatal(err)
	}
	read := func(uri string) *sharedosv1.PinProof {
		t.Helper()
		f.Entry(context.Background(), tr, sharedosv1.CallKind_CALL_KIND_RESOURCE, uri, nil, forward.Request{})
		if inv.got.GetTool() != uri || inv.got.GetKind() != sharedosv1.CallKind_CALL_KIND_RESOURCE {
			t.Fatalf("ReadResource got %v", inv.got)
		}
		return inv.got.GetPinProof()
	}
	if d, err := pinproof.Check(tree.Root(), tree.Size(), pinproof.Resource, "test://c", read("test://c")); err != nil || d != strings.Repeat("c", 64) {
		t.Errorf("pinned URI: %q, %v", d, err)
	}
	for _, uri := range []string{"test://t/7", "test://b", "test://0", "test://z"} {
		if err := pinproof.CheckAbsent(tree.Root(), tree.Size(), pinproof.Resource, uri, read(uri)); err != nil {
			t.Errorf("%s: %v, want a proof of its absence", uri, err)
		}
	}
}

// A call whose client left before it went out (its connection closed once
// the request was read) is sent as abandoned — recorded all the same, on a
// live context, and never run; the answer goes nowhere.
func TestACallWhoseClientLeftIsRecorded(t *testing.T) {
	var ctxErr error
	inv := &stubInvoker{res: outcome.CancelledResult("abandoned"), hook: func(ctx context.Context) { ctxErr = ctx.Err() }}
	f := &forward.Forwarder{Invoker: inv}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f.Call(ctx, turn(false), forward.Request{Name: "files.read", Arguments: json.RawMessage(`{"path":"/a"}`)})
	if inv.got == nil || !inv.got.GetAbandoned() || inv.got.GetEdgeRejection() != "" || inv.got.GetTool() != "files.read" {
		t.Fatalf("the kernel got %v", inv.got)
	}
	if ctxErr != nil {
		t.Errorf("the record was sent on an ended context: %v", ctxErr)
	}
}

// seqInvoker answers each InvokeTool with the next of answers and keeps
// every call it got with the state of its context; arrived has one value
// per call.
type seqInvoker struct {
	mu      sync.Mutex
	answers []func(ctx context.Context) (*sharedosv1.ToolResult, error)
	got     []*sharedosv1.ToolCall
	ctxErrs []error
	arrived chan struct{}
}

func (s *seqInvoker) InvokeTool(ctx context.Context, in *sharedosv1.ToolCall, _ ...grpc.CallOption) (*sharedosv1.ToolResult, error) {
	s.mu.Lock()
	s.got = append(s.got, proto.CloneOf(in))
	s.ctxErrs = append(s.ctxErrs, ctx.Err())
	answer := s.answers[0]
	s.answers = s.answers[1:]
	s.mu.Unlock()
	if s.arrived != nil {
		s.arrived <- struct{}{}
	}
	return answer(ctx)
}

// TestACallTheKernelDidNotTakeIsSentAsAbandoned: when the RPC fails —
// the bridge's call deadline, the kernel unreachable — the client is
// answered failed, and the same call id goes again as abandoned with that
// code: the kernel records what the client was told unless it has the
// call. A resumed round is not sent again (its attempt has its record).
func TestACallTheKernelDidNotTakeIsSentAsAbandoned(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code string
	}{
		{status.Error(codes.DeadlineExceeded, "deadline exceeded"), outcome.Timeout},
		{status.Error(codes.Unavailable, "connection refused"), outcome.Internal},
	} {
		inv := &seqInvoker{answers: []func(context.Context) (*sharedosv1.ToolResult, error){
			func(context.Context) (*sharedosv1.ToolResult, error) { return nil, tc.err },
			func(context.Context) (*sharedosv1.ToolResult, error) { return outcome.Failed(tc.code, "recorded"), nil },
		}, arrived: make(chan struct{}, 2)}
		f := &forward.Forwarder{Invoker: inv}
		res, rerr := f.Call(context.Background(), turn(false), forward.Request{Name: "files.read", Arguments: json.RawMessage(`{"path":"/a"}`)})
		if rerr != nil || res == nil || !res.IsError || !strings.HasPrefix(text(res), "failed: ") {
			t.Fatalf("%v: answered %+v %v, want a failed result", tc.err, res, rerr)
		}
		// The notice goes in the background: the answer does not wait.
		for range 2 {
			select {
			case <-inv.arrived:
			case <-time.After(10 * time.Second):
				t.Fatalf("%v: the abandonment never reached the kernel", tc.err)
			}
		}
		inv.mu.Lock()
		defer inv.mu.Unlock()
		if len(inv.got) != 2 || !inv.got[1].GetAbandoned() || inv.got[1].GetAbandonedCode() != tc.code || inv.got[1].GetCallId() != inv.got[0].GetCallId() {
			t.Fatalf("%v: the kernel got %v, want the call and its abandonment with code %s", tc.err, inv.got, tc.code)
		}
	}
}

// TestACallCancelledOnItsWayIsSentAsAbandoned: when the client leaves
// while the call is on its way to the kernel (the RPC ends Canceled, and
// the call may or may not have arrived), the bridge sends the same call id
// again as abandoned, on a live context: the kernel records it unless it
// has. A call the kernel answered is not sent again, though its client
// left meanwhile.
func TestACallCancelledOnItsWayIsSentAsAbandoned(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	inv := &seqInvoker{answers: []func(context.Context) (*sharedosv1.ToolResult, error){
		func(context.Context) (*sharedosv1.ToolResult, error) {
			cancel()
			return nil, status.Error(codes.Canceled, "context canceled")
		},
		func(context.Context) (*sharedosv1.ToolResult, error) {
			return outcome.CancelledResult("abandoned"), nil
		},
	}}
	f := &forward.Forwarder{Invoker: inv}
	f.Call(ctx, turn(false), forward.Request{Name: "files.read", Arguments: json.RawMessage(`{"path":"/a"}`)})
	if len(inv.got) != 2 {
		t.Fatalf("the kernel got %d calls, want the call and its abandonment", len(inv.got))
	}
	first, again := inv.got[0], inv.got[1]
	if first.GetAbandoned() || !again.GetAbandoned() || again.GetCallId() != first.GetCallId() || again.GetTurnId() != first.GetTurnId() ||
		again.GetTool() != "files.read" || string(again.GetArgumentsJson()) != string(first.GetArgumentsJson()) || again.GetGrant() != first.GetGrant() {
		t.Fatalf("sent %v, then %v", first, again)
	}
	if inv.ctxErrs[1] != nil {
		t.Errorf("the abandonment was sent on an ended context: %v", inv.ctxErrs[1])
	}

	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	inv = &seqInvoker{answers: []func(context.Context) (*sharedosv1.ToolResult, error){
		func(context.Context) (*sharedosv1.ToolResult, error) {
			cancel()
			return outcome.CancelledResult("the caller left"), nil
		},
	}}
	f = &forward.Forwarder{Invoker: inv}
	f.Call(ctx, turn(false), forward.Request{Name: "files.read", Arguments: json.RawMessage(`{"path":"/a"}`)})
	if len(inv.got) != 1 {
		t.Fatalf("the kernel got %d calls for a call it answered, want 1", len(inv.got))
	}
}

func TestRejectRecordsAfterTheClientLeft(t *testing.T) {
	var ctxErr error
	inv := &stubInvoker{res: outcome.Failed(outcome.InvalidRequest, "refused"), hook: func(ctx context.Context) { ctxErr = ctx.Err() }}
	f := &forward.Forwarder{Invoker: inv}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f.Reject(ctx, turn(false), "files.read", "the request body was cut short")
	if inv.got == nil || inv.got.GetEdgeRejection() != "the request body was cut short" {
		t.Fatalf("the kernel got %v", inv.got)
	}
	if ctxErr != nil {
		t.Errorf("the refusal was sent on an ended context: %v", ctxErr)
	}
}
