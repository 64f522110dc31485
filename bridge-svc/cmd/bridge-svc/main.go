// Command bridge-svc serves turn leases (gRPC BridgeService) and each turn's
// MCP endpoint. Subcommands: serve, migrate.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/sharedos/toolshare/bridge-svc/internal/app"
	"github.com/sharedos/toolshare/bridge-svc/migrations"
	"github.com/sharedos/toolshare/services/platform/config"
	"github.com/sharedos/toolshare/services/platform/telemetry"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "bridge-svc:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: bridge-svc serve|migrate [flags]")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fs := flag.NewFlagSet("bridge-svc "+args[0], flag.ContinueOnError)
	switch args[0] {
	case "serve":
		var cfg app.Config
		apply := cfg.Flags(fs)
		if err := config.Parse(fs, args[1:]); err != nil {
			return err
		}
		apply()
		shutdown, err := telemetry.Setup(ctx, telemetry.ServiceBridge)
		if err != nil {
			return err
		}
		defer func() { _ = shutdown(context.WithoutCancel(ctx)) }()
		a, err := cfg.Complete(ctx)
		if err != nil {
			return err
		}
		return a.Run(ctx)
	case "migrate":
		dsn := config.String(fs, "database-url", "", "PostgreSQL DSN (SHAREDOS_DATABASE_URL)")
		if err := config.Parse(fs, args[1:]); err != nil {
			return err
		}
		if *dsn == "" {
			return fmt.Errorf("migrate: --database-url is required")
		}
		return migrations.Up(ctx, *dsn)
	default:
		return fmt.Errorf("unknown subcommand %q (want serve or migrate)", args[0])
	}
}
