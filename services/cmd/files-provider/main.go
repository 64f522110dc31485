// Command files-provider serves the reference files tools (files.read,
// files.search, files.write) as a gRPC ToolHandlerService over a directory
// holding /public and /private.
//
//	files-provider [flags]            serve (see -h)
//	files-provider config-reference   print the flag/env reference as markdown
package main

import (
	"os"

	"github.com/sharedos/toolshare/services/platform/runner"
	"github.com/sharedos/toolshare/services/providers/files"
)

func main() { os.Exit(runner.Main(files.Command, os.Args[1:], os.Stdout, os.Stderr)) }
