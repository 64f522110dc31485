package runner_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/sharedos/toolshare/services/platform/config"
	"github.com/sharedos/toolshare/services/platform/grpcx"
	"github.com/sharedos/toolshare/services/platform/runner"
)

type cfg struct{ Listen, Mode string }

type done struct{ err error }

func (d done) Run(context.Context) error { return d.err }

func command(serve string, complete func(cfg) (runner.Runnable, error)) runner.Command[cfg] {
	return runner.Command[cfg]{
		Name: "demo", Service: "demo", Serve: serve, Summary: "serve the demo", Quiet: true,
		Bind: func(fs *flag.FlagSet) func() cfg {
			l := config.String(fs, "listen", "127.0.0.1:1", "address")
			m := config.String(fs, "mode", "a", "mode")
			return func() cfg { return cfg{*l, *m} }
		},
		Complete: func(_ context.Context, c cfg, env runner.Env) (runner.Runnable, error) {
			if env.Logger == nil {
				return nil, errors.New("no logger")
			}
			return complete(c)
		},
		Subs: []runner.Sub{{Name: "hello", Usage: "say hello", Run: func(_ context.Context, args []string, out, _ io.Writer) int {
			_, _ = io.WriteString(out, "hello "+strings.Join(args, " "))
			return 0
		}}},
	}
}

