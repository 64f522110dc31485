package pipeline_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/inputround"
	"github.com/sharedos/toolshare/services/contract/outcome"

	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline/records"
)

const (
	inputRequired = sharedosv1.OperationStatus_OPERATION_STATUS_INPUT_REQUIRED
	pending       = sharedosv1.OperationStatus_OPERATION_STATUS_PENDING
)

// askTwice is a v3 provider: round 0 asks for a name, round 1 (given the
// answer and its state) for a colour, round 2 reads the file.
func askTwice(req *sharedosv1.HandleRequest) *sharedosv1.HandleResponse {
	ask := func(key, method, state string) *sharedosv1.HandleResponse {
		return &sharedosv1.HandleResponse{InputRequired: &sharedosv1.InputRequired{
			InputRequestsJson: []byte(`{"` + key + `":{"method":"` + method + `","params":{"message":"?"}}}`),
			RequestState:      []byte(state),
		}}
	}
	switch {
	case req.GetRound() == 0:
		return ask("name", "elicitation/create", "s1")
	case req.GetRound() == 1 && string(req.GetRequestState()) == "s1":
		return ask("colour", "elicitation/create", "s2")
	case req.GetRound() == 2 && string(req.GetRequestState()) == "s2":
		return nil
	}
	return &sharedosv1.HandleResponse{ContentJson: []byte(`[{"type":"text","text":"wrong round"}]`), IsError: true}
}

func (h *harness) roundCall(turn, args string, methods ...string) *sharedosv1.ToolCall {
	c := h.newCall(turn, "files.read", args)
	c.InputRounds, c.InputMethods = true, methods
	return c
}

// resumeCall is the client's retry of res's round: a new call id, the same
// tool and arguments, its answers.
func (h *harness) resumeCall(turn, args string, res *sharedosv1.ToolResult, answers string) *sharedosv1.ToolCall {
	c := h.roundCall(turn, args, inputround.Names()...)
	c.InputResponsesJson = []byte(answers)
	c.Resume = &sharedosv1.Resume{AttemptId: res.GetInput().GetAttemptId(), Round: res.GetInput().GetRound(),
		RequestState: res.GetInput().GetInput().GetRequestState()}
	return c
}

// resumed invokes a resumption that continues its attempt: no new record.
func (h *harness) resumed(call *sharedosv1.ToolCall) *sharedosv1.ToolResult {
	h.t.Helper()
	res, err := h.invoke(context.Background(), call)
	if err != nil {
		h.t.Fatal(err)
	}
	h.mu.Lock()
	h.attempts[call.GetTurnId()]--
	h.mu.Unlock()
	return res
}

