package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/callers"
	"github.com/sharedos/toolshare/services/platform/config"
	"github.com/sharedos/toolshare/services/platform/grpcx"
	"github.com/sharedos/toolshare/services/platform/memrelief"
	"github.com/sharedos/toolshare/services/platform/pgdb"
	"github.com/sharedos/toolshare/services/platform/runner"
	"github.com/sharedos/toolshare/services/platform/secretref"
	"github.com/sharedos/toolshare/services/platform/telemetry"
	"github.com/sharedos/toolshare/services/platform/tenancy"

	"github.com/sharedos/toolshare/catalog-svc/internal/catalog"
	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline"
	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline/grants"
	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline/records"
	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline/records/journal"
	recmemory "github.com/sharedos/toolshare/catalog-svc/internal/pipeline/records/memory"
	recpostgres "github.com/sharedos/toolshare/catalog-svc/internal/pipeline/records/postgres"
	"github.com/sharedos/toolshare/catalog-svc/internal/server"
	"github.com/sharedos/toolshare/catalog-svc/internal/store"
	"github.com/sharedos/toolshare/catalog-svc/internal/store/memory"
	"github.com/sharedos/toolshare/catalog-svc/internal/store/postgres"
	"github.com/sharedos/toolshare/catalog-svc/internal/upstream"
	"github.com/sharedos/toolshare/catalog-svc/migrations"

	"github.com/sharedos/toolshare/catalog-svc/internal/budget"
)

// turnLockSpace names the advisory locks that order a turn's calls that are
// not read-only across replicas.
const turnLockSpace = "sharedos.turn-writes"

// upstreamLockSpace names the advisory lock that orders changes of upstream
// records across replicas.
const upstreamLockSpace = "sharedos.upstreams"

// resourceLockSpace names the advisory locks that order the registrations
// of resources (one per match key: two spellings of a URI never both land).
const resourceLockSpace = "sharedos.resources"

// keyResourcesTimeout bounds writing the resources' match keys at start.
const keyResourcesTimeout = 30 * time.Second

// ServiceName is this process's OpenTelemetry service.name.
const ServiceName = telemetry.ServiceCatalog

// Config is everything `catalog-svc serve` is configured with.
type Config struct {
	Listen        string
	MetricsListen string
	DatabaseURL   string
	// DatabaseRole is the least-privilege role the pool acts as (ADR 0013).
	DatabaseRole string
	// DatabaseMaxConns bounds the pool; the process holds up to two more
	// (the catalogue feed's and the revocation watch's LISTEN connections).
	DatabaseMaxConns      int
	Migrate               bool
	AuthzAddr             string
	AuthzTimeout          time.Duration
	DefaultHandlerTimeout time.Duration
	ReconcileInterval     time.Duration
	// InstanceID is stamped on every operation record this process writes;
	// stable across restarts (the pod name), a restarted kernel marks its
	// own pending records interrupted at once.
	InstanceID string
	// RecordJournalDir holds the durable journal of completions the store
	// could not take yet (ADR 0007); empty keeps them in memory only. It
	// needs DatabaseURL, and journals that one database's records
	// (journal.BindStore).
	RecordJournalDir string
	// GrantKey is the PEM Ed25519 private key turn grants are signed with
	// (ADR 0015); every replica holds the same. Empty: a key generated at
	// start that lives only in this process. On the embedded store grants
	// end with the process either way (grants.Keys.EndWithProcess).
	GrantKey string
	// GrantRetiredKeys verify grants signed before a key rotation.
	GrantRetiredKeys []string
	// Upstreams is where upstream MCP servers may be (ADR 0019).
	Upstreams upstream.Guard
	// UpstreamCredentials are the secret references an upstream may name
	// (secretref.ParseScope; empty: its zero Scope), for Upstreams.
	UpstreamCredentials []string
	// UpstreamScreening is the poisoning rule set file (empty: built in).
	UpstreamScreening string
	// UpstreamResultBudget bounds the bytes of upstream results held at
	// once (budget.Budget; must be > 0).
	UpstreamResultBudget int64
	// EmbeddedRecordLimit bounds the finished operation records the
	// embedded store keeps, the newest (recmemory.WithRetention; 0: all).
	EmbeddedRecordLimit int
	// HostTenants are IDENTITY=TENANT entries (tenancy.Policy), the same as
	// bridge-svc's: a host reads the records of its tenants' turns only.
	HostTenants []string
	// Plane is the internal plane's transport (runner.Env.Plane; zero:
	// plaintext, for in-process tests).
	Plane grpcx.Plane
}

