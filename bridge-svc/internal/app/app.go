package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"golang.org/x/sync/errgroup"

	"github.com/sharedos/toolshare/bridge-svc/internal/forward"
	"github.com/sharedos/toolshare/bridge-svc/internal/leases"
	"github.com/sharedos/toolshare/bridge-svc/internal/leases/memory"
	"github.com/sharedos/toolshare/bridge-svc/internal/leases/postgres"
	"github.com/sharedos/toolshare/bridge-svc/internal/mcpserver"
	"github.com/sharedos/toolshare/bridge-svc/internal/protocol"
	"github.com/sharedos/toolshare/bridge-svc/internal/requeststate"
	"github.com/sharedos/toolshare/bridge-svc/migrations"
	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/callers"
	"github.com/sharedos/toolshare/services/platform/config"
	"github.com/sharedos/toolshare/services/platform/grpcx"
	"github.com/sharedos/toolshare/services/platform/pgdb"
	"github.com/sharedos/toolshare/services/platform/runner"
	"github.com/sharedos/toolshare/services/platform/telemetry"
	"github.com/sharedos/toolshare/services/platform/tenancy"
)

// HealthService is the gRPC health name of the bridge's own service.
const HealthService = "sharedos.v1.BridgeService"

// DefaultLeaseRetention is --lease-retention's default: a closed or expired
// lease is kept a week (GetTurn still answers for it), then deleted.
const DefaultLeaseRetention = 7 * 24 * time.Hour

// Config is everything `bridge-svc serve` is configured with.
type Config struct {
	Listen      string
	HTTPListen  string
	PublicURL   string
	Catalog     string
	Kernel      string
	DatabaseURL string
	// DatabaseRole is the least-privilege role the pool acts as (ADR 0013).
	DatabaseRole string
	// DatabaseMaxConns bounds the pool (0: pgdb.DefaultMaxConns).
	DatabaseMaxConns int
	Migrate          bool
	AllowedOrigins   []string
	AllowedHosts     []string
	// TrustedProxies are CIDRs of peers (an Ingress, a load balancer) whose
	// X-Forwarded-For names the client the refusal budget is kept for.
	TrustedProxies []string
	// HostTenants are IDENTITY=TENANT entries: the tenants each host
	// identity may open turns for (tenancy.Policy).
	HostTenants []string
	// OIDCIssuer, when set, makes OpenTurn accept end users' ID tokens
	// (user_token) of this issuer for OIDCAudience; the claims named below
	// become the context.
	OIDCIssuer, OIDCAudience                            string
	OIDCAlgorithms                                      []string
	OIDCPrincipalClaim, OIDCTenantClaim, OIDCRolesClaim string
	MaxBodyBytes                                        int
	// MaxConnections bounds the open HTTP connections (protocol.ConnLimit);
	// 0: defaultMaxConnections.
	MaxConnections int
	DefaultTTL     time.Duration
	SweepInterval  time.Duration
	// LeaseRetention is how long a closed or expired lease is kept before
	// the sweeper deletes it (at most hourly); 0 keeps every lease.
	LeaseRetention time.Duration
	// CallTimeout bounds one InvokeTool (the whole kernel pipeline,
	// handler included); every internal RPC carries a deadline.
	CallTimeout time.Duration
	// StatusCacheTTL is how long a pod reuses a lease status read
	// (ADR 0005); 0 reads the store on every request.
	StatusCacheTTL time.Duration
	// StateKey is the PEM file of the key the requestState of input-required
	// results is sealed with (an Ed25519 private key; its seed is the key
	// material), the same on every pod; StateRetiredKeys still open states
	// sealed before a rotation. Empty: a key generated at start (states
	// then open only on this pod, until it stops).
	StateKey         string
	StateRetiredKeys []string
	// MetricsListen is the address of the Prometheus /metrics endpoint
	// (empty: off); it serves Metrics.
	MetricsListen string
	// Metrics is the Prometheus handler from telemetry.SetupWith; nil
	// leaves the endpoint off whatever MetricsListen says.
	Metrics http.Handler
	// MeterProvider replaces the global one (tests).
	MeterProvider metric.MeterProvider

	// Logger; nil means telemetry.Logger(ServiceBridge).
	Logger *slog.Logger
	// Invoker overrides the dialled kernel for tool calls (tests).
	Invoker forward.Invoker
	// Plane is the internal plane's transport (runner.Env.Plane; zero:
	// plaintext, for in-process tests).
	Plane grpcx.Plane
}

