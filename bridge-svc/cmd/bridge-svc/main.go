// Command bridge-svc serves turn leases (gRPC BridgeService) and each turn's
// MCP endpoint.
//
//	bridge-svc serve [flags]         serve gRPC and the turn MCP endpoints (see --help)
//	bridge-svc migrate [--check]     apply (or check) PostgreSQL migrations
//	bridge-svc config-reference      print the flag/env reference as markdown
package main

import (
	"os"

	"github.com/sharedos/toolshare/bridge-svc/internal/app"
)

func main() { os.Exit(app.Main(os.Args[1:], os.Stdout, os.Stderr)) }
