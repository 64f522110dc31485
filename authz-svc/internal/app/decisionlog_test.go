package app_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sharedos/toolshare/authz-svc/internal/app"
	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/platform/telemetry"
	"github.com/sharedos/toolshare/services/platform/testwait"
)

// stalledStderr is a decision log sink nobody reads: every Write blocks
// until released.
type stalledStderr struct {
	entered chan struct{}
	release chan struct{}
	mu      sync.Mutex
	lines   int
}

func (w *stalledStderr) Write(p []byte) (int, error) {
	select {
	case w.entered <- struct{}{}:
	default:
	}
	<-w.release
	w.mu.Lock()
	w.lines += strings.Count(string(p), "\n")
	w.mu.Unlock()
	return len(p), nil
}

func (w *stalledStderr) written() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lines
}

func decisionLogDropped(t *testing.T, h *harness) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := h.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == telemetry.MetricDecisionLogDropped {
				for _, dp := range sum.DataPoints {
					n += dp.Value
				}
			}
		}
	}
	return n
}

// A decision log whose sink stalls (stderr a pipe nobody reads) never holds
// a decision: every Authorize is answered within its deadline while the
// sink is stuck on the first record — before, the synchronous write held
// each call past it, without limit. Records past the queue are dropped and
// counted; once the sink takes records again the queued ones are written
// and a WARN tells how many were dropped.
func TestAStalledDecisionLogNeverHoldsADecision(t *testing.T) {
	w := &stalledStderr{entered: make(chan struct{}, 1), release: make(chan struct{})}
	const queue, calls = 4, 12
	h := start(t, examplePolicyDir(t), func(c *app.Config) {
		c.DecisionLog, c.DecisionLogWriter, c.DecisionLogQueue = nil, w, queue
	})
	released := false
	release := func() {
		if !released {
			released = true
			close(w.release)
		}
	}
	t.Cleanup(release)
	for i := range calls {
		// A correctness bound, not a wait: an answer that waited on the
		// sink would never come.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := h.client.Authorize(ctx, fileCall(engineer, "files.read", "read", "/public/a.txt"))
		cancel()
		if err != nil || resp.GetDecision() != sharedosv1.Decision_DECISION_ALLOW {
			t.Fatalf("call %d with the decision log stalled: %v, %v", i, resp, err)
		}
		if i == 0 {
			<-w.entered // the sink holds the first record from here on
		}
	}
	// One record held by the sink, queue of them waiting, the rest dropped.
	if n := decisionLogDropped(t, h); n != calls-1-queue {
		t.Errorf("dropped %d records, want %d", n, calls-1-queue)
	}
	release()
	testwait.Until(t, "the queued records written and the drops warned of", func() bool {
		return w.written() == 1+queue && strings.Contains(h.logs.String(), "decision records dropped")
	})
	if !strings.Contains(h.logs.String(), fmt.Sprintf(`"dropped":%d`, calls-1-queue)) {
		t.Errorf("warning: %s", h.logs.String())
	}
}
