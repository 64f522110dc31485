package decisionlog

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/sharedos/toolshare/services/platform/telemetry"
)

// Sink defaults.
const (
	// DefaultQueueRecords and DefaultQueueBytes bound what waits for the
	// writer: a second or more of decisions at full rate, in a few MiB.
	DefaultQueueRecords = 8192
	DefaultQueueBytes   = 16 << 20
	// DefaultWarnEvery is the least time between two warnings of dropped
	// records.
	DefaultWarnEvery = time.Minute
)

// SinkOptions configures NewSink.
type SinkOptions struct {
	// QueueRecords and QueueBytes bound the records waiting for the writer
	// (zero: the defaults).
	QueueRecords int
	QueueBytes   int
	// WarnEvery is the least time between two warnings (zero: the default;
	// negative: none between them, for tests).
	WarnEvery time.Duration
	// Logger receives the warnings; nil means slog.Default().
	Logger *slog.Logger
	// MeterProvider records MetricDecisionLogDropped; nil means no metric.
	MeterProvider metric.MeterProvider
}

// Sink writes decision records to w from a goroutine of its own, so a
// decision never waits on its record's write: the synchronous write to
// stderr (a pipe nobody read) held Authorize past its deadline, without
// limit. Write queues a copy of each record and returns at once; when the
// queue is full (the writer stalled) the record is dropped and counted in
// MetricDecisionLogDropped, and once a write goes through again a WARN on
// Logger says how many were dropped — then at most once per WarnEvery.
// Records are written whole and in order. A decision's durable record is
// the kernel's operation record (ADR 0003): this log is best effort, but
// never silently so.
type Sink struct {
	w         io.Writer
	queue     chan *[]byte
	maxBytes  int64
	queued    atomic.Int64 // bytes in the queue
	unwarned  atomic.Int64 // dropped since the last warning
	dropped   metric.Int64Counter
	logger    *slog.Logger
	warnEvery time.Duration

	closeOnce sync.Once
	closing   chan struct{}
	done      chan struct{}
}

var _ io.Writer = (*Sink)(nil)

// NewSink starts a Sink writing to w; Close stops it.
func NewSink(w io.Writer, opts SinkOptions) (*Sink, error) {
	if opts.QueueRecords <= 0 {
		opts.QueueRecords = DefaultQueueRecords
	}
	if opts.QueueBytes <= 0 {
		opts.QueueBytes = DefaultQueueBytes
	}
	if opts.WarnEvery == 0 {
		opts.WarnEvery = DefaultWarnEvery
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Sink{
		w:         w,
		queue:     make(chan *[]byte, opts.QueueRecords),
		maxBytes:  int64(opts.QueueBytes),
		logger:    opts.Logger,
		warnEvery: opts.WarnEvery,
		closing:   make(chan struct{}),
		done:      make(chan struct{}),
	}
	if opts.MeterProvider != nil {
		c, err := opts.MeterProvider.Meter(telemetry.ScopeAuthz).Int64Counter(telemetry.MetricDecisionLogDropped,
			metric.WithDescription("Decision records never written: the queue to a stalled decision-log sink was full, or the write failed."))
		if err != nil {
			return nil, fmt.Errorf("decisionlog: create metric: %w", err)
		}
		s.dropped = c
	}
	go s.run()
	return s, nil
}

// Write queues a copy of p, one record, and never waits: a record that
// does not fit in the queue is dropped and counted. It always reports
// success (slog swallows errors anyway).
func (s *Sink) Write(p []byte) (int, error) {
	n := int64(len(p))
	if s.queued.Add(n) > s.maxBytes {
		s.queued.Add(-n)
		s.drop()
		return len(p), nil
	}
	bp := buffers.Get().(*[]byte)
	*bp = append((*bp)[:0], p...)
	select {
	case s.queue <- bp:
	default:
		buffers.Put(bp)
		s.queued.Add(-n)
		s.drop()
	}
	return len(p), nil
}

// buffers holds the copies of records written, for reuse: a decision's
// record costs a copy, not an allocation.
var buffers = sync.Pool{New: func() any { return new([]byte) }}

// pipeBuf is the most bytes one write(2) to a pipe writes whole, never
// interleaved with another writer's (the operational log shares stderr).
const pipeBuf = 4096

func (s *Sink) drop() {
	s.unwarned.Add(1)
	if s.dropped != nil {
		s.dropped.Add(context.Background(), 1)
	}
}

// run writes the queue in order until Close, then what is left of it.
func (s *Sink) run() {
	defer close(s.done)
	var lastWarn time.Time
	var timer *time.Timer
	var timerC <-chan time.Time
	for {
		select {
		case b := <-s.queue:
			s.write(b)
		case <-timerC:
			timerC = nil
		case <-s.closing:
			for {
				select {
				case b := <-s.queue:
					s.write(b)
				default:
					s.warn(&lastWarn)
					return
				}
			}
		}
		// A write went through (or the wait for the next warning ended):
		// the sink takes records again, so the drops are told now, or when
		// WarnEvery has passed since the last warning.
		if s.unwarned.Load() == 0 {
			continue
		}
		if wait := s.warnEvery - time.Since(lastWarn); lastWarn.IsZero() || wait <= 0 {
			s.warn(&lastWarn)
		} else if timerC == nil {
			if timer == nil {
				timer = time.NewTimer(wait)
			} else {
				timer.Reset(wait)
			}
			timerC = timer.C
		}
	}
}

// write writes bp and the records queued behind it, together while they
// fit in one pipe write: one write(2) for a burst of decisions, each record
// whole.
func (s *Sink) write(bp *[]byte) {
	n := 1
	for len(*bp) < pipeBuf {
		var next *[]byte
		select {
		case next = <-s.queue:
		default:
		}
		if next == nil {
			break
		}
		if len(*bp)+len(*next) > pipeBuf {
			s.writeOut(bp, n)
			bp, n = next, 1
			continue
		}
		*bp = append(*bp, *next...)
		n++
		s.recycle(next)
	}
	s.writeOut(bp, n)
}

// writeOut writes *bp, n records; they leave the queue's bytes.
func (s *Sink) writeOut(bp *[]byte, n int) {
	if _, err := s.w.Write(*bp); err != nil {
		for range n {
			s.drop()
		}
	}
	s.queued.Add(-int64(len(*bp)))
	s.recycle(bp)
}

// recycle gives bp back for another record, unless it grew large (a
// FilterTools record of thousands of names): the pool would keep it.
func (s *Sink) recycle(bp *[]byte) {
	if cap(*bp) <= maxPooled {
		buffers.Put(bp)
	}
}

// maxPooled is the largest buffer kept for reuse.
const maxPooled = 64 << 10

// warn logs the drops not told yet, if any.
func (s *Sink) warn(last *time.Time) {
	n := s.unwarned.Swap(0)
	if n == 0 {
		return
	}
	*last = time.Now()
	s.logger.Warn("decision records dropped: the decision log's sink stalled (a stderr nobody reads?) or failed",
		slog.Int64("dropped", n), slog.String("metric", telemetry.MetricDecisionLogDropped))
}

// Close stops taking records and writes those queued, until ctx ends (a
// sink still stalled keeps them: the process is stopping).
func (s *Sink) Close(ctx context.Context) error {
	s.closeOnce.Do(func() { close(s.closing) })
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("decisionlog: records left unwritten: %w", ctx.Err())
	}
}
