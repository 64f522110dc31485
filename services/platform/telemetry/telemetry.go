package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"

	promclient "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Protocol values of OTEL_EXPORTER_OTLP_*PROTOCOL.
const (
	ProtocolGRPC         = "grpc"
	ProtocolHTTPProtobuf = "http/protobuf"
	// DefaultProtocol follows the OpenTelemetry specification's default.
	DefaultProtocol = ProtocolHTTPProtobuf
)

// Span limits every TracerProvider of SetupWith applies unless the OTEL_*
// environment sets its own (OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT or
// OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT, OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT or
// OTEL_ATTRIBUTE_COUNT_LIMIT). They are a backstop for a value put on a
// span without EscapeValue: the SDK's own default leaves attribute values
// unbounded, and a span waiting in the batch processor's queue (2,048 of
// them) keeps every byte of them while the collector is slow.
const (
	// SpanAttributeValueLimit caps a string attribute value, in bytes (the
	// kernel's cap for the free text of a record).
	SpanAttributeValueLimit = 1024
	// SpanAttributeCountLimit caps the attributes of one span (the SDK
	// default is 128); no span of ours sets half as many.
	SpanAttributeCountLimit = 64
)

// SetupOptions selects optional parts of SetupWith.
type SetupOptions struct {
	// Prometheus adds a pull exporter; SetupWith then returns an http.Handler
	// serving the metrics (and Go runtime/process collectors) in the
	// Prometheus text format, e.g. for a /metrics endpoint.
	Prometheus bool
}

// Setup configures tracing, metrics and propagation from the OTEL_* environment
// (see the package documentation). shutdown flushes and closes every exporter;
// it is never nil, so callers may defer it even when err is non-nil.
func Setup(ctx context.Context, serviceName string) (shutdown func(context.Context) error, err error) {
	shutdown, _, err = SetupWith(ctx, serviceName, SetupOptions{})
	return shutdown, err
}

// SetupWith is Setup with options. metrics is nil unless opts.Prometheus.
func SetupWith(ctx context.Context, serviceName string, opts SetupOptions) (shutdown func(context.Context) error, metrics http.Handler, err error) {
	// W3C tracecontext carries the trace; baggage carries nothing we rely
	// on, but dropping it would break callers that do.
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(
		propagation.TraceContext{}, propagation.Baggage{},
	))

	var shutdowns []func(context.Context) error
	shutdown = func(ctx context.Context) error {
		var errs []error
		// Reverse order: providers flush before anything they depend on closes.
		for i := len(shutdowns) - 1; i >= 0; i-- {
			errs = append(errs, shutdowns[i](ctx))
		}
		return errors.Join(errs...)
	}
	fail := func(err error) (func(context.Context) error, http.Handler, error) {
		// Release whatever was created; the setup error is what matters.
		_ = shutdown(context.WithoutCancel(ctx))
		return func(context.Context) error { return nil }, nil, err
	}

	tracesOn, err := exportEnabled("TRACES")
	if err != nil {
		return fail(err)
	}
	metricsOn, err := exportEnabled("METRICS")
	if err != nil {
		return fail(err)
	}
	if !tracesOn && !metricsOn && !opts.Prometheus {
		return shutdown, nil, nil
	}

	res, err := newResource(ctx, serviceName)
	if err != nil {
		return fail(err)
	}

	if tracesOn {
		exp, err := newTraceExporter(ctx)
		if err != nil {
			return fail(err)
		}
		smp, err := sampler()
		if err != nil {
			return fail(err)
		}
		tp := sdktrace.NewTracerProvider(
			sdktrace.WithResource(res),
			sdktrace.WithBatcher(exp),
			sdktrace.WithSampler(smp),
			sdktrace.WithRawSpanLimits(spanLimits()),
		)
		shutdowns = append(shutdowns, tp.Shutdown)
		otel.SetTracerProvider(tp)
	}

	var readers []sdkmetric.Option
	if metricsOn {
		exp, err := newMetricExporter(ctx)
		if err != nil {
			return fail(err)
		}
		readers = append(readers, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp)))
	}
	if opts.Prometheus {
		// A private registry: the process-global default registry is shared
		// state any import could pollute, and tests call SetupWith repeatedly.
		reg := promclient.NewRegistry()
		reg.MustRegister(
			collectors.NewGoCollector(),
			collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		)
		exp, err := otelprom.New(otelprom.WithRegisterer(reg))
		if err != nil {
			return fail(fmt.Errorf("telemetry: prometheus exporter: %w", err))
		}
		readers = append(readers, sdkmetric.WithReader(exp))
		metrics = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	}
	if len(readers) > 0 {
		mp := sdkmetric.NewMeterProvider(append(readers, sdkmetric.WithResource(res))...)
		shutdowns = append(shutdowns, mp.Shutdown)
		otel.SetMeterProvider(mp)
	}
	return shutdown, metrics, nil
}

