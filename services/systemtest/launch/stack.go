package launch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health/grpc_health_v1"

	"github.com/sharedos/toolshare/services/contract/callers"
	"github.com/sharedos/toolshare/services/platform/mtls"
	"github.com/sharedos/toolshare/services/platform/mtls/pki"
	"github.com/sharedos/toolshare/services/tools/devstack"
)

// Demo is the demo turn the stack opens (the one `make run` prints).
type Demo = devstack.Demo

// Options choose the stack Start runs. The zero value is the `make run`
// stack: embedded store, deploy/policies, the deploy/demo tree, the
// deploy/catalog catalogue and one demo turn.
type Options struct {
	// Root is the checkout whose bin/ and deploy/ are used (default: the
	// repository holding the test); a benchmark runs a baseline build beside
	// the current one.
	Root string
	// DatabaseURL selects PostgreSQL; empty is the embedded store.
	DatabaseURL string
	// PolicyDir and FileRoot replace deploy/policies and deploy/demo.
	PolicyDir, FileRoot string
	// JournalDir is catalog-svc's record journal (default on PostgreSQL: a
	// directory of the test, kept across restarts of catalog-svc).
	JournalDir string
	// Bridges is the number of bridge-svc processes (default 1).
	Bridges int
	// Env (KEY=VALUE) is added to every service's environment.
	Env []string
	// Flags are extra flags per binary name ("catalog-svc", ...).
	Flags map[string][]string
	// Register, when set, registers the catalogue instead of deploy/catalog,
	// and no demo turn is opened.
	Register func(tb testing.TB, s *Stack)
	// Plaintext runs the internal plane without TLS (a benchmark's
	// baseline); by default every process has its identity from a
	// throwaway CA of the test (devstack.MakePKI), as under make run.
	Plaintext bool
}

// Stack is a running stack: one Proc per service.
type Stack struct {
	Root, Bin string
	Authz     *Proc
	Files     *Proc
	Catalog   *Proc
	Bridges   []*Proc
	// Addrs by service: catalog, authz, files, and the first bridge's gRPC
	// (bridge) and MCP HTTP (mcp) addresses.
	Addrs map[string]string
	// BridgeGRPC and BridgeHTTP are every bridge's addresses, in order.
	BridgeGRPC, BridgeHTTP []string
	// Demo is the demo turn (zero when Options.Register is set).
	Demo Demo
	// PKIDir and CA are the test's local CA (nil CA in plaintext); the test
	// issues more identities with Identity.
	PKIDir string
	CA     *pki.CA

	tb    testing.TB
	creds *mtls.Credentials // the operator's: what the test's own clients use
	cfg   devstack.Config
	mu    sync.Mutex
	stop  []func()
}

// Binaries the stack needs in bin/ (`make build`).
var Binaries = []string{"sharedosctl", "catalog-svc", "authz-svc", "bridge-svc", "files-provider"}

