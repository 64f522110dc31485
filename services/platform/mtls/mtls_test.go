package mtls_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/callers"
	"github.com/sharedos/toolshare/services/platform/grpcx"
	"github.com/sharedos/toolshare/services/platform/mtls"
	"github.com/sharedos/toolshare/services/platform/mtls/pki"
	"github.com/sharedos/toolshare/services/platform/telemetry"
)

// fixture is a CA in a temp dir and a grpcx server with a RuntimeService
// that counts the calls that reached it.
type fixture struct {
	dir  string
	ca   *pki.CA
	addr string
	rt   *countingRuntime
}

type countingRuntime struct {
	sharedosv1.UnimplementedRuntimeServiceServer
	calls chan struct{}
	block chan struct{} // when non-nil, InvokeTool waits for it
}

func (r *countingRuntime) InvokeTool(ctx context.Context, _ *sharedosv1.ToolCall) (*sharedosv1.ToolResult, error) {
	r.calls <- struct{}{}
	if r.block != nil {
		select {
		case <-r.block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return &sharedosv1.ToolResult{}, nil
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ca, err := pki.New(pki.TrustDomain, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{dir: t.TempDir(), ca: ca, rt: &countingRuntime{calls: make(chan struct{}, 100)}}
	if err := ca.WriteBundle(filepath.Join(f.dir, "ca.crt")); err != nil {
		t.Fatal(err)
	}
	return f
}

// identity issues dir/file.{crt,key} and returns its Config.
func (f *fixture) identity(t *testing.T, file string, role callers.Role, name string) mtls.Config {
	t.Helper()
	if _, _, err := f.ca.IssueFiles(f.dir, file, pki.Leaf{Role: string(role), Name: name}); err != nil {
		t.Fatal(err)
	}
	return mtls.Config{CA: filepath.Join(f.dir, "ca.crt"), Cert: filepath.Join(f.dir, file+".crt"), Key: filepath.Join(f.dir, file+".key"),
		Refresh: 50 * time.Millisecond}
}

func load(t *testing.T, cfg mtls.Config) *mtls.Credentials {
	t.Helper()
	c, err := mtls.Load(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// serve starts the kernel-role server (health alone in plaintext on
// healthAddr when set).
func (f *fixture) serve(t *testing.T, healthAddr ...string) *mtls.Credentials {
	t.Helper()
	creds := load(t, f.identity(t, "catalog", callers.Catalog, "k"))
	plane := grpcx.Plane{TLS: creds}
	if len(healthAddr) > 0 {
		plane.HealthListen = healthAddr[0]
	}
	srv := grpcx.NewServer(grpcx.ServerOptions{Plane: plane, Logger: slog.New(slog.DiscardHandler), DrainTimeout: time.Second})
	sharedosv1.RegisterRuntimeServiceServer(srv.GRPC(), f.rt)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.addr = lis.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = srv.Serve(ctx, lis); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return creds
}

func (f *fixture) invoke(t *testing.T, opt grpc.DialOption) error {
	t.Helper()
	cc, err := grpc.NewClient(f.addr, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = sharedosv1.NewRuntimeServiceClient(cc).InvokeTool(ctx, &sharedosv1.ToolCall{CallId: "c"})
	return err
}

func TestCallerAuthorization(t *testing.T) {
	// The refusal counter goes to the global meter provider.
	reader := sdkmetric.NewManualReader()
	prev := otel.GetMeterProvider()
	otel.SetMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	t.Cleanup(func() { otel.SetMeterProvider(prev) })
	f := newFixture(t)
	f.serve(t)
	bridge := load(t, f.identity(t, "bridge", callers.Bridge, "b1"))
	if err := f.invoke(t, bridge.DialOption(callers.Catalog)); err != nil {
		t.Fatalf("a bridge calling InvokeTool: %v", err)
	}
	if len(f.rt.calls) != 1 {
		t.Fatalf("%d calls reached the handler, want 1", len(f.rt.calls))
	}
	<-f.rt.calls
	for _, role := range []callers.Role{callers.Operator, callers.Host, callers.Provider, callers.Authz, callers.Catalog} {
		c := load(t, f.identity(t, string(role), role, "x"))
		err := f.invoke(t, c.DialOption())
		if status.Code(err) != codes.PermissionDenied ||
			!strings.Contains(err.Error(), "spiffe://sharedos.local/"+string(role)+"/x") ||
			!strings.Contains(err.Error(), "/sharedos.v1.RuntimeService/InvokeTool") {
			t.Errorf("%s calling InvokeTool: %v, want PermissionDenied naming the caller and the method", role, err)
		}
	}
	if n := len(f.rt.calls); n != 0 {
		t.Fatalf("%d refused calls reached the handler", n)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var denied int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == telemetry.MetricCallerDenied {
				for _, dp := range sum.DataPoints {
					if v, _ := dp.Attributes.Value(telemetry.AttrRPCMethod); v.AsString() == "/sharedos.v1.RuntimeService/InvokeTool" {
						denied += dp.Value
					}
				}
			}
		}
	}
	if denied != 5 {
		t.Errorf("%s counted %d refusals of InvokeTool, want 5", telemetry.MetricCallerDenied, denied)
	}
	// Health is open to any authenticated peer.
	cc, err := grpc.NewClient(f.addr, load(t, f.identity(t, "op2", callers.Operator, "y")).DialOption())
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	if _, err := healthpb.NewHealthClient(cc).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("health as an operator: %v", err)
	}
}

// Refused at the handshake: plaintext, no client certificate, TLS 1.2, a
// certificate of another CA, an expired one.
func TestHandshakeRefusals(t *testing.T) {
	f := newFixture(t)
	f.serve(t)
	good := load(t, f.identity(t, "bridge", callers.Bridge, "b1"))

	other := newFixture(t)
	foreign := load(t, other.identity(t, "bridge", callers.Bridge, "b1"))

	expiredCfg := f.identity(t, "expired", callers.Bridge, "old")
	c, k, err := f.ca.Issue(pki.Leaf{Role: "bridge", Name: "old", NotBefore: time.Now().Add(-2 * time.Hour), NotAfter: time.Now().Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, expiredCfg.Cert, c)
	writeFile(t, expiredCfg.Key, k)

	caPool := x509.NewCertPool()
	caPool.AppendCertsFromPEM(f.ca.CertPEM())
	noCert := grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS13, RootCAs: caPool, ServerName: "localhost"}))
	tls12 := grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{MaxVersion: tls.VersionTLS12, RootCAs: caPool, ServerName: "localhost"}))

	cases := map[string]grpc.DialOption{
		"plaintext":             grpc.WithTransportCredentials(insecure.NewCredentials()),
		"no client certificate": noCert,
		"TLS 1.2":               tls12,
		"another CA":            foreign.DialOption(),
	}
	for name, opt := range cases {
		if err := f.invoke(t, opt); status.Code(err) != codes.Unavailable {
			t.Errorf("%s: %v, want the handshake refused (Unavailable)", name, err)
		}
	}
	// An expired certificate cannot even be loaded as an identity: the
	// server refuses it when presented by a raw TLS client.
	pair, err := tls.X509KeyPair(c, k)
	if err != nil {
		t.Fatal(err)
	}
	expired := grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS13, RootCAs: caPool, ServerName: "localhost", Certificates: []tls.Certificate{pair}}))
	if err := f.invoke(t, expired); status.Code(err) != codes.Unavailable {
		t.Errorf("expired client certificate: %v, want the handshake refused", err)
	}
	if n := len(f.rt.calls); n != 0 {
		t.Fatalf("%d refused connections reached the handler", n)
	}
	// A client whose own certificate the server accepts, but that trusts
	// another CA, refuses the server: the chain is verified client-side too
	// (InsecureSkipVerify only moves it into VerifyConnection).
	mixed := f.identity(t, "mixed", callers.Bridge, "m")
	mixed.CA = filepath.Join(other.dir, "ca.crt")
	if err := f.invoke(t, load(t, mixed).DialOption()); status.Code(err) != codes.Unavailable ||
		!strings.Contains(err.Error(), "server certificate") {
		t.Errorf("client trusting another CA: %v, want the server refused", err)
	}
	// A client that expects another role refuses the server.
	if err := f.invoke(t, good.DialOption(callers.Authz)); status.Code(err) != codes.Unavailable ||
		!strings.Contains(err.Error(), "want [authz]") {
		t.Errorf("client expecting authz at a catalog server: %v", err)
	}
}