// TestInputRounds (the MCP surface, item 3): a tool that needs the client's
// input answers INPUT_REQUIRED; the attempt's one record waits; each retry
// re-authorizes the same call and goes on as the same attempt, with the
// provider's state and the client's answers; the record ends with its
// rounds. A replayed or altered retry is refused on a record of its own.
func TestInputRounds(t *testing.T) {
	forEachStore(t, options{}, func(t *testing.T, h *harness) {
		const args = `{"path":"/public/a.txt"}`
		h.handler.asks(askTwice)
		authz := h.authz.calls.Load()

		first := h.call("r", "files.read", args) // a client without input rounds
		expect(t, first, failed, outcome.MissingCapability)

		res, err := h.invoke(context.Background(), h.roundCall("r", args, inputround.Names()...))
		if err != nil {
			t.Fatal(err)
		}
		expect(t, res, inputRequired, "")
		in := res.GetInput()
		if in.GetRound() != 1 || in.GetAttemptId() == "" || in.GetExpiresAt() == nil ||
			string(in.GetInput().GetRequestState()) != "s1" || len(in.GetInput().GetInputRequestsJson()) == 0 {
			t.Fatalf("round %+v", in)
		}
		rows := h.records("r")
		if len(rows) != 2 || rows[1].Status != pending || rows[1].WaitingUntil.IsZero() || rows[1].InputRounds != 1 {
			t.Fatalf("waiting record %+v", rows)
		}

		// An altered retry (other arguments) does not touch the wait.
		other := h.resumeCall("r", `{"path":"/public/b.txt"}`, res, `{"name":{"action":"accept"}}`)
		expect(t, h.call2(other), failed, outcome.InvalidRequest)

		second := h.resumed(h.resumeCall("r", args, res, `{"name":{"action":"accept","content":{"name":"Ada"}}}`))
		expect(t, second, inputRequired, "")
		if second.GetInput().GetAttemptId() != in.GetAttemptId() || second.GetInput().GetRound() != 2 {
			t.Fatalf("second round %+v: want the same attempt, round 2", second.GetInput())
		}
		// The first round's state, replayed: refused, recorded on its own.
		expect(t, h.call2(h.resumeCall("r", args, res, `{"name":{"action":"accept"}}`)), failed, outcome.InvalidRequest)

		done := h.resumed(h.resumeCall("r", args, second, `{"colour":{"action":"accept","content":{"colour":"red"}}}`))
		expect(t, done, succeeded, "")
		if n := h.authz.calls.Load() - authz; n != 4 {
			t.Errorf("authorized %d times, want once per round plus the refused client's: 4", n)
		}
		h.handler.mu.Lock()
		asked := h.handler.asked
		h.handler.mu.Unlock()
		last := asked[len(asked)-1]
		if last.GetRound() != 2 || string(last.GetInputResponsesJson()) != `{"colour":{"action":"accept","content":{"colour":"red"}}}` ||
			!slices.Equal(last.GetInputMethods(), inputround.Names()) {
			t.Errorf("the provider's last request %+v", last)
		}
		if n := len(asked); asked[n-1].GetCallId() != asked[n-3].GetCallId() || done.GetCallId() != asked[n-3].GetCallId() {
			t.Errorf("call ids %s, %s, answered %s: every round of an attempt carries its first call id",
				asked[n-3].GetCallId(), asked[n-1].GetCallId(), done.GetCallId())
		}
		if len(asked[0].GetInputMethods()) != 0 {
			t.Errorf("a client without input rounds was offered input methods %v", asked[0].GetInputMethods())
		}
		var attempt *sharedosv1.OperationRecord
		for _, r := range h.records("r") {
			if r.AttemptID == in.GetAttemptId() {
				attempt = r.ToProto()
			}
		}
		if attempt == nil || attempt.GetStatus() != succeeded || attempt.GetInputRounds() != 2 || attempt.GetWaitingUntil() != nil {
			t.Errorf("the attempt's record %+v: want succeeded after 2 rounds", attempt)
		}
	})
}

// call2 invokes a call expected to be answered as a new attempt.
func (h *harness) call2(call *sharedosv1.ToolCall) *sharedosv1.ToolResult {
	h.t.Helper()
	res, err := h.invoke(context.Background(), call)
	if err != nil {
		h.t.Fatal(err)
	}
	return res
}

// TestInputRoundRefusals: what a provider may not ask, and a client may
// not send, ends the attempt with a clear code.
func TestInputRoundRefusals(t *testing.T) {
	forEachStore(t, options{}, func(t *testing.T, h *harness) {
		const args = `{"path":"/public/a.txt"}`
		var answer *sharedosv1.HandleResponse
		h.handler.asks(func(*sharedosv1.HandleRequest) *sharedosv1.HandleResponse { return answer })
		asking := func(reqs string) *sharedosv1.HandleResponse {
			return &sharedosv1.HandleResponse{InputRequired: &sharedosv1.InputRequired{InputRequestsJson: []byte(reqs)}}
		}

		answer = asking(`{"q":{"method":"sampling/createMessage","params":{}},"r":{"method":"roots/list"}}`)
		res := h.call2(h.roundCall("x", args, "roots/list"))
		expect(t, res, failed, outcome.MissingCapability)
		if !slices.Equal(res.GetMissingInputMethods(), []string{"sampling/createMessage"}) {
			t.Errorf("missing %v, want sampling/createMessage", res.GetMissingInputMethods())
		}
		for name, reqs := range map[string]string{
			"unknown method": `{"q":{"method":"tools/call","params":{}}}`,
			"params":         `{"q":{"method":"roots/list","params":[1]}}`,
			// Params of the wrong shape for their method: the bridge could
			// not hand them out, so the attempt must not wait for them
			// (found by review: it waited, then ended failed/timeout while
			// its client had been answered failed/internal).
			"elicitation message": `{"q":{"method":"elicitation/create","params":{"message":5}}}`,
			"sampling messages":   `{"q":{"method":"sampling/createMessage","params":{"messages":"hi","maxTokens":1}}}`,
			"not an object":       `["roots/list"]`,
			"nothing asked":       `{}`,
		} {
			answer = asking(reqs)
			if res := h.call2(h.roundCall("x", args, inputround.Names()...)); res.GetCode() != outcome.HandlerError {
				t.Errorf("%s: %v/%s, want failed/handler_error", name, res.GetStatus(), res.GetCode())
			}
		}
		bad := h.roundCall("x", args, inputround.Names()...)
		bad.InputResponsesJson = []byte(`{"q":12345}`)
		expect(t, h.call2(bad), failed, outcome.InvalidRequest)
		unknown := h.roundCall("x", args, inputround.Names()...)
		unknown.Resume = &sharedosv1.Resume{AttemptId: "0123456789abcdef0123456789abcdef", Round: 1}
		expect(t, h.call2(unknown), failed, outcome.InvalidRequest)
		for _, r := range h.records("x") {
			if r.Status != failed {
				t.Errorf("record %+v, want failed", r)
			}
		}
	})
}

