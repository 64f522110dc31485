package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/sharedos/toolshare/authz-svc/internal/decisionlog"
	"github.com/sharedos/toolshare/authz-svc/internal/pdp"
	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/accesscontext"
	"github.com/sharedos/toolshare/services/contract/redact"
	"github.com/sharedos/toolshare/services/contract/requirement"
	"github.com/sharedos/toolshare/services/contract/toolname"
	"github.com/sharedos/toolshare/services/platform/telemetry"
)

// Request limits beyond the JSON limits of pdp.ParseObject.
const (
	// MaxFilterTools bounds one FilterTools call; the catalogue is paged
	// well below this.
	MaxFilterTools = 10_000
	// MaxResourceBytes bounds the resource string (the kernel refuses a
	// longer one before asking).
	MaxResourceBytes = requirement.MaxResourceBytes
	// MaxContextStringBytes bounds principal, tenant, each role and each
	// attribute key and value (services/contract/accesscontext).
	MaxContextStringBytes = accesscontext.MaxStringBytes
	// MaxRoles bounds the number of roles in a context.
	MaxRoles = accesscontext.MaxRoles
)

// Decider makes decisions; *pdp.Engine is the implementation.
type Decider interface {
	Decide(ctx context.Context, req pdp.Request) (pdp.Decision, string, error)
	DecideTools(ctx context.Context, c pdp.Context, action string, tools []pdp.Tool) ([]pdp.Decision, string, error)
}

var _ Decider = (*pdp.Engine)(nil)

// Server implements sharedosv1.AuthzServiceServer.
type Server struct {
	sharedosv1.UnimplementedAuthzServiceServer
	decider  Decider
	log      decisionlog.Writer
	duration metric.Float64Histogram
}

var _ sharedosv1.AuthzServiceServer = (*Server)(nil)

// New returns a Server deciding with d and recording every decision in log.
// Decision latency goes to the global MeterProvider (telemetry.Setup).
func New(d Decider, log decisionlog.Writer) *Server {
	h, err := otel.Meter(telemetry.ScopeAuthz).Float64Histogram(telemetry.MetricAuthzDecisionDuration,
		metric.WithUnit("s"), metric.WithDescription("Time to decide one Authorize or FilterTools request."))
	if err != nil {
		otel.Handle(err)
	}
	return &Server{decider: d, log: log, duration: h}
}

// observe records the decision's latency by kind and result.
func (s *Server) observe(ctx context.Context, rec *decisionlog.Record) {
	if s.duration == nil {
		return
	}
	s.duration.Record(context.WithoutCancel(ctx), rec.Duration.Seconds(), metric.WithAttributes(
		attribute.String(telemetry.AttrAuthzKind, rec.Kind), attribute.String(telemetry.AttrAuthzResult, rec.Result)))
}

// Authorize decides one call.
func (s *Server) Authorize(ctx context.Context, in *sharedosv1.AuthorizeRequest) (*sharedosv1.AuthorizeResponse, error) {
	start := time.Now()
	req, err := authorizeRequest(in)
	if err != nil {
		return nil, toStatus(err, "", "")
	}
	id := newDecisionID()
	d, rev, err := s.decider.Decide(ctx, req)

	// The resource is built from the arguments, and a reason or an
	// evaluation error may quote them: the record carries their
	// argument-derived parts as digests, like the arguments (invariant 11).
	// Keys too: a key can carry data (a path used as a key). Outside the
	// evaluation's deadline, so bounded: past redact.MaxValues values the
	// texts are replaced whole.
	args := redact.KeysAndValuesOf(in.GetArgumentsJson())
	if uri, ok := readURI(req); ok {
		args = args.With(uri)
	}
	rec := decisionlog.Record{
		Kind:            decisionlog.KindAuthorize,
		DecisionID:      id,
		Revision:        rev,
		Principal:       req.Context.Principal,
		Tenant:          req.Context.Tenant,
		Roles:           req.Context.Roles,
		Tool:            req.Tool.Name,
		Action:          req.Action,
		Resource:        args.Redact(req.Resource),
		ArgumentsDigest: redact.ArgumentsDigest(in.GetArgumentsJson()),
		CallID:          in.GetCallId(),
		TurnID:          in.GetTurnId(),
	}
	finish(ctx, &rec, start, err, d)
	rec.Reason = args.Redact(rec.Reason)
	rec.Error = args.Redact(rec.Error)
	s.log.Write(ctx, rec)
	s.observe(ctx, &rec)
	annotate(ctx, id, rev, req.Action, err == nil && d.Allow)
	if err != nil {
		return nil, toStatus(err, id, rev)
	}
	resp := &sharedosv1.AuthorizeResponse{
		Decision:       sharedosv1.Decision_DECISION_DENY,
		Reason:         d.Reason,
		DecisionId:     id,
		PolicyRevision: rev,
	}
	if d.Allow {
		resp.Decision = sharedosv1.Decision_DECISION_ALLOW
	}
	return resp, nil
}

