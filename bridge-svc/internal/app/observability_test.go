package app_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	promclient "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/sharedos/toolshare/bridge-svc/internal/app"
	"github.com/sharedos/toolshare/bridge-svc/internal/bridgetest"
	"github.com/sharedos/toolshare/bridge-svc/migrations"
	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/platform/pgdb/pgtest"
)

// TestMetricsEndpoint: --metrics-listen serves the Prometheus text format
// at /metrics, and sharedos_turns_open follows the turns this pod serves:
// 1 once a turn's MCP endpoint was used here, 0 after CloseTurn.
func TestMetricsEndpoint(t *testing.T) {
	reg := promclient.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	defer func() { _ = mp.Shutdown(context.Background()) }()

	catalog, kernel := &bridgetest.FakeCatalog{}, bridgetest.NewFakeKernel()
	catalog.SetTools(bridgetest.DefaultTools())
	b := bridgetest.Start(t, bridgetest.ServeFakes(t, catalog, kernel), "", func(c *app.Config) {
		c.MetricsListen = "127.0.0.1:0"
		c.Metrics = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
		c.MeterProvider = mp
	})
	if b.App.MetricsAddr() == "" {
		t.Fatal("MetricsAddr is empty with --metrics-listen set")
	}
	turnsOpen := regexp.MustCompile(`(?m)^sharedos_turns_open(\{[^}]*\})? (\S+)$`)
	scrape := func() string {
		t.Helper()
		resp, err := http.Get("http://" + b.App.MetricsAddr() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /metrics: %d %s", resp.StatusCode, body)
		}
		m := turnsOpen.FindSubmatch(body)
		if m == nil {
			t.Fatalf("no sharedos_turns_open sample in /metrics:\n%s", body)
		}
		return string(m[2])
	}

	lease := b.Open(t)
	if got := scrape(); got != "0" {
		t.Errorf("sharedos_turns_open = %s before the turn's endpoint was used, want 0", got)
	}
	if resp := do(t, rawReq{url: lease.GetMcpUrl(), token: lease.GetToken(), body: modernList(1), modern: true}); resp.status != 200 {
		t.Fatalf("list: %d %s", resp.status, resp.body)
	}
	if got := scrape(); got != "1" {
		t.Errorf("sharedos_turns_open = %s with one served turn, want 1", got)
	}
	if _, err := b.Client.CloseTurn(context.Background(), &sharedosv1.CloseTurnRequest{TurnId: lease.GetTurnId()}); err != nil {
		t.Fatal(err)
	}
	if got := scrape(); got != "0" {
		t.Errorf("sharedos_turns_open = %s after CloseTurn, want 0", got)
	}
}

// TestMetricsListenRefusesBadAddress: a --metrics-listen that cannot be
// bound fails Complete, naming the flag.
func TestMetricsListenRefusesBadAddress(t *testing.T) {
	c := app.Config{
		Listen: "127.0.0.1:0", HTTPListen: "127.0.0.1:0", Catalog: "127.0.0.1:1",
		MaxBodyBytes: 1 << 20, DefaultTTL: time.Minute,
		MetricsListen: "256.0.0.1:bad", Metrics: http.NotFoundHandler(),
	}
	a, err := c.Complete(context.Background())
	if err == nil {
		t.Fatalf("Complete = %v, want an error for --metrics-listen", a)
	}
	if !strings.Contains(err.Error(), "--metrics-listen") {
		t.Errorf("error %q does not name --metrics-listen", err)
	}
}

