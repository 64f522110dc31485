package app_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sharedos/toolshare/services/systemtest/launch"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sharedos/toolshare/bridge-svc/internal/app"
	"github.com/sharedos/toolshare/bridge-svc/internal/bridgetest"
	"github.com/sharedos/toolshare/bridge-svc/internal/leases"
	leasespg "github.com/sharedos/toolshare/bridge-svc/internal/leases/postgres"
	"github.com/sharedos/toolshare/bridge-svc/migrations"
	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/platform/grpcx"
	"github.com/sharedos/toolshare/services/platform/pgdb"
	"github.com/sharedos/toolshare/services/platform/pgdb/pgtest"
)

// Benchmarks of the bridge path. BenchmarkToolCall is the headline: the
// real services as separate processes (services/systemtest/launch; `make build`
// first). BenchmarkToolCallFakeKernel and BenchmarkGRPCEcho use the FAKE
// kernel (no authz, no provider hop, no records) and are kept only to
// isolate the bridge's own cost. Run with `make bench-bridge`; p50/p90/p99
// come from per-op latencies.

// latencies collects per-op durations across goroutines.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

func (l *latencies) report(b *testing.B) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return
	}
	slices.Sort(l.d)
	q := func(p float64) float64 { return float64(l.d[int(p*float64(len(l.d)-1))].Microseconds()) }
	b.ReportMetric(q(0.50), "p50-µs")
	b.ReportMetric(q(0.90), "p90-µs")
	b.ReportMetric(q(0.99), "p99-µs")
}

func runCalls(b *testing.B, m *launch.MCPTarget, tool string, parallel bool) {
	m.Init(b)
	m.CheckCall(b, tool)
	body := m.CallBody(tool)
	var lat latencies
	one := func() {
		start := time.Now()
		st, err := m.Post(body, "tools/call", tool)
		if err != nil || st != 200 {
			b.Errorf("call: %d %v", st, err)
		}
		lat.add(time.Since(start))
	}
	runLoop(b, parallel, one)
	lat.report(b)
}

// benchEra and concurrency name one point of the grid every MCP path is
// measured on: both protocol eras, one caller and sixteen.
type benchEra struct {
	name   string
	modern bool
}

type concurrency struct {
	name     string
	parallel bool
}

var (
	benchEras     = []benchEra{{"2026-07-28", true}, {"2025-11-25", false}}
	concurrencies = []concurrency{{"c=1", false}, {"c=16", true}}
)

// eachPoint runs f for every era and concurrency, eras outermost.
func eachPoint(f func(e benchEra, c concurrency)) {
	for _, e := range benchEras {
		for _, c := range concurrencies {
			f(e, c)
		}
	}
}

// runLoop runs one b.N times, from one goroutine or from 16 (RunParallel),
// and reports calls/s and the 1-minute load average.
func runLoop(b *testing.B, parallel bool, one func()) {
	b.ResetTimer()
	start := time.Now()
	if parallel {
		b.SetParallelism(16 / runtime.GOMAXPROCS(0))
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				one()
			}
		})
	} else {
		for i := 0; i < b.N; i++ {
			one()
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "calls/s")
	b.ReportMetric(launch.LoadAvg(), "load1")
}

// BenchmarkToolCall is the full path on the real services, each its own
// process from bin/ (services/systemtest/launch): MCP client (this process, one raw
// keep-alive HTTP JSON-RPC client for every target) → bridge-svc → kernel
// (catalog-svc) → authz-svc (OPA, example policy) → files-provider reading
// /public/a.txt, on the demo turn (alice/engineer) with its bearer token.
// "real-memory" runs every service on the embedded store, "real-postgres"
// on PostgreSQL (leases, catalogue and operation records; the bridge's
// default 500 ms lease-status reuse). In the same run: a plain mcp-go
// StreamableHTTPServer with an in-process echo tool of the same name and
// arguments, and a bare gRPC echo (InvokeTool answered at once by a separate
// process, plain grpc-go). Both eras, c=1 and c=16.
// baselineRootEnv names a baseline checkout whose bin/ holds built binaries;
// BenchmarkToolCall then adds its "baseline-postgres" stack.
const baselineRootEnv = "SHAREDOS_BENCH_BASELINE_ROOT"

