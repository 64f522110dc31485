package grpcx

import (
	"context"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc/filters"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/stats"
)

// A server's or client's RPCs go through otelgrpc's stats handler when a
// tracer or meter provider is installed as it is built (telemetry.SetupWith
// installs them, before any server or client, only when something exports
// or scrapes; otelgrpc itself takes the provider installed then). With
// neither, its spans are non-recording and its instruments no-ops, yet it
// still built a span and an attribute set per RPC — 3–8 % of each service's
// CPU in the c=16 profiles (docs/benchmarks.md). Then only what must still
// happen is done: the trace context (W3C traceparent and baggage, through
// otel's global propagator) is read from a request's metadata and written
// into the next hop's, so log lines keep the caller's trace id and a
// service that does export joins the caller's trace. Tracing that records
// through otel's default provider without installing one (eBPF
// auto-instrumentation) sees no gRPC spans of a server built that way.

// Providers otel serves before one is installed.
var (
	defaultTracerProvider = otel.GetTracerProvider()
	defaultMeterProvider  = otel.GetMeterProvider()
)

// instrumented reports whether a tracer or meter provider is installed.
func instrumented() bool {
	return otel.GetTracerProvider() != defaultTracerProvider || otel.GetMeterProvider() != defaultMeterProvider
}

func newServerTelemetry() stats.Handler {
	if instrumented() {
		// Health checks are not traced: probes would flood the traces.
		return otelgrpc.NewServerHandler(otelgrpc.WithFilter(filters.Not(filters.HealthCheck())))
	}
	return propagator{server: true}
}

func newClientTelemetry() stats.Handler {
	if instrumented() {
		// Filtered on this side too: a client's health polling would
		// otherwise flood the traces just like the probes.
		return otelgrpc.NewClientHandler(otelgrpc.WithFilter(filters.Not(filters.HealthCheck())))
	}
	return propagator{}
}

// propagator is the stats handler of a server or client built with no
// provider installed: the trace context alone.
type propagator struct{ server bool }

func (p propagator) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context {
	if p.server {
		return otel.GetTextMapPropagator().Extract(ctx, incomingCarrier{ctx})
	}
	if !trace.SpanContextFromContext(ctx).IsValid() && baggage.FromContext(ctx).Len() == 0 {
		return ctx // nothing to carry
	}
	md, ok := metadata.FromOutgoingContext(ctx) // a copy
	if !ok {
		md = metadata.MD{}
	}
	otel.GetTextMapPropagator().Inject(ctx, mdCarrier(md))
	return metadata.NewOutgoingContext(ctx, md)
}

func (propagator) HandleRPC(context.Context, stats.RPCStats) {}

func (propagator) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }

func (propagator) HandleConn(context.Context, stats.ConnStats) {}

// incomingCarrier reads a request's metadata for otel's propagators
// without copying all of it (metadata.FromIncomingContext copies).
type incomingCarrier struct{ ctx context.Context }

func (c incomingCarrier) Get(key string) string {
	if v := metadata.ValueFromIncomingContext(c.ctx, key); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (incomingCarrier) Set(string, string) {} // extraction only

func (c incomingCarrier) Keys() []string {
	md, _ := metadata.FromIncomingContext(c.ctx)
	return mdCarrier(md).Keys()
}

// mdCarrier is gRPC metadata as otel's propagation carrier.
type mdCarrier metadata.MD

func (c mdCarrier) Get(key string) string {
	if v := metadata.MD(c).Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (c mdCarrier) Set(key, value string) { metadata.MD(c).Set(key, value) }

func (c mdCarrier) Keys() []string {
	out := make([]string, 0, len(c))
	for k := range c {
		out = append(out, k)
	}
	return out
}
