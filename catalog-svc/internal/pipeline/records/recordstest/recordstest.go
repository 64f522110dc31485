package recordstest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/exportset"
	"github.com/sharedos/toolshare/services/contract/outcome"
	"github.com/sharedos/toolshare/services/contract/redact"

	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline/records"
)

// Run runs the suite. newStore must return an empty store per call.
func Run(t *testing.T, newStore func(t *testing.T) records.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s records.Store)
	}{
		{"BeginCompleteList", testBeginCompleteList},
		{"OrderWithinTurn", testOrder},
		{"DuplicateCallIsRecorded", testDuplicate},
		{"ConcurrentDuplicatesOneFirst", testConcurrentDuplicates},
		{"BeginNewWritesOnlyTheFirst", testBeginNew},
		{"CompletedRowIsFinal", testCompletedFinal},
		{"CompleteUnknown", testCompleteUnknown},
		{"CompleteOnlyItsTurn", testCompleteTurn},
		{"RefusalInDoubtOnlyWhereTheResumptionTookEffect", testRefusalInDoubt},
		{"RejectsMalformed", testRejectsMalformed},
		{"HostileTextIsStorable", testHostileText},
		{"HostileTextIsStorableWhenParked", testHostileTextParked},
		{"ReconcileMarksOnlyOldPending", testReconcile},
		{"ReconcileInstanceMarksOnlyItsOwn", testReconcileInstance},
		{"RevocationsAreDurableAndForgottenLate", testRevocations},
		{"PendingInTurnCountsOnlyPending", testPendingInTurn},
		{"ExportPagesAndLedger", testExport},
		{"ProgressCountKept", testProgressCount},
		{"KindKept", testKindKept},
		{"InputRoundsOneRecord", testInputRounds},
		{"ResumeOnlyAnExactWait", testResumeExact},
		{"ConcurrentResumesOneWins", testConcurrentResumes},
		{"WaitExpiresAsTimeout", testWaitExpires},
		{"EndedRoundIsTheAttemptsOneOutcome", testEndedRound},
		{"WaitEndsWithTheTurn", testWaitClosed},
		{"WaitingIsNeverInterrupted", testWaitNotReconciled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newStore(t))
		})
	}
}

