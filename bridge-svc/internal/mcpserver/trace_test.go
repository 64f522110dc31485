package mcpserver_test

import (
	"context"
	"encoding/base64"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/baggage"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/sharedos/toolshare/bridge-svc/internal/forward"
	"github.com/sharedos/toolshare/bridge-svc/internal/leases"
	"github.com/sharedos/toolshare/bridge-svc/internal/leases/memory"
	"github.com/sharedos/toolshare/bridge-svc/internal/mcpserver"
	"github.com/sharedos/toolshare/bridge-svc/internal/protocol"
	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/outcome"
	"github.com/sharedos/toolshare/services/platform/telemetry"
)

// fixedKernel answers every InvokeTool with res.
type fixedKernel struct{ res *sharedosv1.ToolResult }

func (k fixedKernel) InvokeTool(_ context.Context, in *sharedosv1.ToolCall, _ ...grpc.CallOption) (*sharedosv1.ToolResult, error) {
	r := proto.Clone(k.res).(*sharedosv1.ToolResult)
	r.CallId = in.GetCallId()
	return r, nil
}

const (
	headerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	headerSpan  = "00f067aa0ba902b7"
	metaTrace   = "0af7651916cd43dd8448eb211c80319c"
	metaSpan    = "b7ad6b7169203331"
)

// TestToolsCallSpan: the tools/call server span continues the harness's
// trace from params._meta.traceparent (SEP-414) when the message has a
// valid one, from the HTTP traceparent header otherwise, and is Error
// exactly when the outcome is failed.
func TestToolsCallSpan(t *testing.T) {
	// The handler uses the global propagator, as every service does
	// (telemetry.Setup installs this one).
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	cases := []struct {
		name              string
		header, meta      string // traceparent values ("" = none)
		res               *sharedosv1.ToolResult
		wantTrace, parent string // "" = a root span
		wantError         bool
	}{
		{"header only", "00-" + headerTrace + "-" + headerSpan + "-01", "",
			&sharedosv1.ToolResult{Status: sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED}, headerTrace, headerSpan, false},
		{"_meta wins over header", "00-" + headerTrace + "-" + headerSpan + "-01", "00-" + metaTrace + "-" + metaSpan + "-01",
			outcome.Denied(outcome.PermissionDenied, "no"), metaTrace, metaSpan, false},
		{"_meta only", "", "00-" + metaTrace + "-" + metaSpan + "-01",
			outcome.Failed(outcome.HandlerError, "boom"), metaTrace, metaSpan, true},
		{"invalid _meta falls back to header", "00-" + headerTrace + "-" + headerSpan + "-01", "00-zz-yy-01",
			outcome.Failed(outcome.InvalidArguments, "path: want string"), headerTrace, headerSpan, true},
		{"neither starts a trace", "", "",
			outcome.Denied(outcome.ToolUnavailable, "unknown"), "", "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			store := memory.New()
			h := mcpserver.NewHandler(mcpserver.Config{
				Store:          store,
				Forwarder:      &forward.Forwarder{Invoker: fixedKernel{tc.res}},
				Edge:           protocol.NewEdge(protocol.EdgeConfig{AllowedHosts: protocol.DefaultAllowedHosts}),
				TracerProvider: tp,
			})
			mux := http.NewServeMux()
			mux.Handle(mcpserver.Pattern, h)
			srv := httptest.NewServer(mux)
			defer srv.Close()
			defer srv.Client().CloseIdleConnections()

			l, token := createLease(t, store, time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
			meta := `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}`
			if tc.meta != "" {
				meta += `,"traceparent":"` + tc.meta + `"`
			}
			headers := map[string]string{}
			if tc.header != "" {
				headers["traceparent"] = tc.header
			}
			postFilesRead(t, srv, l.TurnID, token, meta, headers)

			spans := rec.Ended()
			if len(spans) != 1 {
				t.Fatalf("%d spans ended, want 1 (the tools/call span)", len(spans))
			}
			sp := spans[0]
			if sp.Name() != telemetry.MCPSpanName("tools/call", "files.read") {
				t.Errorf("span name %q", sp.Name())
			}
			if tc.wantTrace == "" {
				if sp.Parent().IsValid() {
					t.Errorf("span has parent %s, want a root", sp.Parent().SpanID())
				}
			} else if got := sp.SpanContext().TraceID().String(); got != tc.wantTrace || sp.Parent().SpanID().String() != tc.parent {
				t.Errorf("span in trace %s under %s, want trace %s under %s", got, sp.Parent().SpanID(), tc.wantTrace, tc.parent)
			}
			if got := sp.Status().Code == otelcodes.Error; got != tc.wantError {
				t.Errorf("span status %v, want Error=%v for %s/%s", sp.Status(), tc.wantError,
					outcome.StatusName(tc.res.GetStatus()), tc.res.GetCode())
			}
		})
	}
}

