// Command authz-svc is the SharedOS policy decision point.
//
//	authz-svc serve [--listen 127.0.0.1:7402] [--policy-dir deploy/policies] [--eval-timeout 500ms]
//	authz-svc version
//	authz-svc config-reference      print the serve flags as a markdown table
package main

import (
	"os"

	"github.com/sharedos/toolshare/authz-svc/internal/app"
)

func main() { os.Exit(app.Main(os.Args[1:], os.Stdout, os.Stderr)) }
