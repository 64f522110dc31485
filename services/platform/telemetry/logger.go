package telemetry

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"

	"go.opentelemetry.io/otel/trace"
)

// LogLevelEnv names the environment variable that sets Logger's level
// (debug, info, warn, error; default info).
const LogLevelEnv = "SHAREDOS_LOG_LEVEL"

// Log attribute keys added from the context's span.
const (
	LogKeyTraceID = "trace_id"
	LogKeySpanID  = "span_id"
	LogKeyService = "service"
)

// Logger returns a JSON logger on stderr for service, at the level named by
// SHAREDOS_LOG_LEVEL. Records logged with a context that carries a valid span
// get trace_id and span_id.
func Logger(service string) *slog.Logger {
	return NewLogger(os.Stderr, service, levelFromEnv())
}

// NewLogger is Logger writing to w at level.
func NewLogger(w io.Writer, service string, level slog.Leveler) *slog.Logger {
	h := slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level})
	l := slog.New(NewTraceHandler(h))
	if service != "" {
		l = l.With(slog.String(LogKeyService, service))
	}
	return l
}

func levelFromEnv() slog.Level {
	var lvl slog.Level
	// An unparsable level falls back to info rather than failing startup:
	// the logger exists before any configuration error could be reported.
	if err := lvl.UnmarshalText([]byte(strings.TrimSpace(os.Getenv(LogLevelEnv)))); err != nil {
		return slog.LevelInfo
	}
	return lvl
}

// TraceHandler adds trace_id and span_id from the record's context to every
// record handled by the wrapped handler. The ids are always top-level keys,
// even below WithGroup, because log-to-trace correlation looks for them there.
type TraceHandler struct {
	root slog.Handler // the wrapped handler without derivations
	next slog.Handler // root with every WithAttrs/WithGroup applied
	// derive replays the derivations onto a root that already carries the
	// trace ids; only needed once a group is open.
	derive  []func(slog.Handler) slog.Handler
	grouped bool
}

var _ slog.Handler = (*TraceHandler)(nil)

// NewTraceHandler wraps next.
func NewTraceHandler(next slog.Handler) *TraceHandler {
	return &TraceHandler{root: next, next: next}
}

// Enabled implements slog.Handler.
func (h *TraceHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

// Handle implements slog.Handler.
func (h *TraceHandler) Handle(ctx context.Context, r slog.Record) error {
	if ctx == nil {
		return h.next.Handle(ctx, r)
	}
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return h.next.Handle(ctx, r)
	}
	ids := []slog.Attr{
		slog.String(LogKeyTraceID, sc.TraceID().String()),
		slog.String(LogKeySpanID, sc.SpanID().String()),
	}
	if !h.grouped {
		// Without an open group, record attrs are top-level: cheap path.
		r = r.Clone()
		r.AddAttrs(ids...)
		return h.next.Handle(ctx, r)
	}
	hh := h.root.WithAttrs(ids)
	for _, d := range h.derive {
		hh = d(hh)
	}
	return hh.Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (h *TraceHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return h.with(func(n slog.Handler) slog.Handler { return n.WithAttrs(attrs) }, false)
}

// WithGroup implements slog.Handler.
func (h *TraceHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return h.with(func(n slog.Handler) slog.Handler { return n.WithGroup(name) }, true)
}

func (h *TraceHandler) with(d func(slog.Handler) slog.Handler, group bool) *TraceHandler {
	return &TraceHandler{
		root:    h.root,
		next:    d(h.next),
		derive:  append(h.derive[:len(h.derive):len(h.derive)], d),
		grouped: h.grouped || group,
	}
}
