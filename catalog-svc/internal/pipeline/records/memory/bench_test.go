package memory_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"

	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline/records"
	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline/records/memory"
	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline/records/recordstest"
)

// BenchmarkBeginComplete is one call's record on the embedded store, as the
// kernel writes it: Begin pending, then Complete, into a store that keeps
// every record (b.N of them at the end).
func BenchmarkBeginComplete(b *testing.B) {
	s := memory.New()
	ctx := context.Background()
	done := records.Completion{Status: sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED, FinishedAt: time.Now()}
	recs := make([]*records.Record, b.N)
	for i := range recs {
		recs[i] = recordstest.NewRecord("turn-"+strconv.Itoa(i%64), "call-"+strconv.Itoa(i), "files.read")
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if err := s.Begin(ctx, recs[i]); err != nil {
			b.Fatal(err)
		}
		if err := s.Complete(ctx, recs[i].AttemptID, done); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReconcile is the reconciler's pass (dead calls' records
// interrupted, expired waits ended) over a store that holds 200,000
// completed records and 16 calls in flight: the time every call waits
// behind it once a reconcile interval.
func BenchmarkReconcile(b *testing.B) {
	s := memory.New()
	ctx := context.Background()
	done := records.Completion{Status: sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED, FinishedAt: time.Now()}
	for i := range 200_000 {
		r := recordstest.NewRecord("turn-"+strconv.Itoa(i%64), "call-"+strconv.Itoa(i), "files.read")
		if err := s.Begin(ctx, r); err != nil {
			b.Fatal(err)
		}
		if i >= 16 {
			if err := s.Complete(ctx, r.AttemptID, done); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ResetTimer()
	for range b.N {
		if _, err := s.Reconcile(ctx, time.Now().Add(-time.Hour)); err != nil {
			b.Fatal(err)
		}
		if _, err := s.ExpireWaiting(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
