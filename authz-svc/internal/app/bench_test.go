package app_test

// Benchmarks of issue 3 (run with `make bench-authz`; method and results in
// docs/benchmarks.md, "## authz-svc").
//
// Every server runs as its own process on 127.0.0.1, the benchmark process
// is the client:
//   - authz-svc: this test binary re-executed in server mode
//     (SHAREDOS_BENCH_SERVE=authz): app.Config → Complete → Run, the real
//     service with its decision log written to stderr (sent to /dev/null).
//   - echo: this test binary re-executed with SHAREDOS_BENCH_SERVE=echo: a
//     grpcx server whose AuthzService returns a fixed response without
//     validating, evaluating or logging: the bare gRPC floor.
//   - opa: `opa run --server` built from the same OPA module version
//     (bin/tools/opa, or $SHAREDOS_OPA_BIN), same policy directory, queried
//     with POST /v1/data/sharedos/authz/decision over keep-alive HTTP/1.1.
// Each benchmark is a closed loop of c goroutines; it reports ops/s, the
// p50/p99 of every call's wall time and the CPU per call (client and server
// together, and the servers alone). BenchmarkAuthorizeEval is the embedded
// evaluation alone (args parse + input build + prepared eval), the "+ eval"
// term of the c=1 goal.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/sharedos/toolshare/authz-svc/internal/app"
	"github.com/sharedos/toolshare/authz-svc/internal/decisionlog"
	"github.com/sharedos/toolshare/authz-svc/internal/pdp"
	"github.com/sharedos/toolshare/authz-svc/internal/server"
	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/platform/grpcx"
	"github.com/sharedos/toolshare/services/platform/runner"
)

const (
	benchServeEnv     = "SHAREDOS_BENCH_SERVE"
	benchPolicyDirEnv = "SHAREDOS_BENCH_POLICY_DIR"
)

// serveForBench runs a benchmark server in this process until stdin closes
// (the parent exited or is done). It prints "ADDR <host:port>" when ready.
func serveForBench(role string) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	logger := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var run func() error
	switch role {
	case "authz":
		runner.ApplyGCPercent(app.GCPercent)
		c, err := app.Config{
			PolicyDir:   os.Getenv(benchPolicyDirEnv),
			EvalTimeout: pdp.DefaultEvalTimeout,
			Watch:       true,
			Logger:      logger,
			// DecisionLog unset: records go to stderr through the
			// decision log's queue, as when serving.
			Listener: lis,
		}.Complete(ctx)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		run = func() error { return c.Run(ctx) }
	case "echo":
		gs := grpcx.NewServer(grpcx.ServerOptions{Logger: logger})
		sharedosv1.RegisterAuthzServiceServer(gs.GRPC(), echoAuthz{})
		run = func() error { return gs.Serve(ctx, lis) }
	default:
		fmt.Fprintln(os.Stderr, "unknown bench role", role)
		return 1
	}
	if p := os.Getenv("SHAREDOS_BENCH_CPUPROFILE"); p != "" && role == "authz" {
		// For investigating the server side of a benchmark run.
		if f, err := os.Create(p); err == nil {
			if err := pprof.StartCPUProfile(f); err == nil {
				defer pprof.StopCPUProfile()
			}
		}
	}
	fmt.Printf("ADDR %s\n", lis.Addr())
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// echoAuthz answers without looking at the request.
type echoAuthz struct {
	sharedosv1.UnimplementedAuthzServiceServer
}

func (echoAuthz) Authorize(context.Context, *sharedosv1.AuthorizeRequest) (*sharedosv1.AuthorizeResponse, error) {
	return &sharedosv1.AuthorizeResponse{
		Decision: sharedosv1.Decision_DECISION_ALLOW, Reason: "role engineer may read /public/a.txt",
		DecisionId:     "00000000000000000000000000000000",
		PolicyRevision: "sha256:0000000000000000000000000000000000000000000000000000000000000000",
	}, nil
}

