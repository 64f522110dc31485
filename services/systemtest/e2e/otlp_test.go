package e2e

import (
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpCollector is a fake OTLP/HTTP receiver (protobuf encoding): the
// in-memory exporter for spans that other processes export. It keeps every
// span and the names of the metrics it was sent.
type otlpCollector struct {
	srv *httptest.Server

	mu      sync.Mutex
	spans   []span
	metrics map[string][]metricPoint // by metric name
}

// span is one exported span with the resource and scope it came with.
type span struct {
	Service  string // resource service.name
	Resource []*commonpb.KeyValue
	Scope    string
	*tracepb.Span
}

// metricPoint is one data point's attributes and the exporting service.
type metricPoint struct {
	Service string
	Attrs   map[string]string
}

func newOTLPCollector(t *testing.T) *otlpCollector {
	t.Helper()
	c := &otlpCollector{metrics: map[string][]metricPoint{}}
	c.srv = httptest.NewServer(c)
	t.Cleanup(c.srv.Close)
	return c
}

// env is the OTEL_* environment pointing a process at the collector, with
// short batch and metric intervals so a test need not wait seconds.
func (c *otlpCollector) env() []string {
	return []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + c.srv.URL,
		"OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
		"OTEL_BSP_SCHEDULE_DELAY=100",
		"OTEL_METRIC_EXPORT_INTERVAL=500",
		"OTEL_TRACES_SAMPLER=parentbased_always_on",
		"OTEL_SERVICE_NAME=", "OTEL_RESOURCE_ATTRIBUTES=", // each process names itself
	}
}

func (c *otlpCollector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		defer zr.Close()
		body = zr
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var resp proto.Message
	switch r.URL.Path {
	case "/v1/traces":
		req := &coltracepb.ExportTraceServiceRequest{}
		if err := proto.Unmarshal(raw, req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c.addTraces(req)
		resp = &coltracepb.ExportTraceServiceResponse{}
	case "/v1/metrics":
		req := &colmetricpb.ExportMetricsServiceRequest{}
		if err := proto.Unmarshal(raw, req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c.addMetrics(req)
		resp = &colmetricpb.ExportMetricsServiceResponse{}
	default:
		http.NotFound(w, r)
		return
	}
	out, _ := proto.Marshal(resp)
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (c *otlpCollector) addTraces(req *coltracepb.ExportTraceServiceRequest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		res := rs.GetResource().GetAttributes()
		svc := kvString(res, "service.name")
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				c.spans = append(c.spans, span{Service: svc, Resource: res, Scope: ss.GetScope().GetName(), Span: s})
			}
		}
	}
}

func (c *otlpCollector) addMetrics(req *colmetricpb.ExportMetricsServiceRequest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rm := range req.GetResourceMetrics() {
		svc := kvString(rm.GetResource().GetAttributes(), "service.name")
		for _, sm := range rm.GetScopeMetrics() {
			for _, m := range sm.GetMetrics() {
				var attrSets [][]*commonpb.KeyValue
				for _, p := range m.GetSum().GetDataPoints() {
					attrSets = append(attrSets, p.GetAttributes())
				}
				for _, p := range m.GetHistogram().GetDataPoints() {
					attrSets = append(attrSets, p.GetAttributes())
				}
				for _, p := range m.GetGauge().GetDataPoints() {
					attrSets = append(attrSets, p.GetAttributes())
				}
				if len(attrSets) == 0 {
					attrSets = append(attrSets, nil)
				}
				for _, a := range attrSets {
					pt := metricPoint{Service: svc, Attrs: map[string]string{}}
					for _, kv := range a {
						pt.Attrs[kv.GetKey()] = anyString(kv.GetValue())
					}
					c.metrics[m.GetName()] = append(c.metrics[m.GetName()], pt)
				}
			}
		}
	}
}

// all returns a copy of every span received so far.
func (c *otlpCollector) all() []span {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.spans)
}

// metricPoints returns the points received for name.
func (c *otlpCollector) metricPoints(name string) []metricPoint {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.metrics[name])
}

// trace returns the spans of traceID.
func (c *otlpCollector) trace(traceID []byte) []span {
	var out []span
	for _, s := range c.all() {
		if string(s.TraceId) == string(traceID) {
			out = append(out, s)
		}
	}
	return out
}

