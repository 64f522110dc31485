package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"

	"github.com/sharedos/toolshare/catalog-svc/internal/catalog"
)

// An upstream's prompts and resources are acquired like its tools (ADR
// 0019): a prompt as <namespace>.<upstream name>, a resource under the URI
// (or URI template) the upstream gave, source and handler target
// mcp:<namespace>; pinned by digest, a changed or new one quarantined until
// approved, one no longer listed withdrawn.

// Entry kinds, as UpstreamEntry.kind.
const (
	kindPrompt   = "prompt"
	kindResource = "resource"
)

// candidate is one listed prompt or resource as SharedOS would register it.
type candidate struct {
	kind, key, upstreamName string
	reg                     proto.Message
	texts                   []text
	// unreadable, when set, is why the upstream's entry could not be
	// read: it is skipped (upstreamName is what it was called, if
	// anything).
	unreadable string
}

// listedPrompt and listedResource are entries of the upstream's list
// results, read from the raw JSON.
type listedPrompt struct {
	Name        string                       `json:"name"`
	Title       string                       `json:"title"`
	Description string                       `json:"description"`
	Arguments   []*sharedosv1.PromptArgument `json:"arguments"`
}

type listedResource struct {
	URI         string `json:"uri"`
	URITemplate string `json:"uriTemplate"`
	Name        string `json:"name"`
	Title       string `json:"title"`
	Description string `json:"description"`
	MimeType    string `json:"mimeType"`
}

// listEntries lists the upstream's prompts and resources (those it
// offers); one whose entry cannot be read is a candidate with why
// (unreadable), as a tool is (listTools).
func (c *conn) listEntries(ctx context.Context, spec *sharedosv1.UpstreamProvider) ([]candidate, error) {
	var out []candidate
	err := c.listed(ctx, func(s session) error {
		var err error
		out, err = c.listEntriesOn(ctx, s, spec)
		return err
	})
	return out, err
}

