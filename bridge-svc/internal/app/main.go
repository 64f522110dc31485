package app

import (
	"context"
	"io"

	"github.com/sharedos/toolshare/bridge-svc/migrations"
	"github.com/sharedos/toolshare/services/platform/runner"
	"github.com/sharedos/toolshare/services/platform/telemetry"
)

// Command is bridge-svc's command line, run by runner.Main.
var Command = runner.Command[Config]{
	Name: "bridge-svc", Service: telemetry.ServiceBridge, Serve: "serve",
	Summary: "serve BridgeService (turn leases) and the turn MCP endpoints",
	Bind:    Bind, Plane: true,
	// Its live heap is the turn cache: Go's GOGC 100, with room to
	// allocate before a collection while that cache is small (ADR 0021).
	GCHeadroom: 64 << 20,
	Complete: func(ctx context.Context, c Config, env runner.Env) (runner.Runnable, error) {
		c.Logger, c.Metrics, c.Plane = env.Logger, env.Metrics, env.Plane
		return c.Complete(ctx)
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
