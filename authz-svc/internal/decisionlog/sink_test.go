package decisionlog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sharedos/toolshare/services/platform/telemetry"
	"github.com/sharedos/toolshare/services/platform/testwait"
)

// stalledWriter blocks every Write until released, telling each one that
// starts, and keeps what it wrote.
type stalledWriter struct {
	entered chan struct{}
	release chan struct{}
	mu      sync.Mutex
	got     []string
}

func newStalledWriter() *stalledWriter {
	return &stalledWriter{entered: make(chan struct{}, 100), release: make(chan struct{})}
}

func (w *stalledWriter) Write(p []byte) (int, error) {
	w.entered <- struct{}{}
	<-w.release
	w.mu.Lock()
	defer w.mu.Unlock()
	w.got = append(w.got, string(p))
	return len(p), nil
}

// written is the records written, one a line (a write may hold several).
func (w *stalledWriter) written() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.SplitAfter(strings.Join(w.got, ""), "\n")[:strings.Count(strings.Join(w.got, ""), "\n")]
}

// syncLog is a goroutine-safe buffer for the operational log.
type syncLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func droppedCount(t *testing.T, r *sdkmetric.ManualReader) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
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

// writeAll writes each record from a goroutine of its own and waits for all
// of them to return: a Write that waited on the stalled writer would never
// let the wait end (the test's deadline then fails it).
func writeAll(t *testing.T, s *Sink, records ...string) {
	t.Helper()
	var done sync.WaitGroup
	for _, r := range records {
		done.Add(1)
		go func() {
			defer done.Done()
			_, _ = s.Write([]byte(r))
		}()
		// One at a time, so the queue holds them in this order.
		done.Wait()
	}
}

// A stalled sink never holds a decision: records queue up to the bound and
// are then dropped and counted; once the sink takes records again the
// queued ones are written whole and in order, and one WARN tells how many
// were dropped. (A JSON handler on stderr wrote synchronously: with stderr
// a pipe nobody read, Authorize stayed blocked past its deadline.)
func TestSinkNeverWaitsOnAStalledWriter(t *testing.T) {
	w := newStalledWriter()
	reader := sdkmetric.NewManualReader()
	var logs syncLog
	s, err := NewSink(w, SinkOptions{
		QueueRecords:  2,
		WarnEvery:     -1,
		Logger:        slog.New(slog.NewJSONHandler(&logs, nil)),
		MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
	})
	if err != nil {
		t.Fatal(err)
	}
	writeAll(t, s, "a\n")
	<-w.entered // the writer holds "a" and is stalled
	writeAll(t, s, "b\n", "c\n", "d\n", "e\n")
	if n := droppedCount(t, reader); n != 2 {
		t.Errorf("dropped %d records, want 2 (d and e: the queue holds two)", n)
	}
	if strings.Contains(logs.String(), "dropped") {
		t.Errorf("warned while the sink was stalled: %s", logs.String())
	}

	close(w.release)
	testwait.Until(t, "the queued records written and the drops warned of", func() bool {
		return len(w.written()) == 3 && strings.Contains(logs.String(), `"dropped":2`)
	})
	if got := strings.Join(w.written(), ""); got != "a\nb\nc\n" {
		t.Errorf("written %q, want a, b, c in order", got)
	}
	if !strings.Contains(logs.String(), `"level":"WARN"`) || !strings.Contains(logs.String(), telemetry.MetricDecisionLogDropped) {
		t.Errorf("warning %s", logs.String())
	}
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// The queue is bounded in bytes too: a record that does not fit is dropped.
// A write that fails drops its record the same way; Close writes what is
// queued.
func TestSinkBoundsAndFailures(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	w := newStalledWriter()
	s, err := NewSink(w, SinkOptions{QueueBytes: 10, MeterProvider: mp, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	writeAll(t, s, "0123456789\n") // 11 bytes: more than the whole queue
	writeAll(t, s, "12345\n")
	<-w.entered
	// The writer holds "12345"; "x" and "67890" fill the queue's ten
	// bytes, "abc" no longer fits.
	writeAll(t, s, "x\n", "67890\n", "abc\n")
	if n := droppedCount(t, reader); n != 2 {
		t.Errorf("dropped %d, want 2", n)
	}
	close(w.release)
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(w.written(), ""); got != "12345\nx\n67890\n" {
		t.Errorf("written %q", got)
	}

	failing, err := NewSink(failWriter{}, SinkOptions{MeterProvider: mp, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	writeAll(t, failing, "z\n")
	if err := failing.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := droppedCount(t, reader); n != 3 {
		t.Errorf("dropped %d, want 3 (the failed write counted)", n)
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

// BenchmarkRecord is one Authorize record written as a decision writes
// it: straight to a file (what a JSON handler on stderr did) or queued for
// the Sink's goroutine (what serving does now).
func BenchmarkRecord(b *testing.B) {
	devNull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer devNull.Close()
	rec := Record{
		Kind: KindAuthorize, DecisionID: "0123456789abcdef0123456789abcdef", Revision: "sha256:" + strings.Repeat("a", 64),
		Principal: "alice", Tenant: "acme", Roles: []string{"engineer"}, Tool: "files.read", Action: "read",
		Resource: "file:/public/a.txt", ArgumentsDigest: "sha256:" + strings.Repeat("b", 64), Result: ResultAllow,
		Reason: "role engineer may read /public/a.txt", CallID: "c-1", TurnID: "t-1",
	}
	b.Run("file", func(b *testing.B) {
		lg := New(slog.NewJSONHandler(devNull, nil))
		b.ReportAllocs()
		for b.Loop() {
			lg.Write(context.Background(), rec)
		}
	})
	b.Run("sink", func(b *testing.B) {
		s, err := NewSink(devNull, SinkOptions{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		defer func() { _ = s.Close(context.Background()) }()
		lg := New(slog.NewJSONHandler(s, nil))
		b.ReportAllocs()
		for b.Loop() {
			lg.Write(context.Background(), rec)
		}
	})
}

// Records that gathered are written together, in order and whole, in
// writes of at most 4 KiB (one a pipe never interleaves with another
// writer's), a longer record alone.
func TestSinkWritesWholeRecordsInPipeSizedWrites(t *testing.T) {
	w := newStalledWriter()
	s, err := NewSink(w, SinkOptions{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	writeAll(t, s, "first\n")
	<-w.entered
	var want strings.Builder
	want.WriteString("first\n")
	for i := range 100 {
		r := fmt.Sprintf("%03d %s\n", i, strings.Repeat("r", 95))
		if i == 50 {
			r = "long " + strings.Repeat("l", 5000) + "\n"
		}
		want.WriteString(r)
		writeAll(t, s, r)
	}
	close(w.release)
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	writes := append([]string(nil), w.got...)
	w.mu.Unlock()
	if got := strings.Join(writes, ""); got != want.String() {
		t.Fatalf("written %d bytes, not the records in order", len(got))
	}
	if len(writes) > 6 {
		t.Errorf("%d writes for 101 records of 10 KiB", len(writes))
	}
	for i, wr := range writes {
		if !strings.HasSuffix(wr, "\n") || len(wr) > 4096 && strings.Count(wr, "\n") > 1 {
			t.Errorf("write %d: %d bytes, %d records", i, len(wr), strings.Count(wr, "\n"))
		}
	}
}