func BenchmarkToolCall(b *testing.B) {
	echo, echoPID := launch.StartEcho(b)
	plain := launch.PlainMCP(b)
	root := launch.RepoRoot(b)
	newDB := func() string { return pgtest.NewDatabase(b, func(context.Context, string) error { return nil }) }
	// real-* run with mutual TLS and caller authorization on the internal
	// plane (what users run); real-memory-plaintext is the same build with
	// --insecure-plaintext, the cost of mTLS in the same run (issue 16).
	stacks := []struct {
		name  string
		root  string
		dsn   func() string
		plain bool
	}{
		{"real-memory", root, func() string { return "" }, false},
		{"real-memory-plaintext", root, func() string { return "" }, true},
		{"real-postgres", root, newDB, false},
	}
	// A baseline checkout (built with `make build`) runs beside this one,
	// so a before/after ratio comes from one run under one load.
	// SHAREDOS_BENCH_BASELINE_STACK=memory-plaintext runs it on the
	// embedded store without TLS instead (the cost of mTLS and grants
	// against a build that had neither).
	if base := os.Getenv(baselineRootEnv); base != "" {
		name, dsn, plain := "baseline-postgres", newDB, false
		if os.Getenv("SHAREDOS_BENCH_BASELINE_STACK") == "memory-plaintext" {
			name, dsn, plain = "baseline-memory-plaintext", func() string { return "" }, true
		}
		stacks = append(stacks, struct {
			name  string
			root  string
			dsn   func() string
			plain bool
		}{name, base, dsn, plain})
	}
	demos := make([]*realStack, len(stacks))
	for i, st := range stacks {
		demos[i] = startRealStackFrom(b, st.root, st.dsn(), st.plain)
	}
	const args = `{"path":"/public/a.txt"}`
	echoCall := &sharedosv1.ToolCall{CallId: "c", TurnId: "t", Tool: "files.read", ArgumentsJson: []byte(args)}
	for _, c := range concurrencies {
		b.Run("echo-grpc-process/"+c.name, func(b *testing.B) {
			cpu := launch.NewCPUMeter(map[string]int{"echo": echoPID})
			defer func() { cpu.Report(b, b.N) }()
			var lat latencies
			runLoop(b, c.parallel, func() {
				start := time.Now()
				if _, err := echo.InvokeTool(context.Background(), echoCall); err != nil {
					b.Error(err)
				}
				lat.add(time.Since(start))
			})
			lat.report(b)
		})
	}
	eachPoint(func(e benchEra, c concurrency) {
		b.Run("plain/"+e.name+"/"+c.name, func(b *testing.B) {
			runCalls(b, &launch.MCPTarget{URL: plain, Modern: e.modern, Args: args}, "files.read", c.parallel)
		})
		for i, st := range stacks {
			d := demos[i].demo
			b.Run(st.name+"/"+e.name+"/"+c.name, func(b *testing.B) {
				cpu := launch.NewCPUMeter(demos[i].demo.PIDs)
				runCalls(b, &launch.MCPTarget{URL: d.MCPURL, Token: d.Token, Modern: e.modern, Args: args}, "files.read", c.parallel)
				cpu.Report(b, b.N)
			})
		}
	})
}

