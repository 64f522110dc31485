package pgdb

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/sharedos/toolshare/services/platform/telemetry"
)

// Tracer is a pgx tracer that turns every query, batch and COPY FROM into an
// OpenTelemetry client span named "{db.operation.name} {db.collection.name}"
// (e.g. "INSERT catalog.operations"), per the database semantic conventions.
//
// It records what an operator needs to find a slow or failing statement —
// the operation, the table when it is cheap to tell, the database and, on
// failure, the SQLSTATE — and nothing a statement carries: no query text, no
// arguments, no error message. Arguments can be tool argument values or
// token hashes, and PostgreSQL error messages quote offending values
// ("invalid input syntax for type uuid: \"...\"", "Key (id)=(...) already
// exists"), so the span status says only "SQLSTATE 23505".
type Tracer struct {
	tracer   trace.Tracer
	roots    bool
	database string
}

var (
	_ pgx.QueryTracer    = (*Tracer)(nil)
	_ pgx.BatchTracer    = (*Tracer)(nil)
	_ pgx.CopyFromTracer = (*Tracer)(nil)
)

// TracerOption configures NewTracer.
type TracerOption func(*tracerOptions)

type tracerOptions struct {
	provider trace.TracerProvider
	roots    bool
	database string
}

// WithTracerProvider uses tp instead of the global provider (tests).
func WithTracerProvider(tp trace.TracerProvider) TracerOption {
	return func(o *tracerOptions) { o.provider = tp }
}

// WithRootSpans makes statements run without a span in their context start
// traces of their own. Off by default: those are background loops (lease
// sweepers, reconcilers, LISTEN connections) that would otherwise add one
// trace per tick and bury the per-request traces operators look for.
func WithRootSpans(on bool) TracerOption {
	return func(o *tracerOptions) { o.roots = on }
}

// WithDatabase records name as db.namespace on every span. It is taken
// once from the pool's configuration (Open does this) because pgx offers no
// allocation-free way to read it from a connection per statement.
func WithDatabase(name string) TracerOption {
	return func(o *tracerOptions) { o.database = name }
}

// NewTracer returns a tracer using the global TracerProvider unless
// WithTracerProvider says otherwise. The global provider is looked up through
// otel's delegate, so a tracer created before telemetry.Setup still exports.
func NewTracer(opts ...TracerOption) *Tracer {
	o := tracerOptions{}
	for _, opt := range opts {
		opt(&o)
	}
	var t trace.Tracer
	if o.provider != nil {
		t = o.provider.Tracer(telemetry.ScopePGDB)
	} else {
		t = otel.Tracer(telemetry.ScopePGDB)
	}
	return &Tracer{tracer: t, roots: o.roots, database: o.database}
}

// start opens a client span for op on collection, or returns ctx unchanged
// when the statement has no parent span and root spans are off.
func (t *Tracer) start(ctx context.Context, op, collection string, extra ...attribute.KeyValue) context.Context {
	if !t.roots && !trace.SpanContextFromContext(ctx).IsValid() {
		if _, ok := ownSpan(ctx); ok {
			// An outer statement's no-op span (no SDK installed): hide it
			// so this statement's end hook does not end it too.
			return context.WithValue(ctx, spanKey{}, nil)
		}
		return ctx
	}
	attrs := make([]attribute.KeyValue, 0, 4+len(extra))
	attrs = append(attrs, attribute.String(telemetry.AttrDBSystemName, telemetry.DBSystemPostgreSQL))
	if op != "" {
		attrs = append(attrs, attribute.String(telemetry.AttrDBOperationName, op))
	}
	if collection != "" {
		attrs = append(attrs, attribute.String(telemetry.AttrDBCollectionName, collection))
	}
	if t.database != "" {
		attrs = append(attrs, attribute.String(telemetry.AttrDBNamespace, t.database))
	}
	attrs = append(attrs, extra...)
	ctx, span := t.tracer.Start(ctx, spanName(op, collection),
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	return context.WithValue(ctx, spanKey{}, span)
}

// spanKey marks the span this tracer opened, so the end hooks never touch
// the caller's span when start declined to open one.
type spanKey struct{}

func ownSpan(ctx context.Context) (trace.Span, bool) {
	span, ok := ctx.Value(spanKey{}).(trace.Span)
	return span, ok
}

// end ends the span start opened (if any), marking it Error when err is a
// failure of the statement.
func end(ctx context.Context, err error) {
	span, ok := ownSpan(ctx)
	if !ok {
		return
	}
	setError(span, err)
	span.End()
}

// setError marks span failed with a description free of driver text.
func setError(span trace.Span, err error) {
	if err == nil || errors.Is(err, pgx.ErrNoRows) {
		// No rows is an answer, not a failure of the statement.
		return
	}
	kind := errorType(err)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		span.SetAttributes(attribute.String(telemetry.AttrDBResponseStatusCode, pgErr.Code))
	}
	span.SetAttributes(attribute.String(telemetry.AttrErrorType, kind))
	span.SetStatus(codes.Error, kind)
}

