package files

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/platform/config"
	"github.com/sharedos/toolshare/services/platform/grpcx"
	"github.com/sharedos/toolshare/services/platform/runner"
	"github.com/sharedos/toolshare/services/platform/telemetry"
)

// LivenessService is the health service name a liveness probe asks for; it
// stays SERVING for as long as the process can answer at all.
const LivenessService = grpcx.LivenessService

// Config is the files-provider process configuration.
type Config struct {
	// Listen is the gRPC address, e.g. 127.0.0.1:7404.
	Listen string
	// Root is the directory holding /public and /private.
	Root   string
	Logger *slog.Logger
	// MetricsListen serves Metrics (the Prometheus handler) at /metrics
	// when both are set.
	MetricsListen string
	Metrics       http.Handler
	// Plane is the internal plane's transport (runner.Env.Plane; zero:
	// plaintext, for in-process tests).
	Plane grpcx.Plane
}

// Bind registers the flags on fs (each also read from SHAREDOS_<NAME>) and
// returns the function that reads the Config once fs has been parsed.
func Bind(fs *flag.FlagSet) func() Config {
	listen := config.String(fs, "listen", "127.0.0.1:7404", "gRPC listen address")
	root := config.String(fs, "root", "deploy/demo", "directory holding /public and /private")
	metrics := runner.BindMetricsListen(fs)
	return func() Config { return Config{Listen: *listen, Root: *root, MetricsListen: *metrics} }
}

// Command is files-provider's command line, run by runner.Main.
var Command = runner.Command[Config]{
	Name: "files-provider", Service: telemetry.ServiceFiles,
	Summary: "serve files.read, files.search and files.write over --root",
	Bind:    Bind, Plane: true,
	// Nothing lives on the heap between calls: see runner.Command.
	GCPercent: 400,
	Complete: func(ctx context.Context, c Config, env runner.Env) (runner.Runnable, error) {
		c.Logger, c.Metrics, c.Plane = env.Logger, env.Metrics, env.Plane
		return c.Complete(ctx)
	},
}

// Validate reports every bad setting at once.
func (c Config) Validate() error {
	var errs config.Errors
	if c.Listen == "" {
		errs.Add("listen", "must be set")
	}
	if c.Root == "" {
		errs.Add("root", "must be set")
	}
	return errs.Err()
}

// Server is a completed, listening files provider.
type Server struct {
	provider *Provider
	grpc     *grpcx.Server
	lis      net.Listener
	logger   *slog.Logger
	metrics  http.Handler
	// metricsListen is Config.MetricsListen ("" or no handler: off).
	metricsListen string
}

// Complete opens the root and the listener; nothing is served until Run.
func (c Config) Complete(_ context.Context) (*Server, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	logger, serviceName := c.Logger, ""
	if logger == nil {
		// A configured logger already names the service; the default does not.
		logger, serviceName = slog.Default(), telemetry.ServiceFiles
	}
	p, err := New(c.Root)
	if err != nil {
		return nil, err
	}
	lis, err := net.Listen("tcp", c.Listen)
	if err != nil {
		_ = p.Close()
		return nil, fmt.Errorf("files: listen on %s: %w", c.Listen, err)
	}
	gs := grpcx.NewServer(grpcx.ServerOptions{ServiceName: serviceName, Logger: logger, Plane: c.Plane})
	sharedosv1.RegisterToolHandlerServiceServer(gs.GRPC(), p)
	gs.SetServing(LivenessService, true)
	return &Server{provider: p, grpc: gs, lis: lis, logger: logger, metrics: c.Metrics, metricsListen: c.MetricsListen}, nil
}

// Addr is the address actually listened on (useful with port 0).
func (s *Server) Addr() net.Addr { return s.lis.Addr() }

// Run serves until ctx is done, then drains and closes the root.
func (s *Server) Run(ctx context.Context) error {
	if s.metrics != nil && s.metricsListen != "" {
		_, stop, err := telemetry.ServeMetrics(s.metricsListen, s.metrics, s.logger)
		if err != nil {
			return errors.Join(err, s.provider.Close())
		}
		defer stop()
	}
	s.logger.InfoContext(ctx, "files provider serving", slog.String("addr", s.lis.Addr().String()))
	err := s.grpc.Serve(ctx, s.lis)
	return errors.Join(err, s.provider.Close())
}
