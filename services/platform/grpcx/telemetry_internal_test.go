package grpcx

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/grpc/stats"
)

// TestOtelgrpcOnlyWithAProvider: a server or client built with no tracer
// or meter provider installed gets the propagator alone; with either
// installed, otelgrpc's handler.
func TestOtelgrpcOnlyWithAProvider(t *testing.T) {
	isPropagator := func(h stats.Handler) bool { _, ok := h.(propagator); return ok }
	if otel.GetTracerProvider() != defaultTracerProvider || otel.GetMeterProvider() != defaultMeterProvider {
		t.Fatal("a provider is installed before the test")
	}
	if !isPropagator(newServerTelemetry()) || !isPropagator(newClientTelemetry()) {
		t.Error("no provider installed: otelgrpc's handler was chosen")
	}

	tp := sdktrace.NewTracerProvider()
	otel.SetTracerProvider(tp)
	if isPropagator(newServerTelemetry()) || isPropagator(newClientTelemetry()) {
		t.Error("a tracer provider installed: the propagator alone was chosen")
	}
	otel.SetTracerProvider(defaultTracerProvider)
	_ = tp.Shutdown(context.Background())

	mp := sdkmetric.NewMeterProvider()
	otel.SetMeterProvider(mp)
	if isPropagator(newServerTelemetry()) {
		t.Error("a meter provider installed: the propagator alone was chosen")
	}
	otel.SetMeterProvider(defaultMeterProvider)
	_ = mp.Shutdown(context.Background())
	if !isPropagator(newServerTelemetry()) {
		t.Error("the defaults restored: otelgrpc's handler was chosen")
	}
}