// NewRecord returns a pending record with every field set.
func NewRecord(turn, call, tool string) *records.Record {
	esc, sum := records.EscapeTool(tool)
	return &records.Record{
		AttemptID:           records.NewAttemptID(),
		CallID:              call,
		TurnID:              turn,
		Principal:           "alice",
		Tenant:              "acme",
		RequestedTool:       esc,
		RequestedToolSHA256: sum,
		CatalogHash:         strings.Repeat("c", 64),
		ArgumentsDigest:     redact.ArgumentsDigest([]byte(`{"path":"/public/a.txt"}`)),
		InstanceID:          "kernel-1",
		Harness:             "test",
		HarnessVersion:      "1.2.3",
		MCPSupport:          "extension",
		Extension:           "pi-mcp-adapter",
		DeclaredModel:       "fake-model",
		ToolPolicyDigest:    redact.SHA256([]byte(`{"mode":"strict"}`)),
		TraceID:             strings.Repeat("a", 32),
		StartedAt:           time.Now().UTC().Truncate(time.Microsecond),
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func turn(t *testing.T) string { return "turn-" + strings.ReplaceAll(t.Name(), "/", "-") }

func list(t *testing.T, s records.Store, turnID string) []records.Record {
	t.Helper()
	rows, err := s.ListOperations(ctx(t), turnID)
	if err != nil {
		t.Fatalf("ListOperations: %v", err)
	}
	return rows
}

func sameTime(a, b time.Time) bool { return a.Sub(b).Abs() < time.Microsecond }

func testBeginCompleteList(t *testing.T, s records.Store) {
	tid := turn(t)
	r := NewRecord(tid, "c1", "files.read")
	r.Status = sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED // ignored by Begin
	if err := s.Begin(ctx(t), r); err != nil {
		t.Fatalf("Begin: %v", err)
	}
	if r.Sequence <= 0 {
		t.Fatalf("Begin left Sequence %d", r.Sequence)
	}
	rows := list(t, s, tid)
	if len(rows) != 1 || rows[0].Status != sharedosv1.OperationStatus_OPERATION_STATUS_PENDING || !rows[0].FinishedAt.IsZero() {
		t.Fatalf("after Begin: %+v", rows)
	}
	fin := time.Now().UTC().Truncate(time.Microsecond)
	c := records.Completion{
		Status: sharedosv1.OperationStatus_OPERATION_STATUS_DENIED, Code: outcome.PermissionDenied,
		Reason: "path is private", ResolvedTool: "files.read", DecisionID: "d-1", PolicyRevision: "rev-7", FinishedAt: fin,
	}
	if err := s.Complete(ctx(t), r.AttemptID, c); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	rows = list(t, s, tid)
	if len(rows) != 1 {
		t.Fatalf("rows = %d", len(rows))
	}
	got := rows[0]
	want := *r
	want.Status, want.Code, want.Reason = c.Status, c.Code, c.Reason
	want.ResolvedTool, want.DecisionID, want.PolicyRevision = c.ResolvedTool, c.DecisionID, c.PolicyRevision
	if !sameTime(got.StartedAt, want.StartedAt) || !sameTime(got.FinishedAt, fin) {
		t.Errorf("times = %v/%v, want %v/%v", got.StartedAt, got.FinishedAt, want.StartedAt, fin)
	}
	got.StartedAt, got.FinishedAt, want.StartedAt, want.FinishedAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	if got != want {
		t.Errorf("row = %+v\nwant  %+v", got, want)
	}
	p := rows[0].ToProto()
	if p.GetStatus() != c.Status || p.GetDecisionId() != "d-1" || p.GetStartedAt() == nil || p.GetFinishedAt() == nil {
		t.Errorf("proto = %v", p)
	}
	// The run's SystemIdentity travels with every record.
	if h := p.GetHarness(); h.GetName() != "test" || h.GetVersion() != "1.2.3" ||
		h.GetMcpSupport() != sharedosv1.McpSupport_MCP_SUPPORT_EXTENSION || h.GetExtensionName() != "pi-mcp-adapter" ||
		p.GetDeclaredModel() != "fake-model" || p.GetToolPolicyDigest() != r.ToolPolicyDigest || p.GetCatalogHash() != r.CatalogHash ||
		p.GetTenant() != "acme" || p.GetPrincipal() != "alice" {
		t.Errorf("proto identity = %v", p)
	}
	if other := list(t, s, tid+"-other"); len(other) != 0 {
		t.Errorf("another turn sees %d rows", len(other))
	}
}

func testOrder(t *testing.T, s records.Store) {
	tid := turn(t)
	var last int64
	for i := range 5 {
		r := NewRecord(tid, fmt.Sprintf("c%d", i), "files.read")
		if err := s.Begin(ctx(t), r); err != nil {
			t.Fatal(err)
		}
		if r.Sequence <= last {
			t.Fatalf("sequence %d after %d", r.Sequence, last)
		}
		last = r.Sequence
		// Interleave another turn: per-turn order must still hold.
		if err := s.Begin(ctx(t), NewRecord(tid+"-x", fmt.Sprintf("c%d", i), "files.read")); err != nil {
			t.Fatal(err)
		}
	}
	rows := list(t, s, tid)
	if len(rows) != 5 {
		t.Fatalf("rows = %d", len(rows))
	}
	for i, r := range rows {
		if r.CallID != fmt.Sprintf("c%d", i) {
			t.Errorf("row %d is %s", i, r.CallID)
		}
	}
}

func testDuplicate(t *testing.T, s records.Store) {
	tid := turn(t)
	first := NewRecord(tid, "c1", "files.read")
	if err := s.Begin(ctx(t), first); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		rep := NewRecord(tid, "c1", "files.write")
		if err := s.Begin(ctx(t), rep); !errors.Is(err, records.ErrDuplicateCall) {
			t.Fatalf("repeat Begin = %v, want ErrDuplicateCall", err)
		}
		if rep.Sequence <= first.Sequence || !rep.Duplicate {
			t.Fatalf("repeat row not recorded: %+v", rep)
		}
		// The repeat row is final already.
		err := s.Complete(ctx(t), rep.AttemptID, records.Completion{Status: sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED, FinishedAt: time.Now()})
		if !errors.Is(err, records.ErrCompleted) {
			t.Fatalf("Complete of a duplicate row = %v, want ErrCompleted", err)
		}
	}
	// The same call id in another turn is a different call.
	if err := s.Begin(ctx(t), NewRecord(tid+"-2", "c1", "files.read")); err != nil {
		t.Fatalf("same call id, other turn: %v", err)
	}
	rows := list(t, s, tid)
	if len(rows) != 3 {
		t.Fatalf("rows = %d, want 3 (one per attempt)", len(rows))
	}
	if rows[0].Duplicate || rows[0].Status != sharedosv1.OperationStatus_OPERATION_STATUS_PENDING {
		t.Errorf("first row = %+v", rows[0])
	}
	for _, r := range rows[1:] {
		if !r.Duplicate || r.Status != sharedosv1.OperationStatus_OPERATION_STATUS_DENIED || r.Code != outcome.DuplicateCall ||
			r.FinishedAt.IsZero() || r.RequestedTool != "files.write" {
			t.Errorf("repeat row = %+v", r)
		}
	}
}

// testBeginNew: BeginNew writes a call id's first row as Begin does,
// marked abandoned, and nothing for one the turn has; Begin after it (the
// call arriving late) writes nothing either. Concurrently, exactly one of
// them writes the first row, and no repeat row follows an abandonment.
func testBeginNew(t *testing.T, s records.Store) {
	tid := turn(t)
	first := NewRecord(tid, "c1", "files.read")
	if err := s.BeginNew(ctx(t), first); err != nil {
		t.Fatal(err)
	}
	if first.Sequence == 0 || first.Status != sharedosv1.OperationStatus_OPERATION_STATUS_PENDING {
		t.Fatalf("first row = %+v", first)
	}
	if err := s.BeginNew(ctx(t), NewRecord(tid, "c1", "files.read")); !errors.Is(err, records.ErrRecorded) {
		t.Fatalf("BeginNew of a recorded call id = %v, want ErrRecorded", err)
	}
	if err := s.Begin(ctx(t), NewRecord(tid, "c1", "files.read")); !errors.Is(err, records.ErrRecorded) {
		t.Fatalf("Begin after an abandonment = %v, want ErrRecorded (the late call of the same attempt)", err)
	}
	if err := s.Begin(ctx(t), NewRecord(tid, "c2", "files.read")); err != nil {
		t.Fatal(err)
	}
	if err := s.BeginNew(ctx(t), NewRecord(tid, "c2", "files.read")); !errors.Is(err, records.ErrRecorded) {
		t.Fatalf("BeginNew after Begin = %v, want ErrRecorded", err)
	}
	if rows := list(t, s, tid); len(rows) != 2 || rows[0].CallID != "c1" || rows[1].CallID != "c2" || rows[0].Duplicate || rows[1].Duplicate ||
		!rows[0].Abandoned || rows[1].Abandoned {
		t.Fatalf("rows = %+v, want c1 (abandoned) and c2 once each", rows)
	}

	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			r := NewRecord(tid, "race", "files.read")
			if i%2 == 0 {
				errs <- s.BeginNew(ctx(t), r)
				return
			}
			if err := s.Begin(ctx(t), r); !errors.Is(err, records.ErrDuplicateCall) {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	won, recorded := 0, 0
	for err := range errs {
		switch {
		case err == nil:
			won++
		case errors.Is(err, records.ErrRecorded):
			recorded++
		default:
			t.Errorf("Begin: %v", err)
		}
	}
	var firstRows, dupRows int
	abandonedFirst := false
	for _, r := range list(t, s, tid) {
		switch {
		case r.CallID != "race":
		case r.Duplicate:
			dupRows++
		default:
			firstRows++
			abandonedFirst = r.Abandoned
		}
	}
	if abandonedFirst && dupRows > 0 {
		t.Fatalf("%d repeat rows after an abandonment: the late calls are the same attempt", dupRows)
	}
	// One first row; BeginNew wrote nothing else, each Begin that lost its
	// duplicate row.
	if won != 1 || firstRows != 1 || dupRows+recorded+won != n {
		t.Fatalf("first=%d (rows %d), BeginNew refused=%d, duplicate rows=%d, want 1 first row and one row per Begin that lost",
			won, firstRows, recorded, dupRows)
	}
}

func testConcurrentDuplicates(t *testing.T, s records.Store) {
	tid := turn(t)
	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() { errs <- s.Begin(ctx(t), NewRecord(tid, "same", "files.read")) })
	}
	wg.Wait()
	close(errs)
	var ok, dup int
	for err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, records.ErrDuplicateCall):
			dup++
		default:
			t.Errorf("Begin: %v", err)
		}
	}
	if ok != 1 || dup != n-1 {
		t.Fatalf("first=%d duplicates=%d, want 1 and %d", ok, dup, n-1)
	}
	if rows := list(t, s, tid); len(rows) != n {
		t.Fatalf("rows = %d, want %d", len(rows), n)
	}
}

