package grpcx_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sharedos/toolshare/services/platform/grpcx"
)

// installTracer installs a tracer provider recording into the exporter it
// returns, until the test ends.
func installTracer(t *testing.T) *tracetest.InMemoryExporter {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() {
		otel.SetTracerProvider(prev)
		_ = tp.Shutdown(context.Background())
	})
	return exp
}

func TestHealthChecksAreNotTraced(t *testing.T) {
	exp := installTracer(t)

	f := start(t, grpcx.ServerOptions{})
	check(t, f.cc, "")
	if err := f.call(context.Background(), "Deadline", new(durationpb.Duration)); err != nil {
		t.Fatal(err)
	}
	if err := f.stop(); err != nil {
		t.Fatal(err)
	}

	var names []string
	for _, s := range exp.GetSpans() {
		names = append(names, s.Name)
	}
	joined := strings.Join(names, ",")
	if !strings.Contains(joined, probeService+"/Deadline") {
		t.Errorf("spans %v: the probe call was not traced", names)
	}
	if strings.Contains(joined, "grpc.health.v1.Health") {
		t.Errorf("spans %v: health checks were traced", names)
	}
}

// TestTraceContextCrossesWithNothingExported: with no tracer or meter
// provider installed (the propagator alone serves:
// TestOtelgrpcOnlyWithAProvider), a call still carries its trace context to the server, whose handler
// reads the caller's trace and span ids; a call without one carries none.
// With a provider installed (before the server and client are made, as
// telemetry.Setup is) otelgrpc makes the spans: the server's, in the same
// trace, under the client's.
func TestTraceContextCrossesWithNothingExported(t *testing.T) {
	prevProp := otel.GetTextMapPropagator()
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	t.Cleanup(func() { otel.SetTextMapPropagator(prevProp) })

	f := start(t, grpcx.ServerOptions{})
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: trace.FlagsSampled,
	})
	seen := func(ctx context.Context) string {
		t.Helper()
		if f == nil {
			t.Fatal("no fixture")
		}
		got := new(wrapperspb.StringValue)
		if err := f.call(ctx, "Trace", got); err != nil {
			t.Fatal(err)
		}
		return got.GetValue()
	}

	if got, want := seen(trace.ContextWithSpanContext(context.Background(), sc)), sc.TraceID().String()+" "+sc.SpanID().String()+" remote=true"; got != want {
		t.Errorf("the server saw %q, want the caller's %q", got, want)
	}
	if got := seen(context.Background()); got != "none" {
		t.Errorf("a call without a trace context: the server saw %q, want none", got)
	}

	exp := installTracer(t)
	f = start(t, grpcx.ServerOptions{}) // otelgrpc takes the provider installed when it is made
	got := seen(trace.ContextWithSpanContext(context.Background(), sc))
	var client, server trace.SpanID
	var serverParent trace.SpanID
	// The server's span ends once its answer is on the wire, which the
	// client may read first: wait until both spans are exported.
	for deadline := time.Now().Add(30 * time.Second); client == (trace.SpanID{}) || server == (trace.SpanID{}); {
		if time.Now().After(deadline) {
			t.Fatalf("spans exported: client %s, server %s; want both", client, server)
		}
		for _, s := range exp.GetSpans() {
			if !strings.HasSuffix(s.Name, "/Trace") {
				continue
			}
			switch s.SpanKind {
			case trace.SpanKindClient:
				client = s.SpanContext.SpanID()
			case trace.SpanKindServer:
				server, serverParent = s.SpanContext.SpanID(), s.Parent.SpanID()
			}
		}
		if client == (trace.SpanID{}) || server == (trace.SpanID{}) {
			time.Sleep(time.Millisecond)
		}
	}
	if want := sc.TraceID().String() + " " + server.String() + " remote=false"; got != want || client == (trace.SpanID{}) || serverParent != client {
		t.Errorf("instrumented: the server saw %q, want %q: its own span (parent %s) under the client span %s", got, want, serverParent, client)
	}
}
