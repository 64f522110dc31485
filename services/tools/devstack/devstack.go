package devstack

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/callers"
	"github.com/sharedos/toolshare/services/platform/config"
	"github.com/sharedos/toolshare/services/platform/grpcx"
	"github.com/sharedos/toolshare/services/platform/mtls"
	"github.com/sharedos/toolshare/services/platform/mtls/pki"
	"github.com/sharedos/toolshare/services/platform/runner"
	"github.com/sharedos/toolshare/services/platform/telemetry"
	"github.com/sharedos/toolshare/services/tools/regfile"
)

// DemoPrincipal is whom the demo turn is for unless told.
const DemoPrincipal = "alice"

// DemoRoles are the demo turn's roles.
var DemoRoles = []string{"engineer"}

// Config is what `sharedos-dev` runs with.
type Config struct {
	Bin         string // directory holding the built binaries
	Root        string // repository root (deploy/ lives there)
	CatalogAddr string
	AuthzAddr   string
	BridgeAddr  string
	FilesAddr   string
	MCPAddr     string
	DatabaseURL string // empty: embedded store
	// PolicyDir, FileRoot: authz-svc's policies and the files provider's
	// tree; empty: deploy/policies and deploy/demo under Root.
	PolicyDir, FileRoot string
	// JournalDir is catalog-svc's record journal (ADR 0007); empty: none on
	// the embedded store (which refuses one), on PostgreSQL one per database
	// URL in the user cache dir (JournalDir).
	JournalDir string
	// PKIDir holds the local CA's files (MakePKI); every service runs with
	// its identity from there. Plaintext runs the internal plane without
	// TLS instead (benchmarks' baseline; loopback only).
	PKIDir    string
	Plaintext bool
	// GrantKey is catalog-svc's turn-grant signing key (MakePKI writes one
	// as GrantKeyFile); empty: a key catalog-svc makes at each start.
	GrantKey string
	// StateKey is bridge-svc's requestState key (MakePKI writes one as
	// StateKeyFile); empty: a key bridge-svc makes at each start.
	StateKey string
	// Flags are extra flags per binary name, appended to its command line.
	Flags     map[string][]string
	Principal string
	Roles     []string
	Verbose   bool
	// ReadyFile, if set, receives the demo turn as JSON once everything is up.
	ReadyFile string
	// Ready, if set, is called with the demo turn once everything is up.
	Ready func(Demo)
	// NoExampleUpstream leaves out the example upstream MCP server Run
	// otherwise acquires when npx is present.
	NoExampleUpstream bool
	// DebugListenBase, when set, gives every service --debug-listen on
	// consecutive ports from it, in start order (DebugAddrs).
	DebugListenBase string
}

// Bind registers the flags on fs (each also read from SHAREDOS_<NAME>) and
// returns the function that reads the Config once fs has been parsed.
func Bind(fs *flag.FlagSet) func() Config {
	bin := config.String(fs, "bin", "bin", "directory holding the built binaries")
	root := config.String(fs, "root", ".", "repository root (holds deploy/)")
	catalog := config.String(fs, "catalog-addr", "127.0.0.1:7401", "catalog-svc gRPC address")
	authz := config.String(fs, "authz-addr", "127.0.0.1:7402", "authz-svc gRPC address")
	bridge := config.String(fs, "bridge-addr", "127.0.0.1:7403", "bridge-svc gRPC address")
	files := config.String(fs, "files-addr", "127.0.0.1:7404", "files provider gRPC address")
	mcp := config.String(fs, "mcp-addr", "127.0.0.1:7480", "bridge MCP HTTP address")
	db := config.String(fs, "database-url", "", "PostgreSQL URL; empty uses the embedded store")
	principal := config.String(fs, "principal", DemoPrincipal, "principal of the demo turn")
	verbose := fs.Bool("v", false, "stream every service's log to stderr")
	ready := config.String(fs, "ready-file", "", "write the demo turn as JSON to this file once ready (for scripts and tests)")
	example := config.Bool(fs, "example-upstream", true, "acquire "+ExampleUpstreamPackage+" over stdio as the upstream fs when npx is present (its tools wait for approval)")
	pkiDir := config.String(fs, "pki-dir", "", "directory of the throwaway local CA made at each start (empty: "+PKIDir+" under --root)")
	debugBase := config.String(fs, "debug-listen-base", "", "serve every service's net/http/pprof on consecutive loopback ports from this address, in start order (authz-svc, files-provider, catalog-svc, bridge-svc; empty: off)")
	return func() Config {
		return Config{Bin: *bin, Root: *root, CatalogAddr: *catalog, AuthzAddr: *authz, BridgeAddr: *bridge,
			FilesAddr: *files, MCPAddr: *mcp, DatabaseURL: *db, Principal: *principal, Verbose: *verbose, ReadyFile: *ready,
			PKIDir: *pkiDir, NoExampleUpstream: !*example, DebugListenBase: *debugBase}
	}
}