// errorType classifies err without its text: the SQLSTATE for server
// errors, a fixed word for the client-side failures worth telling apart.
func errorType(err error) string {
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr):
		return "SQLSTATE " + pgErr.Code
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case pgconn.Timeout(err):
		return "timeout"
	default:
		return "_OTHER"
	}
}

// TraceQueryStart implements pgx.QueryTracer.
func (t *Tracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	op, collection := summarize(data.SQL)
	return t.start(ctx, op, collection)
}

// TraceQueryEnd implements pgx.QueryTracer.
func (t *Tracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	end(ctx, data.Err)
}

// TraceBatchStart implements pgx.BatchTracer. A batch is one span; its
// statements are not spans of their own (their timing is not observable
// separately: they are pipelined).
func (t *Tracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	n := 0
	if data.Batch != nil {
		n = data.Batch.Len()
	}
	return t.start(ctx, "BATCH", "", attribute.Int(telemetry.AttrDBBatchSize, n))
}

// TraceBatchQuery implements pgx.BatchTracer: the first failing statement
// marks the batch span.
func (t *Tracer) TraceBatchQuery(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchQueryData) {
	if data.Err == nil {
		return
	}
	if span, ok := ownSpan(ctx); ok {
		setError(span, data.Err)
	}
}

// TraceBatchEnd implements pgx.BatchTracer.
func (t *Tracer) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchEndData) {
	end(ctx, data.Err)
}

// TraceCopyFromStart implements pgx.CopyFromTracer.
func (t *Tracer) TraceCopyFromStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceCopyFromStartData) context.Context {
	return t.start(ctx, "COPY", strings.Join(data.TableName, "."))
}

// TraceCopyFromEnd implements pgx.CopyFromTracer.
func (t *Tracer) TraceCopyFromEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceCopyFromEndData) {
	end(ctx, data.Err)
}

// spanName is "{operation} {collection}", falling back to the parts known
// and finally to the system name, as the conventions ask.
func spanName(op, collection string) string {
	switch {
	case op != "" && collection != "":
		return op + " " + collection
	case op != "":
		return op
	default:
		return telemetry.DBSystemPostgreSQL
	}
}

// summarize returns the statement's leading keyword (upper case) and, for
// the plain forms whose target is cheap to find, the table it acts on:
// INSERT INTO t, UPDATE t, DELETE FROM t, SELECT ... FROM t, TRUNCATE t.
// It reads words only, never literals, and gives up (empty collection)
// rather than guess.
func summarize(sql string) (op, collection string) {
	sc := scanner{s: sql}
	first := sc.word()
	if first == "" {
		return "", ""
	}
	op = strings.ToUpper(first)
	switch op {
	case "INSERT":
		if strings.EqualFold(sc.word(), "INTO") {
			collection = sc.ident()
		}
	case "UPDATE":
		w := sc.ident()
		if strings.EqualFold(w, "ONLY") {
			w = sc.ident()
		}
		collection = w
	case "DELETE":
		if strings.EqualFold(sc.word(), "FROM") {
			w := sc.ident()
			if strings.EqualFold(w, "ONLY") {
				w = sc.ident()
			}
			collection = w
		}
	case "TRUNCATE":
		w := sc.ident()
		if strings.EqualFold(w, "TABLE") {
			w = sc.ident()
		}
		collection = w
	case "SELECT":
		// The first FROM at nesting depth 0; a subquery or function call
		// there (FROM (SELECT ...), FROM unnest(...)) is not a table.
		if sc.skipToTopLevel("FROM") {
			w := sc.ident()
			if sc.peek() != '(' {
				collection = w
			}
		}
	}
	return op, collection
}