// TestRoundGivenUpByTheBridgeEndsAsAnswered: a round the bridge could not
// hand out (its client answered failed/internal) comes back as an
// abandonment notice resuming it with that code; the attempt ends
// failed/internal on its own record at once, not failed/timeout when its
// wait runs out.
func TestRoundGivenUpByTheBridgeEndsAsAnswered(t *testing.T) {
	forEachStore(t, options{}, func(t *testing.T, h *harness) {
		const args = `{"path":"/public/a.txt"}`
		h.handler.asks(askTwice)
		res := h.call2(h.roundCall("g", args, inputround.Names()...))
		expect(t, res, inputRequired, "")
		notice := h.resumeCall("g", args, res, "")
		notice.Abandoned, notice.AbandonedCode = true, outcome.Internal
		expect(t, h.resumed(notice), failed, outcome.Internal)
		rows := h.records("g")
		if len(rows) != 1 || rows[0].Status != failed || rows[0].Code != outcome.Internal || !rows[0].WaitingUntil.IsZero() {
			t.Fatalf("records %+v: want the one attempt ended failed/internal", rows)
		}
		if !strings.Contains(rows[0].Reason, "input request") {
			t.Errorf("reason %q: want what was given up (the input request), not an unreachable kernel", rows[0].Reason)
		}
	})
}

// TestRoundLeftByItsClientIsCancelled: a 2025-era client that cancels or
// leaves while asked for a round's input comes back as an abandonment
// notice resuming the round with no code: the attempt ends cancelled on
// its own record, whose reason does not say "not run" — its first round
// ran (review).
func TestRoundLeftByItsClientIsCancelled(t *testing.T) {
	forEachStore(t, options{}, func(t *testing.T, h *harness) {
		const args = `{"path":"/public/a.txt"}`
		h.handler.asks(askTwice)
		res := h.call2(h.roundCall("lc", args, inputround.Names()...))
		expect(t, res, inputRequired, "")
		notice := h.resumeCall("lc", args, res, "")
		notice.Abandoned = true
		expect(t, h.resumed(notice), cancelled, outcome.Cancelled)
		rows := h.records("lc")
		if len(rows) != 1 || rows[0].Status != cancelled || !rows[0].WaitingUntil.IsZero() {
			t.Fatalf("records %+v: want the one attempt ended cancelled", rows)
		}
		if strings.Contains(rows[0].Reason, "not run") || !strings.Contains(rows[0].Reason, "input") {
			t.Errorf("reason %q: want the input the client was asked for, not \"not run\" (its first round ran)", rows[0].Reason)
		}
	})
}

