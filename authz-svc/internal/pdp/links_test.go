package pdp

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sharedos/toolshare/services/platform/telemetry"
)

// allowUnlessDenied allows every call a deny rule of package
// sharedos.authz does not deny.
const allowUnlessDenied = `package sharedos.authz

import rego.v1

default deny := false

decision := {"allow": deny == false, "reason": ""}
`

// denyAll denies every call (in a file of its own).
const denyAll = "package sharedos.authz\n\nimport rego.v1\n\ndeny := true\n"

// A served file that is a symbolic link was skipped without a word: the
// deny rules it held were dropped and what they denied was allowed. Now any
// entry that would be served but is not a regular file — a link to a
// policy or data file, a dangling link, a FIFO — or a link to a directory
// (whose files would be dropped as silently) fails the load, naming it;
// links hidden as Kubernetes' ..data is, and links that would not be served,
// are still passed over.
func TestLoadRefusesLinksAndOtherFiles(t *testing.T) {
	outside := writeTree(t, map[string]string{"deny.rego": denyAll, "data.json": `{"x":1}`, "more/deny.rego": denyAll})
	for name, setup := range map[string]func(dir string) error{
		"linked policy": func(dir string) error {
			return os.Symlink(filepath.Join(outside, "deny.rego"), filepath.Join(dir, "deny.rego"))
		},
		"linked data": func(dir string) error {
			return os.Symlink(filepath.Join(outside, "data.json"), filepath.Join(dir, "data.json"))
		},
		"relative link":    func(dir string) error { return os.Symlink("p.rego", filepath.Join(dir, "q.rego")) },
		"dangling link":    func(dir string) error { return os.Symlink("/nonexistent/deny.rego", filepath.Join(dir, "deny.rego")) },
		"linked directory": func(dir string) error { return os.Symlink(filepath.Join(outside, "more"), filepath.Join(dir, "more")) },
		"FIFO":             func(dir string) error { return syscall.Mkfifo(filepath.Join(dir, "deny.rego"), 0o644) },
		// A whole-ConfigMap mount: each file a link into ..data (the chart
		// mounts each by subPath, as a regular file).
		"configmap mount": func(dir string) error {
			if err := os.Symlink(outside, filepath.Join(dir, "..data")); err != nil {
				return err
			}
			return os.Symlink("..data/deny.rego", filepath.Join(dir, "deny.rego"))
		},
	} {
		dir := writeTree(t, map[string]string{"p.rego": allowUnlessDenied})
		if err := setup(dir); err != nil {
			t.Fatal(err)
		}
		_, err := New(context.Background(), Options{Dir: dir, Logger: slog.New(slog.DiscardHandler)})
		if err == nil || !strings.Contains(err.Error(), dir+"/") || !strings.Contains(err.Error(), "must be regular files") {
			t.Errorf("%s: New = %v, want a load error naming the entry", name, err)
		}
	}

	// Passed over: a hidden link (..data) alone, a link that would not be
	// served (a README, a Rego test file).
	dir := writeTree(t, map[string]string{"p.rego": allowUnlessDenied, "README.md": "x"})
	for link, target := range map[string]string{"..data": outside, "NOTES.md": "README.md", "p_test.rego": filepath.Join(outside, "deny.rego")} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := New(context.Background(), Options{Dir: dir, Logger: slog.New(slog.DiscardHandler)}); err != nil {
		t.Errorf("links that are never served: %v", err)
	}
}

// A link added to a serving policy's directory fails the reload: the
// previous policy (with its deny) keeps serving, and the failure shows.
func TestReloadOfALinkKeepsThePreviousPolicy(t *testing.T) {
	dir := writeTree(t, map[string]string{"p.rego": allowUnlessDenied, "deny.rego": denyAll})
	e, err := New(context.Background(), Options{Dir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	before := e.Revision()
	outside := writeTree(t, map[string]string{"deny.rego": denyAll})
	if err := os.Remove(filepath.Join(dir, "deny.rego")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "deny.rego"), filepath.Join(dir, "deny.rego")); err != nil {
		t.Fatal(err)
	}
	if err := e.Reload(context.Background()); err == nil || !strings.Contains(err.Error(), "deny.rego is a symbolic link") {
		t.Fatalf("Reload = %v, want the link named", err)
	}
	if e.Revision() != before || e.LastReloadError() == nil {
		t.Fatalf("revision %s (was %s), LastReloadError %v", e.Revision(), before, e.LastReloadError())
	}
	d, _, err := e.Decide(context.Background(), Request{Context: Context{Principal: "p"}, Action: "read"})
	if err != nil || d.Allow {
		t.Errorf("decision %+v, %v: want the previous policy's deny", d, err)
	}
}

// policyStale is the sharedos.policy.stale gauge r collects (-1: none).
func policyStale(t *testing.T, r *sdkmetric.ManualReader) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if g, ok := m.Data.(metricdata.Gauge[int64]); ok && m.Name == telemetry.MetricPolicyStale && len(g.DataPoints) == 1 {
				return g.DataPoints[0].Value
			}
		}
	}
	return -1
}

// Health stays SERVING while a failed reload leaves an older policy
// serving; sharedos.policy.stale shows it (1) until a reload works (0).
func TestPolicyStaleGauge(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	dir := writeTree(t, map[string]string{"p.rego": allowUnlessDenied})
	e, err := New(context.Background(), Options{Dir: dir, Logger: slog.New(slog.DiscardHandler),
		MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	if err != nil {
		t.Fatal(err)
	}
	if n := policyStale(t, reader); n != 0 {
		t.Fatalf("stale = %d after the first load, want 0", n)
	}
	broken := filepath.Join(dir, "broken.rego")
	if err := os.WriteFile(broken, []byte("package x\n\nallow if {"), 0o644); err != nil {
		t.Fatal(err)
	}
	if e.Reload(context.Background()) == nil {
		t.Fatal("a broken policy reloaded")
	}
	if n := policyStale(t, reader); n != 1 {
		t.Errorf("stale = %d after a failed reload, want 1", n)
	}
	if err := os.Remove(broken); err != nil {
		t.Fatal(err)
	}
	if err := e.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := policyStale(t, reader); n != 0 {
		t.Errorf("stale = %d after a reload that worked, want 0", n)
	}
}
