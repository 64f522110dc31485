// Command sharedos-dev is `make run`: the whole system on one machine.
package main

import (
	"os"

	"github.com/sharedos/toolshare/services/platform/runner"
	"github.com/sharedos/toolshare/services/tools/devstack"
)

func main() { os.Exit(runner.Main(devstack.Command, os.Args[1:], os.Stdout, os.Stderr)) }
