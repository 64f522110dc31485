package forward

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/sharedos/toolshare/bridge-svc/internal/protocol"
	"github.com/sharedos/toolshare/bridge-svc/internal/requeststate"
	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/redact"
)

func (f *Forwarder) now() time.Time {
	if f.Now != nil {
		return f.Now()
	}
	return time.Now()
}

func (f *Forwarder) states() *requeststate.Sealer {
	f.statesOnce.Do(func() {
		if f.States == nil {
			f.States, _ = requeststate.Generate() // never fails: 32 random bytes
		}
	})
	return f.States
}

// resume opens a request's requestState for turn: the round of the
// attempt it continues, provided it was sealed for this very kind of call,
// name and arguments, and the kernel replica that answered it. Anything
// else is -32602: the spec leaves no result form for a state that fails
// its integrity check.
func (f *Forwarder) resume(turn *Turn, token string, call *sharedosv1.ToolCall) (*sharedosv1.Resume, string, *protocol.RPCError) {
	st, err := f.states().Open(token, turn.TurnID, f.now())
	if err != nil {
		msg := requeststate.ErrSeal.Error()
		if errors.Is(err, requeststate.ErrExpired) {
			msg = requeststate.ErrExpired.Error()
		}
		return nil, "", &protocol.RPCError{Code: protocol.CodeInvalidParams, Message: "invalid params: " + msg}
	}
	if st.Kind != call.GetKind() || st.Tool != call.GetTool() || st.ArgumentsDigest != redact.ArgumentsDigest(call.GetArgumentsJson()) {
		return nil, "", &protocol.RPCError{Code: protocol.CodeInvalidParams,
			Message: "invalid params: requestState is not valid: it belongs to another " + callNoun(st.Kind) +
				" (the method, name and arguments must be the same)"}
	}
	return &sharedosv1.Resume{AttemptId: st.AttemptID, Round: st.Round, RequestState: st.Provider}, st.Kernel, nil
}

// seal is the 2026-07-28 form of an INPUT_REQUIRED result: the
// provider's input requests, and the round sealed as requestState with
// the address of the kernel replica that answered it.
func (f *Forwarder) seal(turn *Turn, call *sharedosv1.ToolCall, res *sharedosv1.ToolResult, kernel string) (*Sealed, error) {
	in := res.GetInput()
	var reqs mcp.InputRequests
	if err := json.Unmarshal(in.GetInput().GetInputRequestsJson(), &reqs); err != nil {
		return nil, fmt.Errorf("input requests: %w", err)
	}
	token, err := f.states().Seal(requeststate.State{
		TurnID: turn.TurnID, AttemptID: in.GetAttemptId(), Round: in.GetRound(), Kind: call.GetKind(), Tool: call.GetTool(),
		ArgumentsDigest: redact.ArgumentsDigest(call.GetArgumentsJson()), ExpiresAt: in.GetExpiresAt().AsTime(),
		Provider: in.GetInput().GetRequestState(), Kernel: kernel,
	})
	if err != nil {
		return nil, err
	}
	return &Sealed{Requests: reqs, State: token}, nil
}

// callNoun names the request a requestState was sealed for, as its client
// knows it.
func callNoun(kind sharedosv1.CallKind) string {
	switch kind {
	case sharedosv1.CallKind_CALL_KIND_PROMPT:
		return "prompts/get request"
	case sharedosv1.CallKind_CALL_KIND_RESOURCE:
		return "resources/read request"
	}
	return "tool call"
}
