package telemetry

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// A parent from another process — a harness's traceparent at the bridge —
// decides nothing: its sampled flag neither forces a trace past the
// operator's ratio nor turns tracing of its calls off (review finding).
// A local parent is followed, and an unknown sampler is refused.
func TestARemoteParentDoesNotDecideSampling(t *testing.T) {
	traceID := trace.TraceID{0: 1}
	decide := func(t *testing.T, parent trace.SpanContext) bool {
		t.Helper()
		s, err := sampler()
		if err != nil {
			t.Fatal(err)
		}
		ctx := trace.ContextWithSpanContext(context.Background(), parent)
		res := s.ShouldSample(sdktrace.SamplingParameters{ParentContext: ctx, TraceID: traceID, Name: "tools/call x"})
		return res.Decision == sdktrace.RecordAndSample
	}
	remote := func(sampled bool) trace.SpanContext {
		flags := trace.TraceFlags(0)
		if sampled {
			flags = trace.FlagsSampled
		}
		return trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: trace.SpanID{0: 2}, TraceFlags: flags, Remote: true})
	}
	t.Run("ratio 0", func(t *testing.T) {
		t.Setenv("OTEL_TRACES_SAMPLER", "parentbased_traceidratio")
		t.Setenv("OTEL_TRACES_SAMPLER_ARG", "0")
		if decide(t, remote(true)) {
			t.Error("a remote parent's sampled flag forced a trace the ratio 0 drops")
		}
	})
	t.Run("default", func(t *testing.T) {
		t.Setenv("OTEL_TRACES_SAMPLER", "")
		if !decide(t, remote(false)) {
			t.Error("a remote parent's unsampled flag turned tracing off")
		}
		local := trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: trace.SpanID{0: 2}})
		if decide(t, local) {
			t.Error("an unsampled local parent was not followed")
		}
	})
	for _, bad := range [][2]string{{"jaeger_remote", ""}, {"parentbased_traceidratio", "2"}, {"traceidratio", "x"}} {
		t.Setenv("OTEL_TRACES_SAMPLER", bad[0])
		t.Setenv("OTEL_TRACES_SAMPLER_ARG", bad[1])
		if _, err := sampler(); err == nil {
			t.Errorf("sampler %s %q accepted", bad[0], bad[1])
		}
	}
}
