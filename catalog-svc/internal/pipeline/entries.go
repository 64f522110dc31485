package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	grpccodes "google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/mcpcontent"
	"github.com/sharedos/toolshare/services/contract/outcome"
	"github.com/sharedos/toolshare/services/contract/pinproof"
	"github.com/sharedos/toolshare/services/contract/requirement"
	"github.com/sharedos/toolshare/services/contract/resourceuri"
	"github.com/sharedos/toolshare/services/platform/telemetry"

	"github.com/sharedos/toolshare/catalog-svc/internal/catalog"
	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline/grants"
)

// Prompts and resources (ADR 0018): a prompts/get or resources/read is an
// attempt like a tools/call — the same record, grant, revocation and
// completion — whose steps 2–6 resolve the prompt or resource within the
// turn's pin, check a prompt's arguments, authorize get on prompt:<name>
// or read on resource:<uri>, and dispatch to the provider's GetPrompt or
// ReadResource.

// EntryResolver finds a prompt or resource registration as registered now;
// *catalog.Service implements it.
type EntryResolver interface {
	ResolvePrompt(ctx context.Context, name string) (*catalog.ResolvedEntry, error)
	ResolveResource(ctx context.Context, uri string) (*catalog.ResolvedEntry, error)
	// RegisteredResource is the concrete resource registered that a
	// reader may take uri for; catalog.ErrNotFound when there is none.
	RegisteredResource(ctx context.Context, uri string) (string, error)
	// RegisteredTemplates are the templates registered that the registry
	// reads uri, or a reader's spelling of it, through (none when no
	// template matches).
	RegisteredTemplates(ctx context.Context, uri string) ([]string, error)
	// ForeignResource is the first of uris (its index; -1 when none is)
	// that a resource registration of a source other than source serves
	// and none of source's does, and that registration: the URIs an
	// upstream's content may not embed a resource under (foreignEmbedded).
	ForeignResource(ctx context.Context, source string, uris []string) (int, string, error)
}

// entry is what prepareEntry resolved: the registration's class, name (a
// prompt's name, a resource registration's URI), facts and handler.
type entry struct {
	class    string
	name     string
	facts    *sharedosv1.ToolFacts
	handler  *sharedosv1.HandlerRef
	required []string
	allowed  map[string]bool
}

// prepareEntry is steps 2–5 of a prompt or resource attempt.
func (s *Pipeline) prepareEntry(ctx context.Context, call *sharedosv1.ToolCall, grant *grants.Grant, args []byte) (*sharedosv1.ToolResult, string, func() *sharedosv1.ToolResult) {
	e, res := s.resolveEntry(ctx, call, grant)
	if res != nil {
		return res, "", nil
	}
	action, resource := requirement.ActionRead, "resource:"+call.GetTool()
	if e.class == requirement.ClassPrompt {
		action, resource = requirement.ActionGet, "prompt:"+e.name
		if res := checkPromptArguments(e, args); res != nil {
			return res, e.name, nil
		}
	}
	res, decisionID, revision := s.authorize(ctx, call, grant.Context, e.facts, action, resource, args)
	if res != nil {
		res.DecisionId, res.PolicyRevision = decisionID, revision
		return res, e.name, nil
	}
	return nil, e.name, func() *sharedosv1.ToolResult {
		res := s.dispatchEntry(ctx, call, grant.Context, e, args, decisionID)
		res.DecisionId, res.PolicyRevision = decisionID, revision
		return res
	}
}

// pinnedResource is the registration (its URI or URI template) a read of
// uri goes to within the turn's pin, and its pinned digest: the concrete
// URI when the proof shows it pinned, else — the proof showing it is not —
// the first pinned template it matches (resourceuri.Match). Grants issued
// before the resource tree carry every URI and template in a map.
func pinnedResource(grant *grants.Grant, uri string, proof *sharedosv1.PinProof) (name, digest string, ok bool) {
	if grant.ResourceRoot == "" {
		name, ok = resourceuri.Match(slices.Collect(maps.Keys(grant.Resources)), uri)
		return name, grant.Resources[name], ok
	}
	if d, err := pinproof.Check(grant.ResourceRoot, grant.ResourceSize, pinproof.Resource, uri, proof); err == nil {
		return uri, d, true
	}
	if pinproof.CheckAbsent(grant.ResourceRoot, grant.ResourceSize, pinproof.Resource, uri, proof) != nil {
		return "", "", false
	}
	name, ok = resourceuri.Match(slices.Collect(maps.Keys(grant.ResourceTemplates)), uri)
	return name, grant.ResourceTemplates[name], ok
}

