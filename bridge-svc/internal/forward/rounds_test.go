package forward_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sharedos/toolshare/bridge-svc/internal/forward"
	"github.com/sharedos/toolshare/bridge-svc/internal/protocol"
	"github.com/sharedos/toolshare/bridge-svc/internal/requeststate"
	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/outcome"
	"github.com/sharedos/toolshare/services/platform/grpcx"
)

// roundsInvoker answers INPUT_REQUIRED for a fresh call and records what
// every call carried, and the kernel address its context asked for (it
// stands for the balancer: a call without one is "picked" to pick).
type roundsInvoker struct {
	calls   []*sharedosv1.ToolCall
	kernels []string
	pick    string
	res     func(*sharedosv1.ToolCall) *sharedosv1.ToolResult
}

func (r *roundsInvoker) InvokeTool(ctx context.Context, in *sharedosv1.ToolCall, _ ...grpc.CallOption) (*sharedosv1.ToolResult, error) {
	r.calls = append(r.calls, in)
	a := grpcx.AffinityFrom(ctx)
	r.kernels = append(r.kernels, a.Addr())
	if a != nil && a.Addr() == "" {
		a.Set(r.pick)
	}
	if in.GetEdgeRejection() != "" {
		return outcome.Failed(outcome.InvalidRequest, in.GetEdgeRejection()), nil
	}
	return r.res(in), nil
}

func waiting(attempt string, round int32, expires time.Time) *sharedosv1.ToolResult {
	return &sharedosv1.ToolResult{Status: sharedosv1.OperationStatus_OPERATION_STATUS_INPUT_REQUIRED,
		Input: &sharedosv1.InputRound{AttemptId: attempt, Round: round, ExpiresAt: timestamppb.New(expires),
			Input: &sharedosv1.InputRequired{
				InputRequestsJson: []byte(`{"user_name":{"method":"elicitation/create","params":{"message":"Name?","requestedSchema":{"type":"object","properties":{"name":{"type":"string"}}}}}}`),
				RequestState:      []byte("provider-state"),
			}}}
}

// TestInputRoundTrip: a 2026-07-28 call whose tool needs input is answered
// input_required with the provider's requests and a sealed state; the
// retry carries the round back to the kernel as a resumption with the
// client's answers; what the client declared is passed on as methods.
func TestInputRoundTrip(t *testing.T) {
	now := time.Now()
	states, _ := requeststate.Generate()
	inv := &roundsInvoker{res: func(c *sharedosv1.ToolCall) *sharedosv1.ToolResult {
		if c.GetResume() == nil {
			return waiting("attempt-1", 1, now.Add(time.Minute))
		}
		return &sharedosv1.ToolResult{Status: sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED, ContentJson: []byte(`[{"type":"text","text":"Hello, Ada!"}]`)}
	}, pick: "10.0.0.7:9090"}
	f := &forward.Forwarder{Invoker: inv, States: states, Now: func() time.Time { return now }}
	args := json.RawMessage(`{"path":"/a"}`)
	req := forward.Request{Name: "files.read", Arguments: args, Modern: true, InputMethods: protocol.InputMethods([]string{"elicitation", "sampling"})}
	res, rerr := f.Call(context.Background(), turn(false), req)
	if rerr != nil || res == nil {
		t.Fatalf("Call = %v, %v", res, rerr)
	}
	if res.ResultType != mcp.ResultTypeInputRequired || res.RequestState == "" || res.InputRequests["user_name"].Method != mcp.MethodElicitationCreate {
		t.Fatalf("result %+v: want input_required with the provider's request and a state", res)
	}
	if strings.Contains(res.RequestState, "provider-state") || strings.Contains(res.RequestState, "attempt-1") {
		t.Fatal("the requestState shows what it seals")
	}
	first := inv.calls[0]
	if !first.GetInputRounds() || strings.Join(first.GetInputMethods(), ",") != "elicitation/create,sampling/createMessage" {
		t.Fatalf("ToolCall %+v: want input rounds with the declared methods", first)
	}

	req.RequestState, req.HasRequestState = res.RequestState, true
	req.InputResponses = json.RawMessage(`{"user_name":{"action":"accept","content":{"name":"Ada"}}}`)
	done, rerr := f.Call(context.Background(), turn(false), req)
	if rerr != nil || text(done) != "Hello, Ada!" {
		t.Fatalf("retry = %v, %v", done, rerr)
	}
	resumed := inv.calls[1]
	if r := resumed.GetResume(); r.GetAttemptId() != "attempt-1" || r.GetRound() != 1 || string(r.GetRequestState()) != "provider-state" ||
		string(resumed.GetInputResponsesJson()) != string(req.InputResponses) {
		t.Fatalf("resumed ToolCall %+v", resumed)
	}
	// The retry goes to the kernel replica that answered the first round
	// (on any pod: the address travels sealed).
	if strings.Join(inv.kernels, ",") != ",10.0.0.7:9090" || strings.Contains(res.RequestState, "10.0.0.7") {
		t.Errorf("kernel addresses asked for %q", inv.kernels)
	}
}