// TestARoundGivenUpLateAnswersWithItsAttempt (attack run of 2026-12-07,
// D2): a notice resuming a round that is no longer open — the bridge's
// "no answer before the round expired" (edge_rejection) or its client's
// leaving (abandoned) — is answered with the outcome of the round's own
// attempt under its call id, and writes nothing: whether it comes after
// the round's wait ran out but before the reconciler's sweep (the notice
// ends the attempt failed/timeout itself, and the sweep finds nothing) or
// after it, or after the turn was closed. Each left a second record
// before, failed/invalid_request, and the bridge answered its client
// with that one. A notice while the round is open still ends the attempt
// with itself; a retry of a closed round that is no notice, and a notice
// naming another attempt's round, are still refused on records of their
// own.
func TestARoundGivenUpLateAnswersWithItsAttempt(t *testing.T) {
	const args = `{"path":"/public/a.txt"}`
	unanswered := func(h *harness, turn string, res *sharedosv1.ToolResult) *sharedosv1.ToolCall {
		n := h.resumeCall(turn, args, res, "")
		n.InputResponsesJson = nil
		n.EdgeRejection = "the client did not answer the tool's input request: no answer before the round expired"
		return n
	}
	// ended checks that the notice was answered with the attempt's one
	// record, code.
	ended := func(t *testing.T, h *harness, turn string, first, got *sharedosv1.ToolResult, status sharedosv1.OperationStatus, code string) {
		t.Helper()
		rows := h.records(turn)
		if len(rows) != 1 || rows[0].AttemptID != first.GetInput().GetAttemptId() || rows[0].Status != status || rows[0].Code != code {
			t.Fatalf("records %+v: want the one attempt, ended %v/%s", rows, status, code)
		}
		if got.GetStatus() != status || got.GetCode() != code || got.GetCallId() != rows[0].CallID || got.GetReason() != rows[0].Reason {
			t.Fatalf("answered %v/%s %q under call %s; the record says %v/%s %q under call %s", got.GetStatus(), got.GetCode(),
				got.GetReason(), got.GetCallId(), rows[0].Status, rows[0].Code, rows[0].Reason, rows[0].CallID)
		}
	}
	// A wait of a nanosecond has run out by the time anything resumes it.
	forEachStore(t, options{inputWait: time.Nanosecond}, func(t *testing.T, h *harness) {
		h.handler.asks(askTwice)
		ctx := context.Background()

		// After the round's end, before the sweep.
		res := h.call2(h.roundCall("before-sweep", args, inputround.Names()...))
		expect(t, res, inputRequired, "")
		ended(t, h, "before-sweep", res, h.resumed(unanswered(h, "before-sweep", res)), failed, outcome.Timeout)
		if n, err := h.kernel.ExpireWaiting(ctx); err != nil || n != 0 {
			t.Fatalf("the sweep after the notice ended %d attempts (%v), want none", n, err)
		}

		// After the sweep: the edge's refusal, and a client's leaving.
		for _, turn := range []string{"after-sweep", "left-after-sweep"} {
			res := h.call2(h.roundCall(turn, args, inputround.Names()...))
			expect(t, res, inputRequired, "")
			if n, err := h.kernel.ExpireWaiting(ctx); err != nil || n != 1 {
				t.Fatalf("the sweep ended %d attempts (%v), want 1", n, err)
			}
			notice := unanswered(h, turn, res)
			if turn == "left-after-sweep" {
				notice.EdgeRejection, notice.Abandoned = "", true
			}
			ended(t, h, turn, res, h.resumed(notice), failed, outcome.Timeout)
		}

		// A retry that is no notice, and a notice naming another
		// attempt's round: records of their own, as before.
		retry := h.resumeCall("after-sweep", args, res, `{"name":{"action":"accept"}}`)
		expect(t, h.call2(retry), failed, outcome.InvalidRequest)
		other := unanswered(h, "after-sweep", res)
		other.Resume.Round = 2
		expect(t, h.call2(other), failed, outcome.InvalidRequest)
		if rows := h.records("after-sweep"); len(rows) != 3 {
			t.Fatalf("records %+v: want the attempt and the two refusals", rows)
		}
	})
	forEachStore(t, options{}, func(t *testing.T, h *harness) {
		h.handler.asks(askTwice)

		// While the round is open the notice ends the attempt itself.
		res := h.call2(h.roundCall("open", args, inputround.Names()...))
		expect(t, res, inputRequired, "")
		ended(t, h, "open", res, h.resumed(unanswered(h, "open", res)), failed, outcome.InvalidRequest)

		// After the turn was closed.
		res = h.call2(h.roundCall("closed", args, inputround.Names()...))
		expect(t, res, inputRequired, "")
		if _, err := h.kernel.RevokeTurn(context.Background(), &sharedosv1.RevokeTurnRequest{TurnId: "closed"}); err != nil {
			t.Fatal(err)
		}
		ended(t, h, "closed", res, h.resumed(unanswered(h, "closed", res)), cancelled, outcome.Cancelled)
	})
}