// Bind registers the flags on fs (each also read from SHAREDOS_<NAME>) and
// returns the function that reads the Config once fs has been parsed.
func Bind(fs *flag.FlagSet) func() Config {
	listen := config.String(fs, "listen", "127.0.0.1:7401", "gRPC listen address (CatalogService, RuntimeService, health)")
	metrics := runner.BindMetricsListen(fs)
	db := config.String(fs, "database-url", "", "PostgreSQL URL; empty uses the embedded in-process store")
	dbRole := config.String(fs, "database-role", migrations.ServiceRole, "PostgreSQL role every connection acts as (SET ROLE; the migrations create it): records are append-only for it; empty: the login user's own privileges")
	dbMax := config.Int(fs, "database-max-conns", pgdb.DefaultMaxConns, "PostgreSQL pool size (a pool_max_conns in --database-url wins); the process holds up to two LISTEN connections more")
	migrate := config.Bool(fs, "migrate", false, "apply database migrations before serving (local use; production runs `catalog-svc migrate`)")
	authz := config.String(fs, "authz", "127.0.0.1:7402", "authz-svc gRPC address")
	authzTimeout := config.Duration(fs, "authz-timeout", 2*time.Second, "deadline of one Authorize call")
	handlerTimeout := config.Duration(fs, "handler-timeout", 30*time.Second, "Handle deadline for tools that set no timeout")
	reconcile := config.Duration(fs, "reconcile-interval", time.Minute, "how often pending records of dead calls are marked interrupted")
	instance := config.String(fs, "instance-id", "", "name stamped on operation records, unique among live kernels (empty: the host name and a random suffix, unique per process; a kernel finds the ids of those that stopped on its --record-journal-dir)")
	grantKey := config.String(fs, "grant-key", "", "PEM file of the Ed25519 private key turn grants are signed with, the same on every replica (empty: a key generated at start; grants then end with this process and other replicas refuse them; on the embedded store grants end with the process whatever the key)")
	grantRetired := config.StringSlice(fs, "grant-retired-keys", nil, "comma-separated PEM files of keys that signed grants before a rotation: still verified, never used to sign")
	upHosts := config.StringSlice(fs, "upstream-allow-hosts", nil, "comma-separated hosts (or host:port) an HTTP upstream MCP server may be at (empty: any host; link-local and metadata addresses stay refused)")
	upCommands := config.StringSlice(fs, "upstream-commands", nil, "comma-separated executables a stdio upstream MCP server may be started with, by name or path (empty: no stdio upstreams)")
	upScreening := config.String(fs, "upstream-screening", "", "JSON file of the poisoning rules acquired tool definitions are screened with (format: catalog-svc/internal/upstream/screening.json; empty: that built-in set)")
	upLinkLocal := config.Bool(fs, "upstream-allow-link-local", false, "let upstream MCP servers be at link-local and cloud metadata addresses")
	upDenyPrivate := config.Bool(fs, "upstream-deny-private", false, "refuse upstream MCP servers at loopback, private and unspecified addresses (RFC 1918, RFC 6598, IPv6 unique-local, 0.0.0.0, ::), checked at every dial: for a kernel whose upstreams are all public")
	upCredentials := config.StringSlice(fs, "upstream-credentials", nil, "comma-separated secret references an upstream's headers, bearer token and OAuth client secret may name: env:NAME, env:PREFIX*, file:/directory/ (not holding or in /proc, /sys, /dev, the key directories or the journal), or none (empty: any environment variable; never SHAREDOS_*, OTEL_*, PG*, KUBERNETES_*, K8S_* — the process's own configuration and the platform's — and no file)")
	upCleartext := config.Bool(fs, "upstream-allow-cleartext-credentials", false, "let an upstream's credential (headers, bearer token, OAuth client secret) go over plain http:// to a host off loopback (by default only https, or http to loopback, carries one)")
	hostTenants := config.StringSlice(fs, "host-tenants", nil, "comma-separated spiffe://<td>/host/<name>=<tenant> entries, as bridge-svc's: a host reads (ListOperations) only the records of its tenants' turns (* = any; operators read any)")
	resultBudget := config.Int(fs, "upstream-result-budget", int(budget.DefaultSize), "bytes of upstream MCP results the kernel holds at once, all calls together, one upstream's calls at most half of it, or one whole response (0: 256 MiB; else at least 1 MiB): a response's bytes are taken as it is read and given back once its answer is sent; a call that finds none free waits for room until its deadline, one that needs more mid-response fails upstream_unavailable (a value under 64 MiB, the per-response cap, refuses larger responses)")
	recordLimit := config.Int(fs, "embedded-record-limit", recmemory.DefaultRetention, "finished operation records the embedded store keeps (no --database-url): the newest, older ones dropped oldest first as new ones finish; pending records are always kept, and a dropped call's id is kept while its turn may still call, so a repeat is still refused (0: every record, for the life of the process; PostgreSQL keeps records until the owner purges an export, docs/retention.md)")
	journalDir := config.String(fs, "record-journal-dir", "", "directory of the durable journal of record completions written while PostgreSQL is down (a volume that survives a restart of the process; empty: memory only); needs --database-url, and is bound to that database at first use (a kernel of another database is refused)")
	return func() Config {
		id := *instance
		if id == "" {
			id = defaultInstanceID()
		}
		return Config{
			Listen: *listen, MetricsListen: *metrics, DatabaseURL: *db, Migrate: *migrate, DatabaseRole: *dbRole, DatabaseMaxConns: *dbMax, AuthzAddr: *authz,
			AuthzTimeout: *authzTimeout, DefaultHandlerTimeout: *handlerTimeout, ReconcileInterval: *reconcile,
			InstanceID: id, RecordJournalDir: *journalDir, GrantKey: *grantKey, GrantRetiredKeys: *grantRetired,
			Upstreams: upstream.Guard{
				Hosts: *upHosts, Commands: *upCommands, AllowLinkLocal: *upLinkLocal,
				AllowCleartextCredentials: *upCleartext, DenyPrivate: *upDenyPrivate,
			},
			UpstreamCredentials:  *upCredentials,
			UpstreamScreening:    *upScreening,
			UpstreamResultBudget: int64(*resultBudget),
			HostTenants:          *hostTenants,
			EmbeddedRecordLimit:  *recordLimit,
		}
	}
}

