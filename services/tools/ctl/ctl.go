package ctl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/sharedos/toolshare/services/contract/callers"
	"github.com/sharedos/toolshare/services/platform/grpcx"
	"github.com/sharedos/toolshare/services/platform/mtls"
	"github.com/sharedos/toolshare/services/tools/devstack"
)

// Default addresses are those of `make run`.
const (
	DefaultCatalog = "127.0.0.1:7401"
	DefaultAuthz   = "127.0.0.1:7402"
	DefaultBridge  = "127.0.0.1:7403"
	DefaultFiles   = "127.0.0.1:7404"
)

// usageError is a command-line mistake: exit code 2 with usage.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return usageError{fmt.Sprintf(format, a...)} }

// globals are accepted before the command and inside every subcommand.
type globals struct {
	catalog, authz, bridge, files string
	output                        string
	timeout                       time.Duration
	tls                           mtls.Config
}

func (g *globals) bind(fs *flag.FlagSet) { g.bindExcept(fs, "") }

// bindExcept binds every global flag but the one named skip (a flag the
// command defines with its own meaning).
func (g *globals) bindExcept(fs *flag.FlagSet, skip string) {
	fs.StringVar(&g.catalog, "catalog", envOr("SHAREDOS_CATALOG_ADDR", DefaultCatalog), "catalog-svc gRPC address (env SHAREDOS_CATALOG_ADDR)")
	fs.StringVar(&g.authz, "authz", envOr("SHAREDOS_AUTHZ_ADDR", DefaultAuthz), "authz-svc gRPC address (env SHAREDOS_AUTHZ_ADDR)")
	fs.StringVar(&g.bridge, "bridge", envOr("SHAREDOS_BRIDGE_ADDR", DefaultBridge), "bridge-svc gRPC address (env SHAREDOS_BRIDGE_ADDR)")
	fs.StringVar(&g.files, "files", envOr("SHAREDOS_FILES_ADDR", DefaultFiles), "files provider gRPC address checked by status (env SHAREDOS_FILES_ADDR; empty skips it)")
	fs.StringVar(&g.output, "output", "json", "output format: json or table")
	if skip != "timeout" {
		fs.DurationVar(&g.timeout, "timeout", 15*time.Second, "deadline for each command")
	}
	fs.StringVar(&g.tls.CA, "tls-ca", os.Getenv("SHAREDOS_TLS_CA"), "PEM trust bundle (env SHAREDOS_TLS_CA; default: make run's local CA)")
	fs.StringVar(&g.tls.Cert, "tls-cert", os.Getenv("SHAREDOS_TLS_CERT"), "PEM client certificate (env SHAREDOS_TLS_CERT; default: make run's operator identity)")
	fs.StringVar(&g.tls.Key, "tls-key", os.Getenv("SHAREDOS_TLS_KEY"), "PEM key of --tls-cert (env SHAREDOS_TLS_KEY)")
	fs.BoolVar(&g.tls.InsecurePlaintext, "insecure-plaintext", os.Getenv("SHAREDOS_INSECURE_PLAINTEXT") == "true", "call the internal plane without TLS (env SHAREDOS_INSECURE_PLAINTEXT)")
}

// identity is the TLS configuration a command calls with: the flags, or —
// when they name no files and plaintext was not asked for — make run's
// local identity file (operator by default) found above the working
// directory, if only this user can change it.
func (g *globals) identity(file string) (mtls.Config, error) {
	c := g.tls
	if !c.InsecurePlaintext && c.CA == "" && c.Cert == "" && c.Key == "" {
		dir, err := findDevPKI()
		if err != nil {
			return c, err
		}
		if dir != "" {
			return devstack.TLSFiles(dir, file), nil
		}
	}
	return c, nil
}

// findDevPKI is make run's local CA directory in the working directory or
// above it ("" when there is none), refused unless only this user can
// change or swap it (devstack.CheckPrivateDir: one planted in a shared
// parent such as /tmp would choose whom sharedosctl trusts and which key it
// presents).
func findDevPKI() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", nil
	}
	for {
		p := filepath.Join(dir, devstack.PKIDir)
		if _, err := os.Stat(filepath.Join(p, "ca.crt")); err == nil {
			if err := devstack.CheckPrivateDir(p); err != nil {
				return "", fmt.Errorf("make run's local CA %s is not used: %w (give --tls-ca, --tls-cert and --tls-key)", p, err)
			}
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", nil
		}
		dir = parent
	}
}

// newFS is a subcommand flag set carrying the global flags.
func newFS(g *globals) *flag.FlagSet {
	fs := flag.NewFlagSet("sharedosctl", flag.ContinueOnError)
	g.bind(fs)
	return fs
}

