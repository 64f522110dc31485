package pipeline_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"

	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline"
)

// withProgress returns a context asking for progress and what it received.
func withProgress() (context.Context, func() []float64) {
	var mu sync.Mutex
	var got []float64
	ctx := pipeline.WithProgress(context.Background(), func(p *sharedosv1.Progress) {
		mu.Lock()
		got = append(got, p.GetProgress())
		mu.Unlock()
	})
	return ctx, func() []float64 { mu.Lock(); defer mu.Unlock(); return slices.Clone(got) }
}

// TestProgress (the MCP surface, item 2): a call that asks for progress runs
// its handler through Invoke; only increasing reports pass, at most the
// burst at once, none after the result; the record keeps the count. A v1
// provider (Invoke UNIMPLEMENTED) is called with Handle, once, and a call
// that asks for no progress always is.
func TestProgress(t *testing.T) {
	forEachStore(t, options{}, func(t *testing.T, h *harness) {
		const args = `{"path":"/public/a.txt"}`
		setProgress := func(p []float64) { h.handler.mu.Lock(); h.handler.progress = p; h.handler.mu.Unlock() }

		setProgress([]float64{0, 50, 50, 25, 100})
		ctx, got := withProgress()
		res, err := h.invoke(ctx, h.newCall("p", "files.read", args))
		if err != nil {
			t.Fatal(err)
		}
		expect(t, res, succeeded, "")
		if g := got(); !slices.Equal(g, []float64{0, 50, 100}) {
			t.Errorf("progress passed on %v, want the increasing 0, 50, 100", g)
		}
		if rows := h.records("p"); len(rows) != 1 || rows[0].ProgressCount != 3 {
			t.Errorf("record %+v, want progress count 3", rows)
		}

		flood := make([]float64, 100)
		for i := range flood {
			flood[i] = float64(i + 1)
		}
		setProgress(flood)
		ctx, got = withProgress()
		if _, err := h.invoke(ctx, h.newCall("flood", "files.read", args)); err != nil {
			t.Fatal(err)
		}
		if n := len(got()); n != pipeline.ProgressBurst {
			t.Errorf("100 reports at once: %d passed on, want the burst of %d", n, pipeline.ProgressBurst)
		}

		// Without a progress request, Handle even for a v2 provider.
		invokes := h.handler.invokes.Load()
		expect(t, h.call("plain", "files.read", args), succeeded, "")
		if n := h.handler.invokes.Load() - invokes; n != 0 {
			t.Errorf("a call without progress used Invoke %d times", n)
		}

		// A v1 provider: Handle after one UNIMPLEMENTED.
		setProgress(nil)
		for range 2 {
			ctx, got = withProgress()
			res, err := h.invoke(ctx, h.newCall("v1", "files.read", args))
			if err != nil {
				t.Fatal(err)
			}
			expect(t, res, succeeded, "")
			if g := got(); len(g) != 0 {
				t.Errorf("a v1 provider reported progress %v", g)
			}
		}
		if rows := h.records("v1"); len(rows) != 2 || rows[0].ProgressCount != 0 {
			t.Errorf("records %+v", rows)
		}
	})
}
