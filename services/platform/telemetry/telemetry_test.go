package telemetry_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"

	"github.com/sharedos/toolshare/services/platform/telemetry"
)

// otelEnv lists every variable Setup's behaviour depends on; cleanEnv blanks
// them so the developer's environment cannot change a test's outcome.
var otelEnv = []string{
	"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
	"OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER",
	"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL",
	"OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG",
	"OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT",
	"OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "OTEL_ATTRIBUTE_COUNT_LIMIT",
}

// cleanEnv blanks the OTEL_* variables and restores the global providers
// after the test (Setup replaces them).
func cleanEnv(t *testing.T) {
	t.Helper()
	for _, k := range otelEnv {
		t.Setenv(k, "")
	}
	otel.SetTracerProvider(tracenoop.NewTracerProvider())
	otel.SetMeterProvider(metricnoop.NewMeterProvider())
	t.Cleanup(func() {
		otel.SetTracerProvider(tracenoop.NewTracerProvider())
		otel.SetMeterProvider(metricnoop.NewMeterProvider())
	})
}

func TestSetupIsNoOpWithoutEndpoint(t *testing.T) {
	cleanEnv(t)
	shutdown, err := telemetry.Setup(context.Background(), "svc")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := otel.GetTracerProvider().(*sdktrace.TracerProvider); ok {
		t.Error("an SDK TracerProvider was installed without any exporter configured")
	}
	if _, ok := otel.GetMeterProvider().(*sdkmetric.MeterProvider); ok {
		t.Error("an SDK MeterProvider was installed without any exporter configured")
	}
	fields := strings.Join(otel.GetTextMapPropagator().Fields(), ",")
	if !strings.Contains(fields, "traceparent") || !strings.Contains(fields, "baggage") {
		t.Errorf("propagator fields = %s, want tracecontext and baggage", fields)
	}
	if err := shutdown(context.Background()); err != nil {
		t.Fatalf("no-op shutdown = %v", err)
	}
}