// waitTrace polls until traceID holds a span matching every predicate in
// want (the processes export in batches, each on its own schedule), or
// until the limit passes; it returns the trace as it then is, so the caller
// reports exactly what is missing.
func (c *otlpCollector) waitTrace(traceID []byte, limit time.Duration, want ...func(span) bool) []span {
	deadline := time.Now().Add(limit)
	for {
		spans := c.trace(traceID)
		ok := true
		for _, w := range want {
			if !slices.ContainsFunc(spans, w) {
				ok = false
				break
			}
		}
		if ok || time.Now().After(deadline) {
			return spans
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitQuiet waits until no span has arrived for quiet (every batch
// processor has flushed what it had), bounded by limit.
func (c *otlpCollector) waitQuiet(quiet, limit time.Duration) {
	deadline := time.Now().Add(limit)
	last, since := -1, time.Now()
	for time.Now().Before(deadline) {
		n := len(c.all())
		if n != last {
			last, since = n, time.Now()
		} else if time.Since(since) >= quiet {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func kvString(kvs []*commonpb.KeyValue, key string) string {
	for _, kv := range kvs {
		if kv.GetKey() == key {
			return anyString(kv.GetValue())
		}
	}
	return ""
}

// anyString renders an OTLP value as text: strings as they are, everything
// else (numbers, arrays, maps, bytes) in a readable form that still contains
// every string inside it, for the secret grep.
func anyString(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_BoolValue:
		return fmt.Sprint(x.BoolValue)
	case *commonpb.AnyValue_IntValue:
		return fmt.Sprint(x.IntValue)
	case *commonpb.AnyValue_DoubleValue:
		return fmt.Sprint(x.DoubleValue)
	case *commonpb.AnyValue_BytesValue:
		return string(x.BytesValue) + " " + hex.EncodeToString(x.BytesValue)
	case *commonpb.AnyValue_ArrayValue:
		var parts []string
		for _, e := range x.ArrayValue.GetValues() {
			parts = append(parts, anyString(e))
		}
		return "[" + strings.Join(parts, ",") + "]"
	case *commonpb.AnyValue_KvlistValue:
		var parts []string
		for _, kv := range x.KvlistValue.GetValues() {
			parts = append(parts, kv.GetKey()+"="+anyString(kv.GetValue()))
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	return ""
}

// attr returns the span attribute key as text and whether it is set.
func (s span) attr(key string) (string, bool) {
	for _, kv := range s.Attributes {
		if kv.GetKey() == key {
			return anyString(kv.GetValue()), true
		}
	}
	return "", false
}

func (s span) failed() bool { return s.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR }

func (s span) String() string {
	return fmt.Sprintf("%s %q %s span=%x parent=%x status=%s", s.Service, s.Name,
		strings.TrimPrefix(s.Kind.String(), "SPAN_KIND_"), s.SpanId, s.ParentSpanId,
		strings.TrimPrefix(s.GetStatus().GetCode().String(), "STATUS_CODE_"))
}

// texts returns every string an exported span carries: name, status,
// attributes, events, links and its resource.
func (s span) texts() []string {
	out := []string{s.Name, s.GetStatus().GetMessage(), s.TraceState, s.Scope}
	add := func(kvs []*commonpb.KeyValue) {
		for _, kv := range kvs {
			out = append(out, kv.GetKey(), anyString(kv.GetValue()))
		}
	}
	add(s.Attributes)
	add(s.Resource)
	for _, e := range s.Events {
		out = append(out, e.GetName())
		add(e.GetAttributes())
	}
	for _, l := range s.Links {
		out = append(out, l.GetTraceState())
		add(l.GetAttributes())
	}
	return out
}

// dump renders spans one per line for failure messages.
func dump(spans []span) string {
	var b strings.Builder
	for _, s := range spans {
		b.WriteString("    ")
		b.WriteString(s.String())
		var attrs []string
		for _, kv := range s.Attributes {
			attrs = append(attrs, kv.GetKey()+"="+anyString(kv.GetValue()))
		}
		if len(attrs) > 0 {
			b.WriteString(" {" + strings.Join(attrs, ", ") + "}")
		}
		b.WriteString("\n")
	}
	return b.String()
}

// summary counts spans by service, name and kind, one line each, for a
// failure report that shows what each process does export.
func summary(spans []span) string {
	counts := map[string]int{}
	for _, s := range spans {
		counts[fmt.Sprintf("%s: %q %s", s.Service, s.Name, strings.TrimPrefix(s.Kind.String(), "SPAN_KIND_"))]++
	}
	lines := make([]string, 0, len(counts))
	for k, n := range counts {
		lines = append(lines, fmt.Sprintf("    %s × %d", k, n))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}