// Bind registers the serve flags on fs (each also read from
// SHAREDOS_<NAME>) and returns the function that reads the Config once fs
// has been parsed.
func Bind(fs *flag.FlagSet) func() Config {
	var c Config
	listen := config.String(fs, "listen", "127.0.0.1:7403", "gRPC listen address (BridgeService, health)")
	httpListen := config.String(fs, "http-listen", "127.0.0.1:7480", "HTTP listen address of the turn MCP endpoints")
	publicURL := config.String(fs, "public-url", "", "base URL harnesses reach the HTTP port on (default http://<http-listen>)")
	catalog := config.String(fs, "catalog", "127.0.0.1:7401", "catalog-svc gRPC address: the kernel that grants, revokes and runs each turn's calls")
	kernel := config.String(fs, "kernel", "", "kernel (RuntimeService) gRPC address (default: --catalog)")
	dbURL := config.String(fs, "database-url", "", "PostgreSQL DSN for leases (empty: embedded in-memory store)")
	dbMax := config.Int(fs, "database-max-conns", pgdb.DefaultMaxConns, "PostgreSQL pool size (a pool_max_conns in --database-url wins)")
	dbRole := config.String(fs, "database-role", migrations.ServiceRole, "PostgreSQL role every connection acts as (SET ROLE; the migrations create it): only the bridge schema; empty: the login user's own privileges")
	migrate := config.Bool(fs, "migrate", false, "apply database migrations before serving (local use)")
	origins := config.StringSlice(fs, "allowed-origins", nil, "comma-separated Origins allowed on the MCP endpoints (requests without Origin, and from the bridge's own origin — the public URL's, and the loopback names with its port on a loopback listener — are always allowed)")
	config.Alias(fs, "allowed-origin", "allowed-origins") // as issue 17 spells it
	hosts := config.StringSlice(fs, "allowed-hosts", nil, "comma-separated Host names allowed (default: localhost, 127.0.0.1, ::1 and the public URL host)")
	trusted := config.StringSlice(fs, "trusted-proxies", nil, "comma-separated CIDRs of proxies (an Ingress) whose X-Forwarded-For names the client each refusal budget is kept for (default: none; the peer address is the client)")
	hostTenants := config.StringSlice(fs, "host-tenants", nil, "comma-separated spiffe://<td>/host/<name>=<tenant> entries: the tenants each host identity may open, read and close turns for (* = any; operators may for any)")
	oidcIssuer := config.String(fs, "oidc-issuer", "", "OIDC issuer whose ID tokens OpenTurn accepts as user_token (discovery and JWKS from it; https://, http:// only on loopback; empty: none)")
	oidcAudience := config.String(fs, "oidc-audience", "", "audience (client id) a user token must carry")
	oidcAlgs := config.StringSlice(fs, "oidc-algorithms", leases.DefaultUserTokenAlgorithms, "signature algorithms a user token may use (public-key only)")
	oidcPrincipal := config.String(fs, "oidc-principal-claim", "sub", "claim holding the principal")
	oidcTenant := config.String(fs, "oidc-tenant-claim", "tenant", "claim holding the tenant")
	oidcRoles := config.String(fs, "oidc-roles-claim", "roles", "claim holding the roles (a list, or one space-separated string)")
	maxBody := config.Int(fs, "max-body-bytes", protocol.DefaultMaxBodyBytes, "maximum MCP request body")
	maxConns := config.Int(fs, "max-connections", 0, "bound on the open HTTP connections of the MCP endpoints: at it, a new connection closes the longest-idle keep-alive one, or waits for one to end when none is idle (0: three quarters of the process's open-file limit)")
	ttl := config.Duration(fs, "default-ttl", leases.DefaultTTL, "lease lifetime when OpenTurn gives none")
	sweep := config.Duration(fs, "sweep-interval", 5*time.Second, "how often cached turn servers of closed/expired turns are freed")
	retention := config.Duration(fs, "lease-retention", DefaultLeaseRetention, "how long a closed or expired lease is kept before it is deleted (checked hourly, or every retention/24 if sooner; 0: never deleted)")
	callTimeout := config.Duration(fs, "call-timeout", 2*time.Minute, "deadline of one InvokeTool (kernel pipeline and handler)")
	statusTTL := config.Duration(fs, "lease-cache-ttl", 500*time.Millisecond, "how long a pod reuses a lease status read: a close through another pod is seen within it (0: read every request)")
	metrics := runner.BindMetricsListen(fs)
	stateKey := config.String(fs, "state-key", "", "PEM file of the key (Ed25519 private key, PKCS #8) input-required requestStates are sealed with, the same on every pod (empty: a key generated at start; states then open only on this pod)")
	stateRetired := config.StringSlice(fs, "state-retired-keys", nil, "comma-separated PEM files of earlier --state-key keys: states they sealed still open (keep them for 10 minutes after a rotation)")
	return func() Config {
		c.Listen, c.HTTPListen, c.PublicURL = *listen, *httpListen, *publicURL
		c.Catalog, c.Kernel, c.DatabaseURL, c.Migrate, c.DatabaseRole = *catalog, *kernel, *dbURL, *migrate, *dbRole
		c.DatabaseMaxConns = *dbMax
		c.AllowedOrigins, c.AllowedHosts, c.HostTenants, c.TrustedProxies = *origins, *hosts, *hostTenants, *trusted
		c.OIDCIssuer, c.OIDCAudience, c.OIDCAlgorithms = *oidcIssuer, *oidcAudience, *oidcAlgs
		c.OIDCPrincipalClaim, c.OIDCTenantClaim, c.OIDCRolesClaim = *oidcPrincipal, *oidcTenant, *oidcRoles
		c.MaxBodyBytes, c.DefaultTTL, c.SweepInterval, c.CallTimeout = *maxBody, *ttl, *sweep, *callTimeout
		c.MaxConnections = *maxConns
		c.StatusCacheTTL, c.MetricsListen, c.LeaseRetention = *statusTTL, *metrics, *retention
		c.StateKey, c.StateRetiredKeys = *stateKey, *stateRetired
		return c
	}
}