// Start starts every service of the stack from bin/ on free loopback ports,
// as separate processes composed as devstack.Services composes `make run`,
// waits for each to be SERVING, and registers the catalogue. The stack is
// stopped (SIGTERM, in reverse order) in the test's cleanup, and each
// process's log is printed when the test failed.
func Start(tb testing.TB, o Options) *Stack {
	tb.Helper()
	root := o.Root
	if root == "" {
		root = RepoRoot(tb)
	}
	bin := filepath.Join(root, "bin")
	for _, b := range Binaries {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			tb.Fatalf("%s is not built: run `make build` (make test and make verify do it first)", filepath.Join(bin, b))
		}
	}
	if o.Bridges == 0 {
		o.Bridges = 1
	}
	if o.DatabaseURL != "" && o.JournalDir == "" {
		o.JournalDir = filepath.Join(tb.TempDir(), "record-journal")
	}
	s := &Stack{Root: root, Bin: bin, Addrs: map[string]string{}, tb: tb, cfg: devstack.Config{
		Root: root, DatabaseURL: o.DatabaseURL, PolicyDir: o.PolicyDir, FileRoot: o.FileRoot,
		JournalDir: o.JournalDir, Flags: o.Flags, Plaintext: o.Plaintext,
	}}
	s.creds = mtls.Plaintext()
	if !o.Plaintext {
		s.PKIDir = filepath.Join(tb.TempDir(), "pki")
		ca, err := devstack.MakePKI(s.PKIDir)
		if err != nil {
			tb.Fatalf("local CA: %v", err)
		}
		s.CA, s.cfg.PKIDir = ca, s.PKIDir
		s.cfg.GrantKey = filepath.Join(s.PKIDir, devstack.GrantKeyFile)
		s.cfg.StateKey = filepath.Join(s.PKIDir, devstack.StateKeyFile)
		s.creds = s.load(tb, devstack.TLSFiles(s.PKIDir, "operator"))
	} else {
		// A kernel restarted by the test must still accept its turns (on
		// PostgreSQL: on the embedded store a turn ends with its kernel),
		// and every bridge open the requestStates of the others.
		dir := tb.TempDir()
		s.cfg.GrantKey, s.cfg.StateKey = filepath.Join(dir, devstack.GrantKeyFile), filepath.Join(dir, devstack.StateKeyFile)
		for _, k := range []string{s.cfg.GrantKey, s.cfg.StateKey} {
			if err := pki.WriteSigningKey(k); err != nil {
				tb.Fatalf("signing key: %v", err)
			}
		}
	}
	tb.Cleanup(s.stopAll)

	// Each service is started once its dependencies serve; its own address
	// (and for a bridge its MCP address) is chosen just before it starts.
	s.Authz = s.launch("authz-svc", "authz", o.Env, func(c *devstack.Config, a []string) { c.AuthzAddr = a[0] }, 1)
	s.Files = s.launch("files-provider", "files", o.Env, func(c *devstack.Config, a []string) { c.FilesAddr = a[0] }, 1)
	s.Catalog = s.launch("catalog-svc", "catalog", o.Env, func(c *devstack.Config, a []string) { c.CatalogAddr = a[0] }, 1)
	for i := range o.Bridges {
		var grpcAddr, httpAddr string
		p := s.launch("bridge-svc", "", o.Env, func(c *devstack.Config, a []string) {
			c.BridgeAddr, c.MCPAddr = a[0], a[1]
			grpcAddr, httpAddr = a[0], a[1]
		}, 2)
		p.Name = fmt.Sprintf("bridge-svc#%d", i)
		s.Bridges = append(s.Bridges, p)
		s.BridgeGRPC, s.BridgeHTTP = append(s.BridgeGRPC, grpcAddr), append(s.BridgeHTTP, httpAddr)
	}
	s.Addrs["bridge"], s.Addrs["mcp"] = s.BridgeGRPC[0], s.BridgeHTTP[0]
	s.cfg.BridgeAddr, s.cfg.MCPAddr = s.BridgeGRPC[0], s.BridgeHTTP[0]

	if o.Register != nil {
		o.Register(tb, s)
		return s
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	demo, err := devstack.Setup(ctx, s.cfg, s.creds)
	if err != nil {
		tb.Fatalf("register the example catalogue and open the demo turn: %v", err)
	}
	demo.PIDs = map[string]int{}
	for _, p := range s.Procs() {
		demo.PIDs[strings.TrimSuffix(p.Name, "#0")] = p.PID()
	}
	s.Demo = demo
	return s
}

// Procs are the stack's processes in start order.
func (s *Stack) Procs() []*Proc {
	return append([]*Proc{s.Authz, s.Files, s.Catalog}, s.Bridges...)
}

