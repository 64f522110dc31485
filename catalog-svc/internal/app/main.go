package app

import (
	"context"
	"io"

	"github.com/sharedos/toolshare/services/platform/runner"

	"github.com/sharedos/toolshare/catalog-svc/internal/upstream"
	"github.com/sharedos/toolshare/catalog-svc/migrations"
)

// Command is catalog-svc's command line, run by runner.Main.
var Command = runner.Command[Config]{
	Name: "catalog-svc", Service: ServiceName, Serve: "serve",
	Summary: "serve CatalogService and RuntimeService (the kernel)",
	Bind:    Bind, Plane: true,
	// The kernel's live heap is the catalogue while every call allocates
	// its record, decoded arguments and three RPCs: see runner.Command.
	GCPercent: 400,
	Complete: func(ctx context.Context, c Config, env runner.Env) (runner.Runnable, error) {
		// Before anything runs: a stdio upstream is this process's child,
		// of its user (upstream.ProtectFromChildren). Without
		// --upstream-commands no child is started, and the process stays
		// inspectable by its user (its fds, for make verify's load test).
		if len(c.Upstreams.Commands) > 0 {
			if err := upstream.ProtectFromChildren(); err != nil {
				return nil, err
			}
		}
		c.Plane = env.Plane
		return c.Complete(ctx, env.Logger, env.Metrics)
	},
	Subs: []runner.Sub{{Name: "migrate", Usage: "apply PostgreSQL migrations (--check: exit 0 only when current)",
		Run: func(ctx context.Context, args []string, _, stderr io.Writer) int {
			return migrations.Command(ctx, args, stderr)
		}}},
}

// Main is the whole command line; it returns the exit code: 0 success, 1
// failure (for migrate --check: migrations pending), 2 usage error.
func Main(args []string, stdout, stderr io.Writer) int {
	return runner.Main(Command, args, stdout, stderr)
}