func envOr(k, def string) string {
	if v, ok := os.LookupEnv(k); ok {
		return v
	}
	return def
}

// env is what a command runs with.
type env struct {
	g      *globals
	stdout io.Writer
	stderr io.Writer
	conns  map[string]*grpc.ClientConn
	creds  map[mtls.Config]*mtls.Credentials // one per identity, shared by its connections
}

// conn is a connection to addr, served by a component of role want, with
// the global identity (--tls-*).
func (e *env) conn(addr string, want callers.Role) (*grpc.ClientConn, error) {
	id, err := e.g.identity("operator")
	if err != nil {
		return nil, err
	}
	return e.connWith(context.Background(), addr, want, id)
}

// connWith is a connection to addr, served by a component of role want,
// with the identity of cfg: another component of the plane answering at
// addr (a provider's certificate where the catalogue should be) fails the
// handshake, so what it answers is never taken for the catalogue's.
func (e *env) connWith(ctx context.Context, addr string, want callers.Role, cfg mtls.Config) (*grpc.ClientConn, error) {
	key := addr + "|" + string(want) + "|" + cfg.Cert
	if c, ok := e.conns[key]; ok {
		return c, nil
	}
	creds, ok := e.creds[cfg]
	if !ok {
		var err error
		if creds, err = mtls.Load(ctx, cfg); err != nil {
			return nil, err
		}
		e.creds[cfg] = creds
	}
	c, err := grpcx.Dial(addr, creds.DialOption(want))
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	e.conns[key] = c
	return c, nil
}

func (e *env) close() {
	for _, c := range e.conns {
		_ = c.Close()
	}
	for _, c := range e.creds {
		c.Close()
	}
}

type command struct {
	path  string // "tools list"
	usage string
	run   func(ctx context.Context, e *env, fs *flag.FlagSet, args []string) error
	flags func(fs *flag.FlagSet)
	// deadline, when set, is the command's own fixed deadline and its flags
	// define --timeout with their own meaning (providers add: the bound of
	// one upstream call); a global --timeout before it is a usage error.
	deadline time.Duration
}

var commands []*command

func register(c *command) { commands = append(commands, c) }

// Main runs sharedosctl with args (without the program name) and returns the
// process exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	g := &globals{}
	top := flag.NewFlagSet("sharedosctl", flag.ContinueOnError)
	top.SetOutput(stderr)
	g.bind(top)
	top.Usage = func() { printUsage(stderr, top) }
	if err := top.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	rest := top.Args()
	cmd, n := find(rest)
	if cmd == nil {
		if len(rest) == 0 || rest[0] == "help" {
			printUsage(stdout, top)
			if len(rest) == 0 {
				return 2
			}
			return 0
		}
		fmt.Fprintf(stderr, "sharedosctl: unknown command %q\n", strings.Join(rest, " "))
		printUsage(stderr, top)
		return 2
	}
	sub := *g
	fs := newFS(&sub)
	if cmd.deadline > 0 {
		// The command's --timeout is its own (providers add: one upstream
		// call's bound; column run: the run's) and so is its deadline: a
		// global --timeout before it would mean either, so it is refused.
		global := false
		top.Visit(func(f *flag.Flag) { global = global || f.Name == "timeout" })
		if global {
			fmt.Fprintf(stderr, "sharedosctl %s: --timeout goes after the command: its deadline is its own (%s), and its --timeout means %s's own bound\n",
				cmd.path, cmd.deadline, cmd.path)
			return 2
		}
		fs = flag.NewFlagSet("sharedosctl", flag.ContinueOnError)
		sub.bindExcept(fs, "timeout")
		sub.timeout = cmd.deadline
	}
	fs.Init("sharedosctl "+cmd.path, flag.ContinueOnError)
	fs.SetOutput(stderr)
	// Globals given before the command stay in force unless repeated after it.
	top.Visit(func(f *flag.Flag) {
		if fs.Lookup(f.Name) != nil {
			_ = fs.Set(f.Name, f.Value.String())
		}
	})
	if cmd.flags != nil {
		cmd.flags(fs)
	}
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: sharedosctl %s %s\n", cmd.path, cmd.usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(interleave(fs, rest[n:])); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if sub.output != "json" && sub.output != "table" {
		fmt.Fprintf(stderr, "sharedosctl: --output must be json or table, not %q\n", sub.output)
		return 2
	}
	e := &env{g: &sub, stdout: stdout, stderr: stderr, conns: map[string]*grpc.ClientConn{}, creds: map[mtls.Config]*mtls.Credentials{}}
	defer e.close()
	ctx, cancel := context.WithTimeout(context.Background(), sub.timeout)
	defer cancel()
	if err := cmd.run(ctx, e, fs, fs.Args()); err != nil {
		var ue usageError
		if errors.As(err, &ue) {
			fmt.Fprintf(stderr, "sharedosctl %s: %s\n", cmd.path, message(ue.msg))
			fs.Usage()
			return 2
		}
		var se silentExit
		if errors.As(err, &se) {
			return int(se)
		}
		fmt.Fprintf(stderr, "sharedosctl %s: %s\n", cmd.path, message(describe(err)))
		return 1
	}
	return 0
}