// Validate reports every bad value at once.
func (c *Config) Validate() error {
	var errs config.Errors
	if c.Listen == "" {
		errs.Add("listen", "must not be empty")
	}
	if c.DatabaseMaxConns < 0 {
		errs.Add("database-max-conns", "must be positive")
	}
	if c.HTTPListen == "" {
		errs.Add("http-listen", "must not be empty")
	}
	if len(c.StateRetiredKeys) > 0 && c.StateKey == "" {
		errs.Add("state-retired-keys", "needs --state-key (the key that seals now)")
	}
	// A body becomes one InvokeTool with its grant and proof, which the
	// kernel must take whole to record the attempt: half the plane's
	// message limit leaves that room many times over.
	if c.MaxBodyBytes <= 0 || c.MaxBodyBytes > grpcx.MaxMessageSize/2 {
		errs.Addf("max-body-bytes", "must be in (0, %d], got %d", grpcx.MaxMessageSize/2, c.MaxBodyBytes)
	}
	if c.MaxConnections < 0 {
		errs.Addf("max-connections", "must not be negative (0: three quarters of the open-file limit), got %d", c.MaxConnections)
	}
	if c.DefaultTTL <= 0 || c.DefaultTTL > leases.MaxTTL {
		errs.Addf("default-ttl", "must be in (0, %s], got %s", leases.MaxTTL, c.DefaultTTL)
	}
	if c.StatusCacheTTL < 0 || c.StatusCacheTTL > time.Second {
		errs.Addf("lease-cache-ttl", "must be in [0, 1s] (a close must reach every pod within 1 s), got %s", c.StatusCacheTTL)
	}
	if c.CallTimeout < 0 {
		errs.Addf("call-timeout", "must be positive, got %s", c.CallTimeout)
	}
	if c.LeaseRetention < 0 {
		errs.Addf("lease-retention", "must not be negative (0 keeps every lease), got %s", c.LeaseRetention)
	}
	for _, o := range c.AllowedOrigins {
		if u, perr := url.Parse(o); perr != nil || u.Scheme == "" || u.Host == "" || (u.Path != "" && u.Path != "/") {
			errs.Addf("allowed-origins", "%q is not an origin (scheme://host[:port])", o)
		}
	}
	if _, err := parsePrefixes(c.TrustedProxies); err != nil {
		errs.Addf("trusted-proxies", "%v", err)
	}
	if _, err := tenancy.Parse(c.HostTenants); err != nil {
		errs.Addf("host-tenants", "%v", err)
	}
	switch {
	case c.OIDCIssuer != "" && c.OIDCAudience == "":
		errs.Add("oidc-audience", "is required with --oidc-issuer")
	case c.OIDCIssuer == "" && c.OIDCAudience != "":
		errs.Add("oidc-issuer", "is required with --oidc-audience")
	}
	if err := leases.CheckUserTokenAlgorithms(c.OIDCAlgorithms); err != nil {
		errs.Addf("oidc-algorithms", "%v", err)
	}
	if c.OIDCIssuer != "" {
		if err := leases.CheckIssuer(c.OIDCIssuer); err != nil {
			errs.Addf("oidc-issuer", "%v", err)
		}
	}
	return errs.Err()
}

