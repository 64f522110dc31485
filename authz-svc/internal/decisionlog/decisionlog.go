package decisionlog

import (
	"context"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/sharedos/toolshare/services/platform/telemetry"
)

// Result values of a record.
const (
	ResultAllow = "allow"
	ResultDeny  = "deny"
	// ResultError is an evaluation that produced no decision (the caller got
	// a gRPC error, never a deny).
	ResultError = "error"
)

// Kinds of decision.
const (
	KindAuthorize   = "authorize"
	KindFilterTools = "filter_tools"
)

// Message is the slog message of every decision record, so a log pipeline
// can select them with one equality test.
const Message = "authz decision"

// Record is one decision.
type Record struct {
	Kind       string
	DecisionID string
	Revision   string
	Principal  string
	Tenant     string
	Roles      []string
	Tool       string
	Action     string
	Resource   string
	// ArgumentsDigest is Digest of the raw arguments bytes.
	ArgumentsDigest string
	Result          string
	Reason          string
	// Error is the evaluation error when Result is ResultError.
	Error    string
	CallID   string
	TurnID   string
	Duration time.Duration
	// FilterTools only: how many tools were asked about, and the allowed names.
	ToolCount    int
	AllowedTools []string
}

// Writer writes decision records.
type Writer interface {
	Write(ctx context.Context, r Record)
}

// Logger writes records as slog records at level INFO.
type Logger struct {
	l *slog.Logger
}

var _ Writer = (*Logger)(nil)

// New returns a Logger writing to h (for example a slog.JSONHandler on
// stderr). The handler should not itself add trace ids: Write adds them.
func New(h slog.Handler) *Logger {
	return &Logger{l: slog.New(h).With(slog.String("log_type", "decision"))}
}

// Write logs r. It never fails the request: a decision already made is not
// undone because its record could not be written.
func (lg *Logger) Write(ctx context.Context, r Record) {
	ctx = context.WithoutCancel(ctx)
	attrs := make([]slog.Attr, 0, 20)
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		attrs = append(attrs,
			slog.String("trace_id", sc.TraceID().String()),
			slog.String("span_id", sc.SpanID().String()))
	}
	attrs = append(attrs,
		slog.String("kind", r.Kind),
		slog.String("decision_id", r.DecisionID),
		slog.String("policy_revision", r.Revision),
		slog.String("principal", r.Principal),
		slog.String("tenant", r.Tenant),
		slog.Any("roles", r.Roles),
		slog.String("action", r.Action),
		slog.String("result", r.Result),
		slog.Int64("duration_us", r.Duration.Microseconds()),
	)
	if r.Kind == KindFilterTools {
		attrs = append(attrs,
			slog.Int("tool_count", r.ToolCount),
			slog.Any("allowed_tools", r.AllowedTools))
	} else {
		attrs = append(attrs,
			slog.String(telemetry.LogTool, r.Tool),
			slog.String("resource", r.Resource),
			slog.String("arguments_digest", r.ArgumentsDigest))
	}
	if r.Reason != "" {
		attrs = append(attrs, slog.String("reason", r.Reason))
	}
	if r.Error != "" {
		attrs = append(attrs, slog.String("error", r.Error))
	}
	if r.CallID != "" {
		attrs = append(attrs, slog.String(telemetry.LogCallID, r.CallID))
	}
	if r.TurnID != "" {
		attrs = append(attrs, slog.String(telemetry.LogTurnID, r.TurnID))
	}
	lg.l.LogAttrs(ctx, slog.LevelInfo, Message, attrs...)
}