// launch starts the named service with n fresh loopback addresses given to
// it by set, and waits until its first address serves. A port taken between
// the probe and the service's bind (parallel fuzz workers start stacks too)
// gets new ports, up to 3 tries.
func (s *Stack) launch(name, key string, env []string, set func(*devstack.Config, []string), n int) *Proc {
	s.tb.Helper()
	p := &Proc{Name: name, Path: filepath.Join(s.Bin, name), Env: env, Log: &Output{}}
	for try := 1; ; try++ {
		addrs := FreeAddrs(s.tb, n)
		cfg := s.cfg
		set(&cfg, addrs)
		p.Args = service(cfg, name).Args
		p.Start(s.tb)
		err := s.Serving(p, addrs[0], 60*time.Second)
		if err == nil {
			s.cfg = cfg
			if key != "" {
				s.Addrs[key] = addrs[0]
			}
			s.mu.Lock()
			s.stop = append(s.stop, func() { _ = p.Stop(syscall.SIGTERM, 10*time.Second) })
			s.mu.Unlock()
			return p
		}
		if try < 3 && !p.Running() && strings.Contains(p.Log.String(), "address already in use") {
			continue
		}
		p.Kill(s.tb)
		s.tb.Fatalf("%v:\n%s", err, Tail(p.Log.String(), 30))
	}
}

// service is name's entry of the composition.
func service(cfg devstack.Config, name string) devstack.Service {
	for _, svc := range devstack.Services(cfg) {
		if svc.Name == name {
			return svc
		}
	}
	panic("launch: no service " + name + " in devstack.Services")
}

// Restart starts p again with the same arguments and waits until addr serves.
func (s *Stack) Restart(tb testing.TB, p *Proc, addr string) {
	tb.Helper()
	p.Start(tb)
	if err := s.Serving(p, addr, 60*time.Second); err != nil {
		tb.Fatalf("%v:\n%s", err, Tail(p.Log.String(), 30))
	}
}

// load loads credentials, closed with the stack.
func (s *Stack) load(tb testing.TB, cfg mtls.Config) *mtls.Credentials {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := mtls.Load(ctx, cfg)
	if err != nil {
		tb.Fatalf("credentials %s: %v", cfg.Cert, err)
	}
	tb.Cleanup(c.Close)
	return c
}

// Identity issues file.crt/file.key in the test's CA for
// spiffe://sharedos.local/<role>/<name> and returns its mtls.Config (the
// files exist afterwards, e.g. for a process's --tls-* flags).
func (s *Stack) Identity(tb testing.TB, file string, role callers.Role, name string) mtls.Config {
	tb.Helper()
	if s.CA == nil {
		tb.Fatal("a plaintext stack has no CA")
	}
	if _, _, err := s.CA.IssueFiles(s.PKIDir, file, pki.Leaf{Role: string(role), Name: name}); err != nil {
		tb.Fatal(err)
	}
	return devstack.TLSFiles(s.PKIDir, file)
}

// UsePKI makes the test's own clients use the operator identity of a local
// CA in dir that another process made (sharedos-dev's --pki-dir).
func (s *Stack) UsePKI(tb testing.TB, dir string) {
	tb.Helper()
	s.tb, s.PKIDir = tb, dir
	s.creds = s.load(tb, devstack.TLSFiles(dir, "operator"))
}

// Credentials loads an identity of the test's CA (Identity issues new ones).
func (s *Stack) Credentials(tb testing.TB, cfg mtls.Config) *mtls.Credentials {
	tb.Helper()
	return s.load(tb, cfg)
}

// TLSFlags are the --tls-* flags (or --insecure-plaintext) of an identity
// file of the test's CA, for a process the test starts itself.
func (s *Stack) TLSFlags(file string) []string {
	if s.PKIDir == "" {
		return []string{"--insecure-plaintext"}
	}
	return devstack.TLSFlags(s.PKIDir, file)
}

// Dial is a client connection to addr as the operator, closed with the
// stack.
func (s *Stack) Dial(addr string) *grpc.ClientConn {
	s.tb.Helper()
	return s.DialAs(s.creds, addr)
}

// DialAs is a client connection to addr with creds, closed with the stack.
func (s *Stack) DialAs(creds *mtls.Credentials, addr string) *grpc.ClientConn {
	s.tb.Helper()
	c, err := grpc.NewClient(addr, creds.DialOption())
	if err != nil {
		s.tb.Fatal(err)
	}
	s.mu.Lock()
	s.stop = append(s.stop, func() { _ = c.Close() })
	s.mu.Unlock()
	return c
}

// OnStop runs f when the stack stops, before the processes are stopped.
func (s *Stack) OnStop(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stop = append(s.stop, f)
}

