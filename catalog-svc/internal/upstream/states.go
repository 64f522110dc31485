package upstream

import (
	"fmt"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
)

// The one state machine of acquired definitions — tools, prompts and
// resources alike (ADR 0019): what a refresh does with a listed
// definition, and when an operator's decision applies.

// step is what a refresh does with one listed definition.
type step int

const (
	// stepKeep: unchanged, or still waiting (or rejected) as it is.
	stepKeep step = iota
	// stepPublishNew: new, published under the provider's auto_approve_new.
	stepPublishNew
	// stepQuarantineNew: new, waiting for an operator's approval.
	stepQuarantineNew
	// stepRepublish: the upstream serves the approved definition again.
	stepRepublish
	// stepQuarantineChanged: a definition other than the approved one;
	// the published one is withdrawn.
	stepQuarantineChanged
)

const published = sharedosv1.UpstreamToolState_UPSTREAM_TOOL_STATE_PUBLISHED

// nextStep decides for a definition with digest listed, given what is
// recorded of it (exists, its state, approved and pending digests); a
// screening finding (flagged) keeps a new one from auto-approval.
func nextStep(exists bool, state sharedosv1.UpstreamToolState, approved, pending, listed string, autoApprove, flagged bool) step {
	switch {
	case !exists && autoApprove && !flagged:
		return stepPublishNew
	case !exists:
		return stepQuarantineNew
	case state == published && approved == listed, pending == listed:
		return stepKeep
	case approved == listed:
		return stepRepublish
	default:
		return stepQuarantineChanged
	}
}

// stepReason is the reason recorded for s on a definition of kind ("tool",
// "prompt", "resource"), with the screening finding flag when there is one.
func stepReason(s step, kind, flag string) string {
	var r string
	switch s {
	case stepPublishNew:
		return "a new " + kind + ", approved by the upstream's --auto-approve-new"
	case stepRepublish:
		return "the upstream serves the approved definition again"
	case stepQuarantineNew:
		if flag != "" {
			return "a new " + kind + ": " + flag
		}
		return "a new " + kind + " waits for an operator's approval"
	case stepQuarantineChanged:
		r = "the definition changed since it was approved"
	}
	if flag != "" {
		r += "; " + flag
	}
	return r
}

// checkDecision refuses an approval or rejection (approve false) that does
// not match the definition's state: what names it in messages.
func checkDecision(what string, state sharedosv1.UpstreamToolState, pending, digest string, approve bool) error {
	switch {
	case pending == "":
		return fmt.Errorf("%w: %s is %s and waits for no decision", ErrPrecondition, what, StateName(state))
	case digest != pending:
		return fmt.Errorf("%w: %s's pending digest is %s, not %s (see tools diff)", ErrPrecondition, what, pending, digest)
	case !approve && state == sharedosv1.UpstreamToolState_UPSTREAM_TOOL_STATE_REJECTED:
		return fmt.Errorf("%w: %s is rejected already", ErrPrecondition, what)
	}
	return nil
}

// maxWithdrawn bounds what a provider's record keeps of the tools (and,
// apart, the prompts and resources) its upstream stopped listing.
const maxWithdrawn = 1024

// decided is whether a withdrawn definition's record is kept: it had an
// approved definition (digest) or a rejected one. One that only waited
// for its first approval is new again when listed again, as it was; so
// without --auto-approve-new an upstream cannot push a decided record out
// of the last maxWithdrawn by listing and withdrawing names of its own.
func decided(digest string, state sharedosv1.UpstreamToolState) bool {
	return digest != "" || state == sharedosv1.UpstreamToolState_UPSTREAM_TOOL_STATE_REJECTED
}

// returning is the record of a withdrawn tool listed again, to be judged
// by nextStep: as it was, but no longer published (withdrawing
// deregistered it), so the approved definition is published again and any
// other waits for an operator; a rejected or pending one stays so.
func returning(t *sharedosv1.UpstreamTool) *sharedosv1.UpstreamTool {
	if t.GetState() == published {
		t.State = sharedosv1.UpstreamToolState_UPSTREAM_TOOL_STATE_QUARANTINED
	}
	return t
}

// returningEntry is returning for a prompt or resource.
func returningEntry(e *sharedosv1.UpstreamEntry) *sharedosv1.UpstreamEntry {
	if e.GetState() == published {
		e.State = sharedosv1.UpstreamToolState_UPSTREAM_TOOL_STATE_QUARANTINED
	}
	return e
}

// remembered is the withdrawn records to keep: those of before not listed
// again (still in gone, by name), then those withdrawn now, the last
// maxWithdrawn of them; a name withdrawn now replaces its older record.
func remembered[T any](before []T, gone map[string]T, now []T, name func(T) string) []T {
	fresh := map[string]bool{}
	for _, t := range now {
		fresh[name(t)] = true
	}
	var out []T
	for _, t := range before {
		if n := name(t); !fresh[n] {
			if _, still := gone[n]; still {
				out = append(out, t)
			}
		}
	}
	out = append(out, now...)
	if len(out) > maxWithdrawn {
		out = out[len(out)-maxWithdrawn:]
	}
	return out
}
