package runner

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"sort"
	"strings"
	"syscall"

	"github.com/sharedos/toolshare/services/platform/config"
	"github.com/sharedos/toolshare/services/platform/grpcx"
	"github.com/sharedos/toolshare/services/platform/mtls"
	"github.com/sharedos/toolshare/services/platform/telemetry"
)

// Env is what Main hands Complete besides the parsed Config.
type Env struct {
	// Logger is the process's JSON logger (telemetry.Logger).
	Logger *slog.Logger
	// Metrics is the Prometheus handler of the process's meter provider.
	Metrics http.Handler
	// Plane is the internal plane's transport (Command.Plane): mutual TLS
	// from --tls-* (or plaintext with --insecure-plaintext), --reflection
	// and --health-listen.
	Plane grpcx.Plane
}

// Runnable is a completed binary: everything opened, nothing serving yet.
// Run serves until ctx is done, then drains and closes.
type Runnable interface {
	Run(ctx context.Context) error
}

// Sub is an extra subcommand (migrate, registrations, version).
type Sub struct {
	Name, Usage string
	Run         func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

// Command describes one binary.
type Command[C any] struct {
	// Name is the binary's name; Service its OpenTelemetry service.name.
	Name, Service string
	// Summary is the usage line of the serving command.
	Summary string
	// Serve names the serving subcommand ("serve"); empty means the bare
	// binary serves (the providers: `files-provider [flags]`).
	Serve string
	// Bind registers the flags on fs (each also read from SHAREDOS_<NAME>)
	// and returns the function that reads the Config once fs is parsed.
	Bind func(fs *flag.FlagSet) func() C
	// Complete validates cfg (reporting every bad value at once), opens what
	// Run needs and returns it; on error it closes what it opened.
	Complete func(ctx context.Context, cfg C, env Env) (Runnable, error)
	// Subs are the other subcommands.
	Subs []Sub
	// GCPercent is the GOGC the binary serves with unless GOGC is set (0:
	// Go's default, 100). A service whose live heap is small while every
	// request allocates (authz-svc, the kernel, the providers) spends less
	// CPU on collection and on regrowing its workers' stacks with a higher
	// value, for a heap a few times its small live size; one whose live heap
	// grows with its state (bridge-svc's turn cache) keeps the default.
	GCPercent int
	// GCHeadroom, when set, lets the heap grow by at least this many bytes
	// over its live size before a collection (GOGC raised after each
	// collection up to 400, never below GCPercent): for a service whose
	// live heap is small until its state grows (bridge-svc), so that it
	// does not collect every few megabytes (ApplyGCHeadroom). GOGC in the
	// environment turns it off.
	GCHeadroom uint64
	// Quiet skips printing the configuration and setting up telemetry: a
	// developer tool whose output is read by people (sharedos-dev).
	Quiet bool
	// Plane marks a process of the internal gRPC plane: the runner binds
	// --tls-ca, --tls-cert, --tls-key, --insecure-plaintext, --reflection and
	// --health-listen and hands Complete the loaded credentials in Env.Plane
	// (mutual TLS unless told).
	Plane bool
}

// Main runs the command line args (without the program name) and returns
// the exit code.
func Main[C any](cmd Command[C], args []string, stdout, stderr io.Writer) int {
	sub, rest := cmd.Serve, args
	if cmd.Serve != "" || len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		if len(args) == 0 {
			fmt.Fprint(stderr, cmd.usage())
			return 2
		}
		sub, rest = args[0], args[1:]
	}
	switch sub {
	case cmd.Serve:
		return serve(cmd, rest, stderr)
	case "config-reference":
		fs := flag.NewFlagSet(cmd.flagSetName(), flag.ContinueOnError)
		cmd.bind(fs)
		bindDebug(fs)
		if err := config.Reference(stdout, fs); err != nil {
			fmt.Fprintf(stderr, "%s config-reference: %v\n", cmd.Name, err)
			return 1
		}
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, cmd.usage())
		return 0
	}
	for _, s := range cmd.Subs {
		if s.Name == sub {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return s.Run(ctx, rest, stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "%s: unknown command %q\n%s", cmd.Name, sub, cmd.usage())
	return 2
}

func serve[C any](cmd Command[C], args []string, stderr io.Writer) int {
	ApplyGCPercent(cmd.GCPercent)
	defer ApplyGCHeadroom(cmd.GCHeadroom, cmd.GCPercent)()
	fs := flag.NewFlagSet(cmd.flagSetName(), flag.ContinueOnError)
	fs.SetOutput(stderr)
	get, getTLS, plane := cmd.bind(fs)
	debug := bindDebug(fs)
	if err := config.Parse(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "%s: %v\n", cmd.flagSetName(), err)
		return 2
	}
	if err := debug.check(); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", cmd.flagSetName(), err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	env := Env{Logger: telemetry.Logger(cmd.Service)}
	if !cmd.Quiet {
		shutdown, metrics, err := telemetry.SetupWith(ctx, cmd.Service, telemetry.SetupOptions{Prometheus: servesMetrics(fs)})
		if err != nil {
			fmt.Fprintf(stderr, "%s: telemetry: %v\n", cmd.Name, err)
			return 1
		}
		// Exporters flush on the way out, bounded by the caller's patience
		// rather than the (already cancelled) serve context.
		defer func() { _ = shutdown(context.WithoutCancel(ctx)) }()
		env.Metrics = metrics
		_ = config.Print(stderr, fs)
	}
	if cmd.Plane {
		creds, err := mtls.Load(ctx, getTLS())
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", cmd.Name, err)
			return 1
		}
		defer creds.Close()
		if creds.Plaintext() {
			env.Logger.Warn("INSECURE: the internal gRPC plane runs in plaintext (--insecure-plaintext): every caller is trusted; loopback listeners only")
		} else {
			env.Logger.Info("internal gRPC plane: mutual TLS", slog.String("identity", creds.Self().String()))
		}
		env.Plane = grpcx.Plane{TLS: creds, Reflection: *plane.reflection, HealthListen: *plane.health}
	}
	r, err := cmd.Complete(ctx, get(), env)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", cmd.Name, err)
		return 1
	}
	stopDebug, err := debug.serve(env.Logger)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", cmd.Name, err)
		return 1
	}
	defer stopDebug()
	if err := r.Run(ctx); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", cmd.Name, err)
		return 1
	}
	return 0
}

