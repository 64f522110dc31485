package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"google.golang.org/protobuf/types/known/timestamppb"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/inputround"
	"github.com/sharedos/toolshare/services/contract/outcome"
	"github.com/sharedos/toolshare/services/platform/telemetry"

	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline/records"
)

// Input rounds (MCP input-required results, ADR 0017): a provider may
// answer "not yet" with the inputs it needs; the attempt's record then
// waits, pending, and the client's retry resumes the same attempt.
const (
	// DefaultInputWait is how long an attempt waits for the client's input.
	DefaultInputWait = 10 * time.Minute
	// MaxInputRounds bounds the rounds of one attempt.
	MaxInputRounds = 16
	// MaxInputRequests bounds the input requests of one round.
	MaxInputRequests = 16
	// MaxInputRequestsBytes and MaxRequestStateBytes bound what a provider
	// may ask for and keep (the state travels to the client and back).
	MaxInputRequestsBytes = 64 << 10
	MaxRequestStateBytes  = 8 << 10
)

// errRoundClosed refuses a resumption whose wait is not open.
const roundClosedReason = "the input round this call answers is not open: it was answered already, ran out, or its turn was closed"

// checkInputResponses refuses input responses that are not an object whose
// members are objects (what the bridge let through must still be sane).
func checkInputResponses(b []byte) string {
	t := bytes.TrimSpace(b)
	if len(t) == 0 {
		return ""
	}
	var m map[string]json.RawMessage
	if t[0] != '{' || json.Unmarshal(t, &m) != nil {
		return "inputResponses must be a JSON object"
	}
	for k, v := range m {
		if v = bytes.TrimSpace(v); len(v) == 0 || v[0] != '{' {
			return fmt.Sprintf("inputResponses[%q] must be an object", truncate(k, 64))
		}
	}
	return ""
}

// inputRequest is one member of a provider's inputRequests.
type inputRequest struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// inputRequired turns a provider's input_required answer into the kernel's:
// INPUT_REQUIRED when the requests are well-formed (MCP input requests
// the bridge can hand out) and the client can answer them; failed/handler_error when they are malformed or past the
// round limit; failed/missing_capability when the client cannot answer
// them (the tool goes no further: MCP servers must not rely on a
// capability the client did not declare).
func inputRequired(call *sharedosv1.ToolCall, in *sharedosv1.InputRequired) *sharedosv1.ToolResult {
	reqs := bytes.TrimSpace(in.GetInputRequestsJson())
	if len(reqs) > MaxInputRequestsBytes || len(in.GetRequestState()) > MaxRequestStateBytes {
		return outcome.Failed(outcome.HandlerError, "the tool's provider asked for input past the size limits")
	}
	var m map[string]inputRequest
	if len(reqs) == 0 {
		reqs = []byte("{}")
	}
	if reqs[0] != '{' || json.Unmarshal(reqs, &m) != nil || len(m) > MaxInputRequests {
		return outcome.Failed(outcome.HandlerError, "the tool's provider asked for input in a malformed form")
	}
	// The bridge hands the requests out as MCP's own (mcp-go's
	// InputRequests): ones it could not decode — params that do not fit
	// their method, an elicitation's message of 5 — would leave the
	// attempt waiting for an answer its client was never asked for.
	if json.Unmarshal(reqs, new(mcp.InputRequests)) != nil {
		return outcome.Failed(outcome.HandlerError, "the tool's provider asked for input in a malformed form")
	}
	if len(m) == 0 && len(in.GetRequestState()) == 0 {
		return outcome.Failed(outcome.HandlerError, "the tool's provider asked for input without saying for what")
	}
	var missing []string
	for _, r := range m {
		p := bytes.TrimSpace(r.Params)
		if !inputround.Known(r.Method) || (len(p) > 0 && p[0] != '{') {
			return outcome.Failed(outcome.HandlerError, "the tool's provider asked for input in a malformed form")
		}
		if !slices.Contains(call.GetInputMethods(), r.Method) && !slices.Contains(missing, r.Method) {
			missing = append(missing, r.Method)
		}
	}
	if call.GetResume().GetRound() >= MaxInputRounds {
		return outcome.Failed(outcome.HandlerError, fmt.Sprintf("the tool asked for the client's input more than %d times", MaxInputRounds))
	}
	if !call.GetInputRounds() {
		return outcome.Failed(outcome.MissingCapability,
			"the tool needs the client's input, which this client cannot give (its MCP protocol version has no input rounds)")
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		res := outcome.Failed(outcome.MissingCapability,
			"the tool needs input the client did not declare it can give: "+strings.Join(missing, ", "))
		res.MissingInputMethods = missing
		return res
	}
	return &sharedosv1.ToolResult{
		Status: sharedosv1.OperationStatus_OPERATION_STATUS_INPUT_REQUIRED,
		Input: &sharedosv1.InputRound{Input: &sharedosv1.InputRequired{
			InputRequestsJson: reqs, RequestState: in.GetRequestState(),
		}},
	}
}