// defaultInstanceID is the host name (the pod name on Kubernetes) and a
// random suffix: unique per process, so two kernels on one host never take
// each other's live pending records for their own predecessor's.
func defaultInstanceID() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return host + "-" + hex.EncodeToString(b[:])
}

// Validate reports every bad value at once.
func (c *Config) Validate() error {
	var errs config.Errors
	if c.Listen == "" {
		errs.Add("listen", "must not be empty")
	}
	if c.AuthzAddr == "" {
		errs.Add("authz", "must not be empty")
	}
	if c.AuthzTimeout <= 0 {
		errs.Add("authz-timeout", "must be positive")
	}
	if c.DefaultHandlerTimeout <= 0 {
		errs.Add("handler-timeout", "must be positive")
	}
	if c.DatabaseMaxConns < 0 {
		errs.Add("database-max-conns", "must be positive")
	}
	if c.ReconcileInterval <= 0 {
		errs.Add("reconcile-interval", "must be positive")
	}
	if c.GrantKey == "" && len(c.GrantRetiredKeys) > 0 {
		errs.Add("grant-retired-keys", "needs --grant-key (the key that signs now)")
	}
	if _, err := tenancy.Parse(c.HostTenants); err != nil {
		errs.Addf("host-tenants", "%v", err)
	}
	if scope, err := secretref.ParseScope(c.UpstreamCredentials); err != nil {
		errs.Addf("upstream-credentials", "%v", err)
	} else {
		for _, d := range scope.Dirs() {
			for _, own := range c.ownPrivate() {
				if abs, err := filepath.Abs(own); err == nil && secretref.Overlap(filepath.Clean(d), abs) {
					errs.Addf("upstream-credentials", "file:%s holds or lies in %s, where catalog-svc keeps its own keys or journal: an operator could send them to an upstream", d, own)
				}
			}
		}
	}
	if c.Migrate && c.DatabaseURL == "" {
		errs.Add("migrate", "needs --database-url (the embedded store has no migrations)")
	}
	if c.RecordJournalDir != "" && c.DatabaseURL == "" {
		// The embedded store's records end with the process: it knows
		// none of the records a journal there holds, and replaying them
		// would drop them (the completions of a PostgreSQL kernel that
		// shared the directory among them).
		errs.Add("record-journal-dir", "needs --database-url (the embedded store's records end with the process: it has nothing to journal, and would drop the completions other kernels journaled there as unknown records)")
	}
	if c.EmbeddedRecordLimit < 0 {
		errs.Addf("embedded-record-limit", "must not be negative (0 keeps every record), got %d", c.EmbeddedRecordLimit)
	}
	if c.UpstreamResultBudget < 0 || (c.UpstreamResultBudget > 0 && c.UpstreamResultBudget < budget.MinSize) {
		// A response without a declared length is taken 64 KiB at a time:
		// a smaller budget refuses every such result, however small.
		errs.Addf("upstream-result-budget", "must be 0 (256 MiB) or at least %d bytes, got %d", budget.MinSize, c.UpstreamResultBudget)
	}
	return errs.Err()
}

