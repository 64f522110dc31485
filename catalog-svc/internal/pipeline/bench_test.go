package pipeline_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sharedos/toolshare/services/systemtest/launch"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/platform/grpcx"
	"github.com/sharedos/toolshare/services/platform/pgdb"
	"github.com/sharedos/toolshare/services/platform/pgdb/pgtest"
	"github.com/sharedos/toolshare/services/providers/files"

	"github.com/sharedos/toolshare/catalog-svc/internal/catalog"
	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline"
	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline/records"
	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline/records/memory"
	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline/records/postgres"
	"github.com/sharedos/toolshare/catalog-svc/internal/server"
	"github.com/sharedos/toolshare/catalog-svc/migrations"
)

// echoHandler answers at once: the bare gRPC round trip InvokeTool is
// compared with.
type echoHandler struct {
	sharedosv1.UnimplementedToolHandlerServiceServer
}

var echoContent = []byte(`[{"type":"text","text":"ok"}]`)

func (echoHandler) Handle(context.Context, *sharedosv1.HandleRequest) (*sharedosv1.HandleResponse, error) {
	return &sharedosv1.HandleResponse{ContentJson: echoContent}, nil
}

// BenchmarkInvokeToolInProcessFakeAuthz is the earlier, in-process variant:
// client, kernel, a prefix-check FAKE authz and the files provider in this
// one process over loopback gRPC. Not the headline number (that is
// BenchmarkInvokeTool, the real services as separate processes); kept to
// isolate the kernel's own cost. Custom metrics: p50/p99 latency in µs.
func BenchmarkInvokeToolInProcessFakeAuthz(b *testing.B) {
	echoAddr := serveGRPC(b, func(s *grpcx.Server) { sharedosv1.RegisterToolHandlerServiceServer(s.GRPC(), echoHandler{}) })
	echoCC, err := grpcx.Dial(echoAddr)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { echoCC.Close() })
	echo := sharedosv1.NewToolHandlerServiceClient(echoCC)
	echoReq := &sharedosv1.HandleRequest{CallId: "c", TurnId: "t", Tool: "echo", ArgumentsJson: []byte(`{"path":"/public/a.txt"}`)}

	stores := []struct {
		name string
		open func(b *testing.B) records.Store
	}{
		{"memory", func(*testing.B) records.Store { return memory.New() }},
		{"postgres", func(b *testing.B) records.Store {
			dsn := pgtest.NewDatabase(b, migrations.Up)
			pool, err := pgdb.Open(context.Background(), dsn)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(pool.Close)
			return postgres.New(pool)
		}},
	}

	for _, c := range []int{1, 16} {
		b.Run(fmt.Sprintf("echo-inproc/c=%d", c), func(b *testing.B) {
			runConcurrent(b, c, func(context.Context, int64) error {
				_, err := echo.Handle(context.Background(), echoReq)
				return err
			})
		})
		for _, st := range stores {
			b.Run(fmt.Sprintf("fakeauthz-inproc-%s/c=%d", st.name, c), func(b *testing.B) {
				client, grant := benchKernel(b, st.open(b))
				runConcurrent(b, c, func(ctx context.Context, i int64) error {
					res, err := client.InvokeTool(ctx, &sharedosv1.ToolCall{
						CallId: fmt.Sprintf("c%d", i), TurnId: "bench", Tool: "files.read",
						ArgumentsJson: []byte(`{"path":"/public/a.txt"}`), Grant: grant,
					})
					if err == nil && res.GetStatus() != sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED {
						err = fmt.Errorf("outcome %v %s", res.GetStatus(), res.GetReason())
					}
					return err
				})
			})
		}
	}
}