// baggageKernel keeps the baggage of the context each InvokeTool came in.
type baggageKernel struct {
	fixedKernel
	got chan baggage.Baggage
	sc  chan trace.SpanContext
}

func (k baggageKernel) InvokeTool(ctx context.Context, in *sharedosv1.ToolCall, opts ...grpc.CallOption) (*sharedosv1.ToolResult, error) {
	k.got <- baggage.FromContext(ctx)
	k.sc <- trace.SpanContextFromContext(ctx)
	return k.fixedKernel.InvokeTool(ctx, in, opts...)
}

// TestHarnessBaggageStaysAtTheEdge: a harness's trace is continued, but
// its W3C baggage and tracestate — in the headers or in params._meta —
// are not taken: they would reach the kernel, authz and every provider as
// the caller's own metadata (review: a canary token in either did).
func TestHarnessBaggageStaysAtTheEdge(t *testing.T) {
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	for _, where := range []string{"header", "_meta"} {
		t.Run(where, func(t *testing.T) {
			k := baggageKernel{fixedKernel: fixedKernel{&sharedosv1.ToolResult{Status: sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED}},
				got: make(chan baggage.Baggage, 1), sc: make(chan trace.SpanContext, 1)}
			store := memory.New()
			h := mcpserver.NewHandler(mcpserver.Config{
				Store:          store,
				Forwarder:      &forward.Forwarder{Invoker: k},
				Edge:           protocol.NewEdge(protocol.EdgeConfig{AllowedHosts: protocol.DefaultAllowedHosts}),
				TracerProvider: sdktrace.NewTracerProvider(),
			})
			mux := http.NewServeMux()
			mux.Handle(mcpserver.Pattern, h)
			srv := httptest.NewServer(mux)
			defer srv.Close()
			defer srv.Client().CloseIdleConnections()

			l, token := createLease(t, store, time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
			meta := `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}`
			const tp, bag = "00-" + metaTrace + "-" + metaSpan + "-01", "canary=sk-canary-1234"
			if where == "_meta" {
				meta += `,"traceparent":"` + tp + `","baggage":"` + bag + `","tracestate":"` + bag + `"`
			}
			headers := map[string]string{}
			if where == "header" {
				headers = map[string]string{"traceparent": tp, "baggage": bag, "tracestate": bag}
			}
			postFilesRead(t, srv, l.TurnID, token, meta, headers)
			if b := <-k.got; b.Len() != 0 {
				t.Errorf("the kernel's call carried the harness's baggage %q", b.String())
			}
			sc := <-k.sc
			if sc.TraceID().String() != metaTrace {
				t.Errorf("the kernel's call is in trace %s, want the harness's %s", sc.TraceID(), metaTrace)
			}
			if sc.TraceState().Len() != 0 {
				t.Errorf("the kernel's call carried the harness's tracestate %q", sc.TraceState().String())
			}
		})
	}
}

// TestHarnessStringsOnTheSpanAreBounded: the span of an MCP request opens
// before the bridge refuses anything, so what a harness chose — the tool
// name, the method, the protocol version, the JSON-RPC id, _meta call ids
// — reaches it escaped and capped (telemetry.EscapeValue), and the span is
// named only by a method of MCP and a name of the tool naming rule (review:
// a 3 MiB name made a 3 MiB span name and two 3 MiB attributes, held by
// the batch processor's queue while the collector was slow; a newline or
// an ANSI sequence reached trace UIs as sent).
func TestHarnessStringsOnTheSpanAreBounded(t *testing.T) {
	otel.SetTextMapPropagator(propagation.TraceContext{})
	// Each name as a harness means it, and as its JSON carries it.
	const prefix, prefixJSON = "x\n{\"level\":\"ERROR\"}\x1b[31m", `x\n{\"level\":\"ERROR\"}\u001b[31m`
	refused, refusedJSON := prefix+strings.Repeat("A", 3<<20), prefixJSON+strings.Repeat("A", 3<<20)
	// A call the bridge takes must name it in Mcp-Name too: within a header.
	taken, takenJSON := prefix+strings.Repeat("B", 64<<10), prefixJSON+strings.Repeat("B", 64<<10)
	huge := strings.Repeat("9", 1<<20)
	// What _meta carries stays under protocol.MaxMetaBytes: still far past
	// what a span keeps of a value.
	long := strings.Repeat("9", 16<<10)
	const meta = `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}`
	cases := []struct {
		name     string
		body     string
		headers  map[string]string
		wantSpan string
		want     map[string]string // attributes as the span must carry them
		capped   []string          // attributes the span must carry cut short
	}{
		{
			name:     "tools/call refused for its Mcp-Name",
			body:     `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + refusedJSON + `","arguments":{},"_meta":{` + meta + `}}}`,
			headers:  map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "mismatch"},
			wantSpan: "tools/call",
			want: map[string]string{
				telemetry.AttrMCPMethod:     "tools/call",
				telemetry.AttrGenAIToolName: telemetry.EscapeValue(refused),
			},
			capped: []string{telemetry.AttrGenAIToolName},
		},
		{
			name: "tools/call taken",
			body: `{"jsonrpc":"2.0","id":"` + huge + `\u001b","method":"tools/call","params":{"name":"` + takenJSON + `","arguments":{},` +
				`"_meta":{` + meta + `,"callId":"` + long + `\n","threadId":{"deep":"` + long + `"}}}}`,
			headers:  map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "=?base64?" + base64.StdEncoding.EncodeToString([]byte(taken)) + "?="},
			wantSpan: "tools/call",
			want: map[string]string{
				telemetry.AttrMCPMethod:     "tools/call",
				telemetry.AttrGenAIToolName: telemetry.EscapeValue(taken),
				telemetry.AttrToolRequested: telemetry.EscapeValue(taken),
			},
			capped: []string{telemetry.AttrGenAIToolName, telemetry.AttrToolRequested, telemetry.AttrBridgeJSONRPCID, telemetry.AttrBridgeClientCallIDs},
		},
		{
			name:     "a method of no MCP",
			body:     `{"jsonrpc":"2.0","id":2,"method":"zz\u001b]0;pwn\u0007` + strings.Repeat("M", 1<<20) + `","params":{"_meta":{` + meta + `}}}`,
			wantSpan: telemetry.MCPMethodOther,
			want:     map[string]string{telemetry.AttrMCPMethod: telemetry.MCPMethodOther},
		},
		{
			name: "a version of no MCP",
			body: `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":{` +
				`"io.modelcontextprotocol/protocolVersion":"2026-07-28\u001b[2J` + long + `","io.modelcontextprotocol/clientCapabilities":{}}}}`,
			headers:  map[string]string{"Mcp-Method": "tools/list"},
			wantSpan: "tools/list",
			want:     map[string]string{telemetry.AttrMCPProtocol: telemetry.EscapeValue("2026-07-28\x1b[2J" + long)},
			capped:   []string{telemetry.AttrMCPProtocol},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			store := memory.New()
			h := serve(mcpserver.Config{
				Store:          store,
				Forwarder:      &forward.Forwarder{Invoker: fixedKernel{outcome.Denied(outcome.ToolUnavailable, "unknown")}},
				TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)),
			})
			l, token := createLease(t, store, time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
			headers := map[string]string{"Mcp-Protocol-Version": "2026-07-28"}
			maps.Copy(headers, tc.headers)
			post(h, l.TurnID, token, tc.body, headers)

			spans := rec.Ended()
			if len(spans) != 1 {
				t.Fatalf("%d spans ended, want 1 (the request's)", len(spans))
			}
			sp := spans[0]
			if sp.Name() != tc.wantSpan {
				t.Errorf("span name %q… (%d bytes), want %q", sp.Name()[:min(len(sp.Name()), 64)], len(sp.Name()), tc.wantSpan)
			}
			got := map[string]string{}
			for _, a := range sp.Attributes() {
				v := a.Value.String()
				got[string(a.Key)] = v
				limit := telemetry.MaxValueBytes
				if a.Key == telemetry.AttrBridgeClientCallIDs {
					limit = 2*(len("threadId=")+telemetry.MaxValueBytes) + 1 // two ids, each capped
				}
				if len(v) > limit || strings.ContainsAny(v, "\n\x1b\x07") {
					t.Errorf("%s is %d bytes (at most %d) or holds a control character: %q…", a.Key, len(v), limit, v[:min(len(v), 64)])
				}
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%s = %.64q…, want %.64q…", k, got[k], v)
				}
			}
			for _, k := range tc.capped {
				if !strings.HasSuffix(got[k], "…") {
					t.Errorf("%s = %.64q…: want it there, cut short", k, got[k])
				}
			}
		})
	}
}

// postFilesRead posts a 2026-07-28 tools/call of files.read on turn with
// params._meta members meta and headers, and wants HTTP 200.
func postFilesRead(t *testing.T, srv *httptest.Server, turn, token, meta string, headers map[string]string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+leases.MCPPath(turn), strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"files.read","arguments":{},"_meta":{`+meta+`}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "files.read")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("tools/call: HTTP %d", resp.StatusCode)
	}
}
