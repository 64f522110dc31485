package e2e

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/sharedos/toolshare/services/contract/outcome"
	"github.com/sharedos/toolshare/services/platform/pgdb/pgtest"
	"github.com/sharedos/toolshare/services/platform/telemetry"
	"github.com/sharedos/toolshare/services/systemtest/launch"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// gRPC span names, as otelgrpc names them: "{package}.{Service}/{Method}".
const (
	rpcInvokeTool = "sharedos.v1.RuntimeService/InvokeTool"
	rpcAuthorize  = "sharedos.v1.AuthzService/Authorize"
	rpcHandle     = "sharedos.v1.ToolHandlerService/Handle"
	healthPrefix  = "grpc.health.v1."
)

const (
	serverKind = tracepb.Span_SPAN_KIND_SERVER
	clientKind = tracepb.Span_SPAN_KIND_CLIENT
)

// traceWait bounds how long a test waits for every process's batch
// processor (OTEL_BSP_SCHEDULE_DELAY=100) to deliver a call's spans.
const traceWait = 20 * time.Second

// harnessTrace is the trace context a harness would send with a call.
func harnessTrace(t *testing.T) trace.SpanContext {
	t.Helper()
	var tid trace.TraceID
	var sid trace.SpanID
	if _, err := rand.Read(tid[:]); err != nil {
		t.Fatal(err)
	}
	if _, err := rand.Read(sid[:]); err != nil {
		t.Fatal(err)
	}
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
}

func traceparent(sc trace.SpanContext) string {
	return fmt.Sprintf("00-%s-%s-%s", sc.TraceID(), sc.SpanID(), sc.TraceFlags())
}

// traceHeaders sends the W3C traceparent of the call's context as an HTTP
// header, the way an instrumented harness's HTTP client does.
func traceHeaders(ctx context.Context) map[string]string {
	h := map[string]string{}
	propagation.TraceContext{}.Inject(ctx, propagation.MapCarrier(h))
	return h
}

// tracedStack starts the make-run stack on a fresh PostgreSQL database with
// every process exporting to a fake OTLP collector.
func tracedStack(t *testing.T) (*stack, *otlpCollector) {
	t.Helper()
	col := newOTLPCollector(t)
	dsn := pgtest.NewDatabase(t, nil) // the services run their own migrations (--migrate)
	s := startStack(t, launch.Options{DatabaseURL: dsn, Env: col.env()})
	return s, col
}

// traceCall is one tools/call of the span-tree test and what its trace must show.
type traceCall struct {
	name      string
	tool      string
	args      any
	status    string // outcome.StatusName
	code      string
	authorize bool // an Authorize RPC happens (a decision exists)
	handle    bool // the provider's Handle runs
	failed    bool // span status Error at bridge and kernel

	sc     trace.SpanContext // the harness's span the call continues
	callID string            // from _meta["io.sharedos/outcome"], when the result has it
}

// callTool makes the call and returns the result's outcome meta call id.
func callTool(t *testing.T, ctx context.Context, c *client.Client, tool string, args any, meta map[string]any) (*mcp.CallToolResult, string) {
	t.Helper()
	req := mcp.CallToolRequest{Params: mcp.CallToolParams{Name: tool, Arguments: args}}
	if meta != nil {
		req.Params.Meta = &mcp.Meta{AdditionalFields: meta}
	}
	res, err := c.CallTool(ctx, req)
	if err != nil {
		t.Fatalf("tools/call %s: JSON-RPC error %v (a refusal must be a result)", tool, err)
	}
	var callID string
	if res.Meta != nil {
		if m, ok := res.Meta.AdditionalFields[outcome.MetaKey].(map[string]any); ok {
			callID, _ = m["callId"].(string)
		}
	}
	return res, callID
}

