package pdp

import (
	"context"
	"errors"
	"fmt"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/metrics"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/topdown"

	"github.com/sharedos/toolshare/services/contract/requirement"
)

// NoDecisionReason is the reason of a deny caused by a policy that gave no
// usable decision (undefined, several results, or a malformed value).
const NoDecisionReason = "no policy decision"

// Decision is the result of one evaluation.
type Decision struct {
	Allow  bool
	Reason string
}

// EvalError is an evaluation that produced no decision. It is never a deny:
// callers must report it as an error. Err keeps the cause, so
// errors.Is(err, context.DeadlineExceeded) and context.Canceled work.
type EvalError struct {
	Err error
}

func (e *EvalError) Error() string { return "policy evaluation failed: " + e.Err.Error() }
func (e *EvalError) Unwrap() error { return e.Err }

// Decide evaluates one request. It returns the decision and the revision of
// the policy that made it.
func (e *Engine) Decide(ctx context.Context, req Request) (Decision, string, error) {
	snap := e.current.Load()
	ctx, cancel := context.WithTimeout(ctx, e.evalTimeout)
	defer cancel()
	input := inputValue(contextTerm(req.Context), toolTerm(req.Tool), req.Action, req.Resource, req.Arguments)
	d, err := evalOne(ctx, snap, input)
	return d, snap.revision, err
}

// DecideTools evaluates action on every tool for one context against one
// policy snapshot, so a reload mid-call cannot mix revisions. The context
// part of the input is built once; each tool costs one prepared evaluation.
// The eval timeout covers the whole call.
func (e *Engine) DecideTools(ctx context.Context, c Context, action string, tools []Tool) ([]Decision, string, error) {
	snap := e.current.Load()
	ctx, cancel := context.WithTimeout(ctx, e.evalTimeout)
	defer cancel()
	ct := contextTerm(c)
	// The visible rule answers names: with two entries of one name (a tool
	// and a prompt) it cannot say which, so each is decided on its own.
	if action == requirement.ActionList && distinctNames(tools) {
		out, ok, err := visibleTools(ctx, snap, ct, tools)
		if err != nil {
			return nil, snap.revision, err
		}
		if ok {
			return out, snap.revision, nil
		}
	}
	out := make([]Decision, len(tools))
	for i, t := range tools {
		d, err := evalOne(ctx, snap, inputValue(ct, toolTerm(t), action, "", nil))
		if err != nil {
			return nil, snap.revision, fmt.Errorf("tool %q: %w", t.Name, err)
		}
		out[i] = d
	}
	return out, snap.revision, nil
}

// distinctNames reports whether no two of tools share a name.
func distinctNames(tools []Tool) bool {
	seen := make(map[string]bool, len(tools))
	for _, t := range tools {
		if seen[t.Name] {
			return false
		}
		seen[t.Name] = true
	}
	return true
}

// visibleTools evaluates VisibleQuery once with every tool in the input.
// ok is false when the policy does not define the rule. A value that is
// not a set of names hides every tool (the contract's "no decision").
func visibleTools(ctx context.Context, snap *snapshot, ct *ast.Term, tools []Tool) ([]Decision, bool, error) {
	terms := make([]*ast.Term, len(tools))
	for i, t := range tools {
		terms[i] = toolTerm(t)
	}
	input := ast.NewObject(
		ast.Item(keyContext, ct),
		ast.Item(keyTools, ast.ArrayTerm(terms...)),
		ast.Item(keyAction, ast.StringTerm(requirement.ActionList)),
	)
	rs, err := eval(ctx, snap.visible, input)
	if err != nil {
		return nil, false, err
	}
	if len(rs) == 0 {
		return nil, false, nil
	}
	out := make([]Decision, len(tools))
	var names []any
	if len(rs) == 1 && rs[0].Bindings["set"] == true {
		names, _ = rs[0].Bindings["names"].([]any)
	}
	set := make(map[string]bool, len(names))
	for _, n := range names {
		if s, ok := n.(string); ok {
			set[s] = true
		}
	}
	for i, t := range tools {
		if set[t.Name] {
			out[i] = Decision{Allow: true, Reason: "visible"}
		} else {
			out[i] = Decision{Reason: "not visible"}
		}
	}
	return out, true, nil
}

func evalOne(ctx context.Context, snap *snapshot, input ast.Value) (Decision, error) {
	rs, err := eval(ctx, snap.query, input)
	if err != nil {
		return Decision{}, err
	}
	return decisionOf(rs), nil
}

func eval(ctx context.Context, q rego.PreparedEvalQuery, input ast.Value) (rego.ResultSet, error) {
	if err := ctx.Err(); err != nil {
		return nil, &EvalError{Err: context.Cause(ctx)}
	}
	// An external cancel tied to ctx replaces the goroutine OPA would start
	// per Eval to watch ctx.
	cancel := topdown.NewCancel()
	stop := context.AfterFunc(ctx, cancel.Cancel)
	rs, err := q.Eval(ctx,
		rego.EvalParsedInput(input),
		rego.EvalExternalCancel(cancel),
		rego.EvalMetrics(metrics.NoOp()),
	)
	stop()
	if err != nil {
		// A cancelled evaluation reports topdown's cancel error; keep the
		// context's cause so callers can tell a deadline from a cancel.
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, &EvalError{Err: fmt.Errorf("%w (%v)", ctxErr, err)}
		}
		return nil, &EvalError{Err: err}
	}
	return rs, nil
}

// decisionOf applies the contract: anything but exactly one object with a
// boolean allow is a deny.
func decisionOf(rs rego.ResultSet) Decision {
	if len(rs) != 1 || len(rs[0].Expressions) != 1 {
		return Decision{Reason: NoDecisionReason}
	}
	obj, ok := rs[0].Expressions[0].Value.(map[string]any)
	if !ok {
		return Decision{Reason: NoDecisionReason}
	}
	allow, ok := obj["allow"].(bool)
	if !ok {
		return Decision{Reason: NoDecisionReason}
	}
	reason, _ := obj["reason"].(string)
	if reason == "" {
		if allow {
			reason = "allowed by policy"
		} else {
			reason = "denied by policy"
		}
	}
	return Decision{Allow: allow, Reason: reason}
}

// IsDeadline reports whether err is an evaluation that ran out of time.
func IsDeadline(err error) bool { return errors.Is(err, context.DeadlineExceeded) }