// Command is sharedos-dev's command line (`make run`), run by runner.Main.
var Command = runner.Command[Config]{
	Name: "sharedos-dev", Service: "sharedos-dev", Quiet: true,
	Summary: "start the whole system on loopback and open a demo turn",
	Bind:    Bind,
	Complete: func(_ context.Context, c Config, _ runner.Env) (runner.Runnable, error) {
		return stackRun{c}, nil
	},
}

// stackRun is a Config ready to run: Run starts the stack and serves until
// ctx is done.
type stackRun struct{ cfg Config }

func (s stackRun) Run(ctx context.Context) error { return Run(ctx, s.cfg, os.Stdout) }

// Demo is the opened demo turn.
type Demo struct {
	TurnID      string   `json:"turnId"`
	MCPURL      string   `json:"mcpUrl"`
	Token       string   `json:"token"`
	CatalogHash string   `json:"catalogHash"`
	Tools       []string `json:"tools"`
	// PIDs of the processes started, by name.
	PIDs map[string]int `json:"pids"`
}

// Service is one process of the stack: its binary, its command line and the
// gRPC address its health is checked on.
type Service struct {
	Name string
	Args []string
	Addr string
}

// Services is the composition of the stack, in start order: which processes
// `make run` starts and with which flags. The system tests' launcher
// (services/systemtest/launch) starts the same list, so the stack under test
// is the stack users run.
func Services(cfg Config) []Service {
	policyDir, fileRoot := cfg.PolicyDir, cfg.FileRoot
	if policyDir == "" {
		policyDir = filepath.Join(cfg.Root, "deploy", "policies")
	}
	if fileRoot == "" {
		fileRoot = filepath.Join(cfg.Root, "deploy", "demo")
	}
	var dbArgs []string
	if cfg.DatabaseURL != "" {
		dbArgs = []string{"--database-url", cfg.DatabaseURL, "--migrate"}
	}
	// The local host identity may open turns for any tenant, and read their
	// records.
	devHost := "spiffe://" + pki.TrustDomain + "/host/dev=*"
	catalogArgs := append([]string{"serve", "--listen", cfg.CatalogAddr, "--authz", cfg.AuthzAddr, "--host-tenants", devHost}, dbArgs...)
	if cfg.JournalDir != "" {
		catalogArgs = append(catalogArgs, "--record-journal-dir", cfg.JournalDir)
	}
	if cfg.GrantKey != "" {
		catalogArgs = append(catalogArgs, "--grant-key", cfg.GrantKey)
	}
	bridgeArgs := append([]string{"serve", "--listen", cfg.BridgeAddr, "--http-listen", cfg.MCPAddr,
		"--catalog", cfg.CatalogAddr, "--kernel", cfg.CatalogAddr, "--host-tenants", devHost}, dbArgs...)
	if cfg.StateKey != "" {
		bridgeArgs = append(bridgeArgs, "--state-key", cfg.StateKey)
	}
	svcs := []Service{
		{"authz-svc", []string{"serve", "--listen", cfg.AuthzAddr, "--policy-dir", policyDir}, cfg.AuthzAddr},
		{"files-provider", []string{"--listen", cfg.FilesAddr, "--root", fileRoot}, cfg.FilesAddr},
		{"catalog-svc", catalogArgs, cfg.CatalogAddr},
		{"bridge-svc", bridgeArgs, cfg.BridgeAddr},
	}
	debug, _ := DebugAddrs(cfg.DebugListenBase, len(svcs)) // checked by Run
	for i := range svcs {
		if i < len(debug) {
			svcs[i].Args = append(svcs[i].Args, "--debug-listen", debug[i])
		}
		if cfg.Plaintext {
			svcs[i].Args = append(svcs[i].Args, "--insecure-plaintext")
		} else {
			svcs[i].Args = append(svcs[i].Args, TLSFlags(cfg.PKIDir, serviceIdentity[svcs[i].Name])...)
		}
		svcs[i].Args = append(svcs[i].Args, cfg.Flags[svcs[i].Name]...)
	}
	return svcs
}

