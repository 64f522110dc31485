// Command sharedosctl is the operator CLI of SharedOS toolshare; see
// `sharedosctl help` and the README.
package main

import (
	"os"

	"github.com/sharedos/toolshare/services/tools/ctl"
)

func main() { os.Exit(ctl.Main(os.Args[1:], os.Stdout, os.Stderr)) }