// startChild re-executes the test binary as a server and returns its address.
func startChild(b *testing.B, role, policyDir string) string {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^$")
	cmd.Env = append(os.Environ(), benchServeEnv+"="+role, benchPolicyDirEnv+"="+policyDir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	benchPIDs.add(cmd.Process.Pid)
	b.Cleanup(func() {
		_ = stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "ADDR ") {
		b.Fatalf("%s server did not start: %q %v", role, line, err)
	}
	return strings.TrimSpace(strings.TrimPrefix(line, "ADDR "))
}

// opaBinary finds bin/tools/opa (built by `make bench-authz`).
func opaBinary(b *testing.B) string {
	b.Helper()
	if p := os.Getenv("SHAREDOS_OPA_BIN"); p != "" {
		return p
	}
	p, err := app.ResolvePolicyDir(filepath.Join("bin", "tools"))
	if err == nil {
		if _, err := os.Stat(filepath.Join(p, "opa")); err == nil {
			return filepath.Join(p, "opa")
		}
	}
	b.Fatal("bin/tools/opa not found: build it from authz-svc with " +
		"`go build -o ../bin/tools/opa github.com/open-policy-agent/opa` (make bench-authz does) or set SHAREDOS_OPA_BIN")
	return ""
}

// startOPA runs `opa run --server` on a free loopback port, with extra
// environment (e.g. GOGC) appended.
func startOPA(b *testing.B, policyDir string, env ...string) string {
	b.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	// --log-level error: OPA logs nothing per request, its best case; the
	// authz-svc side writes a decision record per call.
	cmd := exec.Command(opaBinary(b), "run", "--server", "--addr", addr, "--log-level", "error", policyDir)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	benchPIDs.add(cmd.Process.Pid)
	b.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/health")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return addr
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("opa server on %s not healthy: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The benchmark decision: engineer reads /public/a.txt (allow).
var benchArgs = []byte(`{"path":"/public/a.txt"}`)

func benchRequest() *sharedosv1.AuthorizeRequest {
	return &sharedosv1.AuthorizeRequest{
		Context:       &sharedosv1.AccessContext{Principal: "alice", Tenant: "acme", Roles: []string{"engineer"}},
		Tool:          &sharedosv1.ToolFacts{Name: "files.read", Namespace: "files", Class: "managed", Source: "provider:files", AnnotationsJson: []byte(`{"readOnlyHint":true}`)},
		Action:        "read",
		Resource:      "file:/public/a.txt",
		ArgumentsJson: benchArgs,
		CallId:        "call-1",
		TurnId:        "turn-1",
	}
}

// opaBody is the same input document authz-svc builds for benchRequest
// (input.file included), for the REST API.
func opaBody() []byte {
	return []byte(`{"input":{"context":{"principal":"alice","tenant":"acme","roles":["engineer"],"attributes":{}},` +
		`"tool":{"name":"files.read","namespace":"files","class":"managed","annotations":{"readOnlyHint":true},"source":"provider:files"},` +
		`"action":"read","resource":"file:/public/a.txt","arguments":` + string(benchArgs) +
		`,"file":{"path":"/public/a.txt","absolute":true,"suspicious":false}}}`)
}

// loopResult is what closedLoop measured: calls per second, the 99th
// percentile latency, and the CPU per call of this process and the servers
// it started together.
type loopResult struct {
	opsPerSec, p99, allCPU float64
}

// closedLoop runs b.N calls over c goroutines, each sending its next call as
// soon as the last returns, and reports ops/s, p50 and p99.
func closedLoop(b *testing.B, c int, call func() error) loopResult {
	b.Helper()
	// Warm up connections and caches outside the timed region.
	for i := 0; i < 200; i++ {
		if err := call(); err != nil {
			b.Fatal(err)
		}
	}
	if b.N > 1 {
		waitQuiet()
	}
	lat := make([][]time.Duration, c)
	var next, errCount atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	b.ResetTimer()
	meter := startCPU()
	start := time.Now()
	for g := 0; g < c; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			local := make([]time.Duration, 0, b.N/c+1)
			for next.Add(1) <= int64(b.N) {
				t0 := time.Now()
				if err := call(); err != nil {
					// An error (e.g. the 500 ms eval timeout on an
					// overloaded box) is counted and reported, not hidden.
					errCount.Add(1)
					firstErr.CompareAndSwap(nil, err)
					continue
				}
				local = append(local, time.Since(t0))
			}
			lat[g] = local
		}(g)
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	foreign := meter.ForeignCores()
	cpu := meter.PerCall(b.N)
	if n := errCount.Load(); n > 0 {
		b.Logf("%d of %d calls failed; first: %v", n, b.N, firstErr.Load())
		if n*100 > int64(b.N) {
			b.Fatalf("more than 1%% of calls failed")
		}
	}
	b.ReportMetric(float64(errCount.Load()), "errors")
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	r := loopResult{
		opsPerSec: float64(len(all)) / elapsed.Seconds(),
		p99:       float64(all[len(all)*99/100].Nanoseconds()) / 1e3,
		allCPU:    cpu["all"],
	}
	b.ReportMetric(r.opsPerSec, "ops/s")
	b.ReportMetric(float64(all[len(all)/2].Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(r.p99, "p99-µs")
	b.ReportMetric(foreign, "foreign-cores")
	// CPU per call of the client and of the server under test (the other
	// servers idle meanwhile): on a saturated box ops/s follows from it,
	// and it is what the P2 bound in docs/benchmarks.md is computed from.
	b.ReportMetric(cpu["all"], "all-cpu-µs/call")
	b.ReportMetric(cpu["all"]-cpu["client"], "server-cpu-µs/call")
	return r
}

func benchPolicyDir(b *testing.B) string {
	b.Helper()
	dir, err := app.ResolvePolicyDir(app.DefaultPolicyDir)
	if err != nil {
		b.Fatal(err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		b.Fatal(err)
	}
	return abs
}

// BenchmarkAuthorize compares, in one run, the bare gRPC echo, authz-svc
// and the OPA REST server at c=1 and c=16.
func BenchmarkAuthorize(b *testing.B) {
	dir := benchPolicyDir(b)
	echoConn := dialBench(b, startChild(b, "echo", dir))
	authzConn := dialBench(b, startChild(b, "authz", dir))
	opaURL := "http://" + startOPA(b, dir) + "/v1/data/sharedos/authz/decision"
	// The same OPA with authz-svc's GC setting, so the ratio is not just GOGC.
	opaTunedURL := "http://" + startOPA(b, dir, "GOGC=400") + "/v1/data/sharedos/authz/decision"

	echo := sharedosv1.NewAuthzServiceClient(echoConn)
	authz := sharedosv1.NewAuthzServiceClient(authzConn)
	req := benchRequest()
	grpcCall := func(cl sharedosv1.AuthzServiceClient) func() error {
		return func() error {
			resp, err := cl.Authorize(context.Background(), req)
			if err != nil {
				return err
			}
			if resp.GetDecision() != sharedosv1.Decision_DECISION_ALLOW {
				return fmt.Errorf("decision %v: %s", resp.GetDecision(), resp.GetReason())
			}
			return nil
		}
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, MaxConnsPerHost: 64}}
	body := opaBody()
	opaCall := func(url string) func() error {
		return func() error { return postOPA(hc, url, body) }
	}

	// The last measurement of each point (a sub-benchmark runs once with
	// N=1 before its real run).
	got := map[string]loopResult{}
	point := func(name string, c int, call func() error) {
		key := fmt.Sprintf("%s/c=%d", name, c)
		b.Run(key, func(b *testing.B) { got[key] = closedLoop(b, c, call) })
	}
	for _, c := range []int{1, 16} {
		point("echo", c, grpcCall(echo))
		point("authz-svc", c, grpcCall(authz))
		point("opa-rest", c, opaCall(opaURL))
		point("opa-rest-gogc400", c, opaCall(opaTunedURL))
	}
	// The evaluation alone, in this process with authz-svc's GOGC; its row
	// also reports issue 20's P2 in this run.
	call := evalCall(b)
	b.Run("eval-in-process/c=1", func(b *testing.B) {
		defer servingGC()()
		eval := closedLoop(b, 1, call)
		reportP2(b, got, eval)
	})
}

// reportP2 adds issue 20's P2 to the row: authz-svc's c=16 calls/s ÷ the
// OPA server's at the same GOGC (goal ≥ 1.5×, "P2-×") and its p99 ÷ OPA's
// (goal ≤ 0.6×, "P2-p99-×"), beside the most calls/s any server could
// reach that added only the evaluation to the bare echo ("P2-bound-×"): on
// a saturated box calls/s go as 1 ÷ CPU per call (client and server), so
// that server would reach OPA's CPU per call ÷ (echo's + one evaluation's).
// Left out unless every point ran.
func reportP2(b *testing.B, got map[string]loopResult, eval loopResult) {
	authz, opa, echo := got["authz-svc/c=16"], got["opa-rest-gogc400/c=16"], got["echo/c=16"]
	if authz.opsPerSec == 0 || opa.opsPerSec == 0 || echo.allCPU == 0 || eval.allCPU == 0 {
		return
	}
	b.ReportMetric(authz.opsPerSec/opa.opsPerSec, "P2-×")
	b.ReportMetric(authz.p99/opa.p99, "P2-p99-×")
	b.ReportMetric(opa.allCPU/(echo.allCPU+eval.allCPU), "P2-bound-×")
}

// postOPA is one decision from the OPA REST API.
func postOPA(hc *http.Client, url string, body []byte) error {
	resp, err := hc.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var out struct {
		Result struct {
			Allow  bool   `json:"allow"`
			Reason string `json:"reason"`
		} `json:"result"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || !out.Result.Allow {
		return fmt.Errorf("opa: status %d, result %+v", resp.StatusCode, out.Result)
	}
	return nil
}

// BenchmarkAuthorizeEval is the embedded evaluation alone: argument parse,
// input build and the prepared query, in this process, one goroutine, with
// the GOGC authz-svc serves with (its all-cpu-µs/call is an evaluation's
// CPU, garbage collection included, for the P2 bound).
func BenchmarkAuthorizeEval(b *testing.B) {
	defer servingGC()()
	closedLoop(b, 1, evalCall(b))
}

// evalCall is one embedded evaluation of the benchmark decision.
func evalCall(b *testing.B) func() error {
	engine, err := pdp.New(context.Background(), pdp.Options{
		Dir: benchPolicyDir(b), Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
	})
	if err != nil {
		b.Fatal(err)
	}
	in := benchRequest()
	ctx := context.Background()
	return func() error {
		args, err := pdp.ParseObject(in.GetArgumentsJson())
		if err != nil {
			return err
		}
		ann, err := pdp.ParseObject(in.GetTool().GetAnnotationsJson())
		if err != nil {
			return err
		}
		d, _, err := engine.Decide(ctx, pdp.Request{
			Context: pdp.Context{Principal: "alice", Tenant: "acme", Roles: in.GetContext().GetRoles()},
			Tool:    pdp.Tool{Name: "files.read", Namespace: "files", Class: "managed", Source: "provider:files", Annotations: ann},
			Action:  "read", Resource: "file:/public/a.txt", Arguments: args,
		})
		if err == nil && !d.Allow {
			err = fmt.Errorf("deny: %s", d.Reason)
		}
		return err
	}
}

// BenchmarkFilterTools1000 asks authz-svc which of 1,000 tools an engineer
// may see, in one RPC (c=1).
func BenchmarkFilterTools1000(b *testing.B) {
	dir := benchPolicyDir(b)
	cl := sharedosv1.NewAuthzServiceClient(dialBench(b, startChild(b, "authz", dir)))
	tools := make([]*sharedosv1.ToolFacts, 1000)
	for i := range tools {
		name := fmt.Sprintf("files.tool%03d", i)
		switch i % 10 {
		case 0:
			name = fmt.Sprintf("files.read%03d", i) // not in data: hidden
		case 1:
			name = "files.read"
		case 2:
			name = "files.search"
		}
		tools[i] = &sharedosv1.ToolFacts{Name: name, Namespace: "files", Class: "managed", Source: "provider:files", AnnotationsJson: []byte(`{"readOnlyHint":true}`)}
	}
	req := &sharedosv1.FilterToolsRequest{
		Context: &sharedosv1.AccessContext{Principal: "alice", Tenant: "acme", Roles: []string{"engineer"}},
		Tools:   tools,
	}
	closedLoop(b, 1, func() error {
		resp, err := cl.FilterTools(context.Background(), req)
		if err != nil {
			return err
		}
		if len(resp.GetAllowedTools()) != 200 {
			return fmt.Errorf("allowed %d tools, want 200", len(resp.GetAllowedTools()))
		}
		return nil
	})
	b.ReportMetric(1000, "tools/op")
}

func dialBench(b *testing.B, addr string) *grpc.ClientConn {
	b.Helper()
	conn, err := grpcx.Dial(addr)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	return conn
}

// servingGC sets this process's GOGC to the one authz-svc serves with
// (unless GOGC is set) and returns the function that restores it.
func servingGC() (restore func()) {
	if _, set := os.LookupEnv("GOGC"); set {
		return func() {}
	}
	old := debug.SetGCPercent(app.GCPercent)
	return func() { debug.SetGCPercent(old) }
}

// BenchmarkAuthorizeHandler is the server's Authorize handler in process,
// without gRPC, with authz-svc's GOGC: validation, evaluation and the
// decision record (to io.Discard). It isolates the per-call work authz-svc
// adds to eval.
func BenchmarkAuthorizeHandler(b *testing.B) {
	defer servingGC()()
	engine, err := pdp.New(context.Background(), pdp.Options{
		Dir: benchPolicyDir(b), Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
	})
	if err != nil {
		b.Fatal(err)
	}
	srv := server.New(engine, decisionlog.New(slog.NewJSONHandler(io.Discard, nil)))
	req := benchRequest()
	closedLoop(b, 1, func() error {
		resp, err := srv.Authorize(context.Background(), req)
		if err == nil && resp.GetDecision() != sharedosv1.Decision_DECISION_ALLOW {
			err = fmt.Errorf("deny: %s", resp.GetReason())
		}
		return err
	})
}