func TestSetupNoneOverridesEndpoint(t *testing.T) {
	cleanEnv(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	t.Setenv("OTEL_TRACES_EXPORTER", "none")
	t.Setenv("OTEL_METRICS_EXPORTER", "none")
	shutdown, err := telemetry.Setup(context.Background(), "svc")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := otel.GetTracerProvider().(*sdktrace.TracerProvider); ok {
		t.Error("OTEL_TRACES_EXPORTER=none still installed an SDK TracerProvider")
	}
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestSetupRejectsBadEnv(t *testing.T) {
	for _, tc := range []struct{ key, value string }{
		{"OTEL_TRACES_EXPORTER", "zipkin"},
		{"OTEL_METRICS_EXPORTER", "console"},
		{"OTEL_EXPORTER_OTLP_PROTOCOL", "thrift"},
		{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json"},
	} {
		t.Run(tc.key, func(t *testing.T) {
			cleanEnv(t)
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
			t.Setenv(tc.key, tc.value)
			shutdown, err := telemetry.Setup(context.Background(), "svc")
			if err == nil || !strings.Contains(err.Error(), tc.key) || !strings.Contains(err.Error(), tc.value) {
				t.Fatalf("Setup with %s=%s: err = %v, want one naming the variable and value", tc.key, tc.value, err)
			}
			if shutdown == nil {
				t.Fatal("shutdown is nil on error; callers defer it unconditionally")
			}
			if err := shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// unusedAddr returns a loopback address nothing listens on.
func unusedAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	_ = lis.Close()
	return addr
}

func TestShutdownIsBoundedWhenCollectorIsDown(t *testing.T) {
	for _, protocol := range []string{telemetry.ProtocolGRPC, telemetry.ProtocolHTTPProtobuf} {
		t.Run(protocol, func(t *testing.T) {
			cleanEnv(t)
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+unusedAddr(t))
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)

			shutdown, err := telemetry.Setup(context.Background(), "svc")
			if err != nil {
				t.Fatalf("Setup must not need the collector: %v", err)
			}
			_, span := otel.Tracer("test").Start(context.Background(), "work")
			span.End()

			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			// Returning at all is the point (a hang fails the test by
			// timeout); the lost span must be reported, not swallowed.
			if err := shutdown(ctx); err == nil {
				t.Fatal("shutdown reported success although nothing could be exported")
			}
		})
	}
}

// collector is a fake OTLP/HTTP receiver that keeps what it was sent.
type collector struct {
	mu      sync.Mutex
	traces  []*coltracepb.ExportTraceServiceRequest
	metrics []*colmetricpb.ExportMetricsServiceRequest
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var m proto.Message
	switch r.URL.Path {
	case "/v1/traces":
		req := &coltracepb.ExportTraceServiceRequest{}
		c.traces = append(c.traces, req)
		m = req
	case "/v1/metrics":
		req := &colmetricpb.ExportMetricsServiceRequest{}
		c.metrics = append(c.metrics, req)
		m = req
	default:
		http.NotFound(w, r)
		return
	}
	if err := proto.Unmarshal(body, m); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
}

func serviceName(attrs []*commonpb.KeyValue) string {
	for _, kv := range attrs {
		if kv.GetKey() == "service.name" {
			return kv.GetValue().GetStringValue()
		}
	}
	return ""
}

func TestExportsTracesAndMetricsOverHTTP(t *testing.T) {
	for _, tc := range []struct{ envName, want string }{
		{"", "sharedos-test"},
		{"from-env", "from-env"},
	} {
		t.Run("service="+tc.want, func(t *testing.T) {
			cleanEnv(t)
			c := &collector{}
			srv := httptest.NewServer(c)
			defer srv.Close()
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
			t.Setenv("OTEL_SERVICE_NAME", tc.envName)

			shutdown, err := telemetry.Setup(context.Background(), "sharedos-test")
			if err != nil {
				t.Fatal(err)
			}
			_, span := otel.Tracer("test").Start(context.Background(), telemetry.SpanInvokeTool)
			span.End()
			counter, err := otel.Meter("test").Int64Counter(telemetry.MetricToolCallCount)
			if err != nil {
				t.Fatal(err)
			}
			counter.Add(context.Background(), 3, metric.WithAttributes())
			if err := shutdown(context.Background()); err != nil {
				t.Fatalf("shutdown = %v", err)
			}

			c.mu.Lock()
			defer c.mu.Unlock()
			var spans, services []string
			for _, req := range c.traces {
				for _, rs := range req.GetResourceSpans() {
					services = append(services, serviceName(rs.GetResource().GetAttributes()))
					for _, ss := range rs.GetScopeSpans() {
						for _, s := range ss.GetSpans() {
							spans = append(spans, s.GetName())
						}
					}
				}
			}
			if len(spans) != 1 || spans[0] != telemetry.SpanInvokeTool {
				t.Errorf("collector got spans %v, want [%s]", spans, telemetry.SpanInvokeTool)
			}
			if len(services) == 0 || services[0] != tc.want {
				t.Errorf("span resource service.name = %v, want %s", services, tc.want)
			}
			var metrics []string
			for _, req := range c.metrics {
				for _, rm := range req.GetResourceMetrics() {
					for _, sm := range rm.GetScopeMetrics() {
						for _, m := range sm.GetMetrics() {
							metrics = append(metrics, m.GetName())
						}
					}
				}
			}
			if !strings.Contains(strings.Join(metrics, ","), telemetry.MetricToolCallCount) {
				t.Errorf("collector got metrics %v, want %s", metrics, telemetry.MetricToolCallCount)
			}
		})
	}
}

// TestSetupBoundsSpanAttributes: a span of a process Setup configured
// keeps at most SpanAttributeCountLimit attributes of at most
// SpanAttributeValueLimit bytes each, however many and however long the
// code set; a limit the environment sets wins, and an unparsable one does
// not lift ours.
func TestSetupBoundsSpanAttributes(t *testing.T) {
	for _, tc := range []struct {
		name              string
		env               map[string]string
		wantLen, wantAttr int
	}{
		{"defaults", nil, telemetry.SpanAttributeValueLimit, telemetry.SpanAttributeCountLimit},
		{"environment", map[string]string{"OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT": "10", "OTEL_ATTRIBUTE_COUNT_LIMIT": "5"}, 10, 5},
		{"unparsable environment", map[string]string{"OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT": "lots"}, telemetry.SpanAttributeValueLimit, telemetry.SpanAttributeCountLimit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cleanEnv(t)
			c := &collector{}
			srv := httptest.NewServer(c)
			defer srv.Close()
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
			t.Setenv("OTEL_METRICS_EXPORTER", "none")
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			shutdown, err := telemetry.Setup(context.Background(), "sharedos-test")
			if err != nil {
				t.Fatal(err)
			}
			_, span := otel.Tracer("test").Start(context.Background(), telemetry.SpanInvokeTool)
			for i := range 2 * telemetry.SpanAttributeCountLimit {
				span.SetAttributes(attribute.String("k"+strconv.Itoa(i), strings.Repeat("v", 4*telemetry.SpanAttributeValueLimit)))
			}
			span.End()
			if err := shutdown(context.Background()); err != nil {
				t.Fatalf("shutdown = %v", err)
			}

			c.mu.Lock()
			defer c.mu.Unlock()
			n := 0
			for _, req := range c.traces {
				for _, rs := range req.GetResourceSpans() {
					for _, ss := range rs.GetScopeSpans() {
						for _, s := range ss.GetSpans() {
							n++
							if got := len(s.GetAttributes()); got != tc.wantAttr {
								t.Errorf("span has %d attributes, want %d", got, tc.wantAttr)
							}
							for _, kv := range s.GetAttributes() {
								if got := len(kv.GetValue().GetStringValue()); got != tc.wantLen {
									t.Errorf("attribute %s is %d bytes, want %d", kv.GetKey(), got, tc.wantLen)
									break
								}
							}
						}
					}
				}
			}
			if n != 1 {
				t.Fatalf("collector got %d spans, want 1", n)
			}
		})
	}
}

func TestPrometheusHandler(t *testing.T) {
	cleanEnv(t)
	shutdown, handler, err := telemetry.SetupWith(context.Background(), "svc", telemetry.SetupOptions{Prometheus: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	if handler == nil {
		t.Fatal("no metrics handler with Prometheus enabled")
	}
	counter, err := otel.Meter("test").Int64Counter(telemetry.MetricPolicyReloadFailures)
	if err != nil {
		t.Fatal(err)
	}
	counter.Add(context.Background(), 2)

	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{"sharedos_policy_reload_failures", "go_goroutines"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s:\n%s", want, body)
		}
	}

	_, none, err := telemetry.SetupWith(context.Background(), "svc", telemetry.SetupOptions{})
	if err != nil || none != nil {
		t.Fatalf("without Prometheus: handler %v, err %v; want nil, nil", none, err)
	}
}
