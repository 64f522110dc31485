package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/sharedos/toolshare/bridge-svc/migrations"
	"github.com/sharedos/toolshare/services/platform/config"
	"github.com/sharedos/toolshare/services/platform/telemetry"
)

const usage = `usage: bridge-svc COMMAND [flags]

commands:
  serve              serve BridgeService (turn leases) and the turn MCP endpoints
  migrate [--check]  apply PostgreSQL migrations (--check: exit 0 only when current)
  config-reference   print every serve flag and env variable as a markdown table
`

// Main is the whole command line; it returns the exit code: 0 success, 1
// failure (for migrate --check: migrations pending), 2 usage error.
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], stderr)
	case "migrate":
		return migrations.Command(ctx, args[1:], stderr)
	case "config-reference":
		fs := flag.NewFlagSet("bridge-svc serve", flag.ContinueOnError)
		var cfg Config
		cfg.Flags(fs)
		if err := config.Reference(stdout, fs); err != nil {
			fmt.Fprintln(stderr, "bridge-svc config-reference:", err)
			return 1
		}
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "bridge-svc: unknown command %q\n%s", args[0], usage)
		return 2
	}
}

func serve(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("bridge-svc serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg Config
	apply := cfg.Flags(fs)
	if err := config.Parse(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "bridge-svc serve:", err)
		return 2
	}
	apply()
	shutdown, metrics, err := telemetry.SetupWith(ctx, telemetry.ServiceBridge, telemetry.SetupOptions{Prometheus: true})
	if err != nil {
		fmt.Fprintln(stderr, "bridge-svc: telemetry:", err)
		return 1
	}
	// Exporters flush on the way out, bounded by the caller's patience
	// rather than the (already cancelled) serve context.
	defer func() { _ = shutdown(context.WithoutCancel(ctx)) }()
	_ = config.Print(stderr, fs)
	cfg.Metrics = metrics
	a, err := cfg.Complete(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "bridge-svc:", err)
		return 1
	}
	if err := a.Run(ctx); err != nil {
		fmt.Fprintln(stderr, "bridge-svc:", err)
		return 1
	}
	return 0
}
