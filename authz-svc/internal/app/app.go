package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"

	"github.com/sharedos/toolshare/authz-svc/internal/decisionlog"
	"github.com/sharedos/toolshare/authz-svc/internal/pdp"
	"github.com/sharedos/toolshare/authz-svc/internal/server"
	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/platform/config"
	"github.com/sharedos/toolshare/services/platform/grpcx"
	"github.com/sharedos/toolshare/services/platform/runner"
	"github.com/sharedos/toolshare/services/platform/telemetry"
)

// Defaults.
const (
	DefaultListen    = "127.0.0.1:7402"
	DefaultPolicyDir = "deploy/policies"
)

// Health service names this server reports. Liveness stays SERVING for as
// long as the process serves: a failed policy reload keeps the previous
// policy serving, so it is not a reason to restart the pod.
const (
	HealthLiveness = grpcx.LivenessService
	HealthAuthz    = "sharedos.v1.AuthzService"
)

// Config is the service configuration.
type Config struct {
	Listen      string
	PolicyDir   string
	EvalTimeout time.Duration
	// Watch reloads the policy when the directory changes (always on from
	// the command line; tests may turn it off and call Reload).
	Watch bool

	// Logger is the operational log; nil means telemetry.Logger.
	Logger *slog.Logger
	// DecisionLog receives decision records, synchronously (tests); nil
	// means a JSON handler on DecisionLogWriter through a
	// decisionlog.Sink, which a decision never waits on (ADR 0003).
	DecisionLog slog.Handler
	// DecisionLogWriter is the decision log's sink when DecisionLog is nil;
	// nil means stderr. DecisionLogQueue bounds the records waiting for it
	// (zero: decisionlog.DefaultQueueRecords).
	DecisionLogWriter io.Writer
	DecisionLogQueue  int
	// Listener, when set, is used instead of listening on Listen.
	Listener net.Listener
	// MeterProvider records the policy metrics; nil means the global one.
	MeterProvider metric.MeterProvider
	// MetricsListen serves Metrics (the Prometheus handler) at /metrics
	// when both are set.
	MetricsListen string
	Metrics       http.Handler
	// Plane is the internal plane's transport (runner.Env.Plane; zero:
	// plaintext, for in-process tests).
	Plane grpcx.Plane
}

// Bind registers the serve flags on fs (each also read from
// SHAREDOS_<NAME>) and returns the function that reads the Config once fs
// has been parsed.
func Bind(fs *flag.FlagSet) func() Config {
	listen := config.String(fs, "listen", DefaultListen, "gRPC listen address")
	policyDir := config.String(fs, "policy-dir", DefaultPolicyDir, "directory of Rego policies and data (relative paths are also looked up from parent directories)")
	evalTimeout := config.Duration(fs, "eval-timeout", pdp.DefaultEvalTimeout, "bound on one policy evaluation")
	metrics := runner.BindMetricsListen(fs)
	return func() Config {
		return Config{Listen: *listen, PolicyDir: *policyDir, EvalTimeout: *evalTimeout, MetricsListen: *metrics, Watch: true}
	}
}

// Completed is a validated configuration with its policy loaded and its
// listener open: Run cannot fail for a reason Complete could have found.
type Completed struct {
	cfg    Config
	logger *slog.Logger
	engine *pdp.Engine
	grpc   *grpcx.Server
	lis    net.Listener
	// sink is the decision log's queue (nil with Config.DecisionLog).
	sink *decisionlog.Sink
}

// SinkCloseTimeout bounds how long Run, once serving has stopped, waits for
// the decision records still queued to be written.
const SinkCloseTimeout = 5 * time.Second