// defaultMaxConnections is --max-connections' 0: three quarters of the
// open-file limit leave the rest to the gRPC side, the kernel and database
// connections and the process's files.
func defaultMaxConnections() int {
	const fallback, ceiling = 4096, 1 << 20
	n, ok := openFileLimit()
	if !ok {
		return fallback
	}
	return int(min(max(n/4*3, 16), ceiling))
}

// userTokens is the user-token verification of c (nil without an issuer).
func (c Config) userTokens() *leases.UserTokens {
	if c.OIDCIssuer == "" {
		return nil
	}
	return &leases.UserTokens{Issuer: c.OIDCIssuer, Audience: c.OIDCAudience, Algorithms: c.OIDCAlgorithms,
		PrincipalClaim: c.OIDCPrincipalClaim, TenantClaim: c.OIDCTenantClaim, RolesClaim: c.OIDCRolesClaim}
}

// App is a completed, ready-to-run bridge.
type App struct {
	cfg     Config
	log     *slog.Logger
	grpcLis net.Listener
	httpLis net.Listener
	grpc    *grpcx.Server
	http    *http.Server
	mcp     *mcpserver.Handler
	store   leases.Store
	// purge is the sweeper's retention step.
	purge *leasePurge
	// metricsAddr is the bound --metrics-listen address ("" when off).
	metricsAddr string
	pinger      leases.Pinger
	closers     []func()
}