// TestAForeignGrantEndsNoWaitingAttempt: a resumption carrying a grant
// that is no grant of its turn (another turn's, forged) is refused on a
// record of its own and leaves the waiting attempt waiting: the turn's own
// retry still goes on with it (review: it ended the attempt
// denied/invalid_grant).
func TestAForeignGrantEndsNoWaitingAttempt(t *testing.T) {
	forEachStore(t, options{}, func(t *testing.T, h *harness) {
		const args = `{"path":"/public/a.txt"}`
		h.handler.asks(askTwice)
		res := h.call2(h.roundCall("fg", args, inputround.Names()...))
		expect(t, res, inputRequired, "")
		foreign := h.resumeCall("fg", args, res, `{}`)
		foreign.Grant = grantFor(t, "another-turn", h.resolver.pin())
		got, err := h.invoke(context.Background(), foreign) // a record of its own
		if err != nil {
			t.Fatal(err)
		}
		expect(t, got, denied, outcome.InvalidGrant)
		rows := h.records("fg")
		if len(rows) != 2 {
			t.Fatalf("records %+v: want the waiting attempt and the refusal's own", rows)
		}
		for _, r := range rows {
			if r.AttemptID == res.GetInput().GetAttemptId() && r.WaitingUntil.IsZero() {
				t.Fatalf("the waiting attempt %+v was ended by a foreign grant", r)
			}
		}
		// The turn's own retries still take it on, to its end.
		for round := res; round.GetStatus() == inputRequired; {
			round = h.resumed(h.resumeCall("fg", args, round, `{}`))
			if round.GetInput().GetAttemptId() != "" && round.GetInput().GetAttemptId() != res.GetInput().GetAttemptId() {
				t.Fatalf("the retry went on as attempt %s, want %s", round.GetInput().GetAttemptId(), res.GetInput().GetAttemptId())
			}
		}
	})
}

// TestInputRoundReauthorized: the retry of a round is authorized again; a
// policy that cannot decide now ends the same attempt failed.
func TestInputRoundReauthorized(t *testing.T) {
	forEachStore(t, options{}, func(t *testing.T, h *harness) {
		const args = `{"path":"/public/a.txt"}`
		h.handler.asks(askTwice)
		res := h.call2(h.roundCall("z", args, inputround.Names()...))
		expect(t, res, inputRequired, "")
		h.authz.mode.Store("error")
		defer h.authz.mode.Store("")
		expect(t, h.resumed(h.resumeCall("z", args, res, `{}`)), failed, outcome.AuthzError)
		rows := h.records("z")
		if len(rows) != 1 || rows[0].Code != outcome.AuthzError || rows[0].InputRounds != 1 {
			t.Fatalf("records %+v: want the one attempt, failed/authz_error after 1 round", rows)
		}
	})
}

// TestInputRoundEndsWithTheTurn: closing the turn cancels a waiting
// attempt at once (RevokeTurn does not wait for the client), and its
// state can no longer resume it.
func TestInputRoundEndsWithTheTurn(t *testing.T) {
	forEachStore(t, options{}, func(t *testing.T, h *harness) {
		const args = `{"path":"/public/a.txt"}`
		h.handler.asks(askTwice)
		res := h.call2(h.roundCall("w", args, inputround.Names()...))
		expect(t, res, inputRequired, "")
		if _, err := h.kernel.RevokeTurn(context.Background(), &sharedosv1.RevokeTurnRequest{TurnId: "w"}); err != nil {
			t.Fatalf("RevokeTurn with an attempt waiting: %v", err)
		}
		rows := h.records("w")
		if len(rows) != 1 || rows[0].Status != sharedosv1.OperationStatus_OPERATION_STATUS_CANCELLED {
			t.Fatalf("records %+v: want the waiting attempt cancelled", rows)
		}
		expect(t, h.call2(h.resumeCall("w", args, res, `{}`)), failed, outcome.InvalidRequest)
	})
}

