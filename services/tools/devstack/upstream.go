package devstack

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/callers"
	"github.com/sharedos/toolshare/services/platform/grpcx"
	"github.com/sharedos/toolshare/services/platform/mtls"
)

// ExampleUpstreamPackage is the MCP server `make run` brokers when Node is
// present: the filesystem server over stdio on deploy/demo/public
// (ADR 0019, docs/upstreams.md).
const ExampleUpstreamPackage = "@modelcontextprotocol/server-filesystem@2026.8.31"

// exampleUpstream finds npx; "" and why not when there is none. cfg.Flags
// gains what catalog-svc needs to start it.
func exampleUpstream(cfg *Config) (npx, why string) {
	if cfg.NoExampleUpstream {
		return "", "turned off (--example-upstream=false)"
	}
	path, err := exec.LookPath("npx")
	if err != nil {
		return "", "npx not found: install Node.js to broker " + ExampleUpstreamPackage + " as fs (docs/upstreams.md)"
	}
	if cfg.Flags == nil {
		cfg.Flags = map[string][]string{}
	}
	// By name: "npx" (as docs/upstreams.md writes it) and the path it is
	// found at both start.
	cfg.Flags["catalog-svc"] = append(cfg.Flags["catalog-svc"], "--upstream-commands", "npx")
	return path, ""
}

// addExampleUpstream acquires the example upstream as fs and says where it
// stands: its tools wait for an operator's approval, the point of the demo.
func addExampleUpstream(ctx context.Context, cfg Config, creds *mtls.Credentials, npx string, out io.Writer) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute) // npx may download the package first
	defer cancel()
	cc, err := grpcx.Dial(cfg.CatalogAddr, creds.DialOption(callers.Catalog))
	if err != nil {
		fmt.Fprintf(out, "example upstream fs: %v\n", err)
		return
	}
	defer cc.Close()
	uc := sharedosv1.NewUpstreamServiceClient(cc)
	spec := &sharedosv1.UpstreamProvider{Namespace: "fs",
		Command: []string{npx, "-y", ExampleUpstreamPackage, filepath.Join(cfg.Root, "deploy", "demo", "public")}}
	var st *sharedosv1.UpstreamStatus
	resp, err := uc.AddProvider(ctx, &sharedosv1.AddProviderRequest{Provider: spec})
	if status.Code(err) == codes.AlreadyExists { // a persistent store from an earlier run
		var r *sharedosv1.RefreshProviderResponse
		r, err = uc.RefreshProvider(ctx, &sharedosv1.RefreshProviderRequest{Namespace: "fs"})
		st = r.GetStatus()
	} else {
		st = resp.GetStatus()
	}
	switch {
	case ctx.Err() != nil && err != nil:
		return // stopping
	case err != nil:
		fmt.Fprintf(out, "example upstream fs: %v\n", err)
	case st.GetError() != "":
		fmt.Fprintf(out, "example upstream fs (%s): not reachable: %s\n", ExampleUpstreamPackage, st.GetError())
	default:
		fmt.Fprintf(out, "example upstream fs (%s over stdio on deploy/demo/public): %d tools acquired, waiting for approval:\n"+
			"  bin/sharedosctl providers get fs --output table   (then tools diff / tools approve NAME --digest D)\n",
			ExampleUpstreamPackage, len(st.GetTools()))
	}
}