// silentExit ends a command with a code after it already reported.
type silentExit int

func (s silentExit) Error() string { return fmt.Sprintf("exit %d", int(s)) }

// interleave moves flags that follow positional arguments in front of them,
// so `tools get NAME --output table` works like `tools get --output table NAME`.
func interleave(fs *flag.FlagSet, args []string) []string {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if strings.HasPrefix(a, "-") && len(a) > 1 {
			flags = append(flags, a)
			name := strings.TrimLeft(a, "-")
			if strings.Contains(name, "=") {
				continue
			}
			if f := fs.Lookup(name); f != nil {
				if bf, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && bf.IsBoolFlag() {
					continue
				}
				if i+1 < len(args) {
					flags = append(flags, args[i+1])
					i++
				}
			}
			continue
		}
		pos = append(pos, a)
	}
	return append(flags, pos...)
}

func find(args []string) (*command, int) {
	var best *command
	bestN := 0
	for _, c := range commands {
		words := strings.Fields(c.path)
		if len(args) < len(words) {
			continue
		}
		match := true
		for i, w := range words {
			if args[i] != w {
				match = false
				break
			}
		}
		if match && len(words) > bestN {
			best, bestN = c, len(words)
		}
	}
	return best, bestN
}

func printUsage(w io.Writer, top *flag.FlagSet) {
	fmt.Fprintln(w, "usage: sharedosctl [global flags] COMMAND [flags]")
	fmt.Fprintln(w, "\ncommands:")
	cs := append([]*command(nil), commands...)
	sort.Slice(cs, func(i, j int) bool { return cs[i].path < cs[j].path })
	for _, c := range cs {
		fmt.Fprintf(w, "  %-18s %s\n", c.path, c.usage)
	}
	fmt.Fprintln(w, "\nglobal flags:")
	top.SetOutput(w)
	top.PrintDefaults()
}

// describe renders a gRPC error as "Code: message (reason)".
func describe(err error) string {
	st, ok := status.FromError(err)
	if !ok {
		return err.Error()
	}
	msg := fmt.Sprintf("%s: %s", st.Code(), st.Message())
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() != "" {
			msg += " (" + info.GetReason() + ")"
		}
	}
	return msg
}

// emit prints v as indented JSON (hidden characters escaped: escapeJSON),
// or as a table when asked: the given rows,
// or for a single object (no header) one FIELD/VALUE row per top-level key.
func (e *env) emit(v any, header []string, rows [][]string) error {
	if e.g.output == "table" && header == nil {
		var err error
		if header, rows, err = fieldRows(v); err != nil {
			return err
		}
	}
	if e.g.output == "table" && header != nil {
		return writeTable(e.stdout, append([][]string{header}, rows...))
	}
	return writeJSON(e.stdout, v, "  ")
}

// writeTable prints rows as aligned columns, each cell as cell shows it.
func writeTable(w io.Writer, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	for _, r := range rows {
		cells := make([]string, len(r))
		for i, c := range r {
			cells[i] = cell(c)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// multiFlag collects a repeatable flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// kvFlag collects repeatable K=V flags.
type kvFlag map[string]string

func (k kvFlag) String() string { return "" }
func (k kvFlag) Set(v string) error {
	key, val, ok := strings.Cut(v, "=")
	if !ok || key == "" {
		return fmt.Errorf("want K=V, got %q", v)
	}
	k[key] = val
	return nil
}

// fieldRows renders a JSON object as FIELD/VALUE rows (nested values as
// compact JSON), in the object's key order.
func fieldRows(v any) ([]string, [][]string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if _, err := dec.Token(); err != nil { // {
		return nil, nil, err
	}
	var rows [][]string
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return nil, nil, err
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, nil, err
		}
		val := string(raw)
		var str string
		if json.Unmarshal(raw, &str) == nil {
			val = str
		}
		rows = append(rows, []string{fmt.Sprint(k), val})
	}
	return []string{"FIELD", "VALUE"}, rows, nil
}
