// Package telemetry configures OpenTelemetry and structured logging for every
// SharedOS process from the standard OTEL_* environment, so a deployment
// switches exporters without flags of our own.
//
// Setup installs the global TracerProvider, MeterProvider and the W3C
// tracecontext+baggage propagator and returns one joined shutdown function
// that flushes every exporter. Export is opt-in: with no OTLP endpoint
// configured (and OTEL_TRACES_EXPORTER / OTEL_METRICS_EXPORTER not "otlp")
// no exporter is created, the global providers stay no-op and Setup costs
// nothing; the propagator is still installed so trace context flows through
// a process that does not export.
//
// Environment honoured (see the OpenTelemetry SDK environment specification):
//
//	OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_{TRACES,METRICS}_ENDPOINT  enable OTLP export
//	OTEL_TRACES_EXPORTER, OTEL_METRICS_EXPORTER   "otlp" forces export, "none" disables it
//	OTEL_EXPORTER_OTLP_PROTOCOL, OTEL_EXPORTER_OTLP_{TRACES,METRICS}_PROTOCOL
//	    "http/protobuf" (the specification's default, also ours) or "grpc"
//	OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES   override the resource
//	OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG  the specification's samplers, but a
//	    remote parent (a harness's traceparent) decides nothing: sampler.go
//	OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT, OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT (or
//	    the OTEL_ATTRIBUTE_* forms)  read by the SDK; unset, our
//	    SpanAttributeValueLimit and SpanAttributeCountLimit apply
//	OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT, _INSECURE, ...  read by the exporters
//
// SetupWith can also expose metrics in the Prometheus text format for
// scrapers that do not speak OTLP.
//
// Logger returns a JSON slog.Logger whose records carry trace_id and span_id
// taken from the context passed to the *Context logging methods, which is
// what joins a log line to its trace. Its level comes from SHAREDOS_LOG_LEVEL
// (debug, info, warn, error; default info).
//
// names.go holds every span, attribute, metric and service name used across
// the system, so dashboards and queries have one place to look. values.go
// holds the one rule for a string a harness chose that goes on a span or in
// a log line (EscapeValue: escaped, capped), which the kernel's operation
// records follow too.
package telemetry
