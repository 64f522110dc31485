package pdp

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"

	"github.com/sharedos/toolshare/services/platform/telemetry"
)

// DefaultEvalTimeout bounds one evaluation when Options.EvalTimeout is zero.
const DefaultEvalTimeout = 500 * time.Millisecond

// Options configures New.
type Options struct {
	// Dir is the policy directory (made absolute; not a symbolic link).
	Dir string
	// EvalTimeout bounds one evaluation (FilterTools: all its tools); zero
	// means DefaultEvalTimeout.
	EvalTimeout time.Duration
	// Logger receives reload results; nil means slog.Default().
	Logger *slog.Logger
	// MeterProvider records sharedos.policy.reload.failures and
	// sharedos.policy.stale; nil means the global provider.
	MeterProvider metric.MeterProvider
}

// Engine evaluates decisions against the most recently loaded policy.
type Engine struct {
	dir         string
	evalTimeout time.Duration
	logger      *slog.Logger
	failures    metric.Int64Counter

	current atomic.Pointer[snapshot]

	// reloadMu serialises reloads so that two watchers or a watcher and a
	// manual Reload cannot publish an older snapshot after a newer one.
	reloadMu sync.Mutex
	lastErr  atomic.Pointer[reloadError]
}

type reloadError struct{ err error }

// New loads and prepares the policy in opts.Dir. A policy that does not load
// is an error: the service must not start without one.
func New(ctx context.Context, opts Options) (*Engine, error) {
	if opts.Dir == "" {
		return nil, errors.New("pdp: policy dir is empty")
	}
	if opts.EvalTimeout <= 0 {
		opts.EvalTimeout = DefaultEvalTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	mp := opts.MeterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	failures, err := mp.Meter(telemetry.ScopeAuthz).Int64Counter(
		telemetry.MetricPolicyReloadFailures,
		metric.WithDescription("Policy reloads that failed and kept the previous policy serving."),
	)
	if err != nil {
		return nil, fmt.Errorf("pdp: create metric: %w", err)
	}
	dir, err := policyDir(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("pdp: policy dir %s: %w", opts.Dir, err)
	}
	e := &Engine{dir: dir, evalTimeout: opts.EvalTimeout, logger: opts.Logger, failures: failures}
	snap, err := load(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("pdp: load %s: %w", dir, err)
	}
	e.current.Store(snap)
	// Health stays SERVING on a failed reload (the previous policy serves);
	// the gauge shows that it is older than the directory until one works.
	if _, err := mp.Meter(telemetry.ScopeAuthz).Int64ObservableGauge(telemetry.MetricPolicyStale,
		metric.WithDescription("1 while the last policy reload failed and an older policy serves, else 0."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			var stale int64
			if e.LastReloadError() != nil {
				stale = 1
			}
			o.Observe(stale)
			return nil
		})); err != nil {
		return nil, fmt.Errorf("pdp: create metric: %w", err)
	}
	e.logger.Info("policy loaded", slog.String("policy_dir", dir),
		slog.String("policy_revision", snap.revision), slog.Any("files", snap.files))
	return e, nil
}

// policyDir is dir absolute and clean, as fsnotify names the events of the
// directory itself: Watch compares them with it to see the directory removed
// or renamed, and dir as typed ("./policies", "/etc/pol/") never matched, so
// a directory renamed into place went unseen and the old one kept serving.
// A symbolic link is refused: retargeting it sends no event to a watch on
// its target, so the policy would silently stop following the path.
func policyDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if st, err := os.Lstat(abs); err == nil && st.Mode()&fs.ModeSymlink != 0 {
		target, _ := os.Readlink(abs)
		return "", fmt.Errorf("%s is a symbolic link (to %s): give the directory itself, since a link retargeted later could not be followed", abs, target)
	}
	return abs, nil
}

// errUnsettled: the directory changed while it was loaded.
var errUnsettled = errors.New("the policy directory changed while it was loaded (a write in progress?); the previous policy keeps serving until it settles")

// loaded, when set, runs between a load's reading and its check (tests).
var loaded func()

// load reads and prepares dir's policy, and reads dir again: a policy is
// taken only as the directory holds it once it has settled — never a
// directory half-written (a file truncated, another not yet there), whose
// rules could decide otherwise than either whole version.
func load(ctx context.Context, dir string) (*snapshot, error) {
	files, err := readPolicyDir(dir)
	if err != nil {
		return nil, err
	}
	snap, err := prepare(ctx, files)
	if err != nil {
		return nil, err
	}
	if loaded != nil {
		loaded()
	}
	again, err := readPolicyDir(dir)
	if err != nil {
		return nil, err
	}
	if revisionOf(again) != snap.revision {
		return nil, errUnsettled
	}
	return snap, nil
}

// Revision returns the revision of the policy currently serving.
func (e *Engine) Revision() string { return e.current.Load().revision }

// Dir returns the policy directory, absolute and clean.
func (e *Engine) Dir() string { return e.dir }

// LastReloadError returns the error of the most recent reload, or nil when
// it succeeded. A non-nil value means the policy serving is older than the
// directory's content.
func (e *Engine) LastReloadError() error {
	if r := e.lastErr.Load(); r != nil {
		return r.err
	}
	return nil
}

// Reload reads, compiles and prepares the directory again and swaps the new
// policy in. On failure the previous policy keeps serving, the error is
// logged, kept for LastReloadError and counted in
// sharedos.policy.reload.failures, and returned.
func (e *Engine) Reload(ctx context.Context) error {
	e.reloadMu.Lock()
	defer e.reloadMu.Unlock()
	snap, err := load(ctx, e.dir)
	if err != nil {
		err = fmt.Errorf("pdp: reload %s: %w", e.dir, err)
		// Logged and counted before LastReloadError shows it: whoever sees
		// the failure there finds it in the log and the metric too.
		e.failures.Add(ctx, 1)
		e.logger.Error("policy reload failed; previous policy keeps serving",
			slog.String("policy_dir", e.dir),
			slog.String("policy_revision", e.current.Load().revision),
			slog.String("error", err.Error()))
		e.lastErr.Store(&reloadError{err: err})
		return err
	}
	// Cleared before the swap: whoever sees the new revision sees no error.
	e.lastErr.Store(nil)
	prev := e.current.Swap(snap)
	if prev.revision != snap.revision {
		e.logger.Info("policy reloaded", slog.String("policy_dir", e.dir),
			slog.String("previous_revision", prev.revision),
			slog.String("policy_revision", snap.revision), slog.Any("files", snap.files))
	}
	return nil
}