// MetricsListenFlag is the flag a binary serves its Prometheus /metrics
// on (each binary binds it; empty: off).
const MetricsListenFlag = "metrics-listen"

// BindMetricsListen registers --metrics-listen on fs, the one spelling
// every binary uses.
func BindMetricsListen(fs *flag.FlagSet) *string {
	return config.String(fs, MetricsListenFlag, "", "HTTP address of the Prometheus /metrics endpoint (empty: off; then, unless OTLP export is on, no metrics are recorded)")
}

// servesMetrics reports whether anyone can read the process's metrics
// through Prometheus: a binary with an empty --metrics-listen does not
// serve them, so it records none unless OTLP export is on (telemetry.SetupWith
// then installs no meter provider: every instrument, otelgrpc's per-RPC
// histograms included, is a no-op — 5–7 % of each service's CPU in the c=16
// profiles, for figures nobody could read).
func servesMetrics(fs *flag.FlagSet) bool {
	f := fs.Lookup(MetricsListenFlag)
	return f == nil || f.Value.String() != ""
}

// ApplyGCPercent sets GOGC to percent when the environment does not set
// GOGC (percent 0 leaves Go's default). Main calls it first when serving; a
// benchmark's child process that stands in for a main calls it too.
func ApplyGCPercent(percent int) {
	if !gogcSet() && percent > 0 {
		debug.SetGCPercent(percent)
	}
}

// gogcSet reports whether the environment sets GOGC: the operator's value
// stands, whatever the binary would choose.
func gogcSet() bool {
	_, set := os.LookupEnv("GOGC")
	return set
}

// planeFlags are the internal plane's flags besides TLS.
type planeFlags struct {
	reflection *bool
	health     *string
}

// bind registers the command's flags and, for the internal plane, the
// transport flags every such process shares.
func (cmd Command[C]) bind(fs *flag.FlagSet) (get func() C, getTLS func() mtls.Config, plane planeFlags) {
	get = cmd.Bind(fs)
	if cmd.Plane {
		getTLS = mtls.Bind(fs, mtls.Config{})
		plane.reflection = config.Bool(fs, "reflection", false, "serve gRPC server reflection (to any authenticated peer)")
		plane.health = config.String(fs, "health-listen", "", "also serve grpc.health.v1 alone, in plaintext, on this address (kubelet gRPC probes speak no TLS; empty: off)")
	}
	return get, getTLS, plane
}

func (cmd Command[C]) flagSetName() string {
	if cmd.Serve == "" {
		return cmd.Name
	}
	return cmd.Name + " " + cmd.Serve
}

func (cmd Command[C]) usage() string {
	var b strings.Builder
	if cmd.Serve == "" {
		fmt.Fprintf(&b, "usage: %s [flags] | %s COMMAND\n\ncommands:\n", cmd.Name, cmd.Name)
	} else {
		fmt.Fprintf(&b, "usage: %s COMMAND [flags]\n\ncommands:\n", cmd.Name)
	}
	lines := [][2]string{{"config-reference", "print every flag and env variable as a markdown table"}}
	if cmd.Serve != "" {
		lines = append(lines, [2]string{cmd.Serve, cmd.Summary})
	}
	for _, s := range cmd.Subs {
		lines = append(lines, [2]string{s.Name, s.Usage})
	}
	sort.Slice(lines, func(i, j int) bool { return lines[i][0] < lines[j][0] })
	for _, l := range lines {
		fmt.Fprintf(&b, "  %-18s %s\n", l[0], l[1])
	}
	if cmd.Serve == "" {
		fmt.Fprintf(&b, "\n%s [flags] %s (see -h)\n", cmd.Name, cmd.Summary)
	}
	return b.String()
}