func testCompletedFinal(t *testing.T, s records.Store) {
	tid := turn(t)
	r := NewRecord(tid, "c1", "files.read")
	if err := s.Begin(ctx(t), r); err != nil {
		t.Fatal(err)
	}
	done := records.Completion{Status: sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED, FinishedAt: time.Now()}
	if err := s.Complete(ctx(t), r.AttemptID, done); err != nil {
		t.Fatal(err)
	}
	again := records.Completion{Status: sharedosv1.OperationStatus_OPERATION_STATUS_FAILED, Code: outcome.Internal, FinishedAt: time.Now()}
	if err := s.Complete(ctx(t), r.AttemptID, again); !errors.Is(err, records.ErrCompleted) {
		t.Fatalf("second Complete = %v, want ErrCompleted", err)
	}
	if rows := list(t, s, tid); rows[0].Status != sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED {
		t.Fatalf("completed row rewritten: %+v", rows[0])
	}
}

func testCompleteUnknown(t *testing.T, s records.Store) {
	err := s.Complete(ctx(t), records.NewAttemptID(), records.Completion{Status: sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED, FinishedAt: time.Now()})
	if !errors.Is(err, records.ErrNotFound) {
		t.Fatalf("Complete(unknown) = %v, want ErrNotFound", err)
	}
}

// testCompleteTurn: a completion naming a turn ends only that turn's row;
// another turn's attempt id is not found, and its row stays pending.
func testCompleteTurn(t *testing.T, s records.Store) {
	tid := turn(t)
	r := NewRecord(tid, "c1", "files.read")
	if err := s.Begin(ctx(t), r); err != nil {
		t.Fatal(err)
	}
	other := records.Completion{Status: sharedosv1.OperationStatus_OPERATION_STATUS_FAILED, Code: outcome.RecordUnavailable,
		FinishedAt: time.Now(), TurnID: tid + "-other"}
	if err := s.Complete(ctx(t), r.AttemptID, other); !errors.Is(err, records.ErrNotFound) {
		t.Fatalf("Complete of another turn = %v, want ErrNotFound", err)
	}
	if rows := list(t, s, tid); rows[0].Status != sharedosv1.OperationStatus_OPERATION_STATUS_PENDING {
		t.Fatalf("row completed by another turn's completion: %+v", rows[0])
	}
	own := other
	own.TurnID = tid
	if err := s.Complete(ctx(t), r.AttemptID, own); err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(ctx(t), r.AttemptID, own); !errors.Is(err, records.ErrCompleted) {
		t.Fatalf("second Complete of its turn = %v, want ErrCompleted", err)
	}
	if rows := list(t, s, tid); rows[0].Code != outcome.RecordUnavailable {
		t.Fatalf("row = %+v, want failed/record_unavailable", rows[0])
	}
}

func testRejectsMalformed(t *testing.T, s records.Store) {
	tid := turn(t)
	for name, mut := range map[string]func(r *records.Record){
		"no attempt id": func(r *records.Record) { r.AttemptID = "" },
		"no turn":       func(r *records.Record) { r.TurnID = "" },
		"no call":       func(r *records.Record) { r.CallID = "" },
		"no start":      func(r *records.Record) { r.StartedAt = time.Time{} },
	} {
		r := NewRecord(tid, "c-"+name, "files.read")
		mut(r)
		if err := s.Begin(ctx(t), r); !errors.Is(err, records.ErrInvalid) {
			t.Errorf("%s: Begin = %v, want ErrInvalid", name, err)
		}
	}
	r := NewRecord(tid, "ok", "files.read")
	if err := s.Begin(ctx(t), r); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]records.Completion{
		"pending":     {Status: sharedosv1.OperationStatus_OPERATION_STATUS_PENDING, FinishedAt: time.Now()},
		"interrupted": {Status: sharedosv1.OperationStatus_OPERATION_STATUS_INTERRUPTED, FinishedAt: time.Now()},
		"no finish":   {Status: sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED},
	} {
		if err := s.Complete(ctx(t), r.AttemptID, c); !errors.Is(err, records.ErrInvalid) {
			t.Errorf("%s: Complete = %v, want ErrInvalid", name, err)
		}
	}
	if rows := list(t, s, tid); len(rows) != 1 {
		t.Fatalf("malformed records were stored: %d rows", len(rows))
	}
}

func testHostileText(t *testing.T, s records.Store) {
	tid := turn(t)
	hostile := []string{
		"files\x00read",
		"f\xffiles.read",
		"fílés.read",
		"files read",
		strings.Repeat("a", 129),
		strings.Repeat("\x00", 1000),
		"",
	}
	for i, name := range hostile {
		r := NewRecord(tid, fmt.Sprintf("c%d", i), name)
		r.Principal = "mallory\x00"
		if err := s.Begin(ctx(t), r); err != nil {
			t.Fatalf("%q: Begin = %v", name, err)
		}
		c := records.Completion{Status: sharedosv1.OperationStatus_OPERATION_STATUS_DENIED, Code: outcome.ToolUnavailable,
			Reason: "unknown tool " + name + "\xfe", FinishedAt: time.Now()}
		if err := s.Complete(ctx(t), r.AttemptID, c); err != nil {
			t.Fatalf("%q: Complete = %v", name, err)
		}
	}
	rows := list(t, s, tid)
	if len(rows) != len(hostile) {
		t.Fatalf("rows = %d", len(rows))
	}
	for i, r := range rows {
		esc, sum := records.EscapeTool(hostile[i])
		if r.RequestedTool != esc || r.RequestedToolSHA256 != sum {
			t.Errorf("%q stored as %q/%s, want %q/%s", hostile[i], r.RequestedTool, r.RequestedToolSHA256, esc, sum)
		}
		if len(r.RequestedTool) > records.MaxToolBytes || strings.ContainsRune(r.RequestedTool, 0) || strings.ContainsRune(r.Principal, 0) {
			t.Errorf("unescaped or oversize text stored: %q / %q", r.RequestedTool, r.Principal)
		}
	}
}

