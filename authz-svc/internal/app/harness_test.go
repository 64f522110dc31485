package app_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/sharedos/toolshare/authz-svc/internal/app"
	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/platform/grpcx"
)

func TestMain(m *testing.M) {
	// Benchmark server processes are this binary re-executed.
	if role := os.Getenv(benchServeEnv); role != "" {
		os.Exit(serveForBench(role))
	}
	flag.Parse()
	if flag.Lookup("test.bench").Value.String() != "" && flag.Lookup("test.run").Value.String() == "^$" {
		// Benchmarks only: keep the client on the no-op tracer like the
		// HTTP client of the OPA baseline, so neither side pays for spans.
		os.Exit(m.Run())
	}
	// A recording tracer provider and the W3C propagator make the server's
	// otelgrpc spans real, so decision records carry trace and span ids that
	// match the client's trace. grpcx reads the globals when a server or
	// connection is built, so they are set before any test runs.
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	code := m.Run()
	_ = tp.Shutdown(context.Background())
	os.Exit(code)
}

// spans records every span the tests' servers and clients start, so a test
// can wait for the server to take a call instead of waiting a duration.
var spans = tracetest.NewSpanRecorder()

// serverStarted reports whether a server span whose name ends with suffix
// started after the first seen spans.
func serverStarted(seen int, suffix string) bool {
	for _, s := range spans.Started()[seen:] {
		if s.SpanKind() == trace.SpanKindServer && strings.HasSuffix(s.Name(), suffix) {
			return true
		}
	}
	return false
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// records returns every JSON record in the buffer.
func (b *syncBuffer) records(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(b.String()))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("decision log line is not JSON: %v: %s", err, sc.Text())
		}
		out = append(out, m)
	}
	return out
}

// record returns the decision record with decision_id id, or nil.
func (b *syncBuffer) record(t *testing.T, id string) map[string]any {
	t.Helper()
	for _, r := range b.records(t) {
		if r["decision_id"] == id {
			return r
		}
	}
	return nil
}

type harness struct {
	client    sharedosv1.AuthzServiceClient
	health    healthpb.HealthClient
	conn      *grpc.ClientConn
	completed *app.Completed
	decisions *syncBuffer
	logs      *syncBuffer
	reader    *sdkmetric.ManualReader
}

type option func(*app.Config)

func withEvalTimeout(d time.Duration) option { return func(c *app.Config) { c.EvalTimeout = d } }

// start runs the real service (app.Complete + Run) on a loopback listener
// with policies from dir and returns a gRPC client for it.
func start(t *testing.T, dir string, opts ...option) *harness {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	h := &harness{decisions: &syncBuffer{}, logs: &syncBuffer{}, reader: sdkmetric.NewManualReader()}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(h.reader))
	cfg := app.Config{
		PolicyDir:     dir,
		EvalTimeout:   5 * time.Second,
		Watch:         true,
		Logger:        slog.New(slog.NewJSONHandler(h.logs, nil)),
		DecisionLog:   slog.NewJSONHandler(h.decisions, nil),
		Listener:      lis,
		MeterProvider: mp,
		// Reflection is off unless asked; TestHealthAndReflection asks.
		Plane: grpcx.Plane{Reflection: true},
	}
	for _, o := range opts {
		o(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c, err := cfg.Complete(ctx)
	if err != nil {
		cancel()
		_ = lis.Close()
		t.Fatalf("Complete: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	conn, err := grpcx.Dial(c.Addr().String())
	if err != nil {
		cancel()
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		_ = mp.Shutdown(context.Background())
	})
	h.client = sharedosv1.NewAuthzServiceClient(conn)
	h.health = healthpb.NewHealthClient(conn)
	h.conn = conn
	h.completed = c
	return h
}

// examplePolicyDir is deploy/policies of the repository.
func examplePolicyDir(t *testing.T) string {
	t.Helper()
	dir, err := app.ResolvePolicyDir(app.DefaultPolicyDir)
	if err != nil {
		t.Fatalf("example policies: %v", err)
	}
	return dir
}

// copyPolicyDir copies the example policies (without tests) into a temp dir.
func copyPolicyDir(t *testing.T) string {
	t.Helper()
	src := examplePolicyDir(t)
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.Create(target)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			_ = out.Close()
			return err
		}
		return out.Close()
	})
	if err != nil {
		t.Fatalf("copy policies: %v", err)
	}
	return dst
}

// waitFor polls cond until it holds or 15 s pass (a correctness bound for a
// slow CI box, not a performance assertion).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	// Write to a temp file and rename, the way editors and ConfigMap
	// updates replace files, so the watcher never reads a half-written file.
	tmp := path + ".tmp~"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}