// scanner walks SQL text word by word, skipping whitespace, comments,
// string literals and quoted identifiers it is not asked for.
type scanner struct {
	s     string
	i     int
	depth int
}

func (sc *scanner) peek() byte {
	sc.skipSpace()
	if sc.i < len(sc.s) {
		return sc.s[sc.i]
	}
	return 0
}

func (sc *scanner) skipSpace() {
	for sc.i < len(sc.s) {
		c := sc.s[sc.i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
			sc.i++
		case c == '-' && strings.HasPrefix(sc.s[sc.i:], "--"):
			j := strings.IndexByte(sc.s[sc.i:], '\n')
			if j < 0 {
				sc.i = len(sc.s)
			} else {
				sc.i += j + 1
			}
		case c == '/' && strings.HasPrefix(sc.s[sc.i:], "/*"):
			j := strings.Index(sc.s[sc.i+2:], "*/")
			if j < 0 {
				sc.i = len(sc.s)
			} else {
				sc.i += j + 4
			}
		default:
			return
		}
	}
}

func isWordByte(c byte) bool {
	return c == '_' || c == '$' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

// word returns the next bare word, or "" when the next token is not one.
func (sc *scanner) word() string {
	sc.skipSpace()
	start := sc.i
	for sc.i < len(sc.s) && isWordByte(sc.s[sc.i]) {
		sc.i++
	}
	return sc.s[start:sc.i]
}

// ident returns the next possibly schema-qualified, possibly quoted
// identifier with the quotes removed, or "" when there is none.
func (sc *scanner) ident() string {
	sc.skipSpace()
	var parts []string
	for {
		if sc.i < len(sc.s) && sc.s[sc.i] == '"' {
			j := strings.IndexByte(sc.s[sc.i+1:], '"')
			if j < 0 {
				return ""
			}
			parts = append(parts, sc.s[sc.i+1:sc.i+1+j])
			sc.i += j + 2
		} else {
			w := sc.word()
			if w == "" || w[0] == '$' || w[0] >= '0' && w[0] <= '9' {
				return ""
			}
			parts = append(parts, w)
		}
		if sc.i < len(sc.s) && sc.s[sc.i] == '.' {
			sc.i++
			continue
		}
		return strings.Join(parts, ".")
	}
}

// skipToTopLevel advances past the next occurrence of keyword outside
// parentheses, literals and comments, reporting whether it was found.
func (sc *scanner) skipToTopLevel(keyword string) bool {
	for {
		sc.skipSpace()
		if sc.i >= len(sc.s) {
			return false
		}
		c := sc.s[sc.i]
		switch {
		case c == '(':
			sc.depth++
			sc.i++
		case c == ')':
			sc.depth--
			sc.i++
		case c == '\'' || c == '"':
			// A literal or quoted identifier: skip to its closing quote
			// (a doubled quote reopens, which the loop handles).
			j := strings.IndexByte(sc.s[sc.i+1:], c)
			if j < 0 {
				return false
			}
			sc.i += j + 2
		case c == '$' && sc.i+1 < len(sc.s) && (sc.s[sc.i+1] == '$' || !(sc.s[sc.i+1] >= '0' && sc.s[sc.i+1] <= '9')):
			// A dollar-quoted string: $tag$ ... $tag$.
			k := strings.IndexByte(sc.s[sc.i+1:], '$')
			if k < 0 {
				return false
			}
			tag := sc.s[sc.i : sc.i+k+2]
			j := strings.Index(sc.s[sc.i+len(tag):], tag)
			if j < 0 {
				return false
			}
			sc.i += len(tag) + j + len(tag)
		case isWordByte(c):
			w := sc.word()
			if sc.depth == 0 && strings.EqualFold(w, keyword) {
				return true
			}
		default:
			sc.i++
		}
	}
}