// Complete validates c, loads the policy and opens the listener.
func (c Config) Complete(ctx context.Context) (*Completed, error) {
	var errs config.Errors
	if c.Listener == nil && c.Listen == "" {
		errs.Add("listen", "must not be empty")
	}
	if c.EvalTimeout <= 0 {
		errs.Add("eval-timeout", "must be positive")
	}
	dir, err := ResolvePolicyDir(c.PolicyDir)
	if err != nil {
		errs.Add("policy-dir", err.Error())
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	c.PolicyDir = dir

	logger := c.Logger
	if logger == nil {
		logger = telemetry.Logger(telemetry.ServiceAuthz)
	}
	engine, err := pdp.New(ctx, pdp.Options{
		Dir: dir, EvalTimeout: c.EvalTimeout, Logger: logger, MeterProvider: c.MeterProvider,
	})
	if err != nil {
		return nil, err
	}
	dh := c.DecisionLog
	var sink *decisionlog.Sink
	if dh == nil {
		w := c.DecisionLogWriter
		if w == nil {
			w = os.Stderr
		}
		mp := c.MeterProvider
		if mp == nil {
			mp = otel.GetMeterProvider()
		}
		// A stderr nobody reads blocked every decision's write, and with
		// it the decision: records wait in a bounded queue instead, and
		// are dropped (counted, then warned of) when it is full.
		sink, err = decisionlog.NewSink(w, decisionlog.SinkOptions{QueueRecords: c.DecisionLogQueue, Logger: logger, MeterProvider: mp})
		if err != nil {
			return nil, err
		}
		dh = slog.NewJSONHandler(sink, nil)
	}

	// Stream workers are long-lived goroutines: OPA's evaluator recurses
	// deeply, and on a fresh goroutine per RPC (grpc-go's default) every
	// decision paid for growing its stack again (about a third of the CPU
	// at c=16 in the benchmark profile). Workers keep their grown stacks;
	// RPCs beyond the pool still get their own goroutine.
	gs := grpcx.NewServer(grpcx.ServerOptions{Logger: logger, Plane: c.Plane})
	sharedosv1.RegisterAuthzServiceServer(gs.GRPC(), server.New(engine, decisionlog.New(dh)))

	lis := c.Listener
	if lis == nil {
		lis, err = net.Listen("tcp", c.Listen)
		if err != nil {
			gs.Close()
			if sink != nil {
				_ = sink.Close(ctx)
			}
			return nil, fmt.Errorf("listen %s: %w", c.Listen, err)
		}
	}
	return &Completed{cfg: c, logger: logger, engine: engine, grpc: gs, lis: lis, sink: sink}, nil
}

// Addr is the address the server listens on.
func (c *Completed) Addr() net.Addr { return c.lis.Addr() }

// Engine is the decision engine (tests use it to reload and read state).
func (c *Completed) Engine() *pdp.Engine { return c.engine }

// Run serves until ctx is done, watching the policy directory.
func (c *Completed) Run(ctx context.Context) error {
	c.grpc.SetServing("", true)
	c.grpc.SetServing(HealthLiveness, true)
	c.grpc.SetServing(HealthAuthz, true)

	if c.cfg.MetricsListen != "" && c.cfg.Metrics != nil {
		_, stopMetrics, err := telemetry.ServeMetrics(c.cfg.MetricsListen, c.cfg.Metrics, c.logger)
		if err != nil {
			// Nothing served: what Complete opened is closed here, the
			// decision log flushed (review: the listener, the gRPC server
			// and the sink were left open).
			c.grpc.Close()
			_ = c.lis.Close()
			c.closeSink(ctx)
			return err
		}
		defer stopMetrics()
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	watched := make(chan error, 1)
	if c.cfg.Watch {
		go func() {
			err := c.engine.Watch(ctx)
			if err != nil && ctx.Err() == nil {
				// A policy change (a revoked grant) would never apply:
				// stop serving rather than decide on a policy that no
				// longer follows the directory.
				c.logger.Error("policy watch failed; stopping", slog.String("policy_dir", c.cfg.PolicyDir), slog.String("error", err.Error()))
				cancel()
			}
			watched <- err
		}()
	} else {
		watched <- nil
	}
	c.logger.Info("authz-svc serving", slog.String("addr", c.lis.Addr().String()),
		slog.String("policy_dir", c.cfg.PolicyDir), slog.String("policy_revision", c.engine.Revision()))
	err := c.grpc.Serve(ctx, c.lis)
	cancel()
	c.closeSink(ctx) // serving has stopped: no record comes after these
	if werr := <-watched; werr != nil {
		err = errors.Join(err, werr)
	}
	return err
}

// closeSink flushes and closes the decision log's sink, if any, within
// SinkCloseTimeout.
func (c *Completed) closeSink(ctx context.Context) {
	if c.sink == nil {
		return
	}
	sctx, stop := context.WithTimeout(context.WithoutCancel(ctx), SinkCloseTimeout)
	defer stop()
	if err := c.sink.Close(sctx); err != nil {
		c.logger.Warn("decision log not flushed", slog.String("error", err.Error()))
	}
}

// ResolvePolicyDir returns dir if it is a directory. A relative dir that is
// not found from the working directory is looked up in its parents, so the
// default works from the repository root and from a module directory.
func ResolvePolicyDir(dir string) (string, error) {
	if dir == "" {
		return "", errors.New("must not be empty")
	}
	if isDir(dir) {
		return dir, nil
	}
	if filepath.IsAbs(dir) {
		return "", fmt.Errorf("%s is not a directory", dir)
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("%s is not a directory", dir)
	}
	for d := filepath.Dir(wd); ; d = filepath.Dir(d) {
		if p := filepath.Join(d, dir); isDir(p) {
			return p, nil
		}
		if d == filepath.Dir(d) {
			return "", fmt.Errorf("%s is not a directory (looked in %s and its parents)", dir, wd)
		}
	}
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// PrintConfig writes the effective configuration with secrets redacted.
func PrintConfig(w io.Writer, fs *flag.FlagSet) error { return config.Print(w, fs) }