// TestInputRoundRefusals: a requestState that does not open here (altered,
// another turn's, expired, another call's) is -32602 and recorded, nothing
// resumed; a 2026-07-28 tool that needs an undeclared capability is
// -32021 naming it; a 2025-era client gets a failed result instead.
func TestInputRoundRefusals(t *testing.T) {
	now := time.Now()
	states, _ := requeststate.Generate()
	inv := &roundsInvoker{res: func(*sharedosv1.ToolCall) *sharedosv1.ToolResult {
		return waiting("attempt-1", 1, now.Add(time.Minute))
	}}
	f := &forward.Forwarder{Invoker: inv, States: states, Now: func() time.Time { return now }}
	args := json.RawMessage(`{"path":"/a"}`)
	res, _ := f.Call(context.Background(), turn(false), forward.Request{Name: "files.read", Arguments: args, Modern: true})
	good := res.RequestState

	other := forward.NewTurn("t2", "grant-of-t2", "h", []*sharedosv1.PublishedTool{{Name: "files.read"}}, nil, nil, "x", false)
	late := &forward.Forwarder{Invoker: inv, States: states, Now: func() time.Time { return now.Add(time.Hour) }}
	for name, c := range map[string]struct {
		f     *forward.Forwarder
		turn  *forward.Turn
		state string
		args  string
		want  string
	}{
		"tampered":     {f, turn(false), good + "-TAMPERED", `{"path":"/a"}`, "altered"},
		"another turn": {f, other, good, `{"path":"/a"}`, "altered or belongs to another turn"},
		"expired":      {late, turn(false), good, `{"path":"/a"}`, "expired"},
		"other args":   {f, turn(false), good, `{"path":"/b"}`, "another tool call"},
		"empty":        {f, turn(false), "", `{"path":"/a"}`, "not valid"},
	} {
		inv.calls = nil
		res, rerr := c.f.Call(context.Background(), c.turn, forward.Request{Name: "files.read", Arguments: json.RawMessage(c.args),
			Modern: true, RequestState: c.state, HasRequestState: true})
		if res != nil || rerr == nil || rerr.Code != protocol.CodeInvalidParams || !strings.Contains(rerr.Message, c.want) {
			t.Errorf("%s: %v, %+v: want -32602 saying %q", name, res, rerr, c.want)
			continue
		}
		if len(inv.calls) != 1 || inv.calls[0].GetEdgeRejection() == "" || inv.calls[0].GetResume() != nil {
			t.Errorf("%s: kernel saw %v: want the refusal recorded, nothing resumed", name, inv.calls)
		}
	}

	missing := &sharedosv1.ToolResult{Status: sharedosv1.OperationStatus_OPERATION_STATUS_FAILED, Code: outcome.MissingCapability,
		Reason: "the tool needs input the client did not declare it can give: sampling/createMessage", MissingInputMethods: []string{"sampling/createMessage"}}
	inv.res = func(*sharedosv1.ToolCall) *sharedosv1.ToolResult { return missing }
	_, rerr := f.Call(context.Background(), turn(false), forward.Request{Name: "files.read", Arguments: args, Modern: true})
	if rerr == nil || rerr.Code != protocol.CodeMissingCapability {
		t.Fatalf("missing capability: %+v, want -32021", rerr)
	}
	body := string(rerr.Body())
	if !strings.Contains(body, `"requiredCapabilities":{"sampling":{}}`) {
		t.Errorf("-32021 body %s: want data.requiredCapabilities naming sampling", body)
	}
	legacy, rerr := f.Call(context.Background(), turn(false), forward.Request{Name: "files.read", Arguments: args})
	if rerr != nil || legacy == nil || !legacy.IsError || !strings.HasPrefix(text(legacy), "failed: the tool needs input") {
		t.Errorf("2025-era: %v, %v: want a failed result", legacy, rerr)
	}
}