// resolveEntry finds the prompt (by name) or the resource registration (a
// concrete URI against the pinned URIs and templates) the call names,
// within the turn's pin and unchanged since the turn was granted.
func (s *Pipeline) resolveEntry(ctx context.Context, call *sharedosv1.ToolCall, grant *grants.Grant) (*entry, *sharedosv1.ToolResult) {
	raw := call.GetTool()
	shown := telemetry.Escape(raw, 120)
	if s.entries == nil {
		return nil, outcome.Failed(outcome.Internal, "this kernel serves no prompts or resources")
	}
	var (
		name, pinned string
		resolved     *catalog.ResolvedEntry
		err          error
		class        string
	)
	switch call.GetKind() {
	case sharedosv1.CallKind_CALL_KIND_PROMPT:
		class, name = requirement.ClassPrompt, raw
		var ok bool
		if pinned, ok = pinnedDigest(grant, pinproof.Prompt, raw, call.GetPinProof()); !ok {
			return nil, outcome.Denied(outcome.ToolUnavailable, fmt.Sprintf("prompt %q is not in this turn's catalogue", shown))
		}
		resolved, err = s.entries.ResolvePrompt(ctx, raw)
	case sharedosv1.CallKind_CALL_KIND_RESOURCE:
		class = requirement.ClassResource
		if len(raw) > resourceuri.MaxURIBytes {
			// No registration has a longer URI, and each pinned template
			// would be matched against it (the bridge refuses it first, as
			// invalid params: attack run C4).
			return nil, outcome.Failed(outcome.InvalidRequest, fmt.Sprintf("the URI is %d bytes; a resource URI is at most %d", len(raw), resourceuri.MaxURIBytes))
		}
		var ok bool
		if name, pinned, ok = pinnedResource(grant, raw, call.GetPinProof()); !ok {
			return nil, outcome.Denied(outcome.ToolUnavailable, fmt.Sprintf("no resource of this turn has URI %q", shown))
		}
		if name != raw {
			if res := s.readsAnother(ctx, raw, name, shown); res != nil {
				return nil, res
			}
		}
		resolved, err = s.entries.ResolveResource(ctx, name)
	default:
		return nil, outcome.Failed(outcome.InvalidRequest, "unknown call kind")
	}
	switch {
	case errors.Is(err, catalog.ErrNotFound):
		return nil, outcome.Denied(outcome.ToolUnavailable, fmt.Sprintf("%s %q is no longer registered", class, telemetry.Escape(name, 120)))
	case err != nil:
		if res := contextOutcome(ctx); res != nil {
			return nil, res
		}
		s.logger.ErrorContext(ctx, "resolve "+class, slog.String(telemetry.LogTool, shown), slog.Any("error", err))
		return nil, outcome.Failed(outcome.Internal, "the catalogue is unavailable")
	case resolved.Digest != pinned:
		return nil, outcome.Denied(outcome.ToolUnavailable,
			fmt.Sprintf("%s %q changed since this turn started; open a new turn to use it", class, telemetry.Escape(name, 120)))
	}
	e := &entry{class: class, name: name}
	var meta *sharedosv1.ToolMetadata
	if p := resolved.Prompt; p != nil {
		e.handler, meta = p.GetHandler(), p.GetMetadata()
		e.allowed = map[string]bool{}
		for _, a := range p.GetArguments() {
			e.allowed[a.GetName()] = true
			if a.GetRequired() {
				e.required = append(e.required, a.GetName())
			}
		}
	} else {
		e.handler, meta = resolved.Resource.GetHandler(), resolved.Resource.GetMetadata()
	}
	e.facts = &sharedosv1.ToolFacts{Name: name, Class: class, Namespace: meta.GetNamespace(), Source: meta.GetSource()}
	return e, nil
}

