package decisionlog

import (
	"bytes"
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
	// DefaultLinger is how long the writer lets records gather once one
	// arrives, so that a burst costs one write and one wake-up, not one a
	// record.
	DefaultLinger = 5 * time.Millisecond
)

// SinkOptions configures NewSink.
type SinkOptions struct {
	// QueueRecords and QueueBytes bound the records waiting for the writer
	// (zero: the defaults).
	QueueRecords int
	QueueBytes   int
	// WarnEvery is the least time between two warnings (zero: the default;
	// negative: none between them).
	WarnEvery time.Duration
	// Linger is how long records gather before they are written (zero:
	// the default; negative: none).
	Linger time.Duration
	// Logger receives the warnings; nil means slog.Default().
	Logger *slog.Logger
	// MeterProvider records MetricDecisionLogDropped; nil means no metric.
	MeterProvider metric.MeterProvider
}

// Sink writes decision records to w from a goroutine of its own, so a
// decision never waits on its record's write: the synchronous write to
// stderr (a pipe nobody read) held Authorize past its deadline, without
// limit. Write appends a copy of each record to a bounded queue and returns
// at once; when the queue is full (the writer stalled) the record is
// dropped and counted in MetricDecisionLogDropped, and once a write goes
// through again a WARN on Logger says how many were dropped — then at most
// once per WarnEvery. Records are written whole and in order, those that
// gathered meanwhile together, in writes of at most 4 KiB (a longer record
// alone): on a pipe such a write is never interleaved with another
// writer's, the operational log's on the same stderr. A decision's durable
// record is the kernel's operation record (ADR 0003): this log is best
// effort, but never silently so.
type Sink struct {
	w         io.Writer
	logger    *slog.Logger
	dropped   metric.Int64Counter
	warnEvery time.Duration
	linger    time.Duration

	mu         sync.Mutex
	pending    []byte // whole records, in order
	records    int    // in pending
	closed     bool
	maxRecords int
	maxBytes   int

	unwarned atomic.Int64  // dropped since the last warning
	wake     chan struct{} // a record arrived in an empty queue
	closing  chan struct{}
	done     chan struct{}
	once     sync.Once
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
	if opts.Linger == 0 {
		opts.Linger = DefaultLinger
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Sink{
		w:          w,
		logger:     opts.Logger,
		warnEvery:  opts.WarnEvery,
		linger:     opts.Linger,
		maxRecords: opts.QueueRecords,
		maxBytes:   opts.QueueBytes,
		wake:       make(chan struct{}, 1),
		closing:    make(chan struct{}),
		done:       make(chan struct{}),
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

// Write queues a copy of p, one whole record, and never waits on the
// writer: a record the queue has no room for is dropped and counted. It
// always reports success (slog swallows errors anyway).
func (s *Sink) Write(p []byte) (int, error) {
	s.mu.Lock()
	if s.closed || s.records >= s.maxRecords || len(s.pending)+len(p) > s.maxBytes {
		s.mu.Unlock()
		s.drop(1)
		return len(p), nil
	}
	first := s.records == 0
	s.pending = append(s.pending, p...)
	s.records++
	s.mu.Unlock()
	if first {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
	return len(p), nil
}

func (s *Sink) drop(n int) {
	s.unwarned.Add(int64(n))
	if s.dropped != nil {
		s.dropped.Add(context.Background(), int64(n))
	}
}

// take empties the queue, keeping spare's memory for the next records.
func (s *Sink) take(spare []byte) ([]byte, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	batch, n := s.pending, s.records
	s.pending, s.records = spare[:0], 0
	return batch, n
}

// run writes what the queue holds whenever records arrive, until Close.
func (s *Sink) run() {
	defer close(s.done)
	var spare []byte
	var lastWarn time.Time
	var warnTimer *time.Timer
	var warnC <-chan time.Time
	for {
		select {
		case <-s.wake:
			if s.linger > 0 {
				t := time.NewTimer(s.linger)
				select {
				case <-t.C:
				case <-s.closing:
					t.Stop()
				}
			}
			batch, _ := s.take(spare)
			s.writeOut(batch)
			spare = batch
		case <-warnC:
			warnC = nil
		case <-s.closing:
			s.mu.Lock()
			s.closed = true
			s.mu.Unlock()
			batch, _ := s.take(nil)
			s.writeOut(batch)
			s.warn(&lastWarn)
			return
		}
		// Records were written (or the wait for the next warning ended):
		// the drops are told now, or once WarnEvery has passed since the
		// last warning.
		if s.unwarned.Load() == 0 {
			continue
		}
		if wait := s.warnEvery - time.Since(lastWarn); lastWarn.IsZero() || wait <= 0 {
			s.warn(&lastWarn)
		} else if warnC == nil {
			if warnTimer == nil {
				warnTimer = time.NewTimer(wait)
			} else {
				warnTimer.Reset(wait)
			}
			warnC = warnTimer.C
		}
	}
}

// pipeBuf is the most bytes one write(2) to a pipe writes whole, never
// interleaved with another writer's.
const pipeBuf = 4096

// writeOut writes batch, whole records ending in newlines, in writes of at
// most pipeBuf bytes but for a longer record, which is written alone.
func (s *Sink) writeOut(batch []byte) {
	for len(batch) > 0 {
		n := len(batch)
		if n > pipeBuf {
			if i := bytes.LastIndexByte(batch[:pipeBuf], '\n'); i >= 0 {
				n = i + 1
			} else if i := bytes.IndexByte(batch[pipeBuf:], '\n'); i >= 0 {
				n = pipeBuf + i + 1
			}
		}
		if _, err := s.w.Write(batch[:n]); err != nil {
			s.drop(max(1, bytes.Count(batch[:n], []byte{'\n'})))
		}
		batch = batch[n:]
	}
}

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
// sink still stalled keeps them: the process is stopping). Records written
// after it are dropped.
func (s *Sink) Close(ctx context.Context) error {
	s.once.Do(func() { close(s.closing) })
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("decisionlog: records left unwritten: %w", ctx.Err())
	}
}