// TestReadinessFollowsPostgres: liveness stays SERVING throughout; the
// readiness names ("" and BridgeService) go NOT_SERVING while the lease
// database refuses connections and SERVING again once it accepts them.
func TestReadinessFollowsPostgres(t *testing.T) {
	dsn := pgtest.NewDatabase(t, migrations.Up)
	catalog, kernel := &bridgetest.FakeCatalog{}, bridgetest.NewFakeKernel()
	catalog.SetTools(bridgetest.DefaultTools())
	b := bridgetest.Start(t, bridgetest.ServeFakes(t, catalog, kernel), dsn, func(c *app.Config) {
		c.SweepInterval = 20 * time.Millisecond
	})
	cc, err := grpc.NewClient(b.App.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	h := healthpb.NewHealthClient(cc)
	check := func(name string) healthpb.HealthCheckResponse_ServingStatus {
		resp, err := h.Check(context.Background(), &healthpb.HealthCheckRequest{Service: name})
		if err != nil {
			t.Fatalf("health %q: %v", name, err)
		}
		return resp.GetStatus()
	}
	// waitReady polls until both readiness names report want; the bound
	// is a safety net against hangs, not a timing assertion.
	waitReady := func(want healthpb.HealthCheckResponse_ServingStatus) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for check("") != want || check(app.HealthService) != want {
			if time.Now().After(deadline) {
				t.Fatalf("readiness never became %s", want)
			}
			if got := check("liveness"); got != healthpb.HealthCheckResponse_SERVING {
				t.Fatalf("liveness = %s, want SERVING always", got)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitReady(healthpb.HealthCheckResponse_SERVING)

	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := pgx.Connect(context.Background(), pgtest.AdminDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	db := pgx.Identifier{cfg.Database}.Sanitize()
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := admin.Exec(context.Background(), sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec("ALTER DATABASE " + db + " WITH ALLOW_CONNECTIONS false")
	exec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", cfg.Database)
	waitReady(healthpb.HealthCheckResponse_NOT_SERVING)
	if got := check("liveness"); got != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("liveness = %s during the outage, want SERVING", got)
	}
	exec("ALTER DATABASE " + db + " WITH ALLOW_CONNECTIONS true")
	waitReady(healthpb.HealthCheckResponse_SERVING)
}

// TestCommandLine covers bridge-svc's subcommands: config-reference prints
// every serve flag with its env variable, migrate --check exits 1 while
// migrations are pending and 0 once applied, usage errors exit 2.
func TestCommandLine(t *testing.T) {
	run := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := app.Main(args, &out, &errb)
		return code, out.String(), errb.String()
	}
	code, out, _ := run("config-reference")
	if code != 0 {
		t.Errorf("config-reference exit %d", code)
	}
	for _, want := range []string{"`--metrics-listen`", "`SHAREDOS_METRICS_LISTEN`", "`--database-url`", "`--http-listen`"} {
		if !strings.Contains(out, want) {
			t.Errorf("config-reference lacks %s:\n%s", want, out)
		}
	}
	if code, _, stderr := run(); code != 2 || !strings.Contains(stderr, "usage") {
		t.Errorf("no command: exit %d, stderr %q; want 2 and the usage", code, stderr)
	}
	if code, _, stderr := run("frobnicate"); code != 2 || !strings.Contains(stderr, `"frobnicate"`) {
		t.Errorf("unknown command: exit %d, stderr %q; want 2 naming it", code, stderr)
	}
	t.Setenv("SHAREDOS_DATABASE_URL", "")
	if code, _, stderr := run("migrate", "--check"); code != 2 || !strings.Contains(stderr, "--database-url") {
		t.Errorf("migrate without a database: exit %d, stderr %q; want 2 naming --database-url", code, stderr)
	}

	dsn := pgtest.NewNamedDatabase(t, "empty", nil) // nothing applied yet
	if code, _, stderr := run("migrate", "--check", "--database-url", dsn); code != 1 || !strings.Contains(stderr, "pending") {
		t.Errorf("migrate --check on an empty database: exit %d, stderr %q; want 1 (pending)", code, stderr)
	}
	if code, _, stderr := run("migrate", "--database-url", dsn); code != 0 {
		t.Fatalf("migrate: exit %d: %s", code, stderr)
	}
	if code, _, stderr := run("migrate", "--check", "--database-url", dsn); code != 0 {
		t.Errorf("migrate --check after migrate: exit %d, stderr %q; want 0", code, stderr)
	}
}
