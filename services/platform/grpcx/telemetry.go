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

// Every connection's RPCs go through otelgrpc's stats handler while a
// tracer or meter provider is installed (telemetry.SetupWith installs them
// only when something exports or scrapes). With neither, its spans are
// non-recording and its instruments no-ops, yet it still built a span and
// an attribute set per RPC — 3–8 % of each service's CPU in the c=16
// profiles (docs/benchmarks.md). Then only what must still happen is done:
// the trace context (W3C traceparent and baggage, through otel's global
// propagator) is read from a request's metadata and written into the next
// hop's, so log lines keep the caller's trace id and a service that does
// export joins the caller's trace. Which handler serves is decided per RPC
// and per event, so a provider installed later (tests do) is used from its
// next RPC on.

// Providers otel serves before one is installed.
var (
	defaultTracerProvider = otel.GetTracerProvider()
	defaultMeterProvider  = otel.GetMeterProvider()
)

// instrumented reports whether a tracer or meter provider is installed.
func instrumented() bool {
	return otel.GetTracerProvider() != defaultTracerProvider || otel.GetMeterProvider() != defaultMeterProvider
}

// telemetryHandler is otelgrpc's handler while instrumented, otherwise
// the propagation of the trace context alone.
type telemetryHandler struct {
	otel   stats.Handler
	server bool
}

func newServerTelemetry() stats.Handler {
	// Health checks are not traced: probes would flood the traces.
	return telemetryHandler{server: true, otel: otelgrpc.NewServerHandler(otelgrpc.WithFilter(filters.Not(filters.HealthCheck())))}
}

func newClientTelemetry() stats.Handler {
	// Filtered on this side too: a client's health polling would otherwise
	// flood the traces just like the probes.
	return telemetryHandler{otel: otelgrpc.NewClientHandler(otelgrpc.WithFilter(filters.Not(filters.HealthCheck())))}
}

func (h telemetryHandler) TagRPC(ctx context.Context, info *stats.RPCTagInfo) context.Context {
	if instrumented() {
		return h.otel.TagRPC(ctx, info)
	}
	if h.server {
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

// HandleRPC asks again rather than reading a mark from ctx (a context
// lookup per event cost more than the handler saves): an RPC tagged before
// a provider was installed (only tests install one late) has its later
// events go to otelgrpc, which reads what it finds in ctx, or nothing.
func (h telemetryHandler) HandleRPC(ctx context.Context, s stats.RPCStats) {
	if instrumented() {
		h.otel.HandleRPC(ctx, s)
	}
}

func (h telemetryHandler) TagConn(ctx context.Context, info *stats.ConnTagInfo) context.Context {
	return h.otel.TagConn(ctx, info)
}

func (h telemetryHandler) HandleConn(ctx context.Context, s stats.ConnStats) {
	h.otel.HandleConn(ctx, s)
}

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
