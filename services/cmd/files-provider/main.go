// Command files-provider serves the reference files tools (files.read,
// files.search, files.write) as a gRPC ToolHandlerService over a directory
// holding /public and /private.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/sharedos/toolshare/services/platform/config"
	"github.com/sharedos/toolshare/services/platform/telemetry"
	"github.com/sharedos/toolshare/services/providers/files"
)

func main() {
	fs := flag.NewFlagSet("files-provider", flag.ExitOnError)
	cfg := files.Config{Logger: telemetry.Logger(telemetry.ServiceFiles)}
	listen := config.String(fs, "listen", "127.0.0.1:7404", "gRPC listen address")
	root := config.String(fs, "root", "deploy/demo", "directory holding /public and /private")
	if err := config.Parse(fs, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	cfg.Listen, cfg.Root = *listen, *root
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg); err != nil {
		cfg.Logger.Error("files-provider failed", "error", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, cfg files.Config) error {
	shutdown, err := telemetry.Setup(ctx, telemetry.ServiceFiles)
	if err != nil {
		return err
	}
	defer shutdown(context.WithoutCancel(ctx))
	srv, err := cfg.Complete(ctx)
	if err != nil {
		return err
	}
	return srv.Run(ctx)
}
