package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/sharedos/toolshare/bridge-svc/internal/forward"
	"github.com/sharedos/toolshare/bridge-svc/internal/leases"
	"github.com/sharedos/toolshare/bridge-svc/internal/protocol"
	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/outcome"
	"github.com/sharedos/toolshare/services/contract/resourceuri"
)

// Prompts and resources of a turn (ADR 0018): the pinned ones are served
// through mcp-go, each prompts/get and resources/read an attempt of the
// kernel; one that names nothing pinned is refused here, recorded by the
// kernel all the same. Their results have no error form, so a refusal is
// a JSON-RPC error carrying the outcome.
//
// Which pinned resource a URI reads is resourceuri.Match's word, as it is
// the kernel's. mcp-go has a matcher of its own (RFC 6570 through
// yosida95/uritemplate), whose {var} takes only unreserved and
// pct-encoded characters: it finds no handler for test://template/a:b/data
// though the turn pinned test://template/{id}/data. So a BeforeReadResource
// hook (pinnedEntries.beforeRead) hands mcp-go a stand-in URI its matcher
// finds the template by, and keeps the URI requested in the request's
// state; the resource handler reads that one.

// JSON-RPC codes of refused prompts/get and resources/read.
const (
	// CodeDenied: the policy (or the turn) says no.
	CodeDenied = -32001
	// CodeFailed: the attempt could not be carried out.
	CodeFailed = -32603
)

// attemptKinds are the methods that are kernel attempts, by kind.
var attemptKinds = map[string]sharedosv1.CallKind{
	"tools/call":     sharedosv1.CallKind_CALL_KIND_UNSPECIFIED,
	"prompts/get":    sharedosv1.CallKind_CALL_KIND_PROMPT,
	"resources/read": sharedosv1.CallKind_CALL_KIND_RESOURCE,
}

// pinnedEntries are a lease's prompt names and resource URIs (templates).
type pinnedEntries struct {
	prompts map[string]bool
	// resources match a URI to the pinned resource it reads, each
	// template compiled once for the lease.
	resources *resourceuri.Matcher
	// standIns are, by pinned template, a URI mcp-go's matcher finds that
	// template by (standIn).
	standIns map[string]string
}

func pinnedOf(l *leases.Lease) pinnedEntries {
	p := pinnedEntries{prompts: make(map[string]bool, len(l.Prompts)), standIns: make(map[string]string)}
	for _, pr := range l.Prompts {
		p.prompts[pr.GetName()] = true
	}
	uris := make([]string, 0, len(l.Resources))
	for _, r := range l.Resources {
		uris = append(uris, r.GetUri())
		if r.GetTemplate() {
			if s, ok := standIn(r.GetUri()); ok {
				p.standIns[r.GetUri()] = s
			}
		}
	}
	p.resources = resourceuri.NewMatcher(uris)
	return p
}

// standIn is a URI mcp-go's matcher finds template tmpl by, as addEntries
// registers it: each {var} stands for "x", a value every matcher takes. ok
// is false when mcp-go would not find tmpl by it all the same.
func standIn(tmpl string) (string, bool) {
	if resourceuri.CheckTemplate(tmpl) != nil {
		return "", false // not served (addEntries)
	}
	s := resourceuri.Var.ReplaceAllLiteralString(tmpl, "x")
	return s, mcp.NewResourceTemplate(tmpl, "").URITemplate.Regexp().MatchString(s)
}

// beforeRead is the BeforeReadResource hook. When the URI requested reads
// a pinned template (resourceuri.Match), mcp-go is handed the template's
// stand-in, which its own matcher cannot fail to find, and the request's
// state keeps the URI requested for the resource handler: every URI the
// bridge and the kernel take for pinned reaches the kernel as the
// handler's attempt, with its one record. (Every pinned resource has the
// same handler, so whichever entry mcp-go finds the stand-in by serves it.)
func (p pinnedEntries) beforeRead(ctx context.Context, _ any, req *mcp.ReadResourceRequest) {
	lookingUp(ctx)
	st := stateFrom(ctx)
	if st == nil {
		return // nowhere to keep the URI requested: mcp-go's lookup alone
	}
	tmpl, ok := p.resources.Match(req.Params.URI)
	if s, has := p.standIns[tmpl]; ok && has {
		st.resourceURI, req.Params.URI = req.Params.URI, s
	}
}

// pinned reports whether a prompts/get or resources/read names something
// the turn pinned (mcp-go serves only those).
func (p pinnedEntries) pinned(kind sharedosv1.CallKind, target string) bool {
	if kind == sharedosv1.CallKind_CALL_KIND_PROMPT {
		return p.prompts[target]
	}
	_, ok := p.resources.Match(target)
	return ok
}