// TestInputRoundResumedOnlyByItsKind: a round's retry continues its
// attempt only as the kind of call that attempt is. A tools/call that
// names a waiting prompts/get's attempt and round (the same name and
// arguments) would run the tool's handler with the prompt provider's
// state and end the prompt's record with what it did; it is refused
// failed/invalid_request on a record of its own, as a state of another
// call is, and the prompt goes on waiting for its own retry. A
// prompts/get naming a waiting tools/call is refused the same way.
func TestInputRoundResumedOnlyByItsKind(t *testing.T) {
	forEachStore(t, options{}, func(t *testing.T, h *harness) {
		ctx := context.Background()
		rpc, granted, proof := promptTurn(t, h, "pk", &sharedosv1.PromptRegistration{Name: "review"})
		review := func(callID string, first *sharedosv1.ToolResult) *sharedosv1.ToolCall {
			c := &sharedosv1.ToolCall{CallId: callID, TurnId: "pk", Tool: "review", ArgumentsJson: []byte(`{}`), Grant: granted.GetGrant(),
				PinProof: proof, Harness: "test", InputRounds: true, InputMethods: inputround.Names(), Kind: sharedosv1.CallKind_CALL_KIND_PROMPT}
			if first != nil {
				c.InputResponsesJson = []byte(`{"who":{"action":"accept"}}`)
				c.Resume = &sharedosv1.Resume{AttemptId: first.GetInput().GetAttemptId(), Round: first.GetInput().GetRound()}
			}
			return c
		}
		first, err := rpc.GetPrompt(ctx, review("pk-1", nil))
		if err != nil {
			t.Fatal(err)
		}
		expect(t, first, inputRequired, "")
		asTool := review("pk-2", first)
		asTool.Kind = sharedosv1.CallKind_CALL_KIND_UNSPECIFIED
		res, err := rpc.InvokeTool(ctx, asTool)
		if err != nil {
			t.Fatal(err)
		}
		h.mu.Lock()
		h.attempts["pk"] = 2 // the prompt's attempt and the refused tools/call
		h.mu.Unlock()
		expect(t, res, failed, outcome.InvalidRequest)
		rows := h.records("pk")
		if len(rows) != 2 || rows[0].Status != pending || rows[0].WaitingUntil.IsZero() ||
			rows[1].Kind != sharedosv1.CallKind_CALL_KIND_UNSPECIFIED || rows[1].Code != outcome.InvalidRequest {
			t.Fatalf("records %+v: want the prompt still waiting and the tools/call refused on a record of its own", rows)
		}
		done, err := rpc.GetPrompt(ctx, review("pk-3", first))
		if err != nil {
			t.Fatal(err)
		}
		expect(t, done, succeeded, "")
		if rows := h.records("pk"); len(rows) != 2 || rows[0].Status != succeeded || rows[0].Kind != sharedosv1.CallKind_CALL_KIND_PROMPT {
			t.Fatalf("records %+v: want the prompt's attempt ended by its own retry", rows)
		}

		const args = `{"path":"/public/a.txt"}`
		h.handler.asks(askTwice)
		waiting := h.call2(h.roundCall("tk", args, inputround.Names()...))
		expect(t, waiting, inputRequired, "")
		asPrompt := h.resumeCall("tk", args, waiting, `{"name":{"action":"accept"}}`)
		asPrompt.Kind = sharedosv1.CallKind_CALL_KIND_PROMPT
		res, err = h.rpc.GetPrompt(ctx, asPrompt)
		if err != nil {
			t.Fatal(err)
		}
		h.mu.Lock()
		h.attempts["tk"]++
		h.mu.Unlock()
		expect(t, res, failed, outcome.InvalidRequest)
		if rows := h.records("tk"); len(rows) != 2 || rows[0].Status != pending || rows[0].WaitingUntil.IsZero() {
			t.Fatalf("records %+v: want the tools/call still waiting after a prompts/get named it", rows)
		}
		expect(t, h.resumed(h.resumeCall("tk", args, waiting, `{"name":{"action":"accept"}}`)), inputRequired, "")
		if _, err := h.kernel.RevokeTurn(ctx, &sharedosv1.RevokeTurnRequest{TurnId: "tk"}); err != nil {
			t.Fatal(err)
		}
	})
}

// resumeInDoubt's Resume fails while down is set — after taking effect
// when written is set too — and its Complete while completeDown is, as a
// store that does not answer in time.
type resumeInDoubt struct {
	records.Store
	down, written, completeDown atomic.Bool
}

func (s *resumeInDoubt) Resume(ctx context.Context, r records.Resumption) (string, error) {
	if s.down.Load() {
		if s.written.Load() {
			_, _ = s.Store.Resume(ctx, r)
		}
		return "", errors.New("no answer from the store")
	}
	return s.Store.Resume(ctx, r)
}

func (s *resumeInDoubt) Complete(ctx context.Context, id string, c records.Completion) error {
	if s.completeDown.Load() {
		return errors.New("no answer from the store")
	}
	return s.Store.Complete(ctx, id, c)
}