// BenchmarkToolCallFakeKernel is the earlier variant with the FAKE kernel
// over loopback gRPC (answers at once: no authz, no provider, no records),
// all in this process: the bridge's own cost, not the full path.
func BenchmarkToolCallFakeKernel(b *testing.B) {
	f := &fixture{catalog: &bridgetest.FakeCatalog{}, kernel: bridgetest.NewFakeKernel()}
	f.catalog.SetTools(bridgetest.DefaultTools())
	addr := bridgetest.ServeFakes(b, f.catalog, f.kernel)
	f.bridge = bridgetest.Start(b, addr, "")
	lease := f.bridge.Open(b, func(r *sharedosv1.OpenTurnRequest) { r.Ttl = nil })
	dsn := pgtest.NewDatabase(b, migrations.Up)
	pgBridge := bridgetest.Start(b, addr, dsn)
	pgLease := pgBridge.Open(b, func(r *sharedosv1.OpenTurnRequest) { r.Ttl = nil })
	// The production default: a lease status read is reused for 500 ms.
	pgCached := bridgetest.Start(b, addr, dsn, func(c *app.Config) { c.StatusCacheTTL = 500 * time.Millisecond })
	pgCachedURL := strings.Replace(pgLease.GetMcpUrl(), pgBridge.URL, pgCached.URL, 1)
	plain := launch.PlainMCP(b)

	eachPoint(func(e benchEra, c concurrency) {
		b.Run("plain/"+e.name+"/"+c.name, func(b *testing.B) {
			runCalls(b, &launch.MCPTarget{URL: plain, Modern: e.modern}, "notes.append", c.parallel)
		})
		b.Run("bridge+fakekernel/"+e.name+"/"+c.name, func(b *testing.B) {
			runCalls(b, &launch.MCPTarget{URL: lease.GetMcpUrl(), Token: lease.GetToken(), Modern: e.modern}, "notes.append", c.parallel)
		})
		// The same with leases in PostgreSQL: one status read per request
		// (--lease-cache-ttl 0), and the default 500 ms reuse.
		b.Run("bridge+fakekernel+pgleases-ttl0/"+e.name+"/"+c.name, func(b *testing.B) {
			runCalls(b, &launch.MCPTarget{URL: pgLease.GetMcpUrl(), Token: pgLease.GetToken(), Modern: e.modern}, "notes.append", c.parallel)
		})
		b.Run("bridge+fakekernel+pgleases-ttl500ms/"+e.name+"/"+c.name, func(b *testing.B) {
			runCalls(b, &launch.MCPTarget{URL: pgCachedURL, Token: pgLease.GetToken(), Modern: e.modern}, "notes.append", c.parallel)
		})
	})
}

// BenchmarkGRPCEcho is the bare gRPC unary round trip on loopback with the
// fake kernel's InvokeTool answering immediately IN THIS PROCESS. The unit
// of the latency goal is the separate-process echo-grpc-process row of
// BenchmarkToolCall (same run); this one is kept for comparison.
func BenchmarkGRPCEcho(b *testing.B) {
	catalog, kernel := &bridgetest.FakeCatalog{}, bridgetest.NewFakeKernel()
	addr := bridgetest.ServeFakes(b, catalog, kernel)
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Close()
	rt := sharedosv1.NewRuntimeServiceClient(cc)
	call := &sharedosv1.ToolCall{CallId: "c", TurnId: "t", Tool: "echo", ArgumentsJson: []byte(`{"text":"hello"}`)}
	var lat latencies
	runLoop(b, false, func() {
		start := time.Now()
		if _, err := rt.InvokeTool(context.Background(), call); err != nil {
			b.Fatal(err)
		}
		lat.add(time.Since(start))
	})
	lat.report(b)
}

func fiftyTools() []*sharedosv1.PublishedTool {
	var out []*sharedosv1.PublishedTool
	for i := range 50 {
		out = append(out, bridgetest.Tool(fmt.Sprintf("bench.tool_%02d", i), "A benchmark tool with a realistic description.",
			`{"type":"object","properties":{"path":{"type":"string"},"limit":{"type":"integer","minimum":1}},"required":["path"]}`,
			"", `{"readOnlyHint":true}`))
	}
	return out
}