// TestUnsealableRoundEndsItsAttempt: an input-required result the bridge
// cannot hand out (input requests it cannot decode as MCP's) is answered
// failed/internal, and its attempt, which would otherwise wait for an
// answer its client was never asked for and end failed/timeout, is ended
// at once as that: an abandonment notice with code internal resuming its
// round, sent to the kernel replica that answered it.
func TestUnsealableRoundEndsItsAttempt(t *testing.T) {
	now := time.Now()
	inv := &roundsInvoker{res: func(c *sharedosv1.ToolCall) *sharedosv1.ToolResult {
		if c.GetResume() != nil {
			return outcome.Failed(outcome.Internal, "the bridge could not reach SharedOS: not run")
		}
		res := waiting("attempt-1", 1, now.Add(time.Minute))
		res.Input.Input.InputRequestsJson = []byte(`{"q":{"method":"elicitation/create","params":{"message":5}}}`)
		return res
	}, pick: "10.0.0.7:9090"}
	f := &forward.Forwarder{Invoker: inv, Now: func() time.Time { return now }}
	res, rerr := f.Call(context.Background(), turn(false), forward.Request{Name: "files.read", Arguments: json.RawMessage(`{"path":"/a"}`), Modern: true})
	if rerr != nil || res == nil || !res.IsError || !strings.Contains(text(res), "failed: the call asked for input the bridge could not pass on") {
		t.Fatalf("Call = %v, %+v: want a failed/internal result", res, rerr)
	}
	if len(inv.calls) != 2 {
		t.Fatalf("kernel saw %d calls, want the call and the notice ending its round", len(inv.calls))
	}
	notice := inv.calls[1]
	if !notice.GetAbandoned() || notice.GetAbandonedCode() != outcome.Internal || notice.GetResume().GetAttemptId() != "attempt-1" ||
		notice.GetResume().GetRound() != 1 || notice.GetTool() != "files.read" || string(notice.GetArgumentsJson()) != `{"path":"/a"}` {
		t.Errorf("notice %v: want the round resumed as abandoned, code internal", notice)
	}
	if inv.kernels[1] != "10.0.0.7:9090" {
		t.Errorf("notice sent to kernel %q, want the replica that answered the round", inv.kernels[1])
	}
}

// entryRoundsInvoker is a roundsInvoker that also serves prompts/get and
// resources/read, each answered as its tools/call would be.
type entryRoundsInvoker struct{ *roundsInvoker }

func (e entryRoundsInvoker) GetPrompt(ctx context.Context, in *sharedosv1.ToolCall, _ ...grpc.CallOption) (*sharedosv1.ToolResult, error) {
	return e.InvokeTool(ctx, in)
}

func (e entryRoundsInvoker) ReadResource(ctx context.Context, in *sharedosv1.ToolCall, _ ...grpc.CallOption) (*sharedosv1.ToolResult, error) {
	return e.InvokeTool(ctx, in)
}