// resultBudget is the upstream result budget's size: budget.DefaultSize
// when unset (0).
func (c Config) resultBudget() int64 {
	if c.UpstreamResultBudget <= 0 {
		return budget.DefaultSize
	}
	return c.UpstreamResultBudget
}

// App is a completed, ready-to-run catalog-svc.
type App struct {
	cfg      Config
	log      *slog.Logger
	lis      net.Listener
	srv      *grpcx.Server
	pool     *pgxpool.Pool
	authz    *grpc.ClientConn
	catalog  *catalog.Service
	upstream *upstream.Manager
	pipeline *pipeline.Pipeline
	metrics  http.Handler
	closers  []func() error
}

// Complete opens everything Run needs. Nothing listens for requests until it
// has succeeded; on error everything opened so far is closed.
func (c Config) Complete(ctx context.Context, log *slog.Logger, metrics http.Handler) (_ *App, err error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = telemetry.Logger(ServiceName)
	}
	a := &App{cfg: c, log: log, metrics: metrics}
	defer func() {
		// a, not the named result: every error return sets that to nil.
		if err != nil {
			a.close()
		}
	}()
	var tools store.Store
	var recs records.Store
	var pgRecs *recpostgres.Store
	var turnLocks pipeline.TurnLocker
	var upstreamLocks upstream.Locker
	var resourceLocks catalog.Locker
	if c.DatabaseURL == "" {
		log.Info("using the embedded store (nothing persists across restarts)")
		tools, recs = memory.New(), recmemory.New(recmemory.WithRetention(c.EmbeddedRecordLimit))
	} else {
		if c.Migrate {
			if err := migrations.Up(ctx, c.DatabaseURL); err != nil {
				return nil, err
			}
		}
		if err := migrations.Check(ctx, c.DatabaseURL); err != nil {
			return nil, fmt.Errorf("%w: run `catalog-svc migrate` first", err)
		}
		a.pool, err = pgdb.Open(ctx, c.DatabaseURL, pgdb.WithRole(c.DatabaseRole), pgdb.WithMaxConns(c.DatabaseMaxConns))
		if err != nil {
			return nil, err
		}
		a.closers = append(a.closers, func() error { a.pool.Close(); return nil })
		pgRecs = recpostgres.New(a.pool)
		tools, recs = postgres.New(a.pool, postgres.WithLogger(log)), pgRecs
		// The turns' order across replicas: advisory locks, all on one
		// session of the pool while any is held.
		locks := pgdb.NewLocks(a.pool, turnLockSpace, log)
		a.closers = append(a.closers, locks.Close)
		turnLocks = locks
		// Upstream records change on one replica at a time.
		changes := pgdb.NewLocks(a.pool, upstreamLockSpace, log)
		a.closers = append(a.closers, changes.Close)
		upstreamLocks = changes
		resources := pgdb.NewLocks(a.pool, resourceLockSpace, log)
		a.closers = append(a.closers, resources.Close)
		resourceLocks = resources
	}
	a.authz, err = grpcx.Dial(c.AuthzAddr, c.Plane.TLS.DialOption(callers.Authz))
	if err != nil {
		return nil, fmt.Errorf("dial authz-svc: %w", err)
	}
	a.closers = append(a.closers, a.authz.Close)
	authz := sharedosv1.NewAuthzServiceClient(a.authz)

	a.catalog, err = catalog.New(catalog.Config{Store: tools, Filter: authz, Logger: log, Locks: resourceLocks})
	if err != nil {
		return nil, err
	}
	if err := a.catalog.Start(context.WithoutCancel(ctx)); err != nil {
		return nil, err
	}
	a.closers = append(a.closers, a.catalog.Close)
	// Resources stored before match keys (or during a rolling upgrade by
	// a kernel without them) are found at each read until keyed here.
	kctx, kcancel := context.WithTimeout(ctx, keyResourcesTimeout)
	if n, err := a.catalog.KeyResources(kctx); err != nil {
		log.Warn("resource match keys not all written; reads compute them meanwhile", slog.Any("error", err))
	} else if n > 0 {
		log.Info("resource match keys written", slog.Int("resources", n))
	}
	kcancel()
	if c.DatabaseURL != "" && c.RecordJournalDir == "" {
		log.Warn("no --record-journal-dir: during a PostgreSQL outage calls wait for their records, and a record whose completion waits in memory is lost if this process dies")
	}
	if c.RecordJournalDir != "" {
		// A directory journals one database's records: another kernel's
		// completions replayed against this database would be dropped.
		id, err := pgRecs.Identity(ctx) // validated: a journal directory has a database
		if err != nil {
			return nil, err
		}
		if err := journal.BindStore(c.RecordJournalDir, id); err != nil {
			return nil, fmt.Errorf("--record-journal-dir: %w", err)
		}
	}
	jr, err := journal.Open(c.RecordJournalDir, log)
	if err != nil {
		return nil, fmt.Errorf("--record-journal-dir: %w", err)
	}
	a.closers = append(a.closers, jr.Close)
	var instances *journal.Instance
	if c.RecordJournalDir != "" {
		if instances, err = journal.ClaimInstance(c.RecordJournalDir, c.InstanceID); err != nil {
			return nil, fmt.Errorf("--record-journal-dir: %w", err)
		}
		a.closers = append(a.closers, instances.Close)
	}
	// The kernel calls providers as itself and only servers with a
	// provider identity.
	conns := pipeline.NewConnCache(c.Plane.TLS.DialOption(callers.Provider))
	a.closers = append(a.closers, conns.Close)
	screening := upstream.DefaultScreening()
	if c.UpstreamScreening != "" {
		if screening, err = upstream.LoadScreening(c.UpstreamScreening); err != nil {
			return nil, fmt.Errorf("--upstream-screening: %w", err)
		}
	}
	guard := c.Upstreams
	guard.Credentials, _ = secretref.ParseScope(c.UpstreamCredentials) // validated above
	guard.Private = c.private(guard.Credentials)
	resultBudget := budget.New(c.resultBudget())
	// A large result's copies are garbage once its answer is sent: given
	// back to the operating system then, not at the next collection of an
	// idle process (reliability row 48).
	resultBudget.Released = func(n int64) { memrelief.Note(int(n)) }
	a.upstream = upstream.New(upstream.Config{Store: tools, Registry: a.catalog, Guard: guard, Screening: screening, Logger: log, Locks: upstreamLocks,
		ResultBudget: resultBudget})
	a.closers = append(a.closers, a.upstream.Close)
	handlers := upstream.Handlers{Upstreams: a.upstream, Next: conns}
	keys, err := c.grantKeys(log)
	if err != nil {
		return nil, err
	}
	a.pipeline, err = pipeline.New(pipeline.Config{
		Resolver: a.catalog, Entries: a.catalog, Catalogue: a.catalog, Grants: keys, Records: recs, Journal: jr, Authz: authz, Logger: log,
		Handlers:     handlers,
		AuthzTimeout: c.AuthzTimeout, DefaultHandlerTimeout: c.DefaultHandlerTimeout, InstanceID: c.InstanceID,
		Instances: instances, TurnLocks: turnLocks,
	})
	if err != nil {
		return nil, err
	}
	a.closers = append(a.closers, a.pipeline.Close)
	// Records left pending by an earlier life of this instance are
	// interrupted calls: mark them before serving new ones.
	if _, err := a.pipeline.ReconcileAtStartup(ctx); err != nil {
		return nil, err
	}

	a.srv = grpcx.NewServer(grpcx.ServerOptions{ServiceName: ServiceName, Logger: log, Plane: c.Plane})
	sharedosv1.RegisterCatalogServiceServer(a.srv.GRPC(), server.NewCatalogServer(a.catalog, a.upstream, log))
	tenants, err := tenancy.Parse(c.HostTenants) // validated above
	if err != nil {
		return nil, err
	}
	sharedosv1.RegisterRuntimeServiceServer(a.srv.GRPC(), server.NewRuntimeServer(a.pipeline).ScopedBy(tenants))
	sharedosv1.RegisterUpstreamServiceServer(a.srv.GRPC(), server.NewUpstreamServer(a.upstream, log))
	a.closers = append(a.closers, func() error { a.srv.Close(); return nil })
	a.lis, err = net.Listen("tcp", c.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", c.Listen, err)
	}
	return a, nil
}