// readsAnother refuses a read of uri through the turn's pinned template
// when the registry reads uri through another registration: one not in
// this turn's pin, since it is not this turn's (FilterTools may have
// hidden it, or it came after the turn opened). A URI registered on its
// own is read through its own registration, never through a template it
// also matches — nor in another spelling a reader may take for it
// ("%68idden" for "hidden", "INTERNAL" for "internal": resourceuri.Key);
// and a URI another template registered takes first (in byte order, as
// the registry resolves a read: test://template/admin-{n}/data before
// test://template/{id}/data), in its spelling or a reader's, is read only
// through that one. The refusal names neither: the spelling a policy hides
// is not the reader's to learn, nor that there is one. nil when the read
// may go on.
func (s *Pipeline) readsAnother(ctx context.Context, uri, template, shown string) *sharedosv1.ToolResult {
	notHere := outcome.Denied(outcome.ToolUnavailable, fmt.Sprintf("resource %q is not in this turn's catalogue", shown))
	unreadable := func() *sharedosv1.ToolResult {
		if res := contextOutcome(ctx); res != nil {
			return res
		}
		return outcome.Failed(outcome.Internal, "the resource registry could not be read")
	}
	switch _, err := s.entries.RegisteredResource(ctx, uri); {
	case err == nil:
		return notHere
	case !errors.Is(err, catalog.ErrNotFound):
		return unreadable()
	}
	others, err := s.entries.RegisteredTemplates(ctx, uri)
	if err != nil {
		return unreadable()
	}
	for _, t := range others {
		if t != template {
			return notHere
		}
	}
	return nil
}

// checkPromptArguments: MCP prompt arguments are an object of strings;
// every required one present, none the prompt does not declare. They are
// parsed as a tool's are (decodeArguments): the policy reads these bytes
// and the provider parses them again, so a duplicate or case-folded key,
// invalid UTF-8 or anything but one object could be read two ways.
func checkPromptArguments(e *entry, args []byte) *sharedosv1.ToolResult {
	m, err := decodeArguments(args)
	if err != nil {
		return outcome.Failed(outcome.InvalidArguments, "invalid arguments: "+err.Error()+"; a prompt's arguments are an object of strings")
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if _, ok := m[k].(string); !ok {
			return outcome.Failed(outcome.InvalidArguments, fmt.Sprintf("invalid arguments: %q must be a string", truncate(k, 64)))
		}
		if !e.allowed[k] {
			return outcome.Failed(outcome.InvalidArguments, fmt.Sprintf("invalid arguments: the prompt takes no argument %q", truncate(k, 64)))
		}
	}
	for _, r := range e.required {
		if _, ok := m[r]; !ok {
			return outcome.Failed(outcome.InvalidArguments, fmt.Sprintf("invalid arguments: %q is required", r))
		}
	}
	return nil
}