// Complete validates c, opens the store and the clients and binds the
// listeners. On error everything opened is closed again.
func (c Config) Complete(ctx context.Context) (_ *App, err error) {
	a := &App{cfg: c, log: c.Logger}
	if a.log == nil {
		a.log = telemetry.Logger(telemetry.ServiceBridge)
	}
	defer func() {
		if err != nil {
			a.close()
		}
	}()
	if c.SweepInterval <= 0 {
		c.SweepInterval = 5 * time.Second
	}
	if c.CallTimeout == 0 {
		c.CallTimeout = 2 * time.Minute
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}

	a.grpcLis, err = net.Listen("tcp", c.Listen)
	if err != nil {
		return nil, fmt.Errorf("bridge: --listen: %w", err)
	}
	a.closers = append(a.closers, func() { _ = a.grpcLis.Close() })
	a.httpLis, err = net.Listen("tcp", c.HTTPListen)
	if err != nil {
		return nil, fmt.Errorf("bridge: --http-listen: %w", err)
	}
	a.closers = append(a.closers, func() { _ = a.httpLis.Close() })
	if c.MaxConnections == 0 {
		c.MaxConnections = defaultMaxConnections()
	}
	conns := protocol.NewConnLimit(c.MaxConnections, a.log)
	if c.PublicURL == "" {
		c.PublicURL = "http://" + a.httpLis.Addr().String()
	}
	pu, perr := url.Parse(c.PublicURL)
	if perr != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
		return nil, fmt.Errorf("bridge: --public-url: %q must be an http(s) URL", c.PublicURL)
	}
	// Turns are handed this base with /turns/{turnId}/mcp after it: a
	// wildcard host, credentials, a query or a fragment would hand every
	// harness an address that reaches nothing (or leaks).
	if strings.Contains(pu.Host, "*") || pu.User != nil || pu.RawQuery != "" || pu.ForceQuery || pu.Fragment != "" {
		return nil, fmt.Errorf("bridge: --public-url: %q must be a concrete base URL (no wildcard host, credentials, query or fragment)", c.PublicURL)
	}
	hosts := c.AllowedHosts
	if len(hosts) == 0 {
		hosts = append(append([]string{}, protocol.DefaultAllowedHosts...), pu.Hostname())
	}

	if c.DatabaseURL == "" {
		a.store = memory.New()
	} else {
		if c.Migrate {
			if err := migrations.Up(ctx, c.DatabaseURL); err != nil {
				return nil, fmt.Errorf("bridge: migrate: %w", err)
			}
		}
		var pool *pgxpool.Pool
		pool, err = pgdb.Open(ctx, c.DatabaseURL, pgdb.WithRole(c.DatabaseRole), pgdb.WithMaxConns(c.DatabaseMaxConns))
		if err != nil {
			return nil, fmt.Errorf("bridge: --database-url: %w", err)
		}
		a.closers = append(a.closers, pool.Close)
		if err := migrations.Check(ctx, c.DatabaseURL); err != nil {
			return nil, fmt.Errorf("bridge: schema not current (run `bridge-svc migrate`): %w", err)
		}
		ps := postgres.New(pool)
		a.store, a.pinger = ps, ps
	}
	a.purge = newLeasePurge(a.store, c.LeaseRetention, c.SweepInterval, a.log)

	target := c.Kernel
	if target == "" {
		target = c.Catalog
	}
	// InvokeTool gets --call-timeout rather than grpcx's 10 s default: a
	// tool may legitimately run longer than a metadata RPC; the client's
	// cancellation still ends it sooner. GrantTurn and RevokeTurn carry
	// their own request's deadline.
	kc, err := grpcx.Dial(target, grpcx.WithDefaultTimeout(c.CallTimeout), c.Plane.TLS.DialOption(callers.Catalog))
	if err != nil {
		return nil, fmt.Errorf("bridge: --kernel: %w", err)
	}
	a.closers = append(a.closers, func() { _ = kc.Close() })
	kernel := sharedosv1.NewRuntimeServiceClient(kc)
	var invoker forward.Invoker = kernel
	if c.Invoker != nil {
		invoker = c.Invoker
	}

	proxies, err := parsePrefixes(c.TrustedProxies) // validated above
	if err != nil {
		return nil, err
	}
	states, err := c.states(a.log)
	if err != nil {
		return nil, err
	}
	edge := protocol.NewEdge(protocol.EdgeConfig{
		AllowedOrigins: append(slices.Clone(c.AllowedOrigins), protocol.OwnOrigins(pu, a.httpLis.Addr())...),
		AllowedHosts:   hosts, MaxBodyBytes: int64(c.MaxBodyBytes),
	})
	a.mcp = mcpserver.NewHandler(mcpserver.Config{
		Store:          a.store,
		Forwarder:      &forward.Forwarder{Invoker: invoker, Logger: a.log, StreamTimeout: c.CallTimeout, States: states},
		Edge:           edge,
		Logger:         a.log,
		TrustedProxies: proxies,
		StatusCacheTTL: c.StatusCacheTTL,
	})
	tenants, err := tenancy.Parse(c.HostTenants) // validated above
	if err != nil {
		return nil, err
	}
	svc := leases.NewService(leases.ServiceConfig{
		Store: a.store, Kernel: kernel, PublicURL: c.PublicURL, DefaultTTL: c.DefaultTTL,
		OnClose: a.mcp.Evict, Logger: a.log, ValidateTools: mcpserver.ValidateTools, Tenants: tenants,
		Users: c.userTokens(),
	})
	// a.log already names the service; ServiceName would add it twice.
	a.grpc = grpcx.NewServer(grpcx.ServerOptions{Logger: a.log, Plane: c.Plane})
	a.closers = append(a.closers, a.grpc.Close)
	sharedosv1.RegisterBridgeServiceServer(a.grpc.GRPC(), svc)
	a.grpc.SetServing(grpcx.LivenessService, true)

	mux := http.NewServeMux()
	mux.Handle(mcpserver.Pattern, a.mcp)
	a.http = &http.Server{
		Handler:           edge.BoundBody(mux),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(a.log.Handler(), slog.LevelWarn),
		ConnState:         conns.ConnState,
	}
	a.httpLis = conns.Listener(a.httpLis)
	if err := a.registerMetrics(c.MeterProvider); err != nil {
		return nil, err
	}
	if c.Metrics != nil && c.MetricsListen != "" {
		// Bound here like the other listeners, so a bad address fails
		// Complete; scraping before Run only sees idle instruments.
		bound, stop, merr := telemetry.ServeMetrics(c.MetricsListen, c.Metrics, a.log)
		if merr != nil {
			return nil, fmt.Errorf("bridge: --metrics-listen: %w", merr)
		}
		a.closers = append(a.closers, stop)
		a.metricsAddr = bound
	}
	a.cfg = c
	return a, nil
}

