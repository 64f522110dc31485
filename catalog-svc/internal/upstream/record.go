package upstream

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
)

// A provider's record — its spec, and its status with every acquired
// definition, event and skipped entry — is one store entry and one
// message: providers get answers with it, providers list with every
// provider's, in one gRPC message of at most grpcx.MaxMessageSize. Most
// of it is the upstream's to choose, so each part is bounded in bytes and
// the whole by maxRecordBytes, whatever the upstream serves: a server name
// of 40 MiB, or events each holding a 16 MiB diff, made providers list
// fail for every provider. At the bound, 15 records fit in one
// providers list; a provider's record is rarely more than a few hundred
// KiB.
const (
	maxRecordBytes = 4 << 20
	// maxEventsBytes bounds a provider's events together; past it the
	// oldest events' diffs are dropped, then the oldest events.
	maxEventsBytes = 512 << 10
	// maxSkippedBytes bounds the entries a listing skipped, together;
	// past it the rest are counted in one last entry.
	maxSkippedBytes = 256 << 10
	// statusReserve is what the status's own fields take at most: times,
	// counters, its error (cut by reported), the server's strings
	// (serverString).
	statusReserve = 16 << 10
)

// elemSize is what an element of n bytes takes in a repeated field.
func elemSize(n int) int { return protowire.SizeTag(1) + protowire.SizeBytes(n) }

// addEvent records a state change of tool; the events kept are the last
// maxEvents, within maxEventsBytes together (fitEvents).
func addEvent(rec *sharedosv1.GetProviderResponse, tool, action, actor, old, new, reason, diff string) {
	st := rec.GetStatus()
	st.Events = append(st.Events, &sharedosv1.UpstreamEvent{Tool: tool, Action: action, Actor: actor, At: timestamppb.Now(),
		OldDigest: old, NewDigest: new, Reason: reason, Diff: diff})
	fitEvents(st)
}

// droppedDiff stands for a diff an event no longer keeps.
const droppedDiff = "(diff dropped to keep the provider's events within their bound; sharedosctl tools diff NAME shows the diff of the definition pending now)"

// fitEvents keeps st's last maxEvents events, within maxEventsBytes: the
// oldest diffs go first — the history of what was approved or rejected
// stays longest, and what waits can be diffed again — then the oldest
// events. So an upstream renaming its tools at every listing, each a new
// one with a diff, never grows the record past the bound.
func fitEvents(st *sharedosv1.UpstreamStatus) {
	if n := len(st.Events); n > maxEvents {
		st.Events = st.Events[n-maxEvents:]
	}
	total := 0
	for _, e := range st.Events {
		total += elemSize(proto.Size(e))
	}
	for i := 0; total > maxEventsBytes && i < len(st.Events); i++ {
		e := st.Events[i]
		if len(e.GetDiff()) <= len(droppedDiff) {
			continue
		}
		before := elemSize(proto.Size(e))
		e.Diff = droppedDiff
		total += elemSize(proto.Size(e)) - before
	}
	drop := 0
	for ; total > maxEventsBytes && drop < len(st.Events); drop++ {
		total -= elemSize(proto.Size(st.Events[drop]))
	}
	st.Events = st.Events[drop:]
}

// room is what a refresh may still add to a provider's record: its
// definitions — its tools, prompts and resources, acquired or withdrawn,
// each with what it pins and what waits — take what the spec, the events,
// the skipped entries and the status's own fields leave of
// maxRecordBytes. A definition that does not fit is skipped, never kept in
// part, once the withdrawn records' definitions are dropped to make room.
type room struct {
	left int
	st   *sharedosv1.UpstreamStatus
	// goneTools and goneEntries are the withdrawn records not listed
	// again (apply's, applyEntries' gone), leavingTools and leavingEntries
	// the acquired ones with a decided definition this listing withdraws:
	// only those give up their definitions.
	goneTools      map[string]*sharedosv1.UpstreamTool
	goneEntries    map[string]*sharedosv1.UpstreamEntry
	leavingTools   []*sharedosv1.UpstreamTool
	leavingEntries []*sharedosv1.UpstreamEntry
	// skippedBytes are what st.Skipped holds; unkept counts the skipped
	// entries past maxSkippedBytes.
	skippedBytes, unkept int
}

