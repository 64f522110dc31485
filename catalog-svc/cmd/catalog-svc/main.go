// Command catalog-svc serves the tool catalogue and the kernel (InvokeTool).
//
//	catalog-svc serve [flags]         serve gRPC (see --help)
//	catalog-svc migrate [--check]     apply (or check) PostgreSQL migrations
//	catalog-svc config-reference      print the flag/env reference as markdown
package main

import (
	"os"

	"github.com/sharedos/toolshare/catalog-svc/internal/app"
)

func main() { os.Exit(app.Main(os.Args[1:], os.Stdout, os.Stderr)) }