// stopAll undoes Start in reverse: connections and OnStop hooks, bridges,
// catalog, files, authz.
func (s *Stack) stopAll() {
	start := time.Now()
	s.mu.Lock()
	stops := s.stop
	s.stop = nil
	s.mu.Unlock()
	for i := len(stops) - 1; i >= 0; i-- {
		stops[i]()
	}
	if d := time.Since(start); d > 5*time.Second {
		s.tb.Logf("stopping the stack took %s", d)
	}
	if s.tb.Failed() {
		for _, p := range s.Procs() {
			if p != nil && p.Log != nil {
				s.tb.Logf("---- %s log (tail) ----\n%s", p.Name, Tail(p.Log.String(), 40))
			}
		}
	}
}

// Ctl runs bin/sharedosctl against the stack: stdout, stderr, exit code.
func (s *Stack) Ctl(tb testing.TB, args ...string) (string, string, int) {
	tb.Helper()
	cmd := exec.Command(filepath.Join(s.Bin, "sharedosctl"), args...)
	cmd.Env = append(os.Environ(),
		"SHAREDOS_CATALOG_ADDR="+s.Addrs["catalog"], "SHAREDOS_AUTHZ_ADDR="+s.Addrs["authz"],
		"SHAREDOS_BRIDGE_ADDR="+s.Addrs["bridge"], "SHAREDOS_FILES_ADDR="+s.Addrs["files"])
	if s.PKIDir == "" {
		cmd.Env = append(cmd.Env, "SHAREDOS_INSECURE_PLAINTEXT=true")
	} else {
		c := devstack.TLSFiles(s.PKIDir, "operator")
		cmd.Env = append(cmd.Env, "SHAREDOS_TLS_CA="+c.CA, "SHAREDOS_TLS_CERT="+c.Cert, "SHAREDOS_TLS_KEY="+c.Key)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return stdout.String(), stderr.String(), ee.ExitCode()
	case err != nil:
		tb.Fatal(err)
	}
	return stdout.String(), stderr.String(), 0
}

// Health asks addr's gRPC health service ("" = readiness, "liveness") as
// the operator.
func (s *Stack) Health(addr, service string) (grpc_health_v1.HealthCheckResponse_ServingStatus, error) {
	c, err := grpc.NewClient(addr, s.creds.DialOption())
	if err != nil {
		return 0, err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	r, err := grpc_health_v1.NewHealthClient(c).Check(ctx, &grpc_health_v1.HealthCheckRequest{Service: service})
	if err != nil {
		return 0, err
	}
	return r.GetStatus(), nil
}

// Serving waits until addr's overall health is SERVING, or p exits, or
// limit passes.
func (s *Stack) Serving(p *Proc, addr string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if st, err := s.Health(addr, ""); err == nil && st == grpc_health_v1.HealthCheckResponse_SERVING {
			return nil
		}
		if !p.Running() {
			return fmt.Errorf("%s exited before serving at %s (%v)", p.Name, addr, p.Err())
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s not SERVING at %s after %s", p.Name, addr, limit)
}

// Tail is the last n lines of s.
func Tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Output is a process's log: a file in the test's temp dir that every
// incarnation appends to directly (no copying through this process, so a
// benchmark's client does not pay for the services' logs), read back with
// String.
type Output struct {
	mu sync.Mutex
	f  *os.File
}

// file opens the log in dir on first use.
func (o *Output) file(dir, name string) (*os.File, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.f == nil {
		f, err := os.OpenFile(filepath.Join(dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return nil, err
		}
		o.f = f
	}
	return o.f, nil
}

// String is everything written so far.
func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.f == nil {
		return ""
	}
	b, _ := os.ReadFile(o.f.Name())
	return string(b)
}

// RepoRoot is the directory holding go.work above the working directory.
func RepoRoot(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatal("repository root (go.work) not found")
		}
		dir = parent
	}
}

// FreeAddrs returns n loopback addresses that were free a moment ago.
func FreeAddrs(tb testing.TB, n int) []string {
	tb.Helper()
	var ls []net.Listener
	var out []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().String())
	}
	for _, l := range ls {
		_ = l.Close()
	}
	return out
}
