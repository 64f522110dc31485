// Command authz-svc is the SharedOS policy decision point.
//
//	authz-svc serve [--listen 127.0.0.1:7402] [--policy-dir deploy/policies] [--eval-timeout 500ms]
//	authz-svc version
//	authz-svc config-reference      print the serve flags as a markdown table
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/sharedos/toolshare/authz-svc/internal/app"
	"github.com/sharedos/toolshare/services/platform/config"
	"github.com/sharedos/toolshare/services/platform/telemetry"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "authz-svc:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 || (args[0] != "serve" && args[0] != "version" && args[0] != "config-reference") {
		return fmt.Errorf("usage: authz-svc serve [flags] | authz-svc version | authz-svc config-reference")
	}
	if args[0] == "version" {
		fmt.Println(app.Version())
		return nil
	}
	if args[0] == "config-reference" {
		fs := flag.NewFlagSet("authz-svc serve", flag.ContinueOnError)
		app.NewFlags(fs)
		return config.Reference(os.Stdout, fs)
	}
	app.TuneRuntime()
	fs := flag.NewFlagSet("authz-svc serve", flag.ContinueOnError)
	flags := app.NewFlags(fs)
	if err := config.Parse(fs, args[1:]); err != nil {
		return err
	}
	if err := config.Print(os.Stderr, fs); err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	shutdown, metrics, err := telemetry.SetupWith(ctx, telemetry.ServiceAuthz, telemetry.SetupOptions{Prometheus: true})
	if err != nil {
		return err
	}
	defer func() { _ = shutdown(context.WithoutCancel(ctx)) }()

	cfg := flags.Config()
	cfg.Metrics = metrics
	c, err := cfg.Complete(ctx)
	if err != nil {
		return err
	}
	return c.Run(ctx)
}