// TestTracePerToolCall drives the make-run stack (PostgreSQL store) with
// OTLP export to an in-test collector and checks that every tools/call is
// one connected trace across the four processes, named and attributed as in
// platform/telemetry/names.go, and that no secret reaches a span.
func TestTracePerToolCall(t *testing.T) {
	s, col := tracedStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c := mcpClient(t, ctx, s.Demo.MCPURL, s.Demo.Token, transport.WithHTTPHeaderFunc(traceHeaders))
	defer func() {
		if t.Failed() {
			t.Logf("spans received (service: name kind × count):\n%s", summary(col.all()))
			for _, p := range s.Procs() {
				if !p.Running() {
					t.Logf("%s exited during the test (%v)", p.Name, p.Err())
				}
			}
		}
	}()

	calls := []*traceCall{
		{name: "allowed", tool: "files.read", args: map[string]any{"path": "/public/a.txt"},
			status: "succeeded", authorize: true, handle: true},
		{name: "denied", tool: "files.read", args: map[string]any{"path": "/private/a.txt"},
			status: "denied", code: outcome.PermissionDenied, authorize: true},
		{name: "unknown name", tool: "github.delete_repo", args: map[string]any{"repo": "x"},
			status: "denied", code: outcome.ToolUnavailable},
		{name: "failed invalid arguments", tool: "files.read", args: map[string]any{"path": 5},
			status: "failed", code: outcome.InvalidArguments, failed: true},
		{name: "failed after authorization", tool: "files.read", args: map[string]any{"path": "/public/no-such-file.txt"},
			status: "failed", code: outcome.HandlerError, authorize: true, handle: true, failed: true},
	}
	for _, tc := range calls {
		tc.sc = harnessTrace(t)
		res, callID := callTool(t, trace.ContextWithSpanContext(ctx, tc.sc), c, tc.tool, tc.args, nil)
		if res.IsError != (tc.status != "succeeded") {
			t.Fatalf("%s: isError=%v for a %s call", tc.name, res.IsError, tc.status)
		}
		tc.callID = callID
	}

	// One deadline for all: the calls are made, their spans are on the way.
	deadline := time.Now().Add(traceWait)
	for _, tc := range calls {
		t.Run(tc.name, func(t *testing.T) {
			spans := col.waitTrace(traceIDBytes(tc.sc), time.Until(deadline), expectedSpans(tc)...)
			parent := &tc.sc
			if len(spans) == 0 {
				// Report the broken continuation, then check the rest of
				// the tree on the trace the call did land in, so the
				// report names every other gap too.
				t.Errorf("no span arrived for trace %s (the harness's traceparent header): the bridge does not continue the HTTP traceparent, or nothing is exported", tc.sc.TraceID())
				tid := locateCall(col, tc)
				if tid == nil {
					t.Fatalf("no %s span with %s=%s %s=%s %s=%q arrived either", telemetry.SpanInvokeTool,
						telemetry.AttrToolRequested, tc.tool, telemetry.AttrOutcomeStatus, tc.status, telemetry.AttrOutcomeCode, tc.code)
				}
				spans, parent = col.waitTrace(tid, time.Until(deadline), expectedSpans(tc)...), nil
			}
			checkCallTrace(t, s, col, tc, spans, parent)
		})
	}

	t.Run("no traceparent starts a trace at the bridge", func(t *testing.T) {
		before := mcpTraces(col.all())
		plain := mcpClient(t, ctx, s.Demo.MCPURL, s.Demo.Token)
		callTool(t, ctx, plain, "files.read", map[string]any{"path": "/public/a.txt"}, nil)
		var fresh []string
		deadline := time.Now().Add(traceWait)
		for len(fresh) == 0 && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
			for id := range mcpTraces(col.all()) {
				if !before[id] {
					fresh = append(fresh, id)
				}
			}
		}
		if len(fresh) != 1 {
			t.Fatalf("a tools/call without traceparent made %d new traces with a bridge tools/call span, want 1", len(fresh))
		}
		// Wait for every span of the chain, parents included: a server span
		// ends after its children and may come in a later export batch.
		spans := col.waitTrace([]byte(fresh[0]), traceWait, expectedSpans(&traceCall{authorize: true, handle: true})...)
		var roots []span
		for _, sp := range spans {
			if len(sp.ParentSpanId) == 0 {
				roots = append(roots, sp)
			}
		}
		if len(roots) != 1 || roots[0].Service != telemetry.ServiceBridge || roots[0].Kind != serverKind {
			t.Errorf("want exactly one root span, a %s SERVER span; roots:\n%s\ntrace:\n%s", telemetry.ServiceBridge, dump(roots), dump(spans))
		}
		checkConnected(t, spans, nil)
	})

	t.Run("_meta.traceparent continues the harness trace (SEP-414)", func(t *testing.T) {
		sc := harnessTrace(t)
		plain := mcpClient(t, ctx, s.Demo.MCPURL, s.Demo.Token) // no traceparent header
		callTool(t, ctx, plain, "files.read", map[string]any{"path": "/public/a.txt"},
			map[string]any{"traceparent": traceparent(sc)})
		spans := col.waitTrace(traceIDBytes(sc), traceWait, expectedSpans(&traceCall{authorize: true, handle: true})...)
		mcpSpans := filter(spans, isMCPCall)
		if len(mcpSpans) != 1 {
			t.Fatalf("trace %s (from params._meta.traceparent) has %d bridge tools/call spans, want 1: the bridge does not continue _meta.traceparent\n%s",
				sc.TraceID(), len(mcpSpans), dump(spans))
		}
		if !descendsFrom(spans, mcpSpans[0], sc.SpanID()) {
			t.Errorf("bridge tools/call span does not descend from the _meta.traceparent span %s:\n%s", sc.SpanID(), dump(spans))
		}
		checkConnected(t, spans, &sc)
	})

	t.Run("canary: no token or argument value in any span", func(t *testing.T) {
		const canaryArg = "CANARY-ARG-8d1f3c7a2e"
		// A second turn opened through the operator CLI: its token is
		// returned by a traced OpenTurn and used by a traced MCP session.
		var opened struct{ TurnID, McpURL, Token string }
		s.ctlJSON(t, &opened, "turn", "open", "--principal", "alice", "--role", "engineer", "--harness", "canary-harness")
		if opened.Token == "" || opened.McpURL == "" {
			t.Fatalf("turn open returned %+v", opened)
		}
		cc := mcpClient(t, ctx, opened.McpURL, opened.Token, transport.WithHTTPHeaderFunc(traceHeaders))
		var traces []trace.SpanContext
		for _, args := range []map[string]any{
			{"path": "/public/" + canaryArg},              // allowed, handler error quoting the path
			{"path": "/private/" + canaryArg},             // denied by policy (resource carries it)
			{"path": []any{canaryArg}},                    // invalid arguments (validator sees it)
			{"path": "/public/a.txt", "extra": canaryArg}, // an extra key
		} {
			sc := harnessTrace(t)
			traces = append(traces, sc)
			callTool(t, trace.ContextWithSpanContext(ctx, sc), cc, "files.read", args, nil)
		}
		callTool(t, trace.ContextWithSpanContext(ctx, harnessTrace(t)), cc, "github.delete_repo", map[string]any{"repo": canaryArg}, nil)
		// The check is only meaningful once the calls' spans are in: wait
		// for the kernel span of each (found by the turn's harness name, so
		// this holds whether or not the traceparent was continued), then
		// for every exporter to go quiet.
		canaryKernel := func(sp span) bool {
			h, _ := sp.attr(telemetry.AttrHarnessName)
			return sp.Service == telemetry.ServiceCatalog && sp.Name == telemetry.SpanInvokeTool && h == "canary-harness"
		}
		deadline := time.Now().Add(traceWait)
		for len(filter(col.all(), canaryKernel)) < len(traces)+1 && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		if n := len(filter(col.all(), canaryKernel)); n != len(traces)+1 {
			t.Errorf("%d kernel spans with %s=canary-harness arrived, want %d: the grep below covers only those", n, telemetry.AttrHarnessName, len(traces)+1)
		}
		col.waitQuiet(time.Second, traceWait)
		all := col.all()
		if len(all) == 0 {
			t.Fatal("no spans exported at all")
		}
		secrets := map[string]string{
			"demo bearer token":   s.Demo.Token,
			"opened bearer token": opened.Token,
			"argument value":      canaryArg,
		}
		for what, secret := range secrets {
			for _, sp := range all {
				for _, txt := range sp.texts() {
					if strings.Contains(txt, secret) {
						t.Errorf("%s found in an exported span: %s: %q", what, sp, txt)
					}
				}
			}
		}
	})

	t.Run("health checks are not traced", func(t *testing.T) {
		for _, sp := range col.all() {
			if strings.HasPrefix(sp.Name, healthPrefix) || strings.HasPrefix(sp.Name, "/"+healthPrefix) {
				t.Errorf("health check traced: %s", sp)
			}
		}
	})

	t.Run("each process names its service", func(t *testing.T) {
		seen := map[string]bool{}
		for _, sp := range col.all() {
			seen[sp.Service] = true
		}
		for _, svc := range []string{telemetry.ServiceBridge, telemetry.ServiceCatalog, telemetry.ServiceAuthz, telemetry.ServiceFiles} {
			if !seen[svc] {
				t.Errorf("no span with resource service.name=%s (seen %v)", svc, keys(seen))
			}
		}
	})

	t.Run("metrics", func(t *testing.T) {
		want := []struct{ metric, service string }{
			{telemetry.MetricToolCallCount, telemetry.ServiceCatalog},
			{telemetry.MetricToolCallDuration, telemetry.ServiceCatalog},
			{telemetry.MetricAuthzDecisionDuration, telemetry.ServiceAuthz},
			{telemetry.MetricTurnsOpen, telemetry.ServiceBridge},
		}
		deadline := time.Now().Add(traceWait)
		for _, w := range want {
			var pts []metricPoint
			for {
				pts = col.metricPoints(w.metric)
				if slices.ContainsFunc(pts, func(p metricPoint) bool { return p.Service == w.service }) || time.Now().After(deadline) {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if !slices.ContainsFunc(pts, func(p metricPoint) bool { return p.Service == w.service }) {
				t.Errorf("metric %s not exported by %s", w.metric, w.service)
			}
		}
		// The call count is broken down by outcome: the denied call above
		// must show up as status denied, code permission_denied.
		if !slices.ContainsFunc(col.metricPoints(telemetry.MetricToolCallCount), func(p metricPoint) bool {
			return p.Attrs[telemetry.AttrOutcomeStatus] == "denied" && p.Attrs[telemetry.AttrOutcomeCode] == outcome.PermissionDenied
		}) {
			t.Errorf("%s has no point with %s=denied %s=%s: %v", telemetry.MetricToolCallCount,
				telemetry.AttrOutcomeStatus, telemetry.AttrOutcomeCode, outcome.PermissionDenied, col.metricPoints(telemetry.MetricToolCallCount))
		}
	})
}

// expectedSpans are the predicates waitTrace waits for: the last spans of
// each process a call reaches.
func expectedSpans(tc *traceCall) []func(span) bool {
	want := []func(span) bool{
		isMCPCall,
		hasSpan(telemetry.ServiceBridge, rpcInvokeTool, clientKind),
		hasSpan(telemetry.ServiceCatalog, rpcInvokeTool, serverKind),
		hasSpan(telemetry.ServiceCatalog, telemetry.SpanInvokeTool, -1),
	}
	if tc.authorize {
		want = append(want, hasSpan(telemetry.ServiceAuthz, rpcAuthorize, serverKind))
	}
	if tc.handle {
		want = append(want, hasSpan(telemetry.ServiceFiles, rpcHandle, serverKind))
	}
	return want
}

// locateCall finds the trace of tc by its kernel span's attributes (each
// test call has a distinct tool/status/code), for when the harness's trace
// id was not continued.
func locateCall(col *otlpCollector, tc *traceCall) []byte {
	deadline := time.Now().Add(2 * time.Second)
	for {
		var found []span
		for _, sp := range col.all() {
			if sp.Service != telemetry.ServiceCatalog || sp.Name != telemetry.SpanInvokeTool {
				continue
			}
			tool, _ := sp.attr(telemetry.AttrToolRequested)
			st, _ := sp.attr(telemetry.AttrOutcomeStatus)
			code, _ := sp.attr(telemetry.AttrOutcomeCode)
			if tool == tc.tool && st == tc.status && code == tc.code {
				found = append(found, sp)
			}
		}
		if len(found) == 1 {
			return found[0].TraceId
		}
		if time.Now().After(deadline) {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkCallTrace asserts the span tree of one tools/call: below the
// harness's span when parent is set, else as a trace of its own.
func checkCallTrace(t *testing.T, s *stack, col *otlpCollector, tc *traceCall, spans []span, parent *trace.SpanContext) {
	t.Helper()
	defer func() {
		if t.Failed() {
			t.Logf("trace %x:\n%s", spans[0].TraceId, dump(spans))
		}
	}()
	checkConnected(t, spans, parent)

	// The bridge: a SERVER span for the MCP request, continuing the
	// harness's span, and the tools/call span (the same span or below it).
	var entry []span
	for _, sp := range spans {
		if (parent != nil && string(sp.ParentSpanId) == string(spanIDBytes(*parent))) || (parent == nil && len(sp.ParentSpanId) == 0) {
			entry = append(entry, sp)
		}
	}
	if len(entry) != 1 || entry[0].Service != telemetry.ServiceBridge || entry[0].Kind != serverKind {
		t.Errorf("want one %s SERVER span as the trace's entry (child of the harness's span, or root); got:\n%s", telemetry.ServiceBridge, dump(entry))
	}
	callID := tc.callID
	mcpSpans := filter(spans, isMCPCall)
	if len(mcpSpans) != 1 {
		t.Errorf("want one %s span with %s=tools/call (named %q), got %d",
			telemetry.ServiceBridge, telemetry.AttrMCPMethod, telemetry.MCPSpanName("tools/call", tc.tool), len(mcpSpans))
	}
	var bridge *span
	if len(mcpSpans) == 1 {
		bridge = &mcpSpans[0]
		if bridge.Name != telemetry.MCPSpanName("tools/call", tc.tool) {
			t.Errorf("bridge span name %q, want %q", bridge.Name, telemetry.MCPSpanName("tools/call", tc.tool))
		}
		wantAttrs(t, *bridge, map[string]string{
			telemetry.AttrMCPMethod:     "tools/call",
			telemetry.AttrGenAIToolName: tc.tool,
			telemetry.AttrTurnID:        s.Demo.TurnID,
			telemetry.AttrToolRequested: tc.tool,
			telemetry.AttrOutcomeStatus: tc.status,
		})
		wantCode(t, *bridge, tc.code)
		id, _ := bridge.attr(telemetry.AttrCallID)
		if id == "" {
			t.Errorf("bridge span lacks %s", telemetry.AttrCallID)
		} else if callID != "" && id != callID {
			t.Errorf("bridge span %s=%s, result _meta callId %s", telemetry.AttrCallID, id, callID)
		}
		if callID == "" {
			callID = id
		}
		if bridge.failed() != tc.failed {
			t.Errorf("bridge tools/call span status %s, want Error=%v (Error for failed, never for denied)", bridge.GetStatus().GetCode(), tc.failed)
		}
	}

	// InvokeTool: exactly one client span (never retried) below the
	// tools/call span, and its server span in catalog-svc.
	invokeClient := one(t, spans, hasSpan(telemetry.ServiceBridge, rpcInvokeTool, clientKind), "bridge InvokeTool CLIENT span")
	invokeServer := one(t, spans, hasSpan(telemetry.ServiceCatalog, rpcInvokeTool, serverKind), "catalog InvokeTool SERVER span")
	if invokeClient != nil && bridge != nil && !descendsFrom(spans, *invokeClient, spanID(*bridge)) {
		t.Errorf("InvokeTool client span is not below the bridge tools/call span")
	}
	childOf(t, invokeServer, invokeClient, "catalog InvokeTool SERVER", "bridge InvokeTool CLIENT")
	for _, sp := range []*span{invokeClient, invokeServer} {
		if sp != nil && sp.failed() {
			t.Errorf("%s is Error: a %s outcome is a result, not an RPC error", sp, tc.status)
		}
	}

	// The kernel span and its attributes.
	kernel := one(t, spans, hasSpan(telemetry.ServiceCatalog, telemetry.SpanInvokeTool, -1), "kernel "+telemetry.SpanInvokeTool+" span")
	if kernel != nil {
		if invokeServer != nil && !descendsFrom(spans, *kernel, spanID(*invokeServer)) {
			t.Errorf("kernel span is not below the catalog InvokeTool SERVER span")
		}
		want := map[string]string{
			telemetry.AttrTurnID:        s.Demo.TurnID,
			telemetry.AttrCatalogHash:   s.Demo.CatalogHash,
			telemetry.AttrToolRequested: tc.tool,
			telemetry.AttrHarnessName:   "demo",
			telemetry.AttrOutcomeStatus: tc.status,
		}
		if callID != "" {
			want[telemetry.AttrCallID] = callID
		}
		if tc.code != outcome.ToolUnavailable {
			want[telemetry.AttrToolResolved] = tc.tool
		}
		wantAttrs(t, *kernel, want)
		wantCode(t, *kernel, tc.code)
		if tc.authorize {
			for _, k := range []string{telemetry.AttrDecisionID, telemetry.AttrPolicyRevision} {
				if v, _ := kernel.attr(k); v == "" {
					t.Errorf("kernel span lacks %s (a decision was made)", k)
				}
			}
		}
		if kernel.failed() != tc.failed {
			t.Errorf("kernel span status %s, want Error=%v", kernel.GetStatus().GetCode(), tc.failed)
		}
	}

	// Authorize and Handle: client span in catalog-svc, server span in
	// authz-svc / the files provider, only when the pipeline gets there.
	hop := func(rpc, server string, want bool) {
		clients := filter(spans, hasSpan(telemetry.ServiceCatalog, rpc, clientKind))
		servers := filter(spans, hasSpan(server, rpc, serverKind))
		if !want {
			if len(clients)+len(servers) != 0 {
				t.Errorf("%s happened for a %s/%s call:\n%s", rpc, tc.status, tc.code, dump(append(clients, servers...)))
			}
			return
		}
		cl := one(t, spans, hasSpan(telemetry.ServiceCatalog, rpc, clientKind), "catalog "+rpc+" CLIENT span")
		sv := one(t, spans, hasSpan(server, rpc, serverKind), server+" "+rpc+" SERVER span")
		childOf(t, sv, cl, server+" "+rpc+" SERVER", "catalog "+rpc+" CLIENT")
		if cl != nil && kernel != nil && !descendsFrom(spans, *cl, spanID(*kernel)) {
			t.Errorf("%s client span is not below the kernel span", rpc)
		}
		if sv != nil && sv.failed() && rpc == rpcAuthorize {
			t.Errorf("Authorize server span is Error: a decision (allow or deny) is an answer")
		}
	}
	hop(rpcAuthorize, telemetry.ServiceAuthz, tc.authorize)
	hop(rpcHandle, telemetry.ServiceFiles, tc.handle)

	// The operation record: pgx client spans in catalog-svc below the
	// kernel span, inserting the pending record and completing it.
	var ops []string
	for _, sp := range spans {
		if sp.Service != telemetry.ServiceCatalog || sp.Kind != clientKind {
			continue
		}
		if sys, _ := sp.attr(telemetry.AttrDBSystemName); sys != telemetry.DBSystemPostgreSQL {
			continue
		}
		if coll, _ := sp.attr(telemetry.AttrDBCollectionName); coll != "catalog.operations" {
			continue
		}
		if kernel != nil && !descendsFrom(spans, sp, spanID(*kernel)) {
			t.Errorf("operation record span %s is not below the kernel span", sp)
		}
		op, _ := sp.attr(telemetry.AttrDBOperationName)
		ops = append(ops, op)
	}
	if !slices.Contains(ops, "INSERT") || !slices.Contains(ops, "UPDATE") {
		t.Errorf("operation record spans (db.collection.name=catalog.operations) %v, want an INSERT (pending) and an UPDATE (completed)", ops)
	}

	// One trace per call: nothing carrying this call id went elsewhere.
	if callID != "" {
		for _, sp := range col.all() {
			if v, _ := sp.attr(telemetry.AttrCallID); v == callID && string(sp.TraceId) != string(spans[0].TraceId) {
				t.Errorf("span of call %s in another trace %x: %s", callID, sp.TraceId, sp)
			}
		}
	}
	for _, sp := range spans {
		if strings.HasPrefix(sp.Name, healthPrefix) {
			t.Errorf("health check span in a call trace: %s", sp)
		}
	}
}

// checkConnected asserts every span's parent is in the trace, or is the
// harness's span (when parent is given); with parent nil exactly one span
// is a root.
func checkConnected(t *testing.T, spans []span, parent *trace.SpanContext) {
	t.Helper()
	ids := map[string]bool{}
	for _, sp := range spans {
		ids[string(sp.SpanId)] = true
	}
	roots := 0
	for _, sp := range spans {
		p := string(sp.ParentSpanId)
		switch {
		case p == "":
			roots++
			if parent != nil {
				t.Errorf("span %s starts a new root although the call carried a traceparent", sp)
			}
		case ids[p]:
		case parent != nil && p == string(spanIDBytes(*parent)):
		default:
			t.Errorf("span %s has a parent %x that is not in the trace (broken propagation)", sp, sp.ParentSpanId)
		}
	}
	if parent == nil && roots != 1 {
		t.Errorf("trace has %d root spans, want 1", roots)
	}
}

func isMCPCall(sp span) bool {
	m, _ := sp.attr(telemetry.AttrMCPMethod)
	return sp.Service == telemetry.ServiceBridge && m == "tools/call"
}

// hasSpan matches service and name, and kind unless kind is -1.
func hasSpan(service, name string, kind tracepb.Span_SpanKind) func(span) bool {
	return func(sp span) bool {
		return sp.Service == service && sp.Name == name && (kind == -1 || sp.Kind == kind)
	}
}

func filter(spans []span, f func(span) bool) []span {
	var out []span
	for _, sp := range spans {
		if f(sp) {
			out = append(out, sp)
		}
	}
	return out
}

// one returns the single span matching f, reporting zero or several.
func one(t *testing.T, spans []span, f func(span) bool, what string) *span {
	t.Helper()
	m := filter(spans, f)
	if len(m) != 1 {
		t.Errorf("want exactly one %s, got %d", what, len(m))
		if len(m) == 0 {
			return nil
		}
	}
	return &m[0]
}

func childOf(t *testing.T, child, parent *span, childName, parentName string) {
	t.Helper()
	if child != nil && parent != nil && string(child.ParentSpanId) != string(parent.SpanId) {
		t.Errorf("%s (parent %x) is not the child of %s (%x)", childName, child.ParentSpanId, parentName, parent.SpanId)
	}
}

func traceIDBytes(sc trace.SpanContext) []byte { id := sc.TraceID(); return id[:] }

func spanIDBytes(sc trace.SpanContext) []byte { id := sc.SpanID(); return id[:] }

func spanID(sp span) trace.SpanID {
	var id trace.SpanID
	copy(id[:], sp.SpanId)
	return id
}

// descendsFrom reports whether ancestor is sp's parent, grandparent, ...
// within spans (or the remote parent the chain ends at).
func descendsFrom(spans []span, sp span, ancestor trace.SpanID) bool {
	byID := map[string]span{}
	for _, s := range spans {
		byID[string(s.SpanId)] = s
	}
	want := string(ancestor[:])
	for range len(spans) + 1 {
		p := string(sp.ParentSpanId)
		if p == want {
			return true
		}
		next, ok := byID[p]
		if !ok {
			return false
		}
		sp = next
	}
	return false
}

func wantAttrs(t *testing.T, sp span, want map[string]string) {
	t.Helper()
	for k, v := range want {
		got, ok := sp.attr(k)
		switch {
		case !ok:
			t.Errorf("%s %q lacks attribute %s (want %q)", sp.Service, sp.Name, k, v)
		case got != v:
			t.Errorf("%s %q: %s = %q, want %q", sp.Service, sp.Name, k, got, v)
		}
	}
}

// wantCode checks sharedos.outcome.code: the code for refusals; for a
// success it may be absent or empty.
func wantCode(t *testing.T, sp span, code string) {
	t.Helper()
	got, ok := sp.attr(telemetry.AttrOutcomeCode)
	if code == "" {
		if got != "" {
			t.Errorf("%s %q: %s = %q on a success", sp.Service, sp.Name, telemetry.AttrOutcomeCode, got)
		}
		return
	}
	if !ok || got != code {
		t.Errorf("%s %q: %s = %q (set %v), want %q", sp.Service, sp.Name, telemetry.AttrOutcomeCode, got, ok, code)
	}
}

// mcpTraces returns the ids of the traces holding a bridge tools/call span.
func mcpTraces(spans []span) map[string]bool {
	out := map[string]bool{}
	for _, sp := range spans {
		if isMCPCall(sp) {
			out[string(sp.TraceId)] = true
		}
	}
	return out
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