// TestResumeInDoubtEndsOnlyItsTurn: a resumption the store did not answer
// is refused, and its attempt ended failed/record_unavailable from the
// journal where the resumption took effect — of the call's turn only: an
// attempt id named from another turn (the bridge's word) ends nothing
// there, and an attempt the resumption did not take goes on waiting.
func TestResumeInDoubtEndsOnlyItsTurn(t *testing.T) {
	forEachStore(t, options{wrapStore: func(s records.Store) records.Store { return &resumeInDoubt{Store: s} }},
		func(t *testing.T, h *harness) {
			const args = `{"path":"/public/a.txt"}`
			h.handler.asks(askTwice)
			res := h.call2(h.roundCall("victim", args, inputround.Names()...))
			expect(t, res, inputRequired, "")
			st := h.store.(*resumeInDoubt)
			st.down.Store(true)
			for _, tc := range []struct {
				turn    string
				written bool
				ended   bool
			}{{"intruder", true, false}, {"victim", false, false}, {"victim", true, true}} {
				st.written.Store(tc.written)
				if _, err := h.invoke(context.Background(), h.resumeCall(tc.turn, args, res, `{}`)); status.Code(err) != codes.Unavailable {
					t.Fatalf("resumption from %s while the store does not answer: %v, want Unavailable", tc.turn, err)
				}
				h.kernel.DrainJournal(context.Background())
				rows := h.records("victim")
				if !tc.ended && (len(rows) != 1 || rows[0].Status != pending || rows[0].WaitingUntil.IsZero()) {
					t.Fatalf("after %+v victim's records %+v: want its attempt still waiting", tc, rows)
				}
				if tc.ended && (len(rows) != 1 || rows[0].Code != outcome.RecordUnavailable) {
					t.Fatalf("after %+v victim's records %+v: want its attempt failed/record_unavailable", tc, rows)
				}
			}
			if n := h.kernel.Journaled(); n != 0 {
				t.Fatalf("%d completions left in the journal", n)
			}
			if rows := h.records("intruder"); len(rows) != 0 {
				t.Fatalf("intruder's records %+v", rows)
			}
		})
}

// TestResumedAfterDoubtRecordsTheRun: a resumption refused in doubt left
// the attempt waiting; the client's retry resumes and runs it, and its
// outcome, journaled while the store cannot take it, is the record — not
// the refusal journaled before it, from the attempt's turn or another
// (found by review: the journal kept the first).
func TestResumedAfterDoubtRecordsTheRun(t *testing.T) {
	for _, refusedIn := range []string{"victim", "intruder"} {
		t.Run(refusedIn, func(t *testing.T) {
			forEachStore(t, options{wrapStore: func(s records.Store) records.Store { return &resumeInDoubt{Store: s} }, journaled: true},
				func(t *testing.T, h *harness) {
					const args = `{"path":"/public/a.txt"}`
					h.handler.asks(func(req *sharedosv1.HandleRequest) *sharedosv1.HandleResponse {
						if req.GetRound() == 0 {
							return &sharedosv1.HandleResponse{InputRequired: &sharedosv1.InputRequired{
								InputRequestsJson: []byte(`{"name":{"method":"elicitation/create","params":{"message":"?"}}}`),
								RequestState:      []byte("s1")}}
						}
						return nil
					})
					res := h.call2(h.roundCall("victim", args, inputround.Names()...))
					expect(t, res, inputRequired, "")
					st := h.store.(*resumeInDoubt)
					st.down.Store(true)
					if _, err := h.invoke(context.Background(), h.resumeCall(refusedIn, args, res, `{}`)); status.Code(err) != codes.Unavailable {
						t.Fatalf("resumption in doubt: %v, want Unavailable", err)
					}
					st.down.Store(false)
					st.completeDown.Store(true)
					done := h.resumed(h.resumeCall("victim", args, res, `{}`))
					expect(t, done, succeeded, "")
					st.completeDown.Store(false)
					h.kernel.DrainJournal(context.Background())
					if rows := h.records("victim"); len(rows) != 1 || rows[0].Status != succeeded {
						t.Fatalf("records %+v: want the attempt succeeded, as answered", rows)
					}
				})
		})
	}
}