func newRoom(rec *sharedosv1.GetProviderResponse) *room {
	st := rec.GetStatus()
	held := 0
	for _, t := range st.GetTools() {
		held += elemSize(proto.Size(t))
	}
	for _, t := range st.GetWithdrawnTools() {
		held += elemSize(proto.Size(t))
	}
	for _, e := range st.GetEntries() {
		held += elemSize(proto.Size(e))
	}
	for _, e := range st.GetWithdrawnEntries() {
		held += elemSize(proto.Size(e))
	}
	limit := maxRecordBytes - elemSize(proto.Size(rec.GetProvider())) - maxEventsBytes - maxSkippedBytes - statusReserve
	return &room{left: limit - held, st: st}
}

// take claims n bytes for a definition, dropping the definitions of
// withdrawn records, oldest first, while that makes room; false when
// even that does not.
func (r *room) take(n int) bool {
	for n > r.left && r.shed() {
	}
	if n > r.left {
		return false
	}
	r.left -= n
	return true
}

// give returns n bytes claimed for what was not kept after all.
func (r *room) give(n int) { r.left += n }

// leavingTool is an acquired tool the listing does not name, which the
// refresh withdraws once every listed one is reconciled: the room it
// takes is given up first — so an upstream that renames its tools finds
// the room the old names held — all of it when nothing of it is
// remembered (decided), else its definitions when room is short.
func (r *room) leavingTool(t *sharedosv1.UpstreamTool) {
	if !decided(t.GetDigest(), t.GetState()) {
		r.give(elemSize(proto.Size(t)))
		return
	}
	r.leavingTools = append(r.leavingTools, t)
}

// leavingEntry is leavingTool for a prompt or resource.
func (r *room) leavingEntry(e *sharedosv1.UpstreamEntry) {
	if !decided(e.GetDigest(), e.GetState()) {
		r.give(elemSize(proto.Size(e)))
		return
	}
	r.leavingEntries = append(r.leavingEntries, e)
}

// shed drops the definitions of the oldest withdrawn record that has any,
// then of those this listing withdraws (tools before prompts and
// resources); false when none has. Its name, state and digests stay,
// which is all nextStep judges a definition listed again by: what it pins
// is kept, and only a diff of it or tools get can no longer show its
// definition.
func (r *room) shed() bool {
	var tools []*sharedosv1.UpstreamTool
	for _, t := range r.st.GetWithdrawnTools() {
		if r.goneTools[t.GetName()] == t {
			tools = append(tools, t)
		}
	}
	for _, t := range append(tools, r.leavingTools...) {
		if t.GetPublished() != nil || t.GetPending() != nil {
			before := elemSize(proto.Size(t))
			t.Published, t.Pending = nil, nil
			r.give(before - elemSize(proto.Size(t)))
			return true
		}
	}
	var entries []*sharedosv1.UpstreamEntry
	for _, e := range r.st.GetWithdrawnEntries() {
		if r.goneEntries[entryID(e)] == e {
			entries = append(entries, e)
		}
	}
	for _, e := range append(entries, r.leavingEntries...) {
		if e.GetPublished() != nil || e.GetPending() != nil {
			before := elemSize(proto.Size(e))
			e.Published, e.Pending = nil, nil
			r.give(before - elemSize(proto.Size(e)))
			return true
		}
	}
	return false
}

// full is a definition's reason to be skipped when it did not fit.
func full(n int) string {
	return fmt.Sprintf("its definition (%d bytes) does not fit in the provider's record, which SharedOS bounds at %d bytes (what providers get answers with)", n, maxRecordBytes)
}

// skip records s in the status's skipped entries while they hold less
// than maxSkippedBytes, else only counts it (done notes how many).
func (r *room) skip(s *sharedosv1.SkippedTool) {
	n := elemSize(proto.Size(s))
	if r.unkept > 0 || r.skippedBytes+n > maxSkippedBytes-skippedNote {
		r.unkept++
		return
	}
	r.skippedBytes += n
	r.st.Skipped = append(r.st.Skipped, s)
}

// skippedNote is room kept for the entry that counts the skipped entries
// not kept.
const skippedNote = 512

// done ends the skipped entries with one counting those not kept.
func (r *room) done() {
	if r.unkept > 0 {
		r.st.Skipped = append(r.st.Skipped, &sharedosv1.SkippedTool{UpstreamName: "…",
			Reason: fmt.Sprintf("%d more entries were skipped and are not listed here: a provider's record keeps at most %d bytes of them", r.unkept, maxSkippedBytes)})
		r.unkept = 0
	}
}