// TestInputRoundStateOpensOnlyForItsKind: a requestState handed out for a
// prompts/get does not open on a tools/call of the same name and
// arguments, nor a tool's on a prompts/get: the kernel would otherwise be
// asked to continue the prompt's attempt as a tool call. It is refused
// -32602 and recorded as the kind it came with, nothing resumed, like a
// state of another call; on its own kind it resumes the attempt.
func TestInputRoundStateOpensOnlyForItsKind(t *testing.T) {
	now := time.Now()
	states, _ := requeststate.Generate()
	inv := &roundsInvoker{res: func(c *sharedosv1.ToolCall) *sharedosv1.ToolResult {
		if c.GetResume() == nil {
			return waiting("attempt-1", 1, now.Add(time.Minute))
		}
		return &sharedosv1.ToolResult{Status: sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED, ContentJson: []byte(`[]`)}
	}}
	f := &forward.Forwarder{Invoker: entryRoundsInvoker{inv}, States: states, Now: func() time.Time { return now }}
	args := json.RawMessage(`{"path":"/a"}`)
	prompt := sharedosv1.CallKind_CALL_KIND_PROMPT
	_, sealed, rerr, ok := f.Entry(context.Background(), turn(false), prompt, "files.read", args, forward.Request{Modern: true})
	if rerr != nil || !ok || sealed == nil {
		t.Fatalf("prompts/get = %v, %+v, %v: want a sealed input-required answer", sealed, rerr, ok)
	}
	tool, _ := f.Call(context.Background(), turn(false), forward.Request{Name: "files.read", Arguments: args, Modern: true})

	inv.calls = nil
	res, rerr := f.Call(context.Background(), turn(false), forward.Request{Name: "files.read", Arguments: args, Modern: true,
		RequestState: sealed.State, HasRequestState: true})
	if res != nil || rerr == nil || rerr.Code != protocol.CodeInvalidParams || !strings.Contains(rerr.Message, "another prompts/get request") {
		t.Errorf("tools/call with a prompt's state: %v, %+v: want -32602 naming the prompt", res, rerr)
	}
	_, _, rerr, _ = f.Entry(context.Background(), turn(false), prompt, "files.read", args, forward.Request{Modern: true,
		RequestState: tool.RequestState, HasRequestState: true})
	if rerr == nil || rerr.Code != protocol.CodeInvalidParams || !strings.Contains(rerr.Message, "another tool call") {
		t.Errorf("prompts/get with a tool's state: %+v: want -32602 naming the tool call", rerr)
	}
	if len(inv.calls) != 2 || inv.calls[0].GetKind() != sharedosv1.CallKind_CALL_KIND_UNSPECIFIED || inv.calls[1].GetKind() != prompt {
		t.Fatalf("kernel saw %v: want the two refusals recorded, a tools/call's and a prompts/get's", inv.calls)
	}
	for _, c := range inv.calls {
		if c.GetEdgeRejection() == "" || c.GetResume() != nil {
			t.Errorf("kernel saw %v: want the refusal recorded, nothing resumed", c)
		}
	}

	inv.calls = nil
	done, _, rerr, ok := f.Entry(context.Background(), turn(false), prompt, "files.read", args, forward.Request{Modern: true,
		RequestState: sealed.State, HasRequestState: true})
	if rerr != nil || !ok || done.GetStatus() != sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED ||
		inv.calls[0].GetResume().GetAttemptId() != "attempt-1" {
		t.Errorf("the prompt's own retry: %v, %+v (kernel saw %v): want the attempt resumed", done, rerr, inv.calls)
	}
}

// TestAnAskedRoundIsGivenUpBeforeItExpires (attack run of 2026-12-07,
// D2): a 2025-era client is waited for until RoundAnswerMargin before its
// round expires (a tenth of a short round's time at most), so the
// bridge's refusal of an unanswered round reaches the kernel while the
// round is still open, on a clock that runs behind the kernel's too; it
// was given until the expiry itself, and the refusal always came too
// late. The client is answered with what the kernel made of it.
func TestAnAskedRoundIsGivenUpBeforeItExpires(t *testing.T) {
	now := time.Now()
	for _, c := range []struct {
		name          string
		left, waitFor time.Duration
	}{
		{"a round of 10 minutes", 10 * time.Minute, 10*time.Minute - forward.RoundAnswerMargin},
		{"a round of a minute", time.Minute, 54 * time.Second},
		{"a round already past", -time.Second, -time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			inv := &roundsInvoker{res: func(*sharedosv1.ToolCall) *sharedosv1.ToolResult {
				return waiting("attempt-1", 1, now.Add(c.left))
			}}
			f := &forward.Forwarder{Invoker: inv, Now: func() time.Time { return now }}
			var until time.Time
			req := forward.Request{Name: "files.read", Arguments: json.RawMessage(`{}`), InputMethods: []string{"elicitation/create"},
				Ask: func(_ context.Context, _ json.RawMessage, u time.Time) (json.RawMessage, error) {
					until = u
					return nil, errors.New("no answer before the round's deadline")
				}}
			res, rerr := f.Call(context.Background(), turn(false), req)
			if want := now.Add(c.waitFor); !until.Equal(want) {
				t.Errorf("the client was waited for until %v, want %v (the round expires at %v)", until, want, now.Add(c.left))
			}
			if rerr != nil || len(inv.calls) != 2 || inv.calls[1].GetResume().GetAttemptId() != "attempt-1" ||
				!strings.Contains(inv.calls[1].GetEdgeRejection(), "did not answer") || !strings.Contains(text(res), "failed: ") {
				t.Fatalf("Call = %v, %v (kernel saw %v): want the round refused on its resumption and that answered", res, rerr, inv.calls)
			}
		})
	}
}