// testHostileTextParked: what Park writes (the round's resolution, decision
// and policy revision) is stored as Begin's and Complete's text is — valid
// UTF-8 without NUL, capped — on every store, not refused by one and kept
// raw by another.
func testHostileTextParked(t *testing.T, s records.Store) {
	tid := turn(t)
	hostile := []string{"files\x00read", "f\xffiles.read", strings.Repeat("a", records.MaxTextBytes+1), strings.Repeat("\x00", 1000)}
	for i, text := range hostile {
		r := NewRecord(tid, fmt.Sprintf("c%d", i), "files.read")
		if err := s.Begin(ctx(t), r); err != nil {
			t.Fatal(err)
		}
		w := records.Wait{Round: 1, TTL: time.Minute, ResolvedTool: text, DecisionID: text + "-decision", PolicyRevision: text + "-revision"}
		if _, err := s.Park(ctx(t), r.AttemptID, w); err != nil {
			t.Fatalf("%q: Park = %v", text, err)
		}
	}
	rows := list(t, s, tid)
	if len(rows) != len(hostile) {
		t.Fatalf("rows = %d", len(rows))
	}
	for i, r := range rows {
		for name, got := range map[string]string{"resolved tool": r.ResolvedTool, "decision id": r.DecisionID, "policy revision": r.PolicyRevision} {
			if len(got) > records.MaxTextBytes || !utf8.ValidString(got) || strings.ContainsRune(got, 0) || got == "" {
				t.Errorf("%.40q (%d bytes): %s stored as %.40q (%d bytes): want it escaped and capped", hostile[i], len(hostile[i]), name, got, len(got))
			}
		}
		want := records.Completion{ResolvedTool: hostile[i]}
		want.Sanitize()
		if r.ResolvedTool != want.ResolvedTool {
			t.Errorf("%.40q (%d bytes): resolved tool stored as %.40q, want %.40q (as Complete stores it)", hostile[i], len(hostile[i]), r.ResolvedTool, want.ResolvedTool)
		}
	}
}