// --health-listen serves health alone in plaintext (kubelet probes), and
// nothing else: the plane's methods are not reachable there.
func TestPlaintextHealthListener(t *testing.T) {
	f := newFixture(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	healthAddr := l.Addr().String()
	l.Close()
	f.serve(t, healthAddr)
	cc, err := grpc.NewClient(healthAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
	if err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("plaintext health: %v %v", r, err)
	}
	_, err = sharedosv1.NewRuntimeServiceClient(cc).InvokeTool(ctx, &sharedosv1.ToolCall{CallId: "c"})
	if status.Code(err) != codes.Unimplemented || len(f.rt.calls) != 0 {
		t.Fatalf("InvokeTool on the health listener: %v, want Unimplemented", err)
	}
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// A rotated server certificate is served to new connections without a
// restart, while a call in flight on the old connection completes.
func TestRotation(t *testing.T) {
	f := newFixture(t)
	f.rt.block = make(chan struct{})
	f.serve(t)
	bridge := load(t, f.identity(t, "bridge", callers.Bridge, "b1"))

	cc, err := grpc.NewClient(f.addr, bridge.DialOption())
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	inflight := make(chan error, 1)
	go func() {
		_, err := sharedosv1.NewRuntimeServiceClient(cc).InvokeTool(context.Background(), &sharedosv1.ToolCall{CallId: "c"})
		inflight <- err
	}()
	<-f.rt.calls // the call is in the handler
	before := serverSerial(t, f)

	if _, _, err := f.ca.IssueFiles(f.dir, "catalog", pki.Leaf{Role: "catalog", Name: "k"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for serverSerial(t, f) == before {
		if time.Now().After(deadline) {
			t.Fatal("the server still presents the old certificate 10 s after the files changed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(f.rt.block)
	if err := <-inflight; err != nil {
		t.Fatalf("the call in flight across the rotation: %v", err)
	}
}

// serverSerial is the serial of the certificate the server presents now.
func serverSerial(t *testing.T, f *fixture) string {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(f.ca.CertPEM())
	cfg := f.identity(t, "probe", callers.Operator, "probe")
	pair, err := tls.LoadX509KeyPair(cfg.Cert, cfg.Key)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := tls.Dial("tcp", f.addr, &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: pool, ServerName: "localhost",
		Certificates: []tls.Certificate{pair}, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

func TestLoadErrors(t *testing.T) {
	_, err := mtls.Load(context.Background(), mtls.Config{})
	if err == nil || !strings.Contains(err.Error(), "--tls-ca, --tls-cert, --tls-key required") {
		t.Errorf("no files: %v", err)
	}
	_, err = mtls.Load(context.Background(), mtls.Config{CA: "x", InsecurePlaintext: true})
	if err == nil || !strings.Contains(err.Error(), "choose one") {
		t.Errorf("plaintext with files: %v", err)
	}
	f := newFixture(t)
	cfg := f.identity(t, "weird", callers.Role("admin"), "x")
	if _, err := mtls.Load(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), `unknown role "admin"`) {
		t.Errorf("unknown role: %v", err)
	}
	plain, err := mtls.Load(context.Background(), mtls.Config{InsecurePlaintext: true})
	if err != nil || !plain.Plaintext() {
		t.Fatalf("plaintext: %v", err)
	}
	for addr, ok := range map[string]bool{"127.0.0.1:1": true, "[::1]:1": true, "localhost:1": true, "0.0.0.0:1": false, "10.1.2.3:1": false, "[::]:1": false} {
		if err := plain.CheckListener(addr); (err == nil) != ok {
			t.Errorf("plaintext listener %s: %v", addr, err)
		}
	}
	if plain.KeyFile() != "" {
		t.Errorf("plaintext names a key file: %q", plain.KeyFile())
	}
	if cfg := f.identity(t, "k", callers.Catalog, "k"); load(t, cfg).KeyFile() != cfg.Key {
		t.Errorf("KeyFile is not --tls-key %s", cfg.Key)
	}
	if err := load(t, f.identity(t, "b", callers.Bridge, "b")).CheckListener("0.0.0.0:1"); err != nil {
		t.Errorf("mTLS on any address: %v", err)
	}
}
