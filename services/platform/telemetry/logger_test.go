package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/sharedos/toolshare/services/platform/telemetry"
)

func decodeLines(t *testing.T, b *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	dec := json.NewDecoder(b)
	for dec.More() {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

func TestLoggerAddsTraceIDs(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	ctx, span := tp.Tracer("test").Start(context.Background(), "op")
	defer span.End()
	sc := span.SpanContext()

	var buf bytes.Buffer
	log := telemetry.NewLogger(&buf, "sharedos-test", slog.LevelInfo)
	log.InfoContext(ctx, "with span")
	log.Info("without span")
	log.With("k", "v").WithGroup("g").InfoContext(ctx, "derived", "x", 1)
	log.DebugContext(ctx, "below level")

	lines := decodeLines(t, &buf)
	if len(lines) != 3 {
		t.Fatalf("got %d lines, want 3 (debug filtered): %v", len(lines), lines)
	}
	if lines[0][telemetry.LogKeyTraceID] != sc.TraceID().String() || lines[0][telemetry.LogKeySpanID] != sc.SpanID().String() {
		t.Errorf("line with span = %v, want trace_id %s span_id %s", lines[0], sc.TraceID(), sc.SpanID())
	}
	if lines[0][telemetry.LogKeyService] != "sharedos-test" {
		t.Errorf("service = %v", lines[0][telemetry.LogKeyService])
	}
	if _, ok := lines[1][telemetry.LogKeyTraceID]; ok {
		t.Errorf("line without span has a trace_id: %v", lines[1])
	}
	// Even below WithGroup the ids stay top-level, where correlation looks.
	g, _ := lines[2]["g"].(map[string]any)
	if lines[2]["k"] != "v" || lines[2][telemetry.LogKeyTraceID] != sc.TraceID().String() ||
		lines[2][telemetry.LogKeySpanID] != sc.SpanID().String() || g["x"] != float64(1) {
		t.Errorf("derived logger line = %v, want k=v, top-level trace ids and g.x=1", lines[2])
	}
	if _, nested := g[telemetry.LogKeyTraceID]; nested {
		t.Errorf("trace_id nested in group: %v", lines[2])
	}
}

func TestLoggerLevelFromEnv(t *testing.T) {
	t.Setenv(telemetry.LogLevelEnv, "warn")
	if telemetry.Logger("svc").Enabled(context.Background(), slog.LevelInfo) {
		t.Error("info enabled with SHAREDOS_LOG_LEVEL=warn")
	}
	t.Setenv(telemetry.LogLevelEnv, "debug")
	if !telemetry.Logger("svc").Enabled(context.Background(), slog.LevelDebug) {
		t.Error("debug disabled with SHAREDOS_LOG_LEVEL=debug")
	}
	t.Setenv(telemetry.LogLevelEnv, "loud")
	l := telemetry.Logger("svc")
	if l.Enabled(context.Background(), slog.LevelDebug) || !l.Enabled(context.Background(), slog.LevelInfo) {
		t.Error("an unknown level must fall back to info")
	}
}
