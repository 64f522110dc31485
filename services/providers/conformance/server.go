package conformance

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/platform/config"
	"github.com/sharedos/toolshare/services/platform/grpcx"
	"github.com/sharedos/toolshare/services/platform/runner"
	"github.com/sharedos/toolshare/services/tools/regfile"
)

// ServiceName is the provider's OpenTelemetry service.name.
const ServiceName = "sharedos-conformance"

// Config is the conformance-provider process configuration.
type Config struct {
	// Listen is the gRPC address, e.g. 127.0.0.1:7405.
	Listen string
	Logger *slog.Logger
	// Plane is the internal plane's transport (runner.Env.Plane; zero:
	// plaintext, for in-process tests).
	Plane grpcx.Plane
}

// Bind registers the flags on fs and returns the Config reader.
func Bind(fs *flag.FlagSet) func() Config {
	listen := config.String(fs, "listen", "127.0.0.1:7405", "gRPC listen address")
	return func() Config { return Config{Listen: *listen} }
}

// Command is conformance-provider's command line, run by runner.Main.
var Command = runner.Command[Config]{
	Name: "conformance-provider", Service: ServiceName,
	Summary: "serve the MCP conformance suite's tools-only fixtures",
	Bind:    Bind, Plane: true,
	Complete: func(ctx context.Context, c Config, env runner.Env) (runner.Runnable, error) {
		c.Logger, c.Plane = env.Logger, env.Plane
		return c.Complete(ctx)
	},
	Subs: []runner.Sub{{Name: "registrations", Usage: "[TARGET] print the fixtures' registrations (JSON) for `sharedosctl tools register -f`",
		Run: printRegistrations},
		{Name: "prompt-registrations", Usage: "[TARGET] print the prompt fixtures' registrations (JSON) for `sharedosctl prompts register -f`",
			Run: entriesPrinter(func(target string) []proto.Message { return messagesOf(PromptRegistrations(target)) })},
		{Name: "resource-registrations", Usage: "[TARGET] print the resource fixtures' registrations (JSON) for `sharedosctl resources register -f`",
			Run: entriesPrinter(func(target string) []proto.Message { return messagesOf(ResourceRegistrations(target)) })}},
}

// Server is a completed, listening conformance provider.
type Server struct {
	grpc *grpcx.Server
	lis  net.Listener
}

// Complete opens the listener; nothing is served until Run.
func (c Config) Complete(_ context.Context) (*Server, error) {
	var errs config.Errors
	if c.Listen == "" {
		errs.Add("listen", "must be set")
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	lis, err := net.Listen("tcp", c.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", c.Listen, err)
	}
	srv := grpcx.NewServer(grpcx.ServerOptions{ServiceName: ServiceName, Logger: c.Logger, Plane: c.Plane})
	sharedosv1.RegisterToolHandlerServiceServer(srv.GRPC(), &Provider{})
	srv.SetServing(grpcx.LivenessService, true)
	return &Server{grpc: srv, lis: lis}, nil
}

// Run serves until ctx is done.
func (s *Server) Run(ctx context.Context) error { return s.grpc.Serve(ctx, s.lis) }

// printRegistrations writes the fixtures in the registration-file shape,
// their handler target args[0] (default: the --listen default, which
// SHAREDOS_LISTEN sets).
func printRegistrations(_ context.Context, args []string, stdout, stderr io.Writer) int {
	target := Bind(flag.NewFlagSet("", flag.ContinueOnError))().Listen
	if len(args) > 0 {
		target = args[0]
	}
	var out []regfile.Registration
	for _, r := range Registrations(target) {
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

func messagesOf[T proto.Message](regs []T) []proto.Message {
	out := make([]proto.Message, len(regs))
	for i, r := range regs {
		out[i] = r
	}
	return out
}

// entriesPrinter is a subcommand writing prompt or resource registrations
// as a JSON list, in the form sharedosctl prompts|resources register -f
// reads.
func entriesPrinter(regs func(target string) []proto.Message) func(context.Context, []string, io.Writer, io.Writer) int {
	return func(_ context.Context, args []string, stdout, stderr io.Writer) int {
		return printEntries(args, stdout, stderr, regs)
	}
}

func printEntries(args []string, stdout, stderr io.Writer, regs func(target string) []proto.Message) int {
	target := Bind(flag.NewFlagSet("", flag.ContinueOnError))().Listen
	if len(args) > 0 {
		target = args[0]
	}
	items := make([]json.RawMessage, 0)
	for _, r := range regs(target) {
		b, err := protojson.Marshal(r)
		if err != nil {
			fmt.Fprintln(stderr, "conformance-provider:", err)
			return 1
		}
		items = append(items, b)
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(items); err != nil {
		fmt.Fprintln(stderr, "conformance-provider:", err)
		return 1
	}
	return 0
}