// BenchmarkInvokeTool measures InvokeTool end to end on the real services,
// each its own process from bin/ (services/systemtest/launch; `make build` first):
// client (this process) → catalog-svc kernel → authz-svc (OPA, example
// policy) → files-provider reading /public/a.txt of deploy/demo, with the
// operation records in the embedded store ("real-memory") or PostgreSQL
// ("real-postgres", every service on its own fresh database). The grant is
// the one the bridge sends: GrantTurn for alice/engineer, as OpenTurn asks
// for it, so every call verifies the grant and checks the revocation.
// In the same run: a bare gRPC echo (InvokeTool answered at once by a
// separate process, plain grpc-go on both ends). c=1 and c=16 closed-loop
// callers; metrics p50/p99 in µs, calls/s and the 1-minute load average.
func BenchmarkInvokeTool(b *testing.B) {
	echo, echoPID := launch.StartEcho(b)
	stacks := []struct {
		name string
		dsn  func() string
	}{
		{"real-memory", func() string { return "" }},
		{"real-postgres", func() string { return pgtest.NewDatabase(b, func(context.Context, string) error { return nil }) }},
	}
	type target struct {
		stack  *realStack
		client sharedosv1.RuntimeServiceClient
		turn   string
		grant  string
		proof  *sharedosv1.PinProof
	}
	targets := make([]target, len(stacks))
	for i, st := range stacks {
		s := startRealStack(b, st.dsn())
		client := s.kernelClient(b)
		turn, grant, proof := s.benchTurn(b, client)
		targets[i] = target{stack: s, client: client, turn: turn, grant: grant, proof: proof}
	}
	var seq atomic.Int64 // call ids are unique per turn across every round
	echoCall := &sharedosv1.ToolCall{CallId: "c", TurnId: "t", Tool: "files.read", ArgumentsJson: []byte(`{"path":"/public/a.txt"}`)}
	for _, c := range []int{1, 16} {
		b.Run(fmt.Sprintf("echo-grpc-process/c=%d", c), func(b *testing.B) {
			cpu := launch.NewCPUMeter(map[string]int{"echo": echoPID})
			defer func() { cpu.Report(b, b.N+50) }()
			runConcurrent(b, c, func(ctx context.Context, _ int64) error {
				_, err := echo.InvokeTool(ctx, echoCall)
				return err
			})
		})
		for i, st := range stacks {
			t := targets[i]
			b.Run(fmt.Sprintf("%s/c=%d", st.name, c), func(b *testing.B) {
				cpu := launch.NewCPUMeter(t.stack.demo.PIDs)
				defer func() { cpu.Report(b, b.N+50) }() // runConcurrent warms up with 50 calls
				runConcurrent(b, c, func(ctx context.Context, _ int64) error {
					res, err := t.client.InvokeTool(ctx, &sharedosv1.ToolCall{
						CallId: fmt.Sprintf("bench-%d", seq.Add(1)), TurnId: t.turn, Tool: "files.read",
						ArgumentsJson: []byte(`{"path":"/public/a.txt"}`), Grant: t.grant, PinProof: t.proof, Harness: "bench",
					})
					if err == nil && res.GetStatus() != sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED {
						err = fmt.Errorf("outcome %v %s %s", res.GetStatus(), res.GetCode(), res.GetReason())
					}
					return err
				})
			})
		}
	}
}

// runConcurrent runs b.N calls from c goroutines (closed loop) and reports
// latency percentiles.
func runConcurrent(b *testing.B, c int, call func(ctx context.Context, i int64) error) {
	// Warm connections and caches outside the timer.
	for i := range 50 {
		if err := call(context.Background(), -int64(i)-1); err != nil {
			b.Fatal(err)
		}
	}
	var (
		next  atomic.Int64
		mu    sync.Mutex
		lats  = make([]time.Duration, 0, b.N)
		wg    sync.WaitGroup
		first atomic.Value
	)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range c {
		wg.Go(func() {
			local := make([]time.Duration, 0, b.N/c+1)
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					break
				}
				t0 := time.Now()
				if err := call(context.Background(), i); err != nil {
					first.CompareAndSwap(nil, err)
					break
				}
				local = append(local, time.Since(t0))
			}
			mu.Lock()
			lats = append(lats, local...)
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "calls/s")
	b.ReportMetric(launch.LoadAvg(), "load1")
	if err, _ := first.Load().(error); err != nil {
		b.Fatal(err)
	}
	slices.Sort(lats)
	if len(lats) > 0 {
		b.ReportMetric(float64(lats[len(lats)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(lats[len(lats)*99/100].Microseconds()), "p99-µs")
	}
}

func benchKernel(b *testing.B, store records.Store) (sharedosv1.RuntimeServiceClient, string) {
	b.Helper()
	fp, err := files.New(fixtureRoot(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { fp.Close() })
	handlerAddr := serveGRPC(b, func(s *grpcx.Server) { sharedosv1.RegisterToolHandlerServiceServer(s.GRPC(), fp) })
	authzAddr := serveGRPC(b, func(s *grpcx.Server) { sharedosv1.RegisterAuthzServiceServer(s.GRPC(), &fakeAuthz{}) })
	authzCC, err := grpcx.Dial(authzAddr)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { authzCC.Close() })
	res := &fakeResolver{tools: map[string]*catalog.Resolved{}}
	res.add(b, "files.read", pathSchema, "read", "file:{path}", handlerAddr, sharedosv1.ToolClass_TOOL_CLASS_MANAGED, 0)
	k, err := pipeline.New(pipeline.Config{Resolver: res, Records: store, Authz: sharedosv1.NewAuthzServiceClient(authzCC), Grants: testKeys, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { k.Close() })
	kernelAddr := serveGRPC(b, func(s *grpcx.Server) { sharedosv1.RegisterRuntimeServiceServer(s.GRPC(), server.NewRuntimeServer(k)) })
	cc, err := grpcx.Dial(kernelAddr)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cc.Close() })
	return sharedosv1.NewRuntimeServiceClient(cc), grantFor(b, "bench", res.pin())
}