func run(cmd runner.Command[cfg], args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := runner.Main(cmd, args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestCommandLine(t *testing.T) {
	var got cfg
	ok := command("serve", func(c cfg) (runner.Runnable, error) { got = c; return done{}, nil })
	if code, _, stderr := run(ok); code != 2 || !strings.Contains(stderr, "usage: demo") || !strings.Contains(stderr, "hello") {
		t.Errorf("no command: %d %q", code, stderr)
	}
	if code, _, stderr := run(ok, "frobnicate"); code != 2 || !strings.Contains(stderr, `"frobnicate"`) {
		t.Errorf("unknown command: %d %q", code, stderr)
	}
	if code, out, _ := run(ok, "config-reference"); code != 0 || !strings.Contains(out, "`SHAREDOS_LISTEN`") {
		t.Errorf("config-reference: %d %q", code, out)
	}
	if code, out, _ := run(ok, "hello", "you"); code != 0 || out != "hello you" {
		t.Errorf("sub: %d %q", code, out)
	}
	if code, _, _ := run(ok, "serve", "--mode", "b"); code != 0 || got != (cfg{"127.0.0.1:1", "b"}) {
		t.Errorf("serve: %d, config %+v", code, got)
	}
	if code, _, stderr := run(ok, "serve", "--nope"); code != 2 || !strings.Contains(stderr, "nope") {
		t.Errorf("bad flag: %d %q", code, stderr)
	}
	failing := command("serve", func(cfg) (runner.Runnable, error) { return nil, errors.New("bad --listen") })
	if code, _, stderr := run(failing, "serve"); code != 1 || !strings.Contains(stderr, "demo: bad --listen") {
		t.Errorf("Complete error: %d %q", code, stderr)
	}
	runFails := command("serve", func(cfg) (runner.Runnable, error) { return done{errors.New("lost")}, nil })
	if code, _, stderr := run(runFails, "serve"); code != 1 || !strings.Contains(stderr, "lost") {
		t.Errorf("Run error: %d %q", code, stderr)
	}
}

// A serving command takes flags only: a stray word is a usage error before
// anything is opened, for the flag package would stop there and drop the
// flags after it ("--insecure-plaintext false --listen X" served in
// plaintext on the default address). A subcommand still gets its words.
func TestServeRefusesAStrayArgument(t *testing.T) {
	ran := false
	cmd := command("serve", func(cfg) (runner.Runnable, error) { ran = true; return done{}, nil })
	code, _, stderr := run(cmd, "serve", "stray", "--mode", "b")
	if code != 2 || ran || !strings.Contains(stderr, `unexpected argument "stray"`) {
		t.Errorf("serve with a stray word: exit %d, Complete ran %v, stderr %q; want exit 2 naming the word", code, ran, stderr)
	}
	ran = false
	bare := command("", func(cfg) (runner.Runnable, error) { ran = true; return done{}, nil })
	code, _, stderr = run(bare, "--mode", "b", "stray")
	if code != 2 || ran || !strings.Contains(stderr, `unexpected argument "stray"`) {
		t.Errorf("bare binary with a stray word: exit %d, Complete ran %v, stderr %q; want exit 2 naming the word", code, ran, stderr)
	}
	if code, out, _ := run(cmd, "hello", "you", "there"); code != 0 || out != "hello you there" {
		t.Errorf("a subcommand's own arguments: %d %q", code, out)
	}
}

// Every bad environment variable is reported at once, before anything runs.
func TestEnvErrorsTogether(t *testing.T) {
	t.Setenv("SHAREDOS_LISTEN", "")
	cmd := runner.Command[cfg]{Name: "demo", Service: "demo", Quiet: true,
		Bind: func(fs *flag.FlagSet) func() cfg {
			config.Duration(fs, "a-timeout", 0, "a")
			config.Int(fs, "b-count", 0, "b")
			return func() cfg { return cfg{} }
		},
		Complete: func(context.Context, cfg, runner.Env) (runner.Runnable, error) {
			t.Error("Complete ran with bad environment")
			return done{}, nil
		},
	}
	t.Setenv("SHAREDOS_A_TIMEOUT", "soon")
	t.Setenv("SHAREDOS_B_COUNT", "many")
	code, _, stderr := run(cmd)
	if code != 2 || !strings.Contains(stderr, "SHAREDOS_A_TIMEOUT") || !strings.Contains(stderr, "SHAREDOS_B_COUNT") {
		t.Errorf("bare serve with bad env: %d %q", code, stderr)
	}
}

// A process of the internal plane runs mutual TLS unless told otherwise:
// without --tls-* it does not start and says what is missing; with
// --insecure-plaintext its Complete gets plaintext credentials; the plane's
// flags are in its config reference.
func TestPlaneNeedsTLS(t *testing.T) {
	var plane grpcx.Plane
	cmd := command("serve", func(cfg) (runner.Runnable, error) { return done{}, nil })
	cmd.Plane = true
	inner := cmd.Complete
	cmd.Complete = func(ctx context.Context, c cfg, env runner.Env) (runner.Runnable, error) {
		plane = env.Plane
		return inner(ctx, c, env)
	}
	for _, k := range []string{"SHAREDOS_TLS_CA", "SHAREDOS_TLS_CERT", "SHAREDOS_TLS_KEY", "SHAREDOS_INSECURE_PLAINTEXT"} {
		t.Setenv(k, "") // restored after the test
		os.Unsetenv(k)
	}
	if code, _, stderr := run(cmd, "serve"); code != 1 || !strings.Contains(stderr, "--tls-ca, --tls-cert, --tls-key required") {
		t.Errorf("no TLS: exit %d, stderr %q", code, stderr)
	}
	if code, _, stderr := run(cmd, "serve", "--insecure-plaintext", "--reflection", "--health-listen", "127.0.0.1:0"); code != 0 ||
		!plane.TLS.Plaintext() || !plane.Reflection || plane.HealthListen != "127.0.0.1:0" {
		t.Errorf("plaintext: exit %d, plane %+v, stderr %q", code, plane, stderr)
	}
	code, out, _ := run(cmd, "config-reference")
	for _, want := range []string{"`--tls-ca`", "`SHAREDOS_TLS_CERT`", "`--insecure-plaintext`", "`--reflection`", "`--health-listen`"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("config-reference lacks %s", want)
		}
	}
}

// --debug-listen serves pprof while the command runs, on loopback unless
// --debug-listen-remote; a non-loopback address is refused before
// anything starts.
func TestDebugListen(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	var status int
	var body string
	cmd := command("serve", func(cfg) (runner.Runnable, error) {
		return runFunc(func(context.Context) error {
			resp, err := http.Get("http://" + addr + "/debug/pprof/goroutine?debug=1")
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			status, body = resp.StatusCode, string(b)
			return nil
		}), nil
	})
	if code, _, stderr := run(cmd, "serve", "--debug-listen", addr); code != 0 || status != 200 || !strings.Contains(body, "goroutine profile:") {
		t.Errorf("debug server: exit %d, GET %d %q, stderr %q", code, status, body, stderr)
	}
	if _, err := http.Get("http://" + addr + "/debug/pprof/cmdline"); err == nil {
		t.Error("the debug server still answers after the command ended")
	}
	ran := false
	refused := command("serve", func(cfg) (runner.Runnable, error) { ran = true; return done{}, nil })
	if code, _, stderr := run(refused, "serve", "--debug-listen", "0.0.0.0:0"); code != 2 || ran || !strings.Contains(stderr, "--debug-listen-remote") {
		t.Errorf("non-loopback debug address: exit %d, ran %v, stderr %q", code, ran, stderr)
	}
	if code, _, stderr := run(refused, "serve", "--debug-listen", "0.0.0.0:0", "--debug-listen-remote"); code != 0 || !ran {
		t.Errorf("--debug-listen-remote: exit %d, stderr %q", code, stderr)
	}
	if code, out, _ := run(cmd, "config-reference"); code != 0 || !strings.Contains(out, "`--debug-listen`") || !strings.Contains(out, "`SHAREDOS_DEBUG_LISTEN_REMOTE`") {
		t.Errorf("config-reference lacks the debug flags: %q", out)
	}
}

type runFunc func(context.Context) error

func (f runFunc) Run(ctx context.Context) error { return f(ctx) }

// A binary with --metrics-listen records metrics only when someone can
// read them: with the flag empty and no OTLP export it gets no Prometheus
// handler (and telemetry installs no meter provider); with it set it does.
func TestMetricsOnlyWhenRead(t *testing.T) {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "OTEL_METRICS_EXPORTER", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_EXPORTER", "SHAREDOS_METRICS_LISTEN"} {
		t.Setenv(k, "")
	}
	var handler http.Handler
	cmd := runner.Command[cfg]{Name: "demo", Service: "demo",
		Bind: func(fs *flag.FlagSet) func() cfg {
			runner.BindMetricsListen(fs)
			return func() cfg { return cfg{} }
		},
		Complete: func(_ context.Context, _ cfg, env runner.Env) (runner.Runnable, error) {
			handler = env.Metrics
			return done{}, nil
		},
	}
	if code, _, stderr := run(cmd); code != 0 || handler != nil {
		t.Errorf("--metrics-listen empty: exit %d, Prometheus handler %v (want none), stderr %q", code, handler, stderr)
	}
	if code, _, stderr := run(cmd, "--metrics-listen", "127.0.0.1:0"); code != 0 || handler == nil {
		t.Errorf("--metrics-listen set: exit %d, no Prometheus handler, stderr %q", code, stderr)
	}
}

// A binary's GCPercent applies unless GOGC is set.
func TestApplyGCPercent(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	t.Setenv("GOGC", "")
	os.Unsetenv("GOGC")
	runner.ApplyGCPercent(400)
	if got := debug.SetGCPercent(100); got != 400 {
		t.Errorf("GOGC unset: GC percent %d, want 400", got)
	}
	t.Setenv("GOGC", "50")
	runner.ApplyGCPercent(400)
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC set: GC percent changed to %d", got)
	}
}