// resume takes the waiting attempt call names back for this kernel (the
// record step of a resumed call) and makes rec that attempt's (its id and
// first call id): nil, or records.ErrNotWaiting, or a store error. Once it
// took the attempt on, end is to be called when the run ends (completed or
// parked).
func (s *Pipeline) resume(ctx context.Context, call *sharedosv1.ToolCall, rec *records.Record) (end func(), err error) {
	r := call.GetResume()
	if err := checkID("resume.attempt_id", r.GetAttemptId()); err != nil {
		return func() {}, records.ErrNotWaiting
	}
	// A refusal journaled here for a resumption of it in doubt is not
	// written while this one may take the attempt on, nor while it runs
	// the attempt, and the one named from this turn is dropped once it
	// took the attempt (that resumption never took effect).
	release := s.journal.Hold(r.GetAttemptId(), call.GetTurnId())
	callID, err := s.records.Resume(ctx, records.Resumption{
		AttemptID: r.GetAttemptId(), TurnID: call.GetTurnId(), RequestedToolSHA256: rec.RequestedToolSHA256,
		ArgumentsDigest: rec.ArgumentsDigest, Kind: rec.Kind, Round: r.GetRound(), InstanceID: s.instanceID,
	})
	end = release(err == nil)
	if err == nil {
		rec.AttemptID, rec.CallID = r.GetAttemptId(), callID
	}
	return end, err
}

// endedRound answers a notice resuming a round that is no longer open —
// the bridge gave the round up (abandoned), or its 2025-era client did
// not answer it (edge_rejection) — with the outcome of the attempt the
// round belongs to, once that attempt has ended: its wait ran out (ended
// failed/timeout here if the reconciler has not yet, records.EndedRound),
// its turn was closed, or the bridge's notice ended it before. The bridge
// answers its client with that, under the attempt's own call id, where a
// record of the notice's own would say one thing (failed/invalid_request)
// and the attempt's another (attack run of 2026-12-07: the bridge gave up
// exactly at the round's expiry, so every unanswered 2025-era round left
// two records). Nil, with the caller going on as before, for any other
// call, and when the attempt still runs or ended in an outcome its record
// alone cannot answer (a success's content is not kept).
func (s *Pipeline) endedRound(ctx context.Context, call *sharedosv1.ToolCall, rec *records.Record) (*sharedosv1.ToolResult, string) {
	r := call.GetResume()
	if (!call.GetAbandoned() && call.GetEdgeRejection() == "") || checkID("resume.attempt_id", r.GetAttemptId()) != nil {
		return nil, ""
	}
	row, err := s.records.EndedRound(ctx, records.Resumption{
		AttemptID: r.GetAttemptId(), TurnID: call.GetTurnId(), RequestedToolSHA256: rec.RequestedToolSHA256,
		ArgumentsDigest: rec.ArgumentsDigest, Kind: rec.Kind, Round: r.GetRound(),
	})
	if err != nil {
		if !errors.Is(err, records.ErrNotWaiting) {
			s.logger.WarnContext(ctx, "the attempt of a round given up could not be read; the notice is recorded on its own",
				slog.String(telemetry.LogAttemptID, r.GetAttemptId()), slog.Any("error", err))
		}
		return nil, ""
	}
	switch row.Status {
	case sharedosv1.OperationStatus_OPERATION_STATUS_FAILED, sharedosv1.OperationStatus_OPERATION_STATUS_DENIED,
		sharedosv1.OperationStatus_OPERATION_STATUS_CANCELLED:
	default:
		return nil, ""
	}
	// A provider holding the call for the next round lets it go now.
	if rc, ok := s.handlers.(RoundCanceller); ok {
		rc.CancelRound(call.GetTurnId(), r.GetRequestState())
	}
	return &sharedosv1.ToolResult{Status: row.Status, Code: row.Code, Reason: truncate(row.Reason, maxAnswerReasonBytes),
		CallId: row.CallID, DecisionId: row.DecisionID, PolicyRevision: row.PolicyRevision}, row.ResolvedTool
}

// park makes the attempt wait for the client's input and completes res
// with its round; when the record cannot note the wait, the attempt ends
// here instead (cancelled if its turn was closed, else record_unavailable)
// and that is the answer.
func (s *Pipeline) park(ctx context.Context, attemptID string, call *sharedosv1.ToolCall, res *sharedosv1.ToolResult, resolved string, args []byte) *sharedosv1.ToolResult {
	round := call.GetResume().GetRound() + 1
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), completionAttemptTimeout)
	until, err := s.records.Park(pctx, attemptID, records.Wait{Round: round, Progress: progressCount(ctx), TTL: s.inputWait,
		ResolvedTool: resolved, DecisionID: res.GetDecisionId(), PolicyRevision: res.GetPolicyRevision()})
	cancel()
	if err == nil {
		res.Input.AttemptId, res.Input.Round, res.Input.ExpiresAt = attemptID, round, timestamppb.New(until)
		return res
	}
	var end *sharedosv1.ToolResult
	if errors.Is(err, records.ErrNotWaiting) {
		end = outcome.CancelledResult("the turn was closed")
	} else {
		s.storeFailed()
		s.logger.ErrorContext(ctx, "operation record could not note the wait for input", slog.String(telemetry.LogAttemptID, attemptID),
			slog.Any("error", err))
		end = outcome.Failed(outcome.RecordUnavailable,
			"the tool asked for the client's input, but its operation record could not note the wait; ask again")
	}
	end.CallId, end.DecisionId, end.PolicyRevision = res.GetCallId(), res.GetDecisionId(), res.GetPolicyRevision()
	return s.complete(ctx, attemptID, end, resolved, "", args)
}

// ExpireWaiting ends the attempts whose wait for input ran out
// (failed/timeout); the reconciler calls it.
func (s *Pipeline) ExpireWaiting(ctx context.Context) (int64, error) {
	n, err := s.records.ExpireWaiting(ctx)
	if err != nil {
		return 0, fmt.Errorf("runtime: expire waiting: %w", err)
	}
	if n > 0 {
		s.logger.InfoContext(ctx, "attempts whose wait for input ran out ended failed/timeout", slog.Int64("count", n))
	}
	return n, nil
}