// entryError is the JSON-RPC error of a refused prompt or resource attempt:
// the model's text as message, the outcome as data; a resource no pinned
// registration has is -32602 with data.uri (SEP-2164).
func entryError(kind sharedosv1.CallKind, target string, res *sharedosv1.ToolResult) *protocol.RPCError {
	data := map[string]any{outcome.MetaKey: outcome.Meta(res)}
	code := CodeFailed
	switch {
	case res.GetCode() == outcome.ToolUnavailable || res.GetCode() == outcome.InvalidArguments:
		code = protocol.CodeInvalidParams
		if kind == sharedosv1.CallKind_CALL_KIND_RESOURCE && res.GetCode() == outcome.ToolUnavailable {
			data["uri"] = target
			return &protocol.RPCError{Code: code, Message: "Resource not found: " + outcome.Text(res), Data: data}
		}
	case res.GetStatus() == sharedosv1.OperationStatus_OPERATION_STATUS_DENIED:
		code = CodeDenied
	}
	msg := outcome.Text(res)
	if msg == "" {
		msg = fmt.Sprintf("the %s was not served (%s)", map[sharedosv1.CallKind]string{sharedosv1.CallKind_CALL_KIND_PROMPT: "prompt",
			sharedosv1.CallKind_CALL_KIND_RESOURCE: "resource"}[kind], outcome.StatusName(res.GetStatus()))
	}
	return &protocol.RPCError{Code: code, Message: msg, Data: data}
}

// inputRequest is the forward.Request part every attempt (tool, prompt,
// resource) takes from its request: the era and its input rounds.
func inputRequest(st *callState) forward.Request {
	var fr forward.Request
	if st != nil && st.msg != nil {
		fr.Modern = st.modern
		fr.InputMethods = protocol.InputMethods(st.msg.ClientCapabilities)
		fr.InputResponses = st.msg.InputResponses
		fr.RequestState, fr.HasRequestState = st.msg.RequestState, st.msg.HasRequestState
		if !st.modern {
			fr.Ask, fr.InputMethods = st.ask, st.inputMethods
		}
	}
	return fr
}

// entryHandlers are the mcp-go handlers of a turn's prompts and resources.
type entryHandlers struct {
	fwd  *forward.Forwarder
	turn *forward.Turn
}

// attempt runs one prompt or resource attempt for a handler: the kernel's
// successful result, a sealed round, or the error to answer with (the
// request is then answered by the response writer: callState.replaced).
func (e entryHandlers) attempt(ctx context.Context, kind sharedosv1.CallKind, target string, args json.RawMessage) (*sharedosv1.ToolResult, *forward.Sealed, error) {
	st := stateFrom(ctx)
	if st != nil {
		st.handled.Store(true)
	}
	res, sealed, rerr, ok := e.fwd.Entry(ctx, e.turn, kind, target, args, inputRequest(st))
	switch {
	case !ok:
		if st != nil {
			st.cancelled.Store(true)
		}
		return nil, nil, errCancelled
	case rerr == nil && sealed == nil && res.GetStatus() != sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED:
		rerr = entryError(kind, target, res)
	}
	if rerr != nil {
		return nil, nil, replaced(st, rerr)
	}
	return res, sealed, nil
}

// replaced has the request answered with rerr by the response writer
// (callState.replaced) in place of mcp-go's answer.
func replaced(st *callState, rerr *protocol.RPCError) error {
	if st != nil {
		if st.msg != nil {
			rerr.ID = st.msg.ID
		}
		st.replaced.Store(rerr)
	}
	return errReplaced
}