// TestABridgeStoppingAnswersARoundThatEndedAsItEnded: a pod that shuts
// down while its client is asked gives the round up (abandoned,
// failed/internal); when the round had ended before that notice came —
// its wait ran out — the kernel answers with the attempt's outcome, and
// that, under the attempt's call id, is what the client is answered, not
// a failed/internal its record does not say. A round still open is
// answered failed/internal, under the attempt's call id.
func TestABridgeStoppingAnswersARoundThatEndedAsItEnded(t *testing.T) {
	now := time.Now()
	for _, c := range []struct {
		name   string
		kernel *sharedosv1.ToolResult
		code   string
	}{
		{"a round that ran out", &sharedosv1.ToolResult{Status: sharedosv1.OperationStatus_OPERATION_STATUS_FAILED, Code: outcome.Timeout,
			Reason: "the client did not answer the tool's input request in time", CallId: "call-of-the-attempt"}, outcome.Timeout},
		{"an open round", &sharedosv1.ToolResult{Status: sharedosv1.OperationStatus_OPERATION_STATUS_FAILED, Code: outcome.Internal,
			Reason: "the bridge ended the tool's input request before its client answered", CallId: "call-of-the-attempt"}, outcome.Internal},
	} {
		t.Run(c.name, func(t *testing.T) {
			inv := &roundsInvoker{res: func(call *sharedosv1.ToolCall) *sharedosv1.ToolResult {
				if call.GetAbandoned() {
					return c.kernel
				}
				return waiting("attempt-1", 1, now.Add(10*time.Minute))
			}}
			f := &forward.Forwarder{Invoker: inv, Now: func() time.Time { return now }}
			req := forward.Request{Name: "files.read", Arguments: json.RawMessage(`{}`), InputMethods: []string{"elicitation/create"},
				Ask: func(context.Context, json.RawMessage, time.Time) (json.RawMessage, error) {
					return nil, forward.ErrBridgeStopping
				}}
			res, rerr := f.Call(context.Background(), turn(false), req)
			if rerr != nil || res == nil || !res.IsError {
				t.Fatalf("Call = %v, %v: want a failed result", res, rerr)
			}
			meta, _ := res.Meta.AdditionalFields[outcome.MetaKey].(map[string]any)
			if meta["code"] != c.code || meta["callId"] != "call-of-the-attempt" {
				t.Errorf("answered %v: want %s under the attempt's call id", meta, c.code)
			}
			if n := inv.calls[len(inv.calls)-1]; !n.GetAbandoned() || n.GetAbandonedCode() != outcome.Internal {
				t.Errorf("the kernel was told %v: want the round abandoned failed/internal", n)
			}
		})
	}
}

// TestAskedRoundsStayOnOneKernel: a 2025-era session's rounds, asked on
// this pod, go to the kernel replica that answered the first.
func TestAskedRoundsStayOnOneKernel(t *testing.T) {
	now := time.Now()
	inv := &roundsInvoker{res: func(c *sharedosv1.ToolCall) *sharedosv1.ToolResult {
		if c.GetResume().GetRound() < 2 {
			return waiting("attempt-1", c.GetResume().GetRound()+1, now.Add(time.Minute))
		}
		return &sharedosv1.ToolResult{Status: sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED, ContentJson: []byte(`[{"type":"text","text":"done"}]`)}
	}, pick: "10.0.0.8:9090"}
	f := &forward.Forwarder{Invoker: inv, Now: func() time.Time { return now }}
	asked := 0
	req := forward.Request{Name: "files.read", Arguments: json.RawMessage(`{}`), InputMethods: []string{"elicitation/create"},
		Ask: func(context.Context, json.RawMessage, time.Time) (json.RawMessage, error) {
			asked++
			return json.RawMessage(`{"user_name":{"action":"accept","content":{"name":"Ada"}}}`), nil
		}}
	res, rerr := f.Call(context.Background(), turn(false), req)
	if rerr != nil || text(res) != "done" || asked != 2 {
		t.Fatalf("Call = %v, %v (asked %d)", res, rerr, asked)
	}
	if strings.Join(inv.kernels, ",") != ",10.0.0.8:9090,10.0.0.8:9090" {
		t.Errorf("kernel addresses asked for %q", inv.kernels)
	}
}
