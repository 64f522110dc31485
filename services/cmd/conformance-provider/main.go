// Command conformance-provider serves the MCP conformance suite's tools-only
// fixtures (test_simple_text, test_error_handling, ...) as a gRPC
// ToolHandlerService, so the official suite can run against a real turn
// whose calls go through the kernel.
//
//	conformance-provider [flags]          serve (see -h)
//	conformance-provider registrations    print the fixtures' registrations (JSON) for `sharedosctl tools register -f`
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/internal/regfile"
	"github.com/sharedos/toolshare/services/platform/config"
	"github.com/sharedos/toolshare/services/platform/grpcx"
	"github.com/sharedos/toolshare/services/platform/telemetry"
	"github.com/sharedos/toolshare/services/providers/conformance"
)

func main() { os.Exit(runMain(os.Args[1:], os.Stdout, os.Stderr)) }

func runMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("conformance-provider", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := config.String(fs, "listen", "127.0.0.1:7405", "gRPC listen address")
	if len(args) > 0 && args[0] == "registrations" {
		target := listen
		if len(args) > 1 {
			target = &args[1]
		}
		return printRegistrations(stdout, stderr, *target)
	}
	if err := config.Parse(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "conformance-provider:", err)
		return 2
	}
	log := telemetry.Logger("sharedos-conformance")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	shutdown, err := telemetry.Setup(ctx, "sharedos-conformance")
	if err != nil {
		fmt.Fprintln(stderr, "conformance-provider:", err)
		return 1
	}
	defer func() { _ = shutdown(context.WithoutCancel(ctx)) }()
	lis, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(stderr, "conformance-provider:", err)
		return 1
	}
	srv := grpcx.NewServer(grpcx.ServerOptions{ServiceName: "sharedos-conformance", Logger: log})
	sharedosv1.RegisterToolHandlerServiceServer(srv.GRPC(), &conformance.Provider{})
	srv.SetServing(grpcx.LivenessService, true)
	if err := srv.Serve(ctx, lis); err != nil {
		fmt.Fprintln(stderr, "conformance-provider:", err)
		return 1
	}
	return 0
}

// printRegistrations writes the fixtures in the registration-file shape.
func printRegistrations(stdout, stderr io.Writer, target string) int {
	var out []regfile.Registration
	for _, r := range conformance.Registrations(target) {
		out = append(out, regfile.FromProto(r))
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		fmt.Fprintln(stderr, "conformance-provider:", err)
		return 1
	}
	return 0
}