// asksThenBlocks makes the handler ask for input in round 0 and, in the
// round after, tell running and wait for release.
func asksThenBlocks(h *harness) (running, release chan struct{}) {
	running, release = make(chan struct{}), make(chan struct{})
	h.handler.asks(func(req *sharedosv1.HandleRequest) *sharedosv1.HandleResponse {
		if req.GetRound() == 0 {
			return &sharedosv1.HandleResponse{InputRequired: &sharedosv1.InputRequired{
				InputRequestsJson: []byte(`{"name":{"method":"elicitation/create","params":{"message":"?"}}}`),
				RequestState:      []byte("s1")}}
		}
		close(running)
		<-release
		return nil
	})
	return running, release
}

// TestRefusalInDoubtNeverEndsARunningRetry: the refusal journaled for a
// resumption in doubt that did not take effect is not written while the
// client's retry, on this kernel, takes the attempt on and runs it (the
// journal's flush comes while it runs), and is dropped once the retry took
// it: the record is the run's (found by review).
func TestRefusalInDoubtNeverEndsARunningRetry(t *testing.T) {
	forEachStore(t, options{wrapStore: func(s records.Store) records.Store { return &resumeInDoubt{Store: s} }, journaled: true},
		func(t *testing.T, h *harness) {
			const args = `{"path":"/public/a.txt"}`
			running, release := asksThenBlocks(h)
			res := h.call2(h.roundCall("victim", args, inputround.Names()...))
			expect(t, res, inputRequired, "")
			st := h.store.(*resumeInDoubt)
			st.down.Store(true)
			if _, err := h.invoke(context.Background(), h.resumeCall("victim", args, res, `{}`)); status.Code(err) != codes.Unavailable {
				t.Fatalf("resumption in doubt: %v, want Unavailable", err)
			}
			st.down.Store(false) // the store is back; the client retries at once
			out := make(chan *sharedosv1.ToolResult, 1)
			go func() { out <- h.resumed(h.resumeCall("victim", args, res, `{}`)) }()
			wait(t, running, "the retry running")
			h.kernel.DrainJournal(context.Background()) // the journal's flush, while it runs
			close(release)
			expect(t, <-out, succeeded, "")
			if rows := h.records("victim"); len(rows) != 1 || rows[0].Status != succeeded {
				t.Fatalf("records %+v: want the attempt succeeded, as answered", rows)
			}
			if n := h.kernel.Journaled(); n != 0 {
				t.Fatalf("%d completions left in the journal", n)
			}
		})
}

// TestConcurrentRetryInDoubtNeverEndsTheRun: of two retries of one round on
// this kernel, the first takes the attempt on and runs it; the second's
// resumption is in doubt, and the refusal journaled for it names this
// kernel, so it would match the attempt the first holds. It cannot have
// taken effect (the first's did), and it is not written while the run goes
// on (the journal's flush comes meanwhile): the record is the run's, as
// answered.
func TestConcurrentRetryInDoubtNeverEndsTheRun(t *testing.T) {
	forEachStore(t, options{wrapStore: func(s records.Store) records.Store { return &resumeInDoubt{Store: s} }, journaled: true},
		func(t *testing.T, h *harness) {
			const args = `{"path":"/public/a.txt"}`
			running, release := asksThenBlocks(h)
			res := h.call2(h.roundCall("victim", args, inputround.Names()...))
			expect(t, res, inputRequired, "")
			out := make(chan *sharedosv1.ToolResult, 1)
			go func() { out <- h.resumed(h.resumeCall("victim", args, res, `{}`)) }()
			wait(t, running, "the first retry running")
			st := h.store.(*resumeInDoubt)
			st.down.Store(true)
			if _, err := h.invoke(context.Background(), h.resumeCall("victim", args, res, `{}`)); status.Code(err) != codes.Unavailable {
				t.Fatalf("second retry in doubt: %v, want Unavailable", err)
			}
			st.down.Store(false)
			h.kernel.DrainJournal(context.Background()) // the journal's flush, while the first runs
			close(release)
			expect(t, <-out, succeeded, "")
			h.kernel.DrainJournal(context.Background())
			if rows := h.records("victim"); len(rows) != 1 || rows[0].Status != succeeded {
				t.Fatalf("records %+v: want the attempt succeeded, as answered", rows)
			}
			if n := h.kernel.Journaled(); n != 0 {
				t.Fatalf("%d completions left in the journal", n)
			}
		})
}
