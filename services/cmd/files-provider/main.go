// Command files-provider serves the reference files tools (files.read,
// files.search, files.write) as a gRPC ToolHandlerService over a directory
// holding /public and /private.
//
//	files-provider [flags]            serve (see -h)
//	files-provider config-reference   print the flag/env reference as markdown
package main

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
	"github.com/sharedos/toolshare/services/providers/files"
)

type flags struct {
	listen, root, metrics *string
}

func bind(fs *flag.FlagSet) flags {
	return flags{
		listen:  config.String(fs, "listen", "127.0.0.1:7404", "gRPC listen address"),
		root:    config.String(fs, "root", "deploy/demo", "directory holding /public and /private"),
		metrics: config.String(fs, "metrics-listen", "", "HTTP address of the Prometheus /metrics endpoint (empty: off)"),
	}
}

func main() { os.Exit(runMain(os.Args[1:], os.Stdout, os.Stderr)) }

func runMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("files-provider", flag.ContinueOnError)
	fs.SetOutput(stderr)
	f := bind(fs)
	if len(args) > 0 && args[0] == "config-reference" {
		_ = config.Reference(stdout, fs)
		return 0
	}
	if err := config.Parse(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "files-provider:", err)
		return 2
	}
	cfg := files.Config{Logger: telemetry.Logger(telemetry.ServiceFiles), Listen: *f.listen, Root: *f.root}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, *f.metrics); err != nil {
		cfg.Logger.Error("files-provider failed", "error", err)
		return 1
	}
	return 0
}

func run(ctx context.Context, cfg files.Config, metricsAddr string) error {
	shutdown, metrics, err := telemetry.SetupWith(ctx, telemetry.ServiceFiles, telemetry.SetupOptions{Prometheus: true})
	if err != nil {
		return err
	}
	defer func() { _ = shutdown(context.WithoutCancel(ctx)) }()
	srv, err := cfg.Complete(ctx)
	if err != nil {
		return err
	}
	if metricsAddr != "" {
		_, stop, err := telemetry.ServeMetrics(metricsAddr, metrics, cfg.Logger)
		if err != nil {
			return err
		}
		defer stop()
	}
	return srv.Run(ctx)
}
