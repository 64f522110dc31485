// Command conformance-provider serves the MCP conformance suite's tools-only
// fixtures (test_simple_text, test_error_handling, ...) as a gRPC
// ToolHandlerService, so the official suite can run against a real turn
// whose calls go through the kernel.
//
//	conformance-provider [flags]                   serve (see -h)
//	conformance-provider registrations [TARGET]    print the fixtures' registrations (JSON) for `sharedosctl tools register -f`
package main

import (
	"os"

	"github.com/sharedos/toolshare/services/platform/runner"
	"github.com/sharedos/toolshare/services/providers/conformance"
)

func main() { os.Exit(runner.Main(conformance.Command, os.Args[1:], os.Stdout, os.Stderr)) }