// private are the paths a stdio upstream's process may not open
// (upstream.Guard.Private): the directories of the kernel's keys — a
// Kubernetes Secret's mount holds the key's other files too, make run's
// PKI directory every service's key and the CA's — (a key directly in / on
// its own), the record journal, and the directories the upstreams' secret
// references may name.
func (c Config) private(credentials secretref.Scope) []string {
	return append(c.ownPrivate(), credentials.Dirs()...)
}

// ownPrivate are the paths of private that hold the kernel's own secrets
// and records: its key directories and its journal.
func (c Config) ownPrivate() []string {
	var out []string
	for _, f := range append([]string{c.Plane.TLS.KeyFile(), c.GrantKey}, c.GrantRetiredKeys...) {
		switch d := filepath.Dir(f); {
		case f == "":
		case d == string(filepath.Separator):
			out = append(out, f)
		default:
			out = append(out, d)
		}
	}
	if c.RecordJournalDir != "" {
		out = append(out, filepath.Clean(c.RecordJournalDir))
	}
	return out
}

// grantKeys loads the grant keys, or makes a process-local one. On the
// embedded store the grants end with the process whatever the key: the
// turns' revocations and the call ids they ran end with it.
func (c Config) grantKeys(log *slog.Logger) (*grants.Keys, error) {
	if c.GrantKey == "" {
		log.Warn("no --grant-key: turn grants are signed with a key generated now; they end with this process, and another replica refuses them")
		return grants.Generate()
	}
	keys, err := grants.Load(c.GrantKey, c.GrantRetiredKeys...)
	if err != nil {
		return nil, fmt.Errorf("--grant-key: %w", err)
	}
	if c.DatabaseURL == "" {
		if err := keys.EndWithProcess(); err != nil {
			return nil, err
		}
		log.Info("turn grants signed with key " + keys.KeyID() + "; on the embedded store they end with this process")
		return keys, nil
	}
	log.Info("turn grants signed with key " + keys.KeyID())
	return keys, nil
}

