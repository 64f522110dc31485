package pipeline

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
)

// Progress limits per call: reports past the rate are dropped, so a chatty
// provider cannot flood the harness or the bridge.
const (
	ProgressRate       = 10 // reports per second, refilled
	ProgressBurst      = 10
	MaxProgressMessage = 1024
)

// unaryRetry is how long a handler target that answered Invoke with
// UNIMPLEMENTED is called with Handle only before Invoke is tried again
// (its provider may have been upgraded).
const unaryRetry = 10 * time.Minute

// ProgressSink receives the progress reports of a running call.
type ProgressSink func(*sharedosv1.Progress)

type progressKey struct{}

// progress is the progress state of one call.
type progress struct {
	sink    ProgressSink
	limiter *rate.Limiter

	mu   sync.Mutex
	last float64
	seen bool
	done bool

	count atomic.Int32
}

// WithProgress returns ctx asking InvokeTool for the call's progress: the
// handler is invoked as a stream (ToolHandlerService.Invoke, contract v2)
// and each report passes to sink — only increasing ones, at most
// ProgressRate a second, the message cut at MaxProgressMessage bytes —
// until the result: none is passed on after it. The record keeps the count.
func WithProgress(ctx context.Context, sink ProgressSink) context.Context {
	return context.WithValue(ctx, progressKey{}, &progress{sink: sink, limiter: rate.NewLimiter(ProgressRate, ProgressBurst)})
}

func progressFrom(ctx context.Context) *progress {
	p, _ := ctx.Value(progressKey{}).(*progress)
	return p
}

// progressCount is how many reports the call passed on (0 without progress).
func progressCount(ctx context.Context) int32 {
	if p := progressFrom(ctx); p != nil {
		return p.count.Load()
	}
	return 0
}

// report passes r on when the rules allow it.
func (p *progress) report(r *sharedosv1.Progress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done || (p.seen && r.GetProgress() <= p.last) || !p.limiter.Allow() {
		return
	}
	p.seen, p.last = true, r.GetProgress()
	out := &sharedosv1.Progress{Progress: r.GetProgress(), Total: r.GetTotal(), Message: cutAtRune(r.GetMessage(), MaxProgressMessage)}
	p.count.Add(1)
	p.sink(out)
}

// end stops the reports: the result is on its way.
func (p *progress) end() {
	p.mu.Lock()
	p.done = true
	p.mu.Unlock()
}
