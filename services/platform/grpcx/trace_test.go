package grpcx_test

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sharedos/toolshare/services/platform/grpcx"
)

func TestHealthChecksAreNotTraced(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() {
		otel.SetTracerProvider(prev)
		_ = tp.Shutdown(context.Background())
	})

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