// Addr is the address the gRPC server listens on.
func (a *App) Addr() string { return a.lis.Addr().String() }

// Run serves until ctx is done, then drains and closes everything.
func (a *App) Run(ctx context.Context) error {
	defer a.close()
	a.srv.SetServing(grpcx.LivenessService, true)
	if a.pool != nil {
		go a.followDatabase(ctx)
	}
	go a.pipeline.RunReconciler(ctx, a.cfg.ReconcileInterval)
	go a.pipeline.RunJournal(ctx)
	go a.pipeline.RunRevocationWatch(ctx)
	go a.upstream.Run(ctx, 5*time.Second)
	if a.metrics != nil && a.cfg.MetricsListen != "" {
		_, stop, err := telemetry.ServeMetrics(a.cfg.MetricsListen, a.metrics, a.log)
		if err != nil {
			return err
		}
		defer stop()
	}
	a.log.Info("catalog-svc serving", slog.String("addr", a.Addr()))
	err := a.srv.Serve(ctx, a.lis)
	// Calls are drained: write what still waits in the journal while the
	// store answers (a durable journal keeps the rest for the next start).
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	a.pipeline.DrainJournal(dctx)
	return err
}

// followDatabase flips readiness with the database: a kernel that cannot
// write records must not receive calls, but stays alive (liveness) so it is
// not restarted in a loop during an outage.
func (a *App) followDatabase(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	ready := true
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, 900*time.Millisecond)
		err := a.pool.Ping(pctx)
		cancel()
		if ok := err == nil; ok != ready && ctx.Err() == nil {
			ready = ok
			a.srv.SetServing("", ok)
			a.srv.SetServing(sharedosv1.CatalogService_ServiceDesc.ServiceName, ok)
			a.srv.SetServing(sharedosv1.RuntimeService_ServiceDesc.ServiceName, ok)
			a.srv.SetServing(sharedosv1.UpstreamService_ServiceDesc.ServiceName, ok)
			a.log.Warn("readiness changed with the database", slog.Bool("serving", ok), slog.Any("error", err))
		}
	}
}

func (a *App) close() {
	for i := len(a.closers) - 1; i >= 0; i-- {
		if err := a.closers[i](); err != nil {
			a.log.Warn("close", slog.Any("error", err))
		}
	}
	a.closers = nil
}