// registerMetrics registers the bridge's instruments on the global
// MeterProvider (a no-op one until telemetry.SetupWith installs the SDK).
// sharedos.turns.open counts the open turns this pod serves: those it
// holds an MCP server for, the working set the sweeper keeps current
// (a turn closed elsewhere or expired leaves it within --sweep-interval).
// Pods are stateless, so a turn used through several pods counts on each:
// aggregate across pods with max, not sum, for a rough system-wide figure.
func (a *App) registerMetrics(mp metric.MeterProvider) error {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	meter := mp.Meter(telemetry.ScopeBridge)
	open, err := meter.Int64ObservableUpDownCounter(telemetry.MetricTurnsOpen,
		metric.WithDescription("Open turns this bridge pod holds an MCP server for."),
		metric.WithUnit("{turn}"))
	if err != nil {
		return fmt.Errorf("bridge: metric %s: %w", telemetry.MetricTurnsOpen, err)
	}
	reg, err := meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(open, int64(a.mcp.Served()))
		return nil
	}, open)
	if err != nil {
		return fmt.Errorf("bridge: metric %s: %w", telemetry.MetricTurnsOpen, err)
	}
	a.closers = append(a.closers, func() { _ = reg.Unregister() })
	return nil
}

// GRPCAddr and HTTPAddr are the bound addresses (":0" in tests).
func (a *App) GRPCAddr() string { return a.grpcLis.Addr().String() }

// HTTPAddr is the bound HTTP address.
func (a *App) HTTPAddr() string { return a.httpLis.Addr().String() }

// MetricsAddr is the bound Prometheus /metrics address, "" when off.
func (a *App) MetricsAddr() string { return a.metricsAddr }

// PublicURL is the effective public base URL.
func (a *App) PublicURL() string { return a.cfg.PublicURL }

// Run serves until ctx is done, then drains and closes everything.
func (a *App) Run(ctx context.Context) error {
	defer a.close()
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return a.grpc.Serve(gctx, a.grpcLis) })
	g.Go(func() error {
		err := a.http.Serve(a.httpLis)
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return fmt.Errorf("bridge: http serve: %w", err)
	})
	g.Go(func() error {
		<-gctx.Done()
		a.mcp.StopAsking()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(gctx), grpcx.DefaultDrainTimeout)
		defer cancel()
		if err := a.http.Shutdown(sctx); err != nil {
			_ = a.http.Close()
		}
		return nil
	})
	g.Go(func() error { a.loop(gctx); return nil })
	g.Go(func() error { a.mcp.RunAnswerRelay(gctx); return nil })
	a.log.Info("bridge serving", slog.String("grpc", a.GRPCAddr()), slog.String("http", a.HTTPAddr()),
		slog.String("public_url", a.cfg.PublicURL))
	return g.Wait()
}

// loop frees cached turn servers of closed or expired turns, purges leases
// past --lease-retention (at most hourly) and keeps the readiness status in
// step with the store.
func (a *App) loop(ctx context.Context) {
	t := time.NewTicker(a.cfg.SweepInterval)
	defer t.Stop()
	a.ready(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := a.mcp.Sweep(ctx); err != nil && ctx.Err() == nil {
				a.log.Warn("sweep failed", slog.String("error", err.Error()))
			}
			a.purge.step(ctx)
			a.ready(ctx)
		}
	}
}

func (a *App) ready(ctx context.Context) {
	ok := true
	if a.pinger != nil {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		ok = a.pinger.Ping(pctx) == nil
		cancel()
	}
	if ctx.Err() != nil {
		return
	}
	a.grpc.SetServing(HealthService, ok)
	a.grpc.SetServing("", ok)
}

func (a *App) close() {
	for i := len(a.closers) - 1; i >= 0; i-- {
		a.closers[i]()
	}
	a.closers = nil
}

// CachedTurns lists the turns whose MCP server this pod holds (tests,
// diagnostics).
func (a *App) CachedTurns() []string { return a.mcp.Cached() }

// parsePrefixes parses --trusted-proxies: CIDRs, or single addresses.
func parsePrefixes(vs []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(vs))
	for _, v := range vs {
		p, err := netip.ParsePrefix(v)
		if err != nil {
			a, aerr := netip.ParseAddr(v)
			if aerr != nil {
				return nil, fmt.Errorf("%q is neither a CIDR nor an address", v)
			}
			p = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// states loads the requestState keys, or makes a process-local one.
func (c Config) states(log *slog.Logger) (*requeststate.Sealer, error) {
	if c.StateKey == "" {
		log.Warn("no --state-key: input-required requestStates are sealed with a key generated now; only this pod opens them, until it stops")
		return requeststate.Generate()
	}
	s, err := requeststate.Load(c.StateKey, c.StateRetiredKeys...)
	if err != nil {
		return nil, fmt.Errorf("--state-key: %w", err)
	}
	return s, nil
}