// spanLimits returns the SDK's span limits as the OTEL_* environment sets
// them, with SpanAttributeValueLimit and SpanAttributeCountLimit where it
// sets no valid value of its own (the SDK would then leave attribute values
// unbounded).
func spanLimits() sdktrace.SpanLimits {
	l := sdktrace.NewSpanLimits()
	if !envLimit("OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT") {
		l.AttributeValueLengthLimit = SpanAttributeValueLimit
	}
	if !envLimit("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "OTEL_ATTRIBUTE_COUNT_LIMIT") {
		l.AttributeCountLimit = SpanAttributeCountLimit
	}
	return l
}

// envLimit reports whether the SDK takes a limit from the environment: the
// first of names that is set decides, and only an integer counts.
func envLimit(names ...string) bool {
	for _, name := range names {
		if v := os.Getenv(name); v != "" {
			_, err := strconv.Atoi(v)
			return err == nil
		}
	}
	return false
}

// newResource names the service serviceName unless OTEL_SERVICE_NAME or
// OTEL_RESOURCE_ATTRIBUTES say otherwise: later detectors win, and the
// environment detector runs last.
func newResource(ctx context.Context, serviceName string) (*resource.Resource, error) {
	res, err := resource.New(ctx,
		resource.WithTelemetrySDK(),
		resource.WithAttributes(attribute.String("service.name", serviceName)),
		resource.WithFromEnv(),
	)
	if err != nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	return res, nil
}

// exportEnabled reports whether OTLP export of signal ("TRACES" or "METRICS")
// is configured: OTEL_<SIGNAL>_EXPORTER decides when set, otherwise an OTLP
// endpoint (generic or per-signal) does.
func exportEnabled(signal string) (bool, error) {
	name := "OTEL_" + signal + "_EXPORTER"
	switch v := strings.TrimSpace(os.Getenv(name)); v {
	case "none":
		return false, nil
	case "otlp":
		return true, nil
	case "":
		return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" ||
			os.Getenv("OTEL_EXPORTER_OTLP_"+signal+"_ENDPOINT") != "", nil
	default:
		return false, fmt.Errorf("telemetry: %s=%q: must be \"otlp\" or \"none\"", name, v)
	}
}

// protocol returns the OTLP protocol for signal: per-signal variable, then
// the generic one, then DefaultProtocol.
func protocol(signal string) (string, error) {
	name := "OTEL_EXPORTER_OTLP_" + signal + "_PROTOCOL"
	v := strings.TrimSpace(os.Getenv(name))
	if v == "" {
		name = "OTEL_EXPORTER_OTLP_PROTOCOL"
		v = strings.TrimSpace(os.Getenv(name))
	}
	switch v {
	case "":
		return DefaultProtocol, nil
	case ProtocolGRPC, ProtocolHTTPProtobuf:
		return v, nil
	default:
		return "", fmt.Errorf("telemetry: %s=%q: must be %q or %q", name, v, ProtocolGRPC, ProtocolHTTPProtobuf)
	}
}

// The exporters read endpoint, headers, timeout, TLS and compression from the
// environment themselves; neither constructor performs network I/O.
func newTraceExporter(ctx context.Context) (sdktrace.SpanExporter, error) {
	p, err := protocol("TRACES")
	if err != nil {
		return nil, err
	}
	var exp sdktrace.SpanExporter
	if p == ProtocolGRPC {
		exp, err = otlptracegrpc.New(ctx)
	} else {
		exp, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("telemetry: otlp trace exporter (%s): %w", p, err)
	}
	return exp, nil
}

func newMetricExporter(ctx context.Context) (sdkmetric.Exporter, error) {
	p, err := protocol("METRICS")
	if err != nil {
		return nil, err
	}
	var exp sdkmetric.Exporter
	if p == ProtocolGRPC {
		exp, err = otlpmetricgrpc.New(ctx)
	} else {
		exp, err = otlpmetrichttp.New(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("telemetry: otlp metric exporter (%s): %w", p, err)
	}
	return exp, nil
}