// readURI is the URI a resources/read names (ADR 0018: read on
// resource:<uri>, no arguments): the model chose it, a template's variables
// may carry data, so the record treats it as an argument value.
func readURI(req pdp.Request) (string, bool) {
	if req.Tool.Class != requirement.ClassResource {
		return "", false
	}
	uri, ok := strings.CutPrefix(req.Resource, resourcePrefix)
	return uri, ok && uri != ""
}

// resourcePrefix begins the resource of a resources/read.
const resourcePrefix = "resource:"

// FilterTools decides which of the given tools the context may see.
func (s *Server) FilterTools(ctx context.Context, in *sharedosv1.FilterToolsRequest) (*sharedosv1.FilterToolsResponse, error) {
	start := time.Now()
	c, action, tools, err := filterRequest(in)
	if err != nil {
		return nil, toStatus(err, "", "")
	}
	id := newDecisionID()
	ds, rev, err := s.decider.DecideTools(ctx, c, action, tools)

	allowed := make([]string, 0, len(tools))
	if err == nil {
		for i, d := range ds {
			if d.Allow {
				allowed = append(allowed, tools[i].Name)
			}
		}
	}
	rec := decisionlog.Record{
		Kind:         decisionlog.KindFilterTools,
		DecisionID:   id,
		Revision:     rev,
		Principal:    c.Principal,
		Tenant:       c.Tenant,
		Roles:        c.Roles,
		Action:       action,
		ToolCount:    len(tools),
		AllowedTools: allowed,
	}
	finish(ctx, &rec, start, err, pdp.Decision{Allow: len(allowed) > 0})
	rec.Reason = ""
	s.log.Write(ctx, rec)
	s.observe(ctx, &rec)
	annotate(ctx, id, rev, action, err == nil && len(allowed) > 0)
	if err != nil {
		return nil, toStatus(err, id, rev)
	}
	return &sharedosv1.FilterToolsResponse{AllowedTools: allowed, DecisionId: id, PolicyRevision: rev}, nil
}

// finish fills the result fields of rec.
func finish(ctx context.Context, rec *decisionlog.Record, start time.Time, err error, d pdp.Decision) {
	rec.Duration = time.Since(start)
	switch {
	case err != nil:
		rec.Result = decisionlog.ResultError
		rec.Error = err.Error()
		if ctx.Err() != nil && !errors.Is(err, context.DeadlineExceeded) {
			rec.Error += " (request cancelled)"
		}
	case d.Allow:
		rec.Result = decisionlog.ResultAllow
		rec.Reason = d.Reason
	default:
		rec.Result = decisionlog.ResultDeny
		rec.Reason = d.Reason
	}
}

// annotate puts the decision on the RPC's span (created by otelgrpc), so a
// trace links to the decision record.
func annotate(ctx context.Context, id, rev, action string, allowed bool) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(
		attribute.String(telemetry.AttrDecisionID, id),
		attribute.String(telemetry.AttrPolicyRevision, rev),
		attribute.String(telemetry.AttrAuthzAction, action),
		attribute.Bool(telemetry.AttrAuthzAllowed, allowed),
	)
}