// dispatchEntry is step 6 of a prompt or resource attempt.
func (s *Pipeline) dispatchEntry(ctx context.Context, call *sharedosv1.ToolCall, access *sharedosv1.AccessContext, e *entry, args []byte, decisionID string) *sharedosv1.ToolResult {
	if res := contextOutcome(ctx); res != nil {
		return res
	}
	client, err := s.handlers.Client(e.handler.GetTarget())
	if err != nil {
		s.logger.ErrorContext(ctx, "handler client", slog.String(telemetry.LogTool, e.name), slog.Any("error", err))
		return outcome.Failed(outcome.HandlerError, "the provider cannot be reached")
	}
	timeout := s.timeoutOf(e.handler)
	hctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	hctx, span := tracer.Start(hctx, telemetry.ExecuteToolSpanName(e.class+" "+e.name), trace.WithAttributes(
		attribute.String(telemetry.AttrGenAIToolName, e.name),
	))
	defer span.End()
	req := &sharedosv1.HandleRequest{
		CallId: call.GetCallId(), TurnId: call.GetTurnId(), Tool: call.GetTool(), ArgumentsJson: args,
		Context: access, DecisionId: decisionID, Registered: e.name,
		Round: call.GetResume().GetRound(), RequestState: call.GetResume().GetRequestState(), InputResponsesJson: call.GetInputResponsesJson(),
	}
	if call.GetInputRounds() {
		req.InputMethods = call.GetInputMethods()
	}
	failed := func(err error) *sharedosv1.ToolResult {
		span.SetStatus(codes.Error, status.Code(err).String())
		if res := contextOutcome(ctx); res != nil {
			return res
		}
		if res := boundOrSilence(hctx, err, catalog.AcquiredSource(e.facts.GetSource()), "the provider", timeout); res != nil {
			return res
		}
		if status.Code(err) == grpccodes.NotFound && e.class == requirement.ClassResource {
			return outcome.Denied(outcome.ToolUnavailable, fmt.Sprintf("no resource has URI %q", telemetry.Escape(call.GetTool(), 120)))
		}
		if catalog.AcquiredSource(e.facts.GetSource()) {
			return outcome.Failed(outcome.UpstreamUnavailable, "the upstream MCP server could not be reached or answered outside the protocol")
		}
		return outcome.Failed(outcome.HandlerError, fmt.Sprintf("the provider failed (%s)", status.Code(err)))
	}
	if e.class == requirement.ClassPrompt {
		resp, err := client.GetPrompt(hctx, req)
		if err != nil {
			return failed(err)
		}
		if in := resp.GetInputRequired(); in != nil {
			return inputRequired(call, in)
		}
		acquired := catalog.AcquiredSource(e.facts.GetSource())
		// Passed on, messages the bridge cannot serve would fail the
		// request with a JSON-RPC error of its own while the record said
		// succeeded (attack run C2: messages mcp-go's client takes and the
		// bridge does not).
		contents, wrong := checkMessages(resp.GetMessagesJson())
		if wrong == "" && acquired {
			var res *sharedosv1.ToolResult
			if wrong, res = s.foreignEmbedded(ctx, e.facts.GetSource(), contents, func(i int) string {
				return fmt.Sprintf("messages[%d].content", i)
			}); res != nil {
				return res
			}
		}
		if wrong != "" {
			span.SetStatus(codes.Error, "malformed prompt messages")
			if acquired {
				return outcome.Failed(outcome.UpstreamUnavailable, "the upstream MCP server answered outside the protocol: "+wrong)
			}
			return outcome.Failed(outcome.HandlerError, "the provider returned "+wrong)
		}
		return &sharedosv1.ToolResult{Status: sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED,
			ContentJson: resp.GetMessagesJson(), Description: resp.GetDescription()}
	}
	resp, err := client.ReadResource(hctx, req)
	if err != nil {
		return failed(err)
	}
	if wrong := checkContents(resp.GetContentsJson(), call.GetTool(), e.name); wrong != "" {
		// Passed on, the bridge would fail the read (or serve another
		// resource's name) while the record said succeeded.
		span.SetStatus(codes.Error, "malformed resource contents")
		if catalog.AcquiredSource(e.facts.GetSource()) {
			return outcome.Failed(outcome.UpstreamUnavailable, "the upstream MCP server answered outside the protocol: "+wrong)
		}
		return outcome.Failed(outcome.HandlerError, "the provider returned "+wrong)
	}
	return &sharedosv1.ToolResult{Status: sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED, ContentJson: resp.GetContentsJson()}
}

// checkContents says what is wrong with the contents of a read of uri
// through registration, "" when nothing is. They are a JSON array of one
// item or more, each what the bridge serves as MCP resource contents
// (mcpcontent.CheckResource: a uri, a text or a blob, the blob base64),
// each naming the resource read (in any spelling a reader takes for it:
// resourceuri.Key) or one the same registration serves (a URI its template
// matches: the children of a directory read through file:///{path}, say).
// Any other URI may be another registration's, another source's even
// (evil://other answering as file:///etc/passwd): the harness would take
// the contents for that resource's, which nothing authorized or read. The
// contents are checked without a copy of them.
func checkContents(contents []byte, uri, registration string) string {
	items, err := mcpcontent.Items(contents)
	if err != nil || len(items) == 0 {
		return "no resource contents"
	}
	for i, item := range items {
		u, err := mcpcontent.CheckResource(item)
		if err != nil {
			return fmt.Sprintf("malformed resource contents (contents[%d]: %v)", i, err)
		}
		if u == uri || resourceuri.Key(u) == resourceuri.Key(uri) {
			continue
		}
		if _, ok := resourceuri.Match([]string{registration}, u); !ok {
			return fmt.Sprintf("contents naming another resource (contents[%d]: a uri neither the one read nor one its registration serves)", i)
		}
	}
	return ""
}