// DebugAddrs are n consecutive addresses from base (host:port); none when
// base is empty. Each service refuses a non-loopback one itself.
func DebugAddrs(base string, n int) ([]string, error) {
	if base == "" {
		return nil, nil
	}
	host, port, err := net.SplitHostPort(base)
	if err != nil {
		return nil, fmt.Errorf("--debug-listen-base %q: %w", base, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p+n-1 > 65535 {
		return nil, fmt.Errorf("--debug-listen-base %q: want a port from 1 to %d", base, 65536-n)
	}
	out := make([]string, n)
	for i := range out {
		out[i] = net.JoinHostPort(host, strconv.Itoa(p+i))
	}
	return out, nil
}

type proc struct {
	name string
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{} // closed when the process has exited
	err  error         // its exit error, valid once done is closed
}

// Run starts the stack and blocks until ctx is done or a process dies.
func Run(ctx context.Context, cfg Config, out io.Writer) error {
	if len(cfg.Roles) == 0 {
		cfg.Roles = DemoRoles
	}
	root, err := filepath.Abs(cfg.Root)
	if err != nil {
		return err
	}
	bin, err := filepath.Abs(cfg.Bin)
	if err != nil {
		return err
	}
	for _, b := range []string{"authz-svc", "files-provider", "catalog-svc", "bridge-svc"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			return fmt.Errorf("binary %s not found in %s: run `make build` first", b, bin)
		}
	}
	logDir, err := os.MkdirTemp("", "sharedos-run-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(logDir) }()

	store := "embedded store"
	if cfg.DatabaseURL != "" {
		store = "PostgreSQL"
		if cfg.JournalDir == "" {
			// Completions written while PostgreSQL is down survive a crash of
			// the stack and are written on its next start (ADR 0007).
			if cache, err := os.UserCacheDir(); err == nil {
				cfg.JournalDir = JournalDir(cache, cfg.DatabaseURL)
			}
		}
	}
	cfg.Root = root
	if !cfg.Plaintext {
		// A throwaway CA per start: nothing to manage, nothing reused.
		if cfg.PKIDir == "" {
			cfg.PKIDir = filepath.Join(root, PKIDir)
		}
		if _, err := MakePKI(cfg.PKIDir); err != nil {
			return fmt.Errorf("local CA in %s: %w", cfg.PKIDir, err)
		}
		cfg.GrantKey = filepath.Join(cfg.PKIDir, GrantKeyFile)
		cfg.StateKey = filepath.Join(cfg.PKIDir, StateKeyFile)
	}
	creds, err := operatorCredentials(ctx, cfg)
	if err != nil {
		return err
	}
	defer creds.Close()
	if _, err := DebugAddrs(cfg.DebugListenBase, len(Services(cfg))); err != nil {
		return err
	}
	fmt.Fprintf(out, "SharedOS toolshare: starting on loopback (%s, internal plane: %s)\n", store, plane(cfg))
	npx, noExample := exampleUpstream(&cfg)

	specs := Services(cfg)
	var procs []*proc
	stopAll := func() {
		for i := len(procs) - 1; i >= 0; i-- {
			stop(procs[i])
		}
	}
	defer stopAll()
	died := make(chan *proc, len(specs))
	for _, s := range specs {
		p, err := start(ctx, filepath.Join(bin, s.Name), s.Name, s.Args, logDir, cfg.Verbose, root)
		if err != nil {
			return err
		}
		procs = append(procs, p)
		go func(p *proc) {
			<-p.done
			if ctx.Err() == nil {
				died <- p
			}
		}(p)
		if err := waitHealthy(ctx, creds, s.Addr, 30*time.Second, died); err != nil {
			return fmt.Errorf("%s did not become healthy at %s: %w\n%s", s.Name, s.Addr, err, tail(p.log.Name(), 20))
		}
		fmt.Fprintf(out, "  %-15s serving on %s%s\n", s.Name, s.Addr, debugNote(s.Args))
	}

	demo, err := Setup(ctx, cfg, creds)
	if err != nil {
		return err
	}
	demo.PIDs = map[string]int{}
	for _, p := range procs {
		demo.PIDs[p.name] = p.cmd.Process.Pid
	}
	printDemo(out, cfg, demo)
	if npx != "" {
		go addExampleUpstream(ctx, cfg, creds, npx, out)
	} else {
		fmt.Fprintf(out, "example upstream fs: %s\n", noExample)
	}
	if cfg.ReadyFile != "" {
		b, _ := json.Marshal(demo)
		if err := os.WriteFile(cfg.ReadyFile, b, 0o600); err != nil {
			return err
		}
	}
	if cfg.Ready != nil {
		cfg.Ready(demo)
	}
	select {
	case <-ctx.Done():
		fmt.Fprintln(out, "\nstopping...")
		stopAll()
		procs = nil
		fmt.Fprintln(out, "stopped: every process exited")
		return nil
	case p := <-died:
		return fmt.Errorf("%s exited unexpectedly (%v)\n%s", p.name, p.err, tail(p.log.Name(), 30))
	}
}

// JournalDir is the record journal a stack on databaseURL keeps under the
// user's cache directory: one per database — its host, port and name, not
// the whole URL, so a new password or sslmode keeps the directory and the
// completions journaled in it (review) — since a journal directory holds
// one database's completions (catalog-svc refuses a kernel of another
// database on it).
func JournalDir(cache, databaseURL string) string {
	id := databaseURL
	if cfg, err := pgconn.ParseConfig(databaseURL); err == nil {
		id = fmt.Sprintf("%s:%d/%s", cfg.Host, cfg.Port, cfg.Database)
	}
	sum := sha256.Sum256([]byte(id))
	return filepath.Join(cache, "sharedos", "record-journal", hex.EncodeToString(sum[:8]))
}

func start(ctx context.Context, path, name string, args []string, logDir string, verbose bool, dir string) (*proc, error) {
	f, err := os.Create(filepath.Join(logDir, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	cmd.Dir = dir
	cmd.Env = childEnv(os.Environ())
	var w io.Writer = f
	if verbose {
		w = io.MultiWriter(f, &prefixWriter{prefix: "[" + name + "] ", w: os.Stderr})
	}
	cmd.Stdout, cmd.Stderr = w, w
	// Own process group, so a terminal's Ctrl-C reaches us first and we stop
	// children in order; Pdeathsig is the backstop if we are killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: f, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// childEnv is the environment a service starts with: this one without its
// SHAREDOS_ settings, which are sharedos-dev's own (each service would read
// a SHAREDOS_<FLAG> as its flag: one SHAREDOS_METRICS_LISTEN would have all
// four bind the same address). Everything a service is told comes as
// flags; the log level alone is shared.
func childEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if strings.HasPrefix(kv, "SHAREDOS_") && !strings.HasPrefix(kv, telemetry.LogLevelEnv+"=") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// stop sends SIGTERM to the process group and waits; SIGKILL after 10 s.
func stop(p *proc) {
	if p.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
	p.log.Close()
}

func waitHealthy(ctx context.Context, creds *mtls.Credentials, addr string, limit time.Duration, died <-chan *proc) error {
	conn, err := grpcx.Dial(addr, creds.DialOption())
	if err != nil {
		return err
	}
	defer conn.Close()
	hc := grpc_health_v1.NewHealthClient(conn)
	deadline := time.Now().Add(limit)
	var last error
	for time.Now().Before(deadline) {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		resp, err := hc.Check(cctx, &grpc_health_v1.HealthCheckRequest{})
		cancel()
		if err == nil && resp.GetStatus() == grpc_health_v1.HealthCheckResponse_SERVING {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			return ctx.Err()
		case p := <-died:
			return fmt.Errorf("%s exited", p.name)
		case <-time.After(100 * time.Millisecond):
		}
	}
	if last == nil {
		last = errors.New("not SERVING")
	}
	return last
}

// Setup registers the example catalogue (deploy/catalog under cfg.Root) and
// opens the demo turn, calling as creds (an operator identity).
func Setup(ctx context.Context, cfg Config, creds *mtls.Credentials) (Demo, error) {
	if cfg.Principal == "" {
		cfg.Principal = DemoPrincipal
	}
	if len(cfg.Roles) == 0 {
		cfg.Roles = DemoRoles
	}
	regs, err := regfile.ReadDir(filepath.Join(cfg.Root, "deploy", "catalog"))
	if err != nil {
		return Demo{}, fmt.Errorf("read example catalogue: %w", err)
	}
	cc, err := grpcx.Dial(cfg.CatalogAddr, creds.DialOption(callers.Catalog))
	if err != nil {
		return Demo{}, err
	}
	defer cc.Close()
	catalog := sharedosv1.NewCatalogServiceClient(cc)
	for _, r := range regs {
		p, err := r.ToProto()
		if err != nil {
			return Demo{}, err
		}
		if p.GetHandler() != nil && p.GetHandler().GetTarget() == "127.0.0.1:7404" {
			p.Handler.Target = cfg.FilesAddr // follow an overridden provider address
		}
		_, err = catalog.RegisterTool(ctx, &sharedosv1.RegisterToolRequest{Registration: p})
		if status.Code(err) == codes.AlreadyExists { // a persistent store from an earlier run
			_, err = catalog.UpdateTool(ctx, &sharedosv1.UpdateToolRequest{Registration: p})
		}
		if err != nil {
			return Demo{}, fmt.Errorf("register %s: %w", r.Name, err)
		}
	}
	bc, err := grpcx.Dial(cfg.BridgeAddr, creds.DialOption(callers.Bridge))
	if err != nil {
		return Demo{}, err
	}
	defer bc.Close()
	lease, err := sharedosv1.NewBridgeServiceClient(bc).OpenTurn(ctx, &sharedosv1.OpenTurnRequest{
		Context: &sharedosv1.AccessContext{Principal: cfg.Principal, Roles: cfg.Roles},
		Policy:  &sharedosv1.ToolPolicy{Mode: sharedosv1.PolicyMode_POLICY_MODE_PERMISSIVE},
		Harness: &sharedosv1.HarnessIdentity{Name: "demo", McpSupport: sharedosv1.McpSupport_MCP_SUPPORT_NATIVE},
		Ttl:     durationpb.New(8 * time.Hour),
	})
	if err != nil {
		return Demo{}, fmt.Errorf("open demo turn: %w", err)
	}
	d := Demo{TurnID: lease.GetTurnId(), MCPURL: lease.GetMcpUrl(), Token: lease.GetToken(), CatalogHash: lease.GetCatalogHash()}
	for _, t := range lease.GetTools() {
		d.Tools = append(d.Tools, t.GetName())
	}
	return d, nil
}

// plane names the internal plane's transport for people.
func plane(cfg Config) string {
	if cfg.Plaintext {
		return "PLAINTEXT"
	}
	return "mutual TLS, local CA in " + cfg.PKIDir
}

func printDemo(w io.Writer, cfg Config, d Demo) {
	fmt.Fprintf(w, `
Demo turn open for principal %q (roles %s)
  MCP URL      %s
  token        %s
  catalogHash  %s
  tools        %s

Claude Code:
  claude mcp add --transport http sharedos %s --header "Authorization: Bearer %s"

Codex (~/.codex/config.toml):
  [mcp_servers.sharedos]
  url = "%s"
  http_headers = { Authorization = "Bearer %s" }
  default_tools_approval_mode = "approve"

Gemini CLI (~/.gemini/settings.json):
  { "mcpServers": { "sharedos": { "httpUrl": "%s", "headers": { "Authorization": "Bearer %s" } } } }

Watch the calls:  bin/sharedosctl ops list --turn %s --output table
Press Ctrl-C to stop every process.
`, cfg.Principal, strings.Join(cfg.Roles, ","), d.MCPURL, d.Token, d.CatalogHash, strings.Join(d.Tools, ", "),
		d.MCPURL, d.Token, d.MCPURL, d.Token, d.MCPURL, d.Token, d.TurnID)
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  | " + strings.Join(lines, "\n  | ")
}

type prefixWriter struct {
	mu     sync.Mutex
	prefix string
	w      io.Writer
	buf    []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			break
		}
		fmt.Fprintf(p.w, "%s%s\n", p.prefix, p.buf[:i])
		p.buf = p.buf[i+1:]
	}
	return len(b), nil
}

// debugNote names a service's profiles when it was given --debug-listen.
func debugNote(args []string) string {
	for i, a := range args {
		if a == "--debug-listen" && i+1 < len(args) {
			return " (profiles: http://" + args[i+1] + "/debug/pprof/)"
		}
	}
	return ""
}