// newDecisionID returns 128 random bits in hex. crypto/rand.Read never
// fails (it aborts the process instead), so ids are always unique-grade.
func newDecisionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func authorizeRequest(in *sharedosv1.AuthorizeRequest) (pdp.Request, error) {
	c, err := accessContext(in.GetContext())
	if err != nil {
		return pdp.Request{}, err
	}
	if in.GetTool() == nil {
		return pdp.Request{}, invalid("tool", "is required")
	}
	tool, err := toolFacts("tool", in.GetTool())
	if err != nil {
		return pdp.Request{}, err
	}
	if !requirement.IsCallAction(in.GetAction()) {
		// list is for FilterTools only: a call is never authorized by a
		// policy's list rule, which may allow before any resource check.
		return pdp.Request{}, invalid("action", "must be one of %s, got %q", strings.Join(requirement.CallActions(), ", "), clip(in.GetAction()))
	}
	if len(in.GetResource()) > MaxResourceBytes {
		return pdp.Request{}, invalid("resource", "must be at most %d bytes", MaxResourceBytes)
	}
	args, err := pdp.ParseObject(in.GetArgumentsJson())
	if err != nil {
		return pdp.Request{}, jsonField("arguments_json", err)
	}
	return pdp.Request{Context: c, Tool: tool, Action: in.GetAction(), Resource: in.GetResource(), Arguments: args}, nil
}

func filterRequest(in *sharedosv1.FilterToolsRequest) (pdp.Context, string, []pdp.Tool, error) {
	c, err := accessContext(in.GetContext())
	if err != nil {
		return pdp.Context{}, "", nil, err
	}
	action := in.GetAction()
	if action == "" {
		action = requirement.ActionList
	}
	if !requirement.IsAction(action) {
		return pdp.Context{}, "", nil, invalid("action", "must be empty (list) or one of %s, got %q", strings.Join(requirement.Actions(), ", "), clip(action))
	}
	if n := len(in.GetTools()); n > MaxFilterTools {
		return pdp.Context{}, "", nil, invalid("tools", "must hold at most %d tools, got %d", MaxFilterTools, n)
	}
	tools := make([]pdp.Tool, len(in.GetTools()))
	for i, t := range in.GetTools() {
		field := fmt.Sprintf("tools[%d]", i)
		if t == nil {
			return pdp.Context{}, "", nil, invalid(field, "is required")
		}
		if tools[i], err = toolFacts(field, t); err != nil {
			return pdp.Context{}, "", nil, err
		}
	}
	return c, action, tools, nil
}

func accessContext(c *sharedosv1.AccessContext) (pdp.Context, error) {
	// One owner for the context's rules: the bridge, the kernel and the
	// catalogue refuse by the same check before they ask.
	if e := accesscontext.Check(c); e != nil {
		return pdp.Context{}, &fieldError{Field: e.Field, Rule: e.Rule}
	}
	return pdp.Context{
		Principal:  c.GetPrincipal(),
		Tenant:     c.GetTenant(),
		Roles:      c.GetRoles(),
		Attributes: c.GetAttributes(),
	}, nil
}

// maxResourceName bounds a resource entry's name (its registration's URI).
const maxResourceName = 2048

func toolFacts(field string, t *sharedosv1.ToolFacts) (pdp.Tool, error) {
	if t.GetClass() == requirement.ClassResource {
		// A resource entry is named by its URI (ADR 0018), not a tool name.
		if n := t.GetName(); n == "" || len(n) > maxResourceName || !utf8.ValidString(n) ||
			strings.ContainsFunc(n, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return pdp.Tool{}, invalid(field+".name", "a resource is named by its URI: 1 to %d bytes of UTF-8 without control characters", maxResourceName)
		}
	} else if err := toolname.ValidateField(field+".name", t.GetName()); err != nil {
		var te *toolname.Error
		if errors.As(err, &te) {
			return pdp.Tool{}, &fieldError{Field: te.Field, Rule: "violates " + te.Rule + ": " + te.Detail}
		}
		return pdp.Tool{}, invalid(field+".name", "%v", err)
	}
	ann, err := pdp.ParseSharedObject(t.GetAnnotationsJson())
	if err != nil {
		return pdp.Tool{}, jsonField(field+".annotations_json", err)
	}
	return pdp.Tool{
		Name:        t.GetName(),
		Namespace:   t.GetNamespace(),
		Class:       t.GetClass(),
		Source:      t.GetSource(),
		Annotations: ann,
	}, nil
}

func jsonField(field string, err error) error {
	var je *pdp.JSONError
	if errors.As(err, &je) {
		return &fieldError{Field: field, Rule: je.Rule}
	}
	return invalid(field, "%v", err)
}

// clip keeps an echoed, caller-supplied value short in error messages.
func clip(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}