// listEntriesOn is listEntries on the session s.
func (c *conn) listEntriesOn(ctx context.Context, s session, spec *sharedosv1.UpstreamProvider) ([]candidate, error) {
	caps := s.cl.GetServerCapabilities()
	var out []candidate
	if caps.Prompts != nil {
		n := 0
		err := c.pages(ctx, s, string(mcp.MethodPromptsList), func(body json.RawMessage) (mcp.Cursor, error) {
			items, next, err := pageOf(body, "prompts")
			if err != nil {
				return "", err
			}
			for _, b := range items {
				var p listedPrompt
				if why := readEntry(b, &p); why != "" {
					out = append(out, candidate{kind: kindPrompt, upstreamName: nameOf(b, "name"), unreadable: why})
					continue
				}
				out = append(out, promptCandidate(spec, p))
			}
			n += len(items)
			return next, tooMany(n, "prompts")
		})
		if err != nil {
			return nil, err
		}
	}
	if caps.Resources != nil {
		n := 0
		list := func(method, field string) error {
			return c.pages(ctx, s, method, func(body json.RawMessage) (mcp.Cursor, error) {
				items, next, err := pageOf(body, field)
				if err != nil {
					return "", err
				}
				for _, b := range items {
					var r listedResource
					if why := readEntry(b, &r); why != "" {
						out = append(out, candidate{kind: kindResource, upstreamName: nameOf(b, "uri", "uriTemplate", "name"), unreadable: why})
						continue
					}
					out = append(out, resourceCandidate(spec, r))
				}
				n += len(items)
				return next, tooMany(n, "resources and resource templates")
			})
		}
		if err := list(string(mcp.MethodResourcesList), "resources"); err != nil {
			return nil, err
		}
		if err := list(string(mcp.MethodResourcesTemplatesList), "resourceTemplates"); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func handlerOf(spec *sharedosv1.UpstreamProvider) *sharedosv1.HandlerRef {
	h := &sharedosv1.HandlerRef{Target: Target(spec.GetNamespace())}
	if d := spec.GetTimeout(); d != nil && d.AsDuration() > 0 {
		h.Timeout = durationpb.New(d.AsDuration())
	}
	return h
}

func promptCandidate(spec *sharedosv1.UpstreamProvider, p listedPrompt) candidate {
	ns := spec.GetNamespace()
	reg := &sharedosv1.PromptRegistration{Name: ns + "." + p.Name, Title: p.Title, Description: p.Description, Arguments: p.Arguments,
		Metadata: &sharedosv1.ToolMetadata{Namespace: ns, Source: Source(ns)}, Handler: handlerOf(spec)}
	ts := append(nameTexts("name", p.Name), text{"title", p.Title}, text{"description", p.Description})
	for i, a := range p.Arguments {
		ts = append(ts, nameTexts(fmt.Sprintf("arguments[%d].name", i), a.GetName())...)
		ts = append(ts, text{fmt.Sprintf("arguments[%d].description", i), a.GetDescription()})
	}
	return candidate{kind: kindPrompt, key: reg.GetName(), upstreamName: p.Name, reg: reg, texts: ts}
}

func resourceCandidate(spec *sharedosv1.UpstreamProvider, r listedResource) candidate {
	ns := spec.GetNamespace()
	uri := r.URI
	if uri == "" {
		uri = r.URITemplate
	}
	reg := &sharedosv1.ResourceRegistration{Uri: uri, Name: r.Name, Title: r.Title, Description: r.Description, MimeType: r.MimeType,
		Metadata: &sharedosv1.ToolMetadata{Namespace: ns, Source: Source(ns)}, Handler: handlerOf(spec)}
	return candidate{kind: kindResource, key: uri, upstreamName: uri, reg: reg,
		texts: append(append(nameTexts("uri", uri), nameTexts("name", r.Name)...), text{"title", r.Title}, text{"description", r.Description})}
}

// checkEntry validates reg as the catalogue would and returns the digest
// and canonical bytes of its published projection.
func (m *Manager) checkEntry(kind string, reg proto.Message) (string, []byte, error) {
	switch r := reg.(type) {
	case *sharedosv1.PromptRegistration:
		pub, err := m.cfg.Registry.CheckPrompt(r)
		return pub.GetDigest(), pub.GetCanonicalJson(), err
	case *sharedosv1.ResourceRegistration:
		pub, err := m.cfg.Registry.CheckResource(r)
		return pub.GetDigest(), pub.GetCanonicalJson(), err
	}
	return "", nil, fmt.Errorf("upstream: no %s kind", kind)
}

// publishEntry registers reg, new or replacing this upstream's earlier
// one; a prompt name or resource URI another source holds is refused.
func (m *Manager) publishEntry(ctx context.Context, ns string, reg proto.Message) error {
	var holder *sharedosv1.ToolMetadata
	var err error
	var cur *catalog.ResolvedEntry
	switch r := reg.(type) {
	case *sharedosv1.PromptRegistration:
		if cur, err = m.cfg.Registry.ResolvePrompt(ctx, r.GetName()); err == nil {
			holder = cur.Prompt.GetMetadata()
		}
	case *sharedosv1.ResourceRegistration:
		if cur, err = m.cfg.Registry.ResolveResource(ctx, r.GetUri()); err == nil {
			holder = cur.Resource.GetMetadata()
		}
	}
	switch {
	case err != nil && !errors.Is(err, catalog.ErrNotFound):
		return err
	case err == nil && holder.GetSource() != Source(ns):
		return fmt.Errorf("registered already, from source %q", holder.GetSource())
	}
	switch r := reg.(type) {
	case *sharedosv1.PromptRegistration:
		_, _, err = m.cfg.Registry.RegisterPrompt(ctx, r)
	case *sharedosv1.ResourceRegistration:
		_, _, err = m.cfg.Registry.RegisterResource(ctx, r)
	}
	return err
}

// withdrawEntry deregisters the entry (a missing one is fine).
func (m *Manager) withdrawEntry(ctx context.Context, kind, key string) error {
	var err error
	if kind == kindPrompt {
		err = m.cfg.Registry.DeregisterPrompt(ctx, key)
	} else {
		err = m.cfg.Registry.DeregisterResource(ctx, key)
	}
	if errors.Is(err, catalog.ErrNotFound) {
		return nil
	}
	return err
}

func decodeEntry(kind string, b []byte) (proto.Message, error) {
	var m proto.Message = &sharedosv1.ResourceRegistration{}
	if kind == kindPrompt {
		m = &sharedosv1.PromptRegistration{}
	}
	return m, proto.Unmarshal(b, m)
}

func encodeEntry(reg proto.Message) []byte {
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(reg)
	return b
}

// applyEntries brings rec's prompts and resources up to date with what
// the upstream listed, as apply does for tools.
func (m *Manager) applyEntries(ctx context.Context, rec *sharedosv1.GetProviderResponse, listed []candidate, actor string, r *room) {
	// Every new resource is compared with other sources' (twice: before it
	// is quarantined, and as it is registered), all within one bound: an
	// upstream listing intricate templates takes seconds of one refresh at
	// most, and the rest wait for the next (attack run C3: minutes, while
	// every other resource registration waited).
	ctx = catalog.WithOverlapBudget(ctx, m.cfg.OverlapWork)
	st := rec.GetStatus()
	index := map[string]*sharedosv1.UpstreamEntry{}
	for _, e := range st.GetEntries() {
		index[entryID(e)] = e
	}
	gone := map[string]*sharedosv1.UpstreamEntry{}
	for _, e := range st.GetWithdrawnEntries() {
		gone[entryID(e)] = e
	}
	r.goneEntries = gone
	named := map[string]bool{}
	for _, cand := range listed {
		named[cand.kind+" "+cand.key] = true
	}
	for _, e := range st.GetEntries() {
		if !named[entryID(e)] {
			r.leavingEntry(e)
		}
	}
	seen := map[string]bool{}
	for _, cand := range listed {
		if cand.unreadable != "" {
			r.skip(skipped(cand.kind, cand.upstreamName, cand.unreadable))
			continue
		}
		digest, _, err := m.checkEntry(cand.kind, cand.reg)
		if err != nil {
			r.skip(skipped(cand.kind, cand.upstreamName, err.Error()))
			continue
		}
		flag := ""
		if f, hit := m.cfg.Screening.screen(cand.texts); hit {
			flag = f.String()
		}
		id := cand.kind + " " + cand.key
		if e := gone[id]; e != nil && index[id] == nil {
			// Listed again: judged against what was recorded of it.
			delete(gone, id)
			st.Entries = append(st.Entries, returningEntry(e))
			index[id] = e
		}
		if why := m.reconcileEntry(ctx, rec, index, id, cand, digest, flag, actor, r); why != "" {
			r.skip(skipped(cand.kind, cand.upstreamName, why))
			continue
		}
		seen[id] = true
	}
	kept, withdrawn := st.GetEntries()[:0], []*sharedosv1.UpstreamEntry{}
	for _, e := range st.GetEntries() {
		if seen[entryID(e)] {
			kept = append(kept, e)
			continue
		}
		if e.GetState() == sharedosv1.UpstreamToolState_UPSTREAM_TOOL_STATE_PUBLISHED {
			if err := m.withdrawEntry(ctx, e.GetKind(), e.GetKey()); err != nil {
				kept = append(kept, e)
				continue
			}
		}
		addEvent(rec, e.GetKey(), "withdrawn", actor, e.GetDigest(), "", "the upstream no longer lists this "+e.GetKind(), "")
		if decided(e.GetDigest(), e.GetState()) {
			withdrawn = append(withdrawn, e)
		}
	}
	st.Entries = kept
	st.WithdrawnEntries = remembered(st.GetWithdrawnEntries(), gone, withdrawn, entryID)
	slices.SortFunc(st.Entries, func(a, b *sharedosv1.UpstreamEntry) int {
		return strings.Compare(a.GetKind()+" "+a.GetKey(), b.GetKind()+" "+b.GetKey())
	})
}

// entryID names a prompt or resource among a provider's entries.
func entryID(e *sharedosv1.UpstreamEntry) string { return e.GetKind() + " " + e.GetKey() }

func (m *Manager) reconcileEntry(ctx context.Context, rec *sharedosv1.GetProviderResponse, index map[string]*sharedosv1.UpstreamEntry,
	id string, cand candidate, digest, flag, actor string, r *room) string {
	ns := rec.GetProvider().GetNamespace()
	cur := index[id]
	s := nextStep(cur != nil, cur.GetState(), cur.GetDigest(), cur.GetPendingDigest(), digest, rec.GetProvider().GetAutoApproveNew(), flag != "")
	reason := stepReason(s, cand.kind, flag)
	before := 0
	if cur == nil {
		cur = &sharedosv1.UpstreamEntry{Kind: cand.kind, Key: cand.key, UpstreamName: cand.upstreamName}
	} else {
		before = elemSize(proto.Size(cur))
	}
	if r, ok := cand.reg.(*sharedosv1.ResourceRegistration); ok && (s == stepPublishNew || s == stepQuarantineNew) {
		// A new resource one of whose URIs another source's resource may
		// also be read by is skipped, with the registration it overlaps,
		// as a tool name another source holds is: never quarantined for
		// an approval the catalogue would refuse. (One published before
		// the rule is kept; publishing it again is checked again.)
		if err := m.cfg.Registry.CheckResourceOverlap(ctx, r); err != nil {
			return err.Error()
		}
	}
	// Measured before the registry is changed, as a tool is (reconcile).
	was, undo := cur.GetState(), entryRestorer(cur)
	encoded := encodeEntry(cand.reg)
	switch s {
	case stepKeep:
		// As for a tool (reconcile): what was dropped to make room is
		// kept again.
		switch {
		case cur.GetPendingDigest() == digest && cur.GetPending() == nil:
			cur.Pending = encoded
		case cur.GetDigest() == digest && cur.GetPublished() == nil:
			cur.Published = encoded
		default:
			return ""
		}
	case stepPublishNew, stepRepublish:
		cur.State, cur.Digest, cur.Published, cur.Pending, cur.PendingDigest, cur.Reason = published, digest, encoded, nil, "", ""
	case stepQuarantineChanged, stepQuarantineNew:
		cur.State, cur.Pending, cur.PendingDigest, cur.Reason = sharedosv1.UpstreamToolState_UPSTREAM_TOOL_STATE_QUARANTINED, encoded, digest, reason
	}
	grown := elemSize(proto.Size(cur)) - before
	if !r.take(grown) {
		undo()
		return full(len(encoded))
	}
	fail := func(err error) string {
		undo()
		r.give(grown)
		return err.Error()
	}
	switch s {
	case stepPublishNew, stepRepublish:
		if err := m.publishEntry(ctx, ns, cand.reg); err != nil {
			return fail(err)
		}
		addEvent(rec, cur.GetKey(), "published", actor, "", digest, reason, "")
	case stepQuarantineChanged, stepQuarantineNew:
		if was == published {
			if err := m.withdrawEntry(ctx, cur.GetKind(), cur.GetKey()); err != nil {
				return fail(err)
			}
		}
		d, err := m.diffEntries(cand.kind, cur.GetPublished(), cur.GetPending(), maxEventDiffBytes, diffMore(cur.GetKey()))
		if err != nil {
			d = "(no diff: " + clip(err.Error(), maxSkippedReason) + ")"
		}
		addEvent(rec, cur.GetKey(), "quarantined", actor, cur.GetDigest(), digest, reason, d)
	}
	if s == stepPublishNew || s == stepQuarantineNew {
		rec.Status.Entries = append(rec.Status.Entries, cur)
		index[id] = cur
	}
	return ""
}

// entryRestorer returns what puts back the fields of e a step changes.
func entryRestorer(e *sharedosv1.UpstreamEntry) func() {
	state, digest, pub, pending, pendingDigest, reason := e.GetState(), e.GetDigest(), e.GetPublished(), e.GetPending(), e.GetPendingDigest(), e.GetReason()
	return func() {
		e.State, e.Digest, e.Published, e.Pending, e.PendingDigest, e.Reason = state, digest, pub, pending, pendingDigest, reason
	}
}

// diffEntries is the unified diff of two encoded registrations' canonical
// projections, cut to most bytes (diffText).
func (m *Manager) diffEntries(kind string, from, to []byte, most int, more string) (string, error) {
	pretty := func(b []byte) (string, error) {
		if b == nil {
			return "", nil
		}
		reg, err := decodeEntry(kind, b)
		if err != nil {
			return "", err
		}
		_, canonical, err := m.checkEntry(kind, reg)
		if err != nil {
			return "", err
		}
		return indent(canonical)
	}
	a, err := pretty(from)
	if err != nil {
		return "", err
	}
	b, err := pretty(to)
	if err != nil {
		return "", err
	}
	return diffText(a, b, most, more), nil
}

// findEntry is the acquired prompt or resource key of any upstream.
func (m *Manager) findEntry(ctx context.Context, key string) (*sharedosv1.GetProviderResponse, *sharedosv1.UpstreamEntry, error) {
	recs, err := m.List(ctx)
	if err != nil {
		return nil, nil, err
	}
	for _, rec := range recs {
		for _, e := range rec.GetStatus().GetEntries() {
			if e.GetKey() == key {
				return rec, e, nil
			}
		}
	}
	return nil, nil, fmt.Errorf("%w: no upstream has a tool, prompt or resource %q", ErrNotFound, key)
}

// decideEntry approves or rejects an acquired prompt or resource.
func (m *Manager) decideEntry(ctx context.Context, key, digest, actor string, approve bool) (*sharedosv1.UpstreamTool, error) {
	rec, e, err := m.findEntry(ctx, key)
	if err != nil {
		return nil, err
	}
	if err := checkDecision(e.GetKind()+" "+key, e.GetState(), e.GetPendingDigest(), digest, approve); err != nil {
		return nil, err
	}
	old := e.GetDigest()
	if approve {
		reg, err := decodeEntry(e.GetKind(), e.GetPending())
		if err != nil {
			return nil, err
		}
		if err := m.publishEntry(ctx, rec.GetProvider().GetNamespace(), reg); err != nil {
			return nil, err
		}
		e.Published, e.Digest = e.GetPending(), e.GetPendingDigest()
		e.State, e.Pending, e.PendingDigest, e.Reason = sharedosv1.UpstreamToolState_UPSTREAM_TOOL_STATE_PUBLISHED, nil, "", ""
		addEvent(rec, key, "approved", actor, old, digest, "", "")
	} else {
		e.State, e.Reason = sharedosv1.UpstreamToolState_UPSTREAM_TOOL_STATE_REJECTED, "rejected by "+actor
		addEvent(rec, key, "rejected", actor, old, digest, "", "")
	}
	return entryAsTool(e), m.save(ctx, rec)
}

// entryAsTool shows an entry in the UpstreamTool shape the decision RPCs
// answer with.
func entryAsTool(e *sharedosv1.UpstreamEntry) *sharedosv1.UpstreamTool {
	return &sharedosv1.UpstreamTool{Name: e.GetKey(), UpstreamName: e.GetUpstreamName(), State: e.GetState(), Digest: e.GetDigest(),
		PendingDigest: e.GetPendingDigest(), Reason: e.GetReason()}
}
