// Command sharedos-dev is `make run`: the whole system on one machine.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/sharedos/toolshare/services/internal/devstack"
)

func main() {
	var cfg devstack.Config
	cfg.Bind(flag.CommandLine)
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := devstack.Run(ctx, cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "sharedos-dev:", err)
		os.Exit(1)
	}
}
