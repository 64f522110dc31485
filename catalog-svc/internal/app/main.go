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

	"github.com/sharedos/toolshare/services/platform/config"
	"github.com/sharedos/toolshare/services/platform/telemetry"

	"github.com/sharedos/toolshare/catalog-svc/migrations"
)

const usage = `usage: catalog-svc COMMAND [flags]

commands:
  serve              serve CatalogService and RuntimeService (the kernel)
  migrate [--check]  apply PostgreSQL migrations (--check: exit 0 only when current)
  config-reference   print every flag and env variable as a markdown table
`

// Main is the whole command line; it returns the exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], stdout, stderr)
	case "migrate":
		return migrations.Command(ctx, args[1:], stderr)
	case "config-reference":
		fs := flag.NewFlagSet("catalog-svc serve", flag.ContinueOnError)
		Bind(fs)
		_ = config.Reference(stdout, fs)
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "catalog-svc: unknown command %q\n%s", args[0], usage)
		return 2
	}
}

func serve(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("catalog-svc serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	get := Bind(fs)
	if err := config.Parse(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "catalog-svc serve:", err)
		return 2
	}
	log := telemetry.Logger(ServiceName)
	shutdown, metrics, err := telemetry.SetupWith(ctx, ServiceName, telemetry.SetupOptions{Prometheus: true})
	if err != nil {
		fmt.Fprintln(stderr, "catalog-svc: telemetry:", err)
		return 1
	}
	defer func() { _ = shutdown(context.WithoutCancel(ctx)) }()
	_ = config.Print(stderr, fs)
	a, err := get().Complete(ctx, log, metrics)
	if err != nil {
		fmt.Fprintln(stderr, "catalog-svc:", err)
		return 1
	}
	if err := a.Run(ctx); err != nil {
		fmt.Fprintln(stderr, "catalog-svc:", err)
		return 1
	}
	return 0
}
