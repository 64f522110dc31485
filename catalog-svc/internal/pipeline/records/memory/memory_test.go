package memory_test

import (
	"errors"
	"strconv"
	"testing"
	"time"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/exportset"

	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline/records"
	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline/records/memory"
	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline/records/recordstest"
)

func TestConformance(t *testing.T) {
	recordstest.Run(t, func(*testing.T) records.Store { return memory.New() })
}

// The kernel's embedded store keeps a bound of finished records
// (WithRetention); below it the contract is the same.
func TestConformanceWithRetention(t *testing.T) {
	recordstest.Run(t, func(*testing.T) records.Store { return memory.New(memory.WithRetention(memory.DefaultRetention)) })
}

// Records beyond the first few thousand (the store keeps them in chunks)
// keep their sequence order, their turns and their completions.
func TestManyRecords(t *testing.T) {
	s := memory.New()
	ctx := t.Context()
	const n = 2500
	recs := make([]*records.Record, n)
	for i := range recs {
		recs[i] = recordstest.NewRecord("turn-"+strconv.Itoa(i%3), "call-"+strconv.Itoa(i), "files.read")
		if err := s.Begin(ctx, recs[i]); err != nil {
			t.Fatal(err)
		}
		if recs[i].Sequence != int64(i+1) {
			t.Fatalf("record %d has sequence %d", i, recs[i].Sequence)
		}
	}
	last := recs[n-1]
	done := records.Completion{Status: sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED, FinishedAt: time.Now()}
	if err := s.Complete(ctx, last.AttemptID, done); err != nil {
		t.Fatal(err)
	}
	if s.Len() != n {
		t.Errorf("Len %d, want %d", s.Len(), n)
	}
	rows, err := s.ListOperations(ctx, last.TurnID)
	if err != nil || len(rows) != (n+2)/3 {
		t.Fatalf("ListOperations: %d rows, %v", len(rows), err)
	}
	for i, r := range rows {
		if want := recs[3*i+(n-1)%3].AttemptID; r.AttemptID != want {
			t.Fatalf("row %d of the turn is %s, want %s", i, r.AttemptID, want)
		}
	}
	if got := rows[len(rows)-1].Status; got != sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED {
		t.Errorf("the last record is %v", got)
	}
	// A page across the boundary between two chunks.
	from, page, err := s.ExportPage(ctx, time.Time{}, 1020, 10)
	if err != nil || from != 1020 || len(page) != 10 {
		t.Fatalf("ExportPage: from %d, %d rows, %v", from, len(page), err)
	}
	for i, r := range page {
		if r.Sequence != int64(1021+i) || r.AttemptID != recs[1020+i].AttemptID {
			t.Errorf("page row %d: sequence %d", i, r.Sequence)
		}
	}
	if n, err := s.PendingInTurn(ctx, last.TurnID); err != nil || n != len(rows)-1 {
		t.Errorf("PendingInTurn %d, %v; want %d", n, err, len(rows)-1)
	}
	if _, err := s.RecordExport(ctx, records.Export{After: 1020, Through: 1030, Rows: 10}); !errors.Is(err, records.ErrExportMismatch) {
		t.Errorf("RecordExport of pending records: %v", err)
	}
	// Every record but the completed one is still pending: Reconcile ends
	// exactly those, once.
	if ended, err := s.Reconcile(ctx, time.Now().Add(time.Minute)); err != nil || ended != n-1 {
		t.Errorf("Reconcile ended %d, %v; want %d", ended, err, n-1)
	}
	if ended, err := s.Reconcile(ctx, time.Now().Add(time.Minute)); err != nil || ended != 0 {
		t.Errorf("a second Reconcile ended %d, %v", ended, err)
	}
	if err := s.Complete(ctx, recs[0].AttemptID, done); !errors.Is(err, records.ErrCompleted) {
		t.Errorf("completing an interrupted record: %v", err)
	}
	// Export ranges across a chunk boundary and to the end: exactly the
	// finished records of the range, counted.
	for _, e := range []records.Export{{After: 1020, Through: 1030, Rows: 10}, {After: 0, Through: n, Rows: n}, {After: n - 5, Through: n + 5, Rows: 5}} {
		set := exportset.New()
		for q := e.After + 1; q <= min(e.Through, n); q++ {
			set.Add(q)
		}
		e.RecordsDigest = set.Sum()
		if _, err := s.RecordExport(ctx, e); err != nil {
			t.Errorf("RecordExport %+v: %v", e, err)
		}
		e.Rows--
		if _, err := s.RecordExport(ctx, e); !errors.Is(err, records.ErrExportMismatch) {
			t.Errorf("RecordExport %+v: %v, want a mismatch", e, err)
		}
	}
	rows, err = s.ListOperations(ctx, last.TurnID)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows[:len(rows)-1] {
		if r.Status != sharedosv1.OperationStatus_OPERATION_STATUS_INTERRUPTED {
			t.Fatalf("%s is %v after Reconcile", r.AttemptID, r.Status)
		}
	}
}