func testReconcile(t *testing.T, s records.Store) {
	tid := turn(t)
	old := NewRecord(tid, "old", "files.read")
	old.StartedAt = time.Now().Add(-time.Hour).UTC().Truncate(time.Microsecond)
	oldDone := NewRecord(tid, "old-done", "files.read")
	oldDone.StartedAt = old.StartedAt
	fresh := NewRecord(tid, "fresh", "files.read")
	for _, r := range []*records.Record{old, oldDone, fresh} {
		if err := s.Begin(ctx(t), r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Complete(ctx(t), oldDone.AttemptID, records.Completion{Status: sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED, FinishedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	n, err := s.Reconcile(ctx(t), time.Now().Add(-time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	// Only the old pending row qualifies: the completed one is final and the
	// fresh one may still be in flight.
	if n != 1 {
		t.Fatalf("Reconcile marked %d rows, want 1", n)
	}
	rows := list(t, s, tid)
	want := []sharedosv1.OperationStatus{
		sharedosv1.OperationStatus_OPERATION_STATUS_INTERRUPTED,
		sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED,
		sharedosv1.OperationStatus_OPERATION_STATUS_PENDING,
	}
	for i, r := range rows {
		if r.Status != want[i] {
			t.Errorf("%s: status %v, want %v", r.CallID, r.Status, want[i])
		}
	}
	if rows[0].FinishedAt.IsZero() || rows[0].Reason != records.InterruptedReason {
		t.Errorf("interrupted row = %+v", rows[0])
	}
	// An interrupted row is final: a late completion cannot overwrite it.
	late := records.Completion{Status: sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED, FinishedAt: time.Now()}
	if err := s.Complete(ctx(t), old.AttemptID, late); !errors.Is(err, records.ErrCompleted) {
		t.Fatalf("Complete after interrupt = %v, want ErrCompleted", err)
	}
}

func testReconcileInstance(t *testing.T, s records.Store) {
	tid := turn(t)
	restart := time.Now()
	mineOld := NewRecord(tid, "mine-old", "files.read")
	mineOld.InstanceID, mineOld.StartedAt = "pod-a", restart.Add(-time.Second).UTC()
	mineNew := NewRecord(tid, "mine-new", "files.read")
	mineNew.InstanceID, mineNew.StartedAt = "pod-a", restart.Add(time.Second).UTC()
	other := NewRecord(tid, "other", "files.read")
	other.InstanceID, other.StartedAt = "pod-b", restart.Add(-time.Second).UTC()
	for _, r := range []*records.Record{mineOld, mineNew, other} {
		if err := s.Begin(ctx(t), r); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := s.ReconcileInstance(ctx(t), "", restart); err != nil || n != 0 {
		t.Fatalf("ReconcileInstance(\"\") = %d, %v; an empty id must match nothing", n, err)
	}
	n, err := s.ReconcileInstance(ctx(t), "pod-a", restart)
	if err != nil || n != 1 {
		t.Fatalf("ReconcileInstance = %d, %v, want 1", n, err)
	}
	want := map[string]sharedosv1.OperationStatus{
		"mine-old": sharedosv1.OperationStatus_OPERATION_STATUS_INTERRUPTED,
		"mine-new": sharedosv1.OperationStatus_OPERATION_STATUS_PENDING,
		"other":    sharedosv1.OperationStatus_OPERATION_STATUS_PENDING,
	}
	for _, r := range list(t, s, tid) {
		if r.Status != want[r.CallID] {
			t.Errorf("%s: %v, want %v", r.CallID, r.Status, want[r.CallID])
		}
	}
}

func testRevocations(t *testing.T, s records.Store) {
	now := time.Now().UTC()
	if got, err := s.TurnRevoked(ctx(t), "t-open"); err != nil || got {
		t.Fatalf("TurnRevoked(never revoked) = %v, %v", got, err)
	}
	for _, until := range []time.Time{now.Add(time.Hour), now.Add(-time.Hour)} { // a repeat keeps the later until
		if err := s.RevokeTurn(ctx(t), "t-closed", until); err != nil {
			t.Fatalf("RevokeTurn: %v", err)
		}
	}
	if err := s.RevokeTurn(ctx(t), "t-old", now.Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	for _, turn := range []string{"t-closed", "t-old"} {
		if got, err := s.TurnRevoked(ctx(t), turn); err != nil || !got {
			t.Fatalf("TurnRevoked(%s) = %v, %v, want true", turn, got, err)
		}
	}
	n, err := s.ForgetRevocations(ctx(t), now)
	if err != nil || n != 1 {
		t.Fatalf("ForgetRevocations = %d, %v, want 1 (only t-old is past its until)", n, err)
	}
	if got, _ := s.TurnRevoked(ctx(t), "t-closed"); !got {
		t.Error("a revocation was forgotten before its until")
	}
	if got, _ := s.TurnRevoked(ctx(t), "t-old"); got {
		t.Error("a revocation past its until was kept")
	}
}

func testPendingInTurn(t *testing.T, s records.Store) {
	for i, call := range []string{"c1", "c2", "c3"} {
		r := NewRecord("t-p", call, "files.read")
		if err := s.Begin(ctx(t), r); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if err := s.Complete(ctx(t), r.AttemptID, records.Completion{
				Status: sharedosv1.OperationStatus_OPERATION_STATUS_CANCELLED, Code: outcome.Cancelled, FinishedAt: time.Now().UTC(),
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.Begin(ctx(t), NewRecord("t-other", "c1", "files.read")); err != nil {
		t.Fatal(err)
	}
	if n, err := s.PendingInTurn(ctx(t), "t-p"); err != nil || n != 2 {
		t.Fatalf("PendingInTurn = %d, %v, want 2", n, err)
	}
}

// testExport: pages run in sequence order from the first record since a
// time or after a sequence, pending records included (the pipeline stops
// before them); the ledger takes an archive only when its range holds
// exactly its rows, none pending.
func testExport(t *testing.T, s records.Store) {
	c := ctx(t)
	tr := turn(t)
	var rs []*records.Record
	for i := range 5 {
		r := NewRecord(tr, fmt.Sprintf("call-%d", i), "files.read")
		r.StartedAt = r.StartedAt.Add(time.Duration(i) * time.Second)
		if err := s.Begin(c, r); err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	complete := func(r *records.Record) {
		t.Helper()
		if err := s.Complete(c, r.AttemptID, records.Completion{Status: sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED, FinishedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	complete(rs[0])
	complete(rs[1])
	complete(rs[3])
	complete(rs[4])
	seqs := func(rows []records.Record) []int64 {
		out := make([]int64, len(rows))
		for i := range rows {
			out[i] = rows[i].Sequence
		}
		return out
	}
	from, rows, err := s.ExportPage(c, time.Time{}, 0, 10)
	if err != nil || from != rs[0].Sequence-1 || len(rows) != 5 || rows[2].Status != sharedosv1.OperationStatus_OPERATION_STATUS_PENDING {
		t.Fatalf("ExportPage from the start = %d %v %v", from, seqs(rows), err)
	}
	if from, rows, err := s.ExportPage(c, rs[3].StartedAt, 0, 10); err != nil || from != rs[3].Sequence-1 || len(rows) != 2 {
		t.Fatalf("ExportPage since the fourth record = %d %v %v", from, seqs(rows), err)
	}
	if _, rows, err := s.ExportPage(c, time.Time{}, rs[1].Sequence, 2); err != nil || len(rows) != 2 || rows[0].Sequence != rs[2].Sequence {
		t.Fatalf("ExportPage after the second record = %v %v", seqs(rows), err)
	}
	if from, rows, err := s.ExportPage(c, rs[4].StartedAt.Add(time.Hour), 0, 10); err != nil || len(rows) != 0 || from < rs[4].Sequence {
		t.Fatalf("ExportPage since after the last record = %d %v %v", from, seqs(rows), err)
	}
	sum := strings.Repeat("ab", 32)
	base := rs[0].Sequence - 1
	set := func(rows ...*records.Record) string {
		d := exportset.New()
		for _, r := range rows {
			d.Add(r.Sequence)
		}
		return d.Sum()
	}
	if _, err := s.RecordExport(c, records.Export{After: base, Through: rs[1].Sequence, Rows: 2, SHA256: sum, RecordsDigest: set(rs[0], rs[1])}); err != nil {
		t.Fatalf("RecordExport of two finished records: %v", err)
	}
	for name, e := range map[string]records.Export{
		"a range with a pending record": {After: base, Through: rs[3].Sequence, Rows: 3, SHA256: sum, RecordsDigest: set(rs[0], rs[1], rs[3])},
		"too few rows":                  {After: rs[2].Sequence, Through: rs[4].Sequence, Rows: 1, SHA256: sum, RecordsDigest: set(rs[3])},
		"too many rows":                 {After: rs[2].Sequence, Through: rs[4].Sequence, Rows: 3, SHA256: sum, RecordsDigest: set(rs[3], rs[4])},
		// The count is right, the set is not: an archive without a record
		// the range holds (one in flight when it was read) and with one it
		// does not.
		"another set of records": {After: base, Through: rs[1].Sequence, Rows: 2, SHA256: sum, RecordsDigest: set(rs[0], rs[2])},
	} {
		if _, err := s.RecordExport(c, e); !errors.Is(err, records.ErrExportMismatch) {
			t.Errorf("RecordExport of %s = %v, want ErrExportMismatch", name, err)
		}
	}
	complete(rs[2])
	if _, err := s.RecordExport(c, records.Export{After: base, Through: rs[4].Sequence, Rows: 5, SHA256: sum, RecordsDigest: set(rs...)}); err != nil {
		t.Fatalf("RecordExport once all are finished: %v", err)
	}
}

// testProgressCount: the completion's progress count is kept with the row.
// testKindKept: what an attempt is survives the round trip.
func testKindKept(t *testing.T, s records.Store) {
	c := ctx(t)
	for i, k := range []sharedosv1.CallKind{sharedosv1.CallKind_CALL_KIND_UNSPECIFIED, sharedosv1.CallKind_CALL_KIND_PROMPT,
		sharedosv1.CallKind_CALL_KIND_RESOURCE} {
		r := NewRecord(turn(t), fmt.Sprintf("call-%d", i), "test://static-text")
		r.Kind = k
		if err := s.Begin(c, r); err != nil {
			t.Fatal(err)
		}
	}
	rows := list(t, s, turn(t))
	if len(rows) != 3 || rows[0].Kind != sharedosv1.CallKind_CALL_KIND_UNSPECIFIED || rows[1].Kind != sharedosv1.CallKind_CALL_KIND_PROMPT ||
		rows[2].Kind != sharedosv1.CallKind_CALL_KIND_RESOURCE || rows[2].ToProto().GetKind() != sharedosv1.CallKind_CALL_KIND_RESOURCE {
		t.Fatalf("kinds %+v", rows)
	}
}

func testProgressCount(t *testing.T, s records.Store) {
	c := ctx(t)
	r := NewRecord(turn(t), "call-1", "files.read")
	if err := s.Begin(c, r); err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(c, r.AttemptID, records.Completion{Status: sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED,
		FinishedAt: time.Now(), ProgressCount: 3}); err != nil {
		t.Fatal(err)
	}
	if rows := list(t, s, r.TurnID); len(rows) != 1 || rows[0].ProgressCount != 3 || rows[0].ToProto().GetProgressCount() != 3 {
		t.Fatalf("rows %+v, want progress count 3", rows)
	}
}

// park begins r and parks it for round 1 (one progress report so far).
func park(t *testing.T, s records.Store, r *records.Record, ttl time.Duration) time.Time {
	t.Helper()
	if err := s.Begin(ctx(t), r); err != nil {
		t.Fatal(err)
	}
	until, err := s.Park(ctx(t), r.AttemptID, records.Wait{Round: 1, Progress: 1, TTL: ttl, ResolvedTool: "files.read", DecisionID: "dec-1"})
	if err != nil {
		t.Fatalf("Park: %v", err)
	}
	return until
}

func resumption(r *records.Record, round int32, instance string) records.Resumption {
	return records.Resumption{AttemptID: r.AttemptID, TurnID: r.TurnID, RequestedToolSHA256: r.RequestedToolSHA256,
		ArgumentsDigest: r.ArgumentsDigest, Kind: r.Kind, Round: round, InstanceID: instance}
}

// testInputRounds: one attempt asks twice and then succeeds — one row,
// with its rounds and every round's progress, waiting between rounds.
func testInputRounds(t *testing.T, s records.Store) {
	c := ctx(t)
	r := NewRecord(turn(t), "call-1", "files.read")
	until := park(t, s, r, time.Minute)
	if d := time.Until(until); d < 50*time.Second || d > 70*time.Second {
		t.Fatalf("Park until %v: %v from now, want about a minute", until, d)
	}
	rows := list(t, s, r.TurnID)
	if len(rows) != 1 || rows[0].Status != sharedosv1.OperationStatus_OPERATION_STATUS_PENDING || rows[0].WaitingUntil.IsZero() ||
		rows[0].InputRounds != 1 || rows[0].ToProto().GetWaitingUntil() == nil {
		t.Fatalf("parked row %+v: want pending, waiting, 1 round", rows)
	}
	if rows[0].ResolvedTool != "files.read" || rows[0].DecisionID != "dec-1" {
		t.Fatalf("parked row %+v: want the round's resolution and decision", rows[0])
	}
	if _, err := s.Park(c, r.AttemptID, records.Wait{Round: 2, TTL: time.Minute}); !errors.Is(err, records.ErrNotWaiting) {
		t.Fatalf("Park of a waiting row: %v, want ErrNotWaiting", err)
	}
	if call, err := s.Resume(c, resumption(r, 1, "kernel-2")); err != nil || call != r.CallID {
		t.Fatalf("Resume = %q, %v; want the row's call id %q", call, err, r.CallID)
	}
	if _, err := s.Park(c, r.AttemptID, records.Wait{Round: 2, Progress: 2, TTL: time.Minute}); err != nil {
		t.Fatalf("second Park: %v", err)
	}
	if _, err := s.Resume(c, resumption(r, 2, "kernel-1")); err != nil {
		t.Fatalf("second Resume: %v", err)
	}
	if err := s.Complete(c, r.AttemptID, records.Completion{Status: sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED,
		FinishedAt: time.Now(), ProgressCount: 1}); err != nil {
		t.Fatal(err)
	}
	rows = list(t, s, r.TurnID)
	if len(rows) != 1 {
		t.Fatalf("%d rows, want the one attempt", len(rows))
	}
	got := rows[0]
	if got.Status != sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED || got.InputRounds != 2 || got.ProgressCount != 4 ||
		!got.WaitingUntil.IsZero() || got.ResumedBy != "kernel-1" || got.ResumedAt.IsZero() || got.ToProto().GetInputRounds() != 2 {
		t.Fatalf("row %+v: want succeeded, 2 rounds, 4 progress reports, resumed by kernel-1", got)
	}
	if _, err := s.Park(c, r.AttemptID, records.Wait{Round: 3, TTL: time.Minute}); !errors.Is(err, records.ErrNotWaiting) {
		t.Fatalf("Park of a completed row: %v, want ErrNotWaiting", err)
	}
}

// testResumeExact: a wait is ended only by a resumption matching it in
// every part (its kind too), and only once (a replayed state finds
// nothing).
func testResumeExact(t *testing.T, s records.Store) {
	c := ctx(t)
	r := NewRecord(turn(t), "call-1", "files.read")
	park(t, s, r, time.Minute)
	other := NewRecord(turn(t), "call-2", "files.write")
	wrong := map[string]records.Resumption{}
	for name, edit := range map[string]func(*records.Resumption){
		"attempt": func(x *records.Resumption) { x.AttemptID = other.AttemptID },
		"turn":    func(x *records.Resumption) { x.TurnID = "another-turn" },
		"tool":    func(x *records.Resumption) { x.RequestedToolSHA256 = other.RequestedToolSHA256 + "0" },
		"arguments": func(x *records.Resumption) {
			x.ArgumentsDigest = redact.ArgumentsDigest([]byte(`{"path":"/private/a"}`))
		},
		"round": func(x *records.Resumption) { x.Round = 2 },
		"kind":  func(x *records.Resumption) { x.Kind = sharedosv1.CallKind_CALL_KIND_PROMPT },
	} {
		x := resumption(r, 1, "kernel-2")
		edit(&x)
		wrong[name] = x
	}
	for name, x := range wrong {
		if _, err := s.Resume(c, x); !errors.Is(err, records.ErrNotWaiting) {
			t.Errorf("Resume with another %s: %v, want ErrNotWaiting", name, err)
		}
	}
	if _, err := s.Resume(c, resumption(r, 1, "kernel-2")); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if _, err := s.Resume(c, resumption(r, 1, "kernel-2")); !errors.Is(err, records.ErrNotWaiting) {
		t.Fatalf("replayed Resume: %v, want ErrNotWaiting", err)
	}

	// A prompt's wait is not continued by a tools/call of the same name
	// and arguments: the kernel would run the tool's handler with the
	// prompt provider's state and end a record of kind prompt with it.
	prompt := NewRecord(turn(t), "call-3", "files.read")
	prompt.Kind = sharedosv1.CallKind_CALL_KIND_PROMPT
	park(t, s, prompt, time.Minute)
	asTool := resumption(prompt, 1, "kernel-2")
	asTool.Kind = sharedosv1.CallKind_CALL_KIND_UNSPECIFIED
	if _, err := s.Resume(c, asTool); !errors.Is(err, records.ErrNotWaiting) {
		t.Errorf("a tool's Resume of a waiting prompt: %v, want ErrNotWaiting", err)
	}
	if _, err := s.Resume(c, resumption(prompt, 1, "kernel-2")); err != nil {
		t.Fatalf("the prompt's own Resume after a tool's was refused: %v (it must still wait)", err)
	}
}

// testRefusalInDoubt: a refusal of a resumption in doubt (ResumedBy) ends
// the attempt only where that resumption took effect: not while it still
// waits, not once another kernel resumed it; it does once that kernel did.
func testRefusalInDoubt(t *testing.T, s records.Store) {
	c := ctx(t)
	refusal := records.Completion{Status: sharedosv1.OperationStatus_OPERATION_STATUS_FAILED, Code: outcome.RecordUnavailable,
		FinishedAt: time.Now(), TurnID: turn(t), ResumedBy: "kernel-1"}
	waiting := NewRecord(turn(t), "call-1", "files.read")
	park(t, s, waiting, time.Minute)
	if err := s.Complete(c, waiting.AttemptID, refusal); !errors.Is(err, records.ErrNotFound) {
		t.Fatalf("refusal of a waiting attempt: %v, want ErrNotFound", err)
	}
	if _, err := s.Resume(c, resumption(waiting, 1, "kernel-2")); err != nil {
		t.Fatalf("Resume after the refusal: %v (the attempt must still wait)", err)
	}
	if err := s.Complete(c, waiting.AttemptID, refusal); !errors.Is(err, records.ErrNotFound) {
		t.Fatalf("refusal of an attempt another kernel resumed: %v, want ErrNotFound", err)
	}
	taken := NewRecord(turn(t), "call-2", "files.read")
	park(t, s, taken, time.Minute)
	if _, err := s.Resume(c, resumption(taken, 1, "kernel-1")); err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(c, taken.AttemptID, refusal); err != nil {
		t.Fatalf("refusal of the attempt its resumption took: %v", err)
	}
	rows := list(t, s, turn(t))
	if len(rows) != 2 || rows[0].Status != sharedosv1.OperationStatus_OPERATION_STATUS_PENDING || rows[1].Code != outcome.RecordUnavailable {
		t.Fatalf("rows %+v: want call-1 pending (kernel-2 runs it), call-2 refused", rows)
	}
}

func testConcurrentResumes(t *testing.T, s records.Store) {
	r := NewRecord(turn(t), "call-1", "files.read")
	park(t, s, r, time.Minute)
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := 0
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.Resume(ctx(t), resumption(r, 1, "kernel-2"))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won++
			case !errors.Is(err, records.ErrNotWaiting):
				t.Errorf("Resume: %v", err)
			}
		}()
	}
	wg.Wait()
	if won != 1 {
		t.Fatalf("%d concurrent resumptions took the attempt, want exactly 1", won)
	}
}

// testWaitExpires: a wait that ran out ends failed/timeout and can no
// longer be resumed; one that has not is left alone.
func testWaitExpires(t *testing.T, s records.Store) {
	c := ctx(t)
	short := NewRecord(turn(t), "short", "files.read")
	long := NewRecord(turn(t), "long", "files.read")
	until := park(t, s, short, time.Millisecond)
	park(t, s, long, time.Hour)
	for time.Now().Before(until.Add(time.Millisecond)) { // the store's clock is past until
		time.Sleep(time.Millisecond)
	}
	n, err := s.ExpireWaiting(c)
	if err != nil || n != 1 {
		t.Fatalf("ExpireWaiting = %d, %v, want 1", n, err)
	}
	if _, err := s.Resume(c, resumption(short, 1, "kernel-2")); !errors.Is(err, records.ErrNotWaiting) {
		t.Fatalf("Resume of an expired wait: %v, want ErrNotWaiting", err)
	}
	for _, row := range list(t, s, short.TurnID) {
		switch row.CallID {
		case "short":
			if row.Status != sharedosv1.OperationStatus_OPERATION_STATUS_FAILED || row.Code != outcome.Timeout ||
				row.Reason != records.ExpiredWaitReason || row.FinishedAt.IsZero() || !row.WaitingUntil.IsZero() {
				t.Errorf("expired row %+v, want failed/timeout", row)
			}
		case "long":
			if row.Status != sharedosv1.OperationStatus_OPERATION_STATUS_PENDING || row.WaitingUntil.IsZero() {
				t.Errorf("row still within its wait %+v, want pending and waiting", row)
			}
		}
	}
}

// testEndedRound: a round that can no longer be answered gives its row's
// one outcome — a wait past its end is ended failed/timeout by EndedRound
// itself or by ExpireWaiting, whichever comes first, and the other finds
// it ended — while a round still open, another round, another call's
// tool or arguments, another turn or a row running a resumption give
// nothing and are left as they are.
func testEndedRound(t *testing.T, s records.Store) {
	c := ctx(t)
	timedOut := func(name string, row records.Record) {
		t.Helper()
		if row.Status != sharedosv1.OperationStatus_OPERATION_STATUS_FAILED || row.Code != outcome.Timeout ||
			row.Reason != records.ExpiredWaitReason || row.FinishedAt.IsZero() || !row.WaitingUntil.IsZero() {
			t.Errorf("%s: row %+v, want failed/timeout", name, row)
		}
	}

	// Past its wait (a TTL of 0 ends it as it begins), not yet swept.
	first := NewRecord(turn(t), "first", "files.read")
	park(t, s, first, 0)
	row, err := s.EndedRound(c, resumption(first, 1, "kernel-2"))
	if err != nil || row.AttemptID != first.AttemptID || row.CallID != "first" || row.DecisionID != "dec-1" {
		t.Fatalf("EndedRound of an unswept expired wait = %+v, %v: want its row", row, err)
	}
	timedOut("ended by EndedRound", row)
	if n, err := s.ExpireWaiting(c); err != nil || n != 0 {
		t.Fatalf("ExpireWaiting after EndedRound = %d, %v, want 0", n, err)
	}

	// Swept first.
	swept := NewRecord(turn(t), "swept", "files.read")
	park(t, s, swept, 0)
	if n, err := s.ExpireWaiting(c); err != nil || n != 1 {
		t.Fatalf("ExpireWaiting = %d, %v, want 1", n, err)
	}
	if row, err = s.EndedRound(c, resumption(swept, 1, "kernel-2")); err != nil || row.AttemptID != swept.AttemptID {
		t.Fatalf("EndedRound of a swept wait = %+v, %v: want its row", row, err)
	}
	timedOut("swept", row)

	// Still open, or not this round's: nothing, and the wait goes on.
	open := NewRecord(turn(t), "open", "files.read")
	park(t, s, open, time.Hour)
	names := map[string]records.Resumption{"an open wait": resumption(open, 1, "kernel-2")}
	for name, edit := range map[string]func(*records.Resumption){
		"another round": func(x *records.Resumption) { x.Round = 2 },
		"another turn":  func(x *records.Resumption) { x.TurnID = "another-turn" },
		"another tool":  func(x *records.Resumption) { x.RequestedToolSHA256 += "0" },
		"other arguments": func(x *records.Resumption) {
			x.ArgumentsDigest = redact.ArgumentsDigest([]byte(`{"path":"/private/a"}`))
		},
		"another kind": func(x *records.Resumption) { x.Kind = sharedosv1.CallKind_CALL_KIND_PROMPT },
	} {
		x := resumption(first, 1, "kernel-2")
		edit(&x)
		names[name] = x
	}
	for name, x := range names {
		if row, err := s.EndedRound(c, x); !errors.Is(err, records.ErrNotWaiting) {
			t.Errorf("EndedRound of %s = %+v, %v, want ErrNotWaiting", name, row, err)
		}
	}
	if _, err := s.Resume(c, resumption(open, 1, "kernel-2")); err != nil {
		t.Fatalf("Resume of the open wait after EndedRound: %v (it must still wait)", err)
	}
	if _, err := s.EndedRound(c, resumption(open, 1, "kernel-2")); !errors.Is(err, records.ErrNotWaiting) {
		t.Errorf("EndedRound of a row running its resumption: %v, want ErrNotWaiting", err)
	}
	rows := list(t, s, turn(t))
	if len(rows) != 3 || rows[2].Status != sharedosv1.OperationStatus_OPERATION_STATUS_PENDING {
		t.Fatalf("rows %+v: want the three attempts, the resumed one still pending", rows)
	}
}

// testWaitClosed: closing a turn ends its waits as cancelled (and only
// its own); a revoked turn's row cannot start waiting.
func testWaitClosed(t *testing.T, s records.Store) {
	c := ctx(t)
	tr := turn(t)
	mine := NewRecord(tr, "mine", "files.read")
	park(t, s, mine, time.Hour)
	other := NewRecord(tr+"-other", "theirs", "files.read")
	park(t, s, other, time.Hour)
	if err := s.RevokeTurn(c, tr, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	late := NewRecord(tr, "late", "files.read")
	if err := s.Begin(c, late); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Park(c, late.AttemptID, records.Wait{Round: 1, TTL: time.Hour}); !errors.Is(err, records.ErrNotWaiting) {
		t.Fatalf("Park in a revoked turn: %v, want ErrNotWaiting", err)
	}
	if n, err := s.CloseWaiting(c, tr); err != nil || n != 1 {
		t.Fatalf("CloseWaiting = %d, %v, want 1", n, err)
	}
	rows := list(t, s, tr)
	if rows[0].Status != sharedosv1.OperationStatus_OPERATION_STATUS_CANCELLED || rows[0].Code != outcome.Cancelled ||
		rows[0].Reason != records.ClosedWaitReason {
		t.Errorf("closed wait %+v, want cancelled", rows[0])
	}
	if n, err := s.PendingInTurn(c, tr); err != nil || n != 1 { // "late", still in its kernel's hands
		t.Errorf("PendingInTurn = %d, %v, want 1", n, err)
	}
	if rows := list(t, s, tr+"-other"); rows[0].Status != sharedosv1.OperationStatus_OPERATION_STATUS_PENDING {
		t.Errorf("another turn's wait was closed: %+v", rows[0])
	}
}

// testWaitNotReconciled: a waiting row is in no kernel's hands, so neither
// the age cutoff nor a restart interrupts it; once resumed it is judged by
// its resumption (time and kernel), not by when and where it began.
func testWaitNotReconciled(t *testing.T, s records.Store) {
	c := ctx(t)
	r := NewRecord(turn(t), "call-1", "files.read")
	r.StartedAt = time.Now().Add(-time.Hour).UTC()
	park(t, s, r, time.Hour)
	if n, err := s.Reconcile(c, time.Now()); err != nil || n != 0 {
		t.Fatalf("Reconcile = %d, %v: a waiting row was interrupted", n, err)
	}
	if n, err := s.ReconcileInstance(c, r.InstanceID, time.Now()); err != nil || n != 0 {
		t.Fatalf("ReconcileInstance = %d, %v: a waiting row was interrupted", n, err)
	}
	if _, err := s.Resume(c, resumption(r, 1, "kernel-2")); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Reconcile(c, time.Now().Add(-time.Minute)); err != nil || n != 0 {
		t.Fatalf("Reconcile = %d, %v: a row resumed just now was interrupted by its start time", n, err)
	}
	if n, err := s.ReconcileInstance(c, r.InstanceID, time.Now().Add(time.Minute)); err != nil || n != 0 {
		t.Fatalf("ReconcileInstance(the kernel that began it) = %d, %v: another kernel holds it now", n, err)
	}
	if n, err := s.ReconcileInstance(c, "kernel-2", time.Now().Add(time.Minute)); err != nil || n != 1 {
		t.Fatalf("ReconcileInstance(the kernel that resumed it) = %d, %v, want 1", n, err)
	}
}