// BenchmarkOpenTurn50Tools: OpenTurn over gRPC with a 50-tool catalogue
// (fake catalog over gRPC), on the memory and the PostgreSQL store; and, as
// P6's baseline, one INSERT with synchronous commit of a row holding the
// same 50 published tools. The two round trips an OpenTurn is made of
// beside its INSERT are measured alone: grant-hop, the same GrantTurn to
// the same fake kernel called directly, and client-hop, the client's
// OpenTurn answered with the same lease by a server that does nothing
// else. The floor of P6 is insert-baseline + grant-hop + client-hop;
// lease-insert is the path's own INSERT alone.
func BenchmarkOpenTurn50Tools(b *testing.B) {
	b.Run("client-hop", func(b *testing.B) {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		srv := grpc.NewServer()
		sharedosv1.RegisterBridgeServiceServer(srv, fixedLease{lease: &sharedosv1.TurnLease{
			TurnId: "turn-0", McpUrl: "http://127.0.0.1:1/turns/turn-0/mcp", Token: strings.Repeat("t", 43),
			ExpiresAt: timestamppb.Now(), CatalogHash: "sha256:" + strings.Repeat("0", 64), Tools: fiftyTools(),
		}})
		go func() { _ = srv.Serve(lis) }()
		defer srv.Stop()
		cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			b.Fatal(err)
		}
		defer cc.Close()
		client, req := sharedosv1.NewBridgeServiceClient(cc), bridgetest.OpenRequest()
		var lat latencies
		for b.Loop() {
			start := time.Now()
			if l, err := client.OpenTurn(context.Background(), req); err != nil || len(l.GetTools()) != 50 {
				b.Fatalf("OpenTurn: %d tools, %v", len(l.GetTools()), err)
			}
			lat.add(time.Since(start))
		}
		lat.report(b)
	})
	b.Run("grant-hop", func(b *testing.B) {
		client, open := fiftyToolKernel(b), bridgetest.OpenRequest()
		var lat latencies
		i := 0
		for b.Loop() {
			i++
			start := time.Now()
			resp, err := client.GrantTurn(context.Background(), grantRequest(open, fmt.Sprint("turn-", i), start.Add(10*time.Minute)))
			if err != nil || len(resp.GetTools()) != 50 {
				b.Fatalf("GrantTurn: %d tools, %v", len(resp.GetTools()), err)
			}
			lat.add(time.Since(start))
		}
		lat.report(b)
	})
	b.Run("insert-baseline", func(b *testing.B) {
		ctx := context.Background()
		pool, err := pgdb.Open(ctx, pgtest.NewDatabase(b, migrations.Up))
		if err != nil {
			b.Fatal(err)
		}
		defer pool.Close()
		if _, err := pool.Exec(ctx, `CREATE TABLE bench_insert (id bigserial PRIMARY KEY, turn_id text NOT NULL, tools bytea NOT NULL, created_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			b.Fatal(err)
		}
		var row []byte
		for _, t := range fiftyTools() {
			m, err := proto.Marshal(t)
			if err != nil {
				b.Fatal(err)
			}
			row = append(row, m...)
		}
		var lat latencies
		i := 0
		for b.Loop() {
			i++
			start := time.Now()
			if _, err := pool.Exec(ctx, `INSERT INTO bench_insert (turn_id, tools) VALUES ($1, $2)`, fmt.Sprint("turn-", i), row); err != nil {
				b.Fatal(err)
			}
			lat.add(time.Since(start))
		}
		lat.report(b)
		b.ReportMetric(float64(len(row)), "row-B")
	})
	// The path's own INSERT: the PostgreSQL lease store's Create of the
	// lease the postgres sub-benchmark stores (the same 50 tools, its
	// catalogue already stored), as the bridge's service role.
	b.Run("lease-insert", func(b *testing.B) {
		ctx := context.Background()
		open, now := bridgetest.OpenRequest(), time.Now().UTC().Truncate(time.Microsecond)
		resp, err := fiftyToolKernel(b).GrantTurn(ctx, grantRequest(open, "turn-0", now.Add(10*time.Minute)))
		if err != nil {
			b.Fatal(err)
		}
		pool, err := pgdb.Open(ctx, pgtest.NewDatabase(b, migrations.Up), pgdb.WithRole(migrations.ServiceRole))
		if err != nil {
			b.Fatal(err)
		}
		defer pool.Close()
		st := leasespg.New(pool)
		var lat latencies
		i := 0
		for b.Loop() {
			i++
			l := &leases.Lease{TurnID: fmt.Sprint("turn-", i), Context: open.GetContext(), Policy: open.GetPolicy(),
				Harness: open.GetHarness(), DeclaredModel: open.GetDeclaredModel(), CatalogHash: resp.GetCatalogHash(),
				Tools: resp.GetTools(), Grant: resp.GetGrant(), OpenedAt: now, ExpiresAt: now.Add(10 * time.Minute)}
			l.TokenHash[0], l.TokenHash[1], l.TokenHash[2] = byte(i), byte(i>>8), byte(i>>16)
			start := time.Now()
			if err := st.Create(ctx, l); err != nil {
				b.Fatal(err)
			}
			lat.add(time.Since(start))
		}
		lat.report(b)
	})
	for _, store := range []string{"memory", "postgres"} {
		b.Run(store, func(b *testing.B) {
			catalog, kernel := &bridgetest.FakeCatalog{}, bridgetest.NewFakeKernel()
			catalog.SetTools(fiftyTools())
			addr := bridgetest.ServeFakes(b, catalog, kernel)
			dsn := ""
			if store == "postgres" {
				dsn = pgtest.NewDatabase(b, migrations.Up)
			}
			br := bridgetest.Start(b, addr, dsn)
			req := bridgetest.OpenRequest()
			var lat latencies
			for b.Loop() {
				start := time.Now()
				if _, err := br.Client.OpenTurn(context.Background(), req); err != nil {
					b.Fatal(err)
				}
				lat.add(time.Since(start))
			}
			lat.report(b)
		})
	}
}

// fiftyToolKernel is a client of the fake kernel over fiftyTools, as
// plain gRPC; it closes at the benchmark's end.
func fiftyToolKernel(b *testing.B) sharedosv1.RuntimeServiceClient {
	catalog, kernel := &bridgetest.FakeCatalog{}, bridgetest.NewFakeKernel()
	catalog.SetTools(fiftyTools())
	cc, err := grpc.NewClient(bridgetest.ServeFakes(b, catalog, kernel), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cc.Close() })
	return sharedosv1.NewRuntimeServiceClient(cc)
}

// grantRequest is the GrantTurn the bridge sends for open as turn.
func grantRequest(open *sharedosv1.OpenTurnRequest, turn string, expires time.Time) *sharedosv1.GrantTurnRequest {
	return &sharedosv1.GrantTurnRequest{
		TurnId: turn, Context: open.GetContext(), ExpiresAt: timestamppb.New(expires),
		Harness: open.GetHarness(), DeclaredModel: open.GetDeclaredModel(), Policy: open.GetPolicy(),
	}
}

// fixedLease answers every OpenTurn with the same lease.
type fixedLease struct {
	sharedosv1.UnimplementedBridgeServiceServer
	lease *sharedosv1.TurnLease
}

func (f fixedLease) OpenTurn(context.Context, *sharedosv1.OpenTurnRequest) (*sharedosv1.TurnLease, error) {
	return f.lease, nil
}

// BenchmarkIdleTurnMemory: heap held per open, idle turn whose MCP server
// has been built (one tools/list) — lease (memory store) + cached server.
func BenchmarkIdleTurnMemory(b *testing.B) {
	catalog, kernel := &bridgetest.FakeCatalog{}, bridgetest.NewFakeKernel()
	tools := append(bridgetest.DefaultTools(), fiftyTools()[:7]...)
	catalog.SetTools(tools)
	addr := bridgetest.ServeFakes(b, catalog, kernel)
	br := bridgetest.Start(b, addr, "")
	const turns = 2000
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for b.Loop() {
		for range turns {
			l, err := br.Client.OpenTurn(context.Background(), bridgetest.OpenRequest())
			if err != nil {
				b.Fatal(err)
			}
			t := &launch.MCPTarget{URL: l.GetMcpUrl(), Token: l.GetToken(), Modern: true}
			if st, err := t.Post(modernList(1), "tools/list", ""); err != nil || st != 200 {
				b.Fatalf("list: %d %v", st, err)
			}
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	n := float64(len(br.App.CachedTurns()))
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "heap-B/turn")
	b.ReportMetric(n, "turns")
	b.ReportMetric(float64(len(tools)), "tools/turn")
}

// BenchmarkOpenTurnToolsList10k (issue 20, P3): OpenTurn over gRPC with
// 10,000 visible tools, then the turn's tools/list over HTTP (2026-07-28),
// its whole answer read — and, in the same run, the baseline: one gRPC
// unary call carrying as many bytes as that answer to a bare echo process;
// and the floor mcp-go sets for any server of these 10,000 tools: plain
// mcp-go answering tools/list (its server built once), and building that
// server (AddTools) and then answering, as a turn's first list must.
func BenchmarkOpenTurnToolsList10k(b *testing.B) {
	const (
		desc   = "A benchmark tool with a realistic description."
		schema = `{"type":"object","properties":{"path":{"type":"string"},"limit":{"type":"integer","minimum":1}},"required":["path"]}`
	)
	tools := make([]*sharedosv1.PublishedTool, 10_000)
	for i := range tools {
		tools[i] = bridgetest.Tool(fmt.Sprintf("bench.tool_%05d", i), desc, schema, "", `{"readOnlyHint":true}`)
	}
	catalog, kernel := &bridgetest.FakeCatalog{}, bridgetest.NewFakeKernel()
	catalog.SetTools(tools)
	br := bridgetest.Start(b, bridgetest.ServeFakes(b, catalog, kernel), "")
	// A host's client for 10,000 tools takes answers past gRPC's 4 MiB
	// default, as grpcx's clients do.
	cc, err := grpc.NewClient(br.App.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(grpcx.MaxMessageSize)))
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Close()
	host := sharedosv1.NewBridgeServiceClient(cc)
	// The answer's size, for the baseline.
	l, err := host.OpenTurn(context.Background(), bridgetest.OpenRequest())
	if err != nil {
		b.Fatal(err)
	}
	m := &launch.MCPTarget{URL: l.GetMcpUrl(), Token: l.GetToken(), Modern: true}
	req, _ := http.NewRequest(http.MethodPost, m.URL, strings.NewReader(modernList(1)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+m.Token)
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/list")
	resp, err := launch.MCPClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || !strings.Contains(string(body), "bench.tool_09999") {
		b.Fatalf("tools/list: %d, %d bytes, %v", resp.StatusCode, len(body), err)
	}

	b.Run("open+list", func(b *testing.B) {
		var lat, open latencies
		for b.Loop() {
			start := time.Now()
			l, err := host.OpenTurn(context.Background(), bridgetest.OpenRequest())
			if err != nil {
				b.Fatal(err)
			}
			open.add(time.Since(start))
			t := &launch.MCPTarget{URL: l.GetMcpUrl(), Token: l.GetToken(), Modern: true}
			if st, err := t.Post(modernList(1), "tools/list", ""); err != nil || st != 200 {
				b.Fatalf("tools/list: %d %v", st, err)
			}
			lat.add(time.Since(start))
		}
		lat.report(b)
		open.mu.Lock()
		slices.Sort(open.d)
		b.ReportMetric(float64(open.d[len(open.d)/2].Microseconds()), "open-p50-µs")
		open.mu.Unlock()
		b.ReportMetric(float64(len(body)), "list-B")
	})
	plainTools := make([]server.ServerTool, len(tools))
	for i, t := range tools {
		tool := mcp.NewToolWithRawSchema(t.GetName(), desc, []byte(schema))
		tool.Annotations.ReadOnlyHint = mcp.ToBoolPtr(true)
		plainTools[i] = server.ServerTool{Tool: tool, Handler: func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("ok"), nil
		}}
	}
	plainServer := func() *server.MCPServer {
		s := server.NewMCPServer("plain", "1", server.WithToolCapabilities(false))
		s.AddTools(plainTools...)
		return s
	}
	plainList := func(b *testing.B, url string) {
		t := &launch.MCPTarget{URL: url, Modern: true}
		if st, err := t.Post(modernList(1), "tools/list", ""); err != nil || st != 200 {
			b.Fatalf("plain tools/list: %d %v", st, err)
		}
	}
	b.Run("plain-mcp-go-list", func(b *testing.B) {
		ts := httptest.NewServer(server.NewStreamableHTTPServer(plainServer(), server.WithDisableStreaming(true)))
		defer ts.Close()
		var lat latencies
		for b.Loop() {
			start := time.Now()
			plainList(b, ts.URL)
			lat.add(time.Since(start))
		}
		lat.report(b)
	})
	b.Run("plain-mcp-go-build+list", func(b *testing.B) {
		var (
			mu  sync.Mutex
			cur http.Handler
		)
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			h := cur
			mu.Unlock()
			h.ServeHTTP(w, r)
		}))
		defer ts.Close()
		var lat latencies
		for b.Loop() {
			start := time.Now()
			h := server.NewStreamableHTTPServer(plainServer(), server.WithDisableStreaming(true))
			mu.Lock()
			cur = h
			mu.Unlock()
			plainList(b, ts.URL)
			lat.add(time.Since(start))
		}
		lat.report(b)
	})
	b.Run("grpc-unary-same-bytes", func(b *testing.B) {
		echo, _ := launch.StartEcho(b)
		call := &sharedosv1.ToolCall{CallId: "c", TurnId: "t", Tool: "echo", ArgumentsJson: body}
		var lat latencies
		for b.Loop() {
			start := time.Now()
			if _, err := echo.InvokeTool(context.Background(), call); err != nil {
				b.Fatal(err)
			}
			lat.add(time.Since(start))
		}
		lat.report(b)
	})
}