func (e entryHandlers) prompt(ctx context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	args, _ := json.Marshal(req.Params.Arguments)
	if req.Params.Arguments == nil {
		args = []byte(`{}`)
	}
	res, sealed, err := e.attempt(ctx, sharedosv1.CallKind_CALL_KIND_PROMPT, req.Params.Name, args)
	if err != nil {
		return nil, err
	}
	if sealed != nil {
		return &mcp.GetPromptResult{Result: mcp.Result{ResultType: mcp.ResultTypeInputRequired},
			MultiRoundTripResult: mcp.MultiRoundTripResult{InputRequests: sealed.Requests, RequestState: sealed.State}}, nil
	}
	// The kernel checked the messages as they are read here
	// (mcpcontent.CheckMessage), so its record says failed for those that
	// do not read. One that did not (an older kernel) is answered failed
	// with its outcome, as a tools/call's content is (forward.toMCP) —
	// never with the decoder's error, which names Go's types.
	malformed := func() (*mcp.GetPromptResult, error) {
		failed := outcome.Failed(outcome.HandlerError, "the prompt's provider answered with messages that are not MCP prompt messages")
		failed.CallId, failed.DecisionId = res.GetCallId(), res.GetDecisionId()
		return nil, replaced(stateFrom(ctx), entryError(sharedosv1.CallKind_CALL_KIND_PROMPT, req.Params.Name, failed))
	}
	var raw []struct {
		Role    mcp.Role        `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(res.GetContentJson(), &raw); err != nil {
		return malformed()
	}
	out := &mcp.GetPromptResult{Description: res.GetDescription(), Messages: make([]mcp.PromptMessage, 0, len(raw))}
	for _, m := range raw {
		c, err := mcp.UnmarshalContent(m.Content)
		if err != nil {
			return malformed()
		}
		out.Messages = append(out.Messages, mcp.PromptMessage{Role: m.Role, Content: c})
	}
	return out, nil
}

func (e entryHandlers) resource(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
	uri := req.Params.URI
	if st := stateFrom(ctx); st != nil && st.resourceURI != "" {
		uri = st.resourceURI // mcp-go was handed a stand-in (beforeRead)
	}
	res, _, err := e.attempt(ctx, sharedosv1.CallKind_CALL_KIND_RESOURCE, uri, nil)
	if err != nil {
		return nil, err
	}
	var raw []map[string]any
	if err := json.Unmarshal(res.GetContentJson(), &raw); err != nil {
		return nil, fmt.Errorf("resource contents: %w", err)
	}
	out := make([]mcp.ResourceContents, 0, len(raw))
	for i, m := range raw {
		c, err := mcp.ParseResourceContents(m)
		if err != nil {
			return nil, fmt.Errorf("resource contents %d: %w", i, err)
		}
		out = append(out, c)
	}
	return out, nil
}

// addEntries registers the lease's prompts and resources on srv.
func addEntries(srv *server.MCPServer, l *leases.Lease, h entryHandlers) {
	for _, p := range l.Prompts {
		opts := []mcp.PromptOption{mcp.WithPromptDescription(p.GetDescription())}
		if p.GetTitle() != "" {
			opts = append(opts, mcp.WithPromptTitle(p.GetTitle()))
		}
		for _, a := range p.GetArguments() {
			aopts := []mcp.ArgumentOption{mcp.ArgumentDescription(a.GetDescription())}
			if a.GetRequired() {
				aopts = append(aopts, mcp.RequiredArgument())
			}
			opts = append(opts, mcp.WithArgument(a.GetName(), aopts...))
		}
		srv.AddPrompt(mcp.NewPrompt(p.GetName(), opts...), h.prompt)
	}
	for _, r := range l.Resources {
		if r.GetTemplate() {
			if resourceuri.CheckTemplate(r.GetUri()) != nil {
				// One the catalogue refuses now, pinned before it did:
				// mcp-go's NewResourceTemplate would panic on it. Not
				// served; a read of it is refused at the edge, recorded.
				continue
			}
			opts := []mcp.ResourceTemplateOption{mcp.WithTemplateDescription(r.GetDescription())}
			if r.GetMimeType() != "" {
				opts = append(opts, mcp.WithTemplateMIMEType(r.GetMimeType()))
			}
			srv.AddResourceTemplate(mcp.NewResourceTemplate(r.GetUri(), r.GetName(), opts...), h.resource)
			continue
		}
		opts := []mcp.ResourceOption{mcp.WithResourceDescription(r.GetDescription())}
		if r.GetMimeType() != "" {
			opts = append(opts, mcp.WithMIMEType(r.GetMimeType()))
		}
		srv.AddResource(mcp.NewResource(r.GetUri(), r.GetName(), opts...), h.resource)
	}
}

// lookingUp notes in the request's state that mcp-go looks its prompt or
// resource up (callState.lookedUp).
func lookingUp(ctx context.Context) {
	if st := stateFrom(ctx); st != nil {
		st.lookedUp.Store(true)
	}
}

// refuseUnpinned answers a prompts/get or resources/read that mcp-go
// checked and found nothing for, when it names nothing the turn pinned: the
// kernel records it (denied/tool_unavailable) and the client gets its
// JSON-RPC error. ok is false when the request names a pinned entry.
func (h *Handler) refuseUnpinned(w http.ResponseWriter, ctx context.Context, srv *turnServer, msg *protocol.Message) bool {
	kind, ok := attemptKinds[msg.Method]
	if !ok || kind == sharedosv1.CallKind_CALL_KIND_UNSPECIFIED || srv.entries.pinned(kind, msg.Target) {
		return false
	}
	res, _, rerr, done := h.cfg.Forwarder.Entry(ctx, srv.turn, kind, msg.Target, nil, forward.Request{})
	if !done {
		return true // the client left
	}
	if rerr == nil {
		rerr = entryError(kind, msg.Target, res)
	}
	rerr.ID = msg.ID
	modern := false
	if st := stateFrom(ctx); st != nil {
		modern = st.modern
	}
	writeRPCErrorStatus(w, protocol.ErrorStatus(modern, rerr.Code), rerr)
	return true
}
