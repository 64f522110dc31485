package pipeline_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/accesscontext/accesscontexttest"
	"github.com/sharedos/toolshare/services/contract/outcome"

	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline"
	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline/grants"
	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline/records"
	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline/records/journal"
	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline/records/memory"
	"github.com/sharedos/toolshare/catalog-svc/internal/server"
)

// TestInvalidGrantsAreRefusedAndRecorded: the kernel takes a call's context
// and pin from its grant alone; every grant it did not sign for this turn,
// or that has expired, is refused — and the attempt is recorded, with no
// principal (nothing the caller asserted is written as fact).
func TestInvalidGrantsAreRefusedAndRecorded(t *testing.T) {
	forEachStore(t, options{}, func(t *testing.T, h *harness) {
		good := grantFor(t, "g", h.resolver.pin())
		parts := strings.Split(good, ".")
		payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
		altered := parts[0] + "." + base64.RawURLEncoding.EncodeToString(
			[]byte(strings.Replace(string(payload), `"engineer"`, `"admin"`, 1))) + "." + parts[2]
		other, err := grants.Generate()
		if err != nil {
			t.Fatal(err)
		}
		forged, _ := other.Issue(grants.Grant{TurnID: "g", Context: &sharedosv1.AccessContext{Principal: "mallory", Roles: []string{"admin"}},
			Tools: h.resolver.pin(), ExpiresAt: time.Now().Add(time.Hour)}, time.Now())
		expired, _ := testKeys.Issue(grants.Grant{TurnID: "g", Context: alice(), Tools: h.resolver.pin(),
			ExpiresAt: time.Now().Add(-time.Minute)}, time.Now().Add(-time.Hour))
		for name, grant := range map[string]string{
			"missing": "", "forged": forged, "altered": altered, "expired": expired,
			"other turn": grantFor(t, "another-turn", h.resolver.pin()),
		} {
			c := h.newCall("g", "files.read", `{"path":"/private/a.txt"}`)
			c.Grant = grant
			res, err := h.invoke(context.Background(), c)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			expect(t, res, denied, outcome.InvalidGrant)
		}
		if n := h.handler.calls.Load(); n != 0 {
			t.Fatalf("a handler ran %d times for refused grants", n)
		}
		if n := h.authz.calls.Load(); n != 0 {
			t.Fatalf("authz was asked %d times for refused grants", n)
		}
		rows := h.records("g")
		if len(rows) != 5 {
			t.Fatalf("%d records for 5 refused attempts", len(rows))
		}
		var expiry *grants.Refusal
		errors.As(grants.ErrExpired, &expiry)
		for _, r := range rows {
			// Only the turn's own grant, signed here and only expired, says
			// whose the call was; nothing of another is recorded.
			principal := ""
			if r.Reason == expiry.Reason {
				principal = alice().GetPrincipal()
			}
			if r.Status != denied || r.Code != outcome.InvalidGrant || r.Principal != principal || r.Reason == "" {
				t.Errorf("record = %+v", r)
			}
		}
	})
}

// TestNoticeUnderAnExpiredGrantIsRecordedAsAnswered: the bridge answers
// its client itself (failed/timeout when InvokeTool failed, or a protocol
// error at its edge) and then sends the kernel its notice, by which time
// the turn's grant may have expired. The record says what the client was
// told, not denied/invalid_grant (invariant 4: an answer never says more
// than its record; found by review). An expired grant of another turn is
// still refused.
func TestNoticeUnderAnExpiredGrantIsRecordedAsAnswered(t *testing.T) {
	forEachStore(t, options{}, func(t *testing.T, h *harness) {
		expired := func(turn string) string {
			g, err := testKeys.Issue(grants.Grant{TurnID: turn, Context: alice(), CatalogHash: testHash, Tools: h.resolver.pin(),
				ExpiresAt: time.Now().Add(-time.Minute)}, time.Now().Add(-time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			return g
		}
		for _, tc := range []struct {
			name, turn, grantTurn string
			notice                func(*sharedosv1.ToolCall)
			status                sharedosv1.OperationStatus
			code                  string
		}{
			{"abandoned", "x-abandoned", "x-abandoned",
				func(c *sharedosv1.ToolCall) { c.Abandoned, c.AbandonedCode = true, outcome.Timeout }, failed, outcome.Timeout},
			{"refused at the edge", "x-edge", "x-edge",
				func(c *sharedosv1.ToolCall) { c.EdgeRejection = "the request body is not valid UTF-8" }, failed, outcome.InvalidRequest},
			{"abandoned, another turn's grant", "x-other", "x-elsewhere",
				func(c *sharedosv1.ToolCall) { c.Abandoned, c.AbandonedCode = true, outcome.Timeout }, denied, outcome.InvalidGrant},
		} {
			c := h.newCall(tc.turn, "files.read", `{"path":"/public/a.txt"}`)
			c.Grant = expired(tc.grantTurn)
			tc.notice(c)
			res, err := h.invoke(context.Background(), c)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			rows := h.records(tc.turn)
			if len(rows) != 1 {
				t.Fatalf("%s: %d records, want 1", tc.name, len(rows))
			}
			if res.GetStatus() != tc.status || res.GetCode() != tc.code || rows[0].Status != tc.status || rows[0].Code != tc.code {
				t.Errorf("%s: answer %v/%s, record %v/%s (%s); want %v/%s", tc.name, res.GetStatus(), res.GetCode(),
					rows[0].Status, rows[0].Code, rows[0].Reason, tc.status, tc.code)
			}
			// The turn's own grant, only expired, still says whose the call
			// was: the record names its principal and catalogue.
			if ownGrant := tc.turn == tc.grantTurn; ownGrant && (rows[0].Principal != alice().GetPrincipal() || rows[0].CatalogHash != testHash) {
				t.Errorf("%s: record of principal %q, catalogue %q; want the expired grant's %q, %q", tc.name,
					rows[0].Principal, rows[0].CatalogHash, alice().GetPrincipal(), testHash)
			}
		}
		if n := h.handler.calls.Load(); n != 0 {
			t.Fatalf("a handler ran %d times for notices", n)
		}
	})
}

// TestRevokeTurn: a call in flight when its turn is revoked is cancelled
// and recorded cancelled; RevokeTurn returns only after it ended; a call
// after it is refused invalid_grant and recorded, and nothing starts.
func TestRevokeTurn(t *testing.T) {
	forEachStore(t, options{}, func(t *testing.T, h *harness) {
		ctx := context.Background()
		type answer struct {
			res *sharedosv1.ToolResult
			err error
		}
		inflight := make(chan answer, 1)
		go func() {
			res, err := h.invoke(ctx, h.newCall("r", "test.sleep", `{}`))
			inflight <- answer{res, err}
		}()
		wait(t, h.handler.started, "handler start")
		resp, err := h.kernel.RevokeTurn(ctx, &sharedosv1.RevokeTurnRequest{TurnId: "r"})
		if err != nil {
			t.Fatalf("RevokeTurn: %v", err)
		}
		if resp.GetCancelled() != 1 {
			t.Errorf("RevokeTurn cancelled %d calls, want 1", resp.GetCancelled())
		}
		// RevokeTurn has returned: the in-flight call's record is final.
		rows := h.records("r")
		if len(rows) != 1 || rows[0].Status != cancelled || rows[0].Reason != "the turn was closed" {
			t.Fatalf("records at RevokeTurn's return = %+v", rows)
		}
		a := wait(t, inflight, "the in-flight answer")
		if a.err != nil {
			t.Fatal(a.err)
		}
		expect(t, a.res, cancelled, outcome.Cancelled)

		before := h.handler.calls.Load()
		res := h.call("r", "files.read", `{"path":"/public/a.txt"}`)
		expect(t, res, denied, outcome.InvalidGrant)
		if res.GetReason() != "the turn was closed" {
			t.Errorf("reason %q", res.GetReason())
		}
		if h.handler.calls.Load() != before {
			t.Fatal("a handler started after RevokeTurn returned")
		}
		// Idempotent, and other turns go on.
		if resp, err := h.kernel.RevokeTurn(ctx, &sharedosv1.RevokeTurnRequest{TurnId: "r"}); err != nil || resp.GetCancelled() != 0 {
			t.Fatalf("second RevokeTurn = %v, %v", resp, err)
		}
		expect(t, h.call("other", "files.read", `{"path":"/public/a.txt"}`), succeeded, "")
		// A closed turn's id is never granted again.
		_, err = server.NewRuntimeServer(h.kernel).GrantTurn(ctx, &sharedosv1.GrantTurnRequest{TurnId: "r", Context: alice(),
			ExpiresAt: timestamppb.New(time.Now().Add(time.Hour))})
		if status.Code(err) != codes.FailedPrecondition {
			t.Errorf("GrantTurn of a closed turn = %v, want FailedPrecondition", err)
		}
	})
}

func TestGrantTurnRefusesBadRequests(t *testing.T) {
	forEachStore(t, options{}, func(t *testing.T, h *harness) {
		rpc := server.NewRuntimeServer(h.kernel)
		future := timestamppb.New(time.Now().Add(time.Hour))
		for name, req := range map[string]*sharedosv1.GrantTurnRequest{
			"no turn":      {Context: alice(), ExpiresAt: future},
			"no principal": {TurnId: "t", Context: &sharedosv1.AccessContext{}, ExpiresAt: future},
			"no expiry":    {TurnId: "t", Context: alice()},
			"past":         {TurnId: "t", Context: alice(), ExpiresAt: timestamppb.New(time.Now().Add(-time.Second))},
			"too long":     {TurnId: "t", Context: alice(), ExpiresAt: timestamppb.New(time.Now().Add(25 * time.Hour))},
			"model":        {TurnId: "t", Context: alice(), ExpiresAt: future, DeclaredModel: "fake\nmodel"},
			"harness":      {TurnId: "t", Context: alice(), ExpiresAt: future, Harness: &sharedosv1.HarnessIdentity{Name: strings.Repeat("h", 300)}},
		} {
			if _, err := rpc.GrantTurn(context.Background(), req); status.Code(err) != codes.InvalidArgument {
				t.Errorf("%s: GrantTurn = %v, want InvalidArgument", name, err)
			}
		}
		if _, err := rpc.RevokeTurn(context.Background(), &sharedosv1.RevokeTurnRequest{}); status.Code(err) != codes.InvalidArgument {
			t.Errorf("RevokeTurn without a turn = %v", err)
		}
	})
}

// TestStartupReconcilesOnlyStoppedKernels (issue 17, item 16): two kernels
// on one host no longer mark each other's live calls interrupted. A kernel
// starting on a journal directory marks interrupted the pending rows of
// the kernels whose claim there it could take (they stopped), never those
// of a kernel still holding its claim.
func TestStartupReconcilesOnlyStoppedKernels(t *testing.T) {
	store := memory.New()
	ctx := context.Background()
	for _, inst := range []string{"host-dead", "host-live"} {
		r := &records.Record{AttemptID: records.NewAttemptID(), CallID: "c-" + inst, TurnID: "t", InstanceID: inst, StartedAt: time.Now().UTC()}
		if err := store.Begin(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	live, err := journal.ClaimInstance(dir, "host-live")
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	dead, err := journal.ClaimInstance(dir, "host-dead")
	if err != nil {
		t.Fatal(err)
	}
	if err := dead.Close(); err != nil { // the process stopped
		t.Fatal(err)
	}
	mine, err := journal.ClaimInstance(dir, "host-new")
	if err != nil {
		t.Fatal(err)
	}
	defer mine.Close()
	k, err := pipeline.New(pipeline.Config{Resolver: &fakeResolver{}, Records: store, Authz: sharedosv1.NewAuthzServiceClient(nil),
		Grants: testKeys, Logger: quiet, InstanceID: "host-new", Instances: mine})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	if n, err := k.ReconcileAtStartup(ctx); err != nil || n != 1 {
		t.Fatalf("ReconcileAtStartup = %d, %v; want the stopped kernel's one row", n, err)
	}
	rows, _ := store.ListOperations(ctx, "t")
	for _, r := range rows {
		want := sharedosv1.OperationStatus_OPERATION_STATUS_PENDING
		if r.InstanceID == "host-dead" {
			want = sharedosv1.OperationStatus_OPERATION_STATUS_INTERRUPTED
		}
		if r.Status != want {
			t.Errorf("row of %s is %v, want %v", r.InstanceID, r.Status, want)
		}
	}
	if len(mine.Dead()) != 0 {
		t.Errorf("the reconciled kernel's claim is kept: %v", mine.Dead())
	}
}

// TestStartupLeavesWhatASiblingHoldsJournaled: a kernel stopped with an
// outcome journaled (answered succeeded while the store was down) and a
// live sibling on the same directory adopted its journal file. A kernel
// starting there takes the stopped kernel's claim, but marks nothing
// interrupted while the sibling holds the completion: the sibling writes
// it, and a later Reconcile marks the stopped kernel's other row.
func TestStartupLeavesWhatASiblingHoldsJournaled(t *testing.T) {
	store := memory.New()
	ctx := context.Background()
	dir := t.TempDir()
	begin := func(call, inst string) *records.Record {
		// An hour old: past the age-based reconcile's cutoff too.
		r := &records.Record{AttemptID: records.NewAttemptID(), CallID: call, TurnID: "t", InstanceID: inst, StartedAt: time.Now().UTC().Add(-time.Hour)}
		if err := store.Begin(ctx, r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	answered, unknown := begin("answered", "host-dead"), begin("unknown", "host-dead")
	dead, err := journal.ClaimInstance(dir, "host-dead")
	if err != nil {
		t.Fatal(err)
	}
	jdead, err := journal.Open(dir, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if err := jdead.Add(answered.AttemptID, records.Completion{Status: sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED, FinishedAt: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	// The process stops: its files stay, their locks go.
	if err := errors.Join(jdead.Close(), dead.Close()); err != nil {
		t.Fatal(err)
	}
	sibling, err := journal.Open(dir, quiet) // adopts the stopped kernel's file
	if err != nil {
		t.Fatal(err)
	}
	defer sibling.Close()
	if sibling.Len() != 1 {
		t.Fatalf("the sibling adopted %d completions, want 1", sibling.Len())
	}
	mine, err := journal.ClaimInstance(dir, "host-new")
	if err != nil {
		t.Fatal(err)
	}
	defer mine.Close()
	jmine, err := journal.Open(dir, quiet)
	if err != nil {
		t.Fatal(err)
	}
	k, err := pipeline.New(pipeline.Config{Resolver: &fakeResolver{}, Records: store, Authz: sharedosv1.NewAuthzServiceClient(nil),
		Grants: testKeys, Logger: quiet, InstanceID: "host-new", Instances: mine, Journal: jmine})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	if n, err := k.ReconcileAtStartup(ctx); err != nil || n != 0 {
		t.Fatalf("ReconcileAtStartup = %d, %v; want nothing marked while the sibling holds a completion", n, err)
	}
	// Meanwhile the stopped kernel may come back under its id (and stop
	// again): its claim was let go.
	back, err := journal.ClaimInstance(dir, "host-dead")
	if err != nil {
		t.Fatalf("the stopped kernel restarting under its id: %v", err)
	}
	if err := back.Close(); err != nil {
		t.Fatal(err)
	}
	if w, err := sibling.Flush(ctx, store); err != nil || w != 1 {
		t.Fatalf("the sibling's flush wrote %d, %v; want its one completion", w, err)
	}
	if n, err := k.Reconcile(ctx); err != nil || n != 1 {
		t.Fatalf("Reconcile = %d, %v; want the stopped kernel's unknown row", n, err)
	}
	want := map[string]sharedosv1.OperationStatus{
		answered.CallID: sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED,
		unknown.CallID:  sharedosv1.OperationStatus_OPERATION_STATUS_INTERRUPTED,
	}
	rows, _ := store.ListOperations(ctx, "t")
	for _, r := range rows {
		if r.Status != want[r.CallID] {
			t.Errorf("row %s is %v, want %v", r.CallID, r.Status, want[r.CallID])
		}
	}
	if len(mine.Dead()) != 0 {
		t.Errorf("the reconciled kernel's claim is kept: %v", mine.Dead())
	}
}

// outageStore is a record store PostgreSQL's outage reaches: while down it
// takes no completion, and while failMarks is set it marks nothing.
type outageStore struct {
	records.Store
	down, failMarks atomic.Bool
}

func (s *outageStore) Complete(ctx context.Context, id string, c records.Completion) error {
	if s.down.Load() {
		return errInjected
	}
	return s.Store.Complete(ctx, id, c)
}

func (s *outageStore) ReconcileInstance(ctx context.Context, id string, before time.Time) (int64, error) {
	if s.failMarks.Load() {
		return 0, errInjected
	}
	return s.Store.ReconcileInstance(ctx, id, before)
}

// TestStoppedKernelRestartsWhileReconcileIsPostponed (reliability row 32):
// a kernel that took a stopped sibling's claim lets go of it whenever its
// reconcile gives up before marking that sibling's rows — the startup
// flush failed, completions wait in its journal, the store failed within
// the last 30 s, the marking itself failed — so the stopped kernel can
// restart under its stable id (a pod's --instance-id) at once. Before, only
// a sibling's held completions let go: the others kept the claim, and the
// restarting kernel failed "instance id is held by a running kernel" for
// the whole PostgreSQL outage. Once nothing holds the pass back, the
// stopped kernel's unknown row is marked interrupted once, and never while
// that kernel runs again under its id.
func TestStoppedKernelRestartsWhileReconcileIsPostponed(t *testing.T) {
	store := &outageStore{Store: memory.New()}
	store.down.Store(true) // PostgreSQL is down
	ctx := context.Background()
	dir := t.TempDir()
	begin := func(call string) *records.Record {
		// Recent: only the stopped kernel's claim can mark it, never the
		// age cutoff.
		r := &records.Record{AttemptID: records.NewAttemptID(), CallID: call, TurnID: "t", InstanceID: "pod-0", StartedAt: time.Now().UTC()}
		if err := store.Begin(ctx, r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	answered, unknown := begin("answered"), begin("unknown")
	// pod-0 journals the outcome it answered, then dies.
	dead, err := journal.ClaimInstance(dir, "pod-0")
	if err != nil {
		t.Fatal(err)
	}
	jdead, err := journal.Open(dir, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if err := jdead.Add(answered.AttemptID, records.Completion{Status: succeeded, FinishedAt: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(jdead.Close(), dead.Close()); err != nil {
		t.Fatal(err)
	}
	// pod-1 starts on the directory: it takes pod-0's claim and adopts its
	// journal file.
	mine, err := journal.ClaimInstance(dir, "pod-1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mine.Close() })
	jmine, err := journal.Open(dir, quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { jmine.Close() })
	k, err := pipeline.New(pipeline.Config{Resolver: &fakeResolver{}, Records: store, Authz: sharedosv1.NewAuthzServiceClient(nil),
		Grants: testKeys, Logger: quiet, InstanceID: "pod-1", Instances: mine, Journal: jmine})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	// restarts: pod-0 comes back under its id, and stops again.
	restarts := func(when string) {
		t.Helper()
		back, err := journal.ClaimInstance(dir, "pod-0")
		if err != nil {
			t.Errorf("%s: pod-0 restarting under its id: %v", when, err)
			return
		}
		if err := back.Close(); err != nil {
			t.Fatal(err)
		}
	}

	if n, err := k.ReconcileAtStartup(ctx); err != nil || n != 0 {
		t.Fatalf("ReconcileAtStartup in the outage = %d, %v; want nothing marked", n, err)
	}
	restarts("the startup flush failed")
	if n, err := k.Reconcile(ctx); err != nil || n != 0 {
		t.Fatalf("Reconcile with pod-0's outcome journaled = %d, %v; want nothing marked", n, err)
	}
	restarts("completions wait in the journal")

	store.down.Store(false) // PostgreSQL is back
	if k.DrainJournal(ctx); k.Journaled() != 0 {
		t.Fatalf("%d completions left in the journal with the store back", k.Journaled())
	}
	if n, err := k.Reconcile(ctx); err != nil || n != 0 {
		t.Fatalf("Reconcile within 30 s of the store's failure = %d, %v; want nothing marked", n, err)
	}
	restarts("the store failed lately")

	k.ForgetStoreFailureForTest()
	store.failMarks.Store(true)
	if _, err := k.Reconcile(ctx); !errors.Is(err, errInjected) {
		t.Fatalf("Reconcile whose marking fails = %v; want the store's error", err)
	}
	restarts("the marking failed")
	store.failMarks.Store(false)

	// While pod-0 runs again, its rows are its own: nothing is marked.
	back, err := journal.ClaimInstance(dir, "pod-0")
	if err != nil {
		t.Fatalf("pod-0 restarting under its id: %v", err)
	}
	if n, err := k.Reconcile(ctx); err != nil || n != 0 {
		t.Fatalf("Reconcile while pod-0 runs = %d, %v; want nothing of its marked", n, err)
	}
	if err := back.Close(); err != nil { // it stops again
		t.Fatal(err)
	}
	if n, err := k.Reconcile(ctx); err != nil || n != 1 {
		t.Fatalf("Reconcile = %d, %v; want pod-0's unknown row marked", n, err)
	}
	if n, err := k.Reconcile(ctx); err != nil || n != 0 {
		t.Fatalf("Reconcile again = %d, %v; want nothing marked twice", n, err)
	}
	want := map[string]sharedosv1.OperationStatus{
		answered.CallID: succeeded, // what its client was told
		unknown.CallID:  sharedosv1.OperationStatus_OPERATION_STATUS_INTERRUPTED,
	}
	rows, _ := store.ListOperations(ctx, "t")
	for _, r := range rows {
		if r.Status != want[r.CallID] {
			t.Errorf("row %s is %v, want %v", r.CallID, r.Status, want[r.CallID])
		}
	}
	if len(mine.Dead()) != 0 {
		t.Errorf("the reconciled kernel's claim is kept: %v", mine.Dead())
	}
}

// TestLiveKernelWritesAStoppedSiblingsJournal: a kernel stopped with an
// outcome journaled (answered succeeded while the store was down) while a
// sibling on the same directory runs with an empty journal of its own. The
// sibling's flusher adopts the stopped kernel's file and writes the
// outcome, after which its Reconcile marks the stopped kernel's other,
// stale row interrupted. Before, only a flush with something of its own
// adopted: the answered row stayed pending and every Reconcile was
// postponed for as long as the sibling ran (found by review).
func TestLiveKernelWritesAStoppedSiblingsJournal(t *testing.T) {
	store := memory.New()
	ctx := context.Background()
	dir := t.TempDir()
	begin := func(call string) *records.Record {
		// An hour old: past the age-based reconcile's cutoff.
		r := &records.Record{AttemptID: records.NewAttemptID(), CallID: call, TurnID: "t", InstanceID: "host-dead", StartedAt: time.Now().UTC().Add(-time.Hour)}
		if err := store.Begin(ctx, r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	answered, stale := begin("answered"), begin("stale")
	jlive, err := journal.Open(dir, quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { jlive.Close() })
	k := newKernelJournaled(t, store, "host-live", jlive)
	rctx, stop := context.WithCancel(ctx)
	flusher := make(chan struct{})
	go func() { defer close(flusher); k.RunJournal(rctx) }()
	defer func() { stop(); <-flusher }()

	jdead, err := journal.Open(dir, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if err := jdead.Add(answered.AttemptID, records.Completion{Status: succeeded, FinishedAt: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	// While that kernel runs, the outcome is its to write: nothing is
	// marked interrupted.
	if n, err := k.Reconcile(ctx); err != nil || n != 0 {
		t.Fatalf("Reconcile while the sibling holds an outcome = %d, %v; want nothing marked", n, err)
	}
	// It stops: its file stays, its lock goes.
	if err := jdead.Close(); err != nil {
		t.Fatal(err)
	}
	ops := func() map[string]sharedosv1.OperationStatus {
		rows, err := store.ListOperations(ctx, "t")
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]sharedosv1.OperationStatus{}
		for _, r := range rows {
			out[r.CallID] = r.Status
		}
		return out
	}
	deadline := time.Now().Add(10 * time.Second)
	for ops()[answered.CallID] != succeeded || k.Journaled() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the stopped kernel's outcome not written within 10s: rows %v, journaled %d", ops(), k.Journaled())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n, err := k.Reconcile(ctx); err != nil || n != 1 {
		t.Fatalf("Reconcile = %d, %v; want the stale row marked", n, err)
	}
	if got := ops(); got[answered.CallID] != succeeded || got[stale.CallID] != sharedosv1.OperationStatus_OPERATION_STATUS_INTERRUPTED {
		t.Fatalf("rows %v; want %s succeeded (what its client was told) and %s interrupted", got, answered.CallID, stale.CallID)
	}
}

// refusingStore takes no completion: a flush of it keeps what it adopted.
type refusingStore struct{ records.Store }

func (refusingStore) Complete(context.Context, string, records.Completion) error {
	return errors.New("the store is down")
}

// The journal's flusher adopts a stopped sibling's file at any moment,
// moving its completions from the other processes' files to this one's.
// Reconcile reads both; an adoption between its reads must not hide an
// outcome a client was given, or its row is marked interrupted.
func TestReconcileSeesAnOutcomeAdoptedBetweenItsReads(t *testing.T) {
	store := memory.New()
	ctx := context.Background()
	dir := t.TempDir()
	answered := &records.Record{AttemptID: records.NewAttemptID(), CallID: "answered", TurnID: "t", InstanceID: "host-dead", StartedAt: time.Now().UTC().Add(-time.Hour)}
	if err := store.Begin(ctx, answered); err != nil {
		t.Fatal(err)
	}
	jlive, err := journal.Open(dir, quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { jlive.Close() })
	k := newKernelJournaled(t, store, "host-live", jlive)
	jdead, err := journal.Open(dir, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if err := jdead.Add(answered.AttemptID, records.Completion{Status: succeeded, FinishedAt: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	if err := jdead.Close(); err != nil { // stopped: its file stays, its lock goes
		t.Fatal(err)
	}
	k.OnJournalReadsForTest(func() {
		// The flusher adopts the file; the store is down, so it keeps it.
		if _, err := jlive.Flush(ctx, refusingStore{store}); err == nil {
			t.Error("a flush to a store that is down succeeded")
		}
	})
	if n, err := k.Reconcile(ctx); err != nil || n != 0 {
		t.Errorf("Reconcile = %d, %v; want nothing marked while the outcome waits in the journal", n, err)
	}
	rows, err := store.ListOperations(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Status == sharedosv1.OperationStatus_OPERATION_STATUS_INTERRUPTED {
		t.Errorf("rows %+v: the answered call was marked interrupted", rows)
	}
}

// TestRecordsNeverQuoteArgumentValues (issue 17, item 17): a schema error
// quoting a long value (pattern, cut for the model at 600 bytes), a number
// (rendered 4.111222333×10⁰⁹ by the validator) or a short string leaves
// the record with the location and the failing keyword only; the model
// still reads the validator's message.
func TestRecordsNeverQuoteArgumentValues(t *testing.T) {
	forEachStore(t, options{}, func(t *testing.T, h *harness) {
		h.resolver.add(t, "test.pattern", `{"type":"object","properties":{"code":{"type":"string","pattern":"^[0-9]+$"},"n":{"type":"integer","maximum":100},"s":{"type":"string","minLength":3}}}`,
			"read", "file:/public/x", "127.0.0.1:1", sharedosv1.ToolClass_TOOL_CLASS_MANAGED, 0)
		long := "SECRET-" + strings.Repeat("x", 1000)
		for i, args := range []string{`{"code":"` + long + `"}`, `{"n":4111222333}`, `{"s":"q7"}`} {
			res := h.call("red"+itoa(i), "test.pattern", args)
			expect(t, res, failed, outcome.InvalidArguments)
			if len(res.GetReason()) > 600+len("…") || !strings.Contains(res.GetReason(), "at /") {
				t.Errorf("the model's reason (%d bytes): %.80s", len(res.GetReason()), res.GetReason())
			}
			r := h.records("red" + itoa(i))[0]
			for _, v := range []string{"SECRET-xxxx", "4111222333", "4.111222333", "q7"} {
				if strings.Contains(r.Reason, v) {
					t.Errorf("%s: the record's reason quotes %q: %s", args[:min(20, len(args))], v, r.Reason)
				}
			}
			if !strings.Contains(r.Reason, "does not satisfy") {
				t.Errorf("%s: record reason %q names no keyword", args[:min(20, len(args))], r.Reason)
			}
		}
	})
}

// TestRecordsNeverQuoteDataKeys: a key of the arguments the tool's schema
// does not declare (a token, a path, but also one that reads like a name: a
// password or a PIN used as a key) is named in the record's location by its
// digest — also one longer than the location is cut at, whose cut start
// would not be found whole to be redacted; a declared property name and an
// array index stay.
func TestRecordsNeverQuoteDataKeys(t *testing.T) {
	forEachStore(t, options{}, func(t *testing.T, h *harness) {
		h.resolver.add(t, "test.map", `{"type":"object","properties":{"limits":{"type":"object","additionalProperties":{"type":"integer"}},"list":{"type":"array","items":{"type":"integer"}}}}`,
			"read", "file:/public/x", "127.0.0.1:1", sharedosv1.ToolClass_TOOL_CLASS_MANAGED, 0)
		res := h.call("index", "test.map", `{"list":[7,8,"x"]}`)
		expect(t, res, failed, outcome.InvalidArguments)
		if r := h.records("index")[0]; !strings.HasPrefix(r.Reason, "invalid arguments at /list/2:") {
			t.Errorf("record reason %q: want the array index kept", r.Reason)
		}
		token := "ghp_" + strings.Repeat("S3cr3tT0k3nPart", 20)
		for i, key := range []string{token, "/private/" + strings.Repeat("d", 250) + "/key.pem", "/private/k", "hunter2x", "S3cr3t", "4711"} {
			res := h.call("key"+itoa(i), "test.map", `{"limits":{"`+key+`":"x"}}`)
			expect(t, res, failed, outcome.InvalidArguments)
			r := h.records("key" + itoa(i))[0]
			if strings.Contains(r.Reason, "S3cr3t") || strings.Contains(r.Reason, "private") || strings.Contains(r.Reason, key) ||
				!strings.HasPrefix(r.Reason, "invalid arguments at /limits/[arg sha256:") {
				t.Errorf("record reason %q: want the data key by its digest, the name kept", r.Reason)
			}
		}
	})
}

// A schema violation's record keeps its location and keyword even when an
// argument value holds them as words: that reason is the kernel's, made
// for the record without values; only a policy's or a handler's text loses
// the words of values (redact.Values.Redact).
func TestRecordKeepsTheSchemaWordsAValueHolds(t *testing.T) {
	forEachStore(t, options{}, func(t *testing.T, h *harness) {
		h.resolver.add(t, "test.mode", `{"type":"object","properties":{"mode":{"enum":["fast","slow"]},"note":{"type":"string"}}}`,
			"read", "file:/public/x", "127.0.0.1:1", sharedosv1.ToolClass_TOOL_CLASS_MANAGED, 0)
		res := h.call("words", "test.mode", `{"mode":"fastest","note":"the mode does not satisfy enum rules"}`)
		expect(t, res, failed, outcome.InvalidArguments)
		if r := h.records("words")[0]; !strings.HasPrefix(r.Reason, "invalid arguments at /mode:") || !strings.Contains(r.Reason, "does not satisfy") {
			t.Errorf("record reason %q: want the location and the keyword kept", r.Reason)
		}
	})
}

// TestGrantLogNamesTheContext: a bridge identity may ask for a grant of
// any context (docs/security.md, Limits) and the kernel's "turn granted"
// line is the audit of it: it names the principal, tenant and roles
// granted and the expiry (found by review: it named only the turn).
func TestGrantLogNamesTheContext(t *testing.T) {
	forEachStore(t, options{}, func(t *testing.T, h *harness) {
		var buf syncBuffer
		cat := realCatalogue(t, h)
		k, err := pipeline.New(pipeline.Config{
			Resolver: cat, Entries: cat, Catalogue: cat, Records: h.store, Authz: h.authzClient, Grants: testKeys,
			AuthzTimeout: h.authzTimeout, InstanceID: "test-kernel", Journal: h.journal,
			Logger: slog.New(slog.NewJSONHandler(&buf, nil)),
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { k.Close() })
		exp := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
		if _, err := k.GrantTurn(context.Background(), &sharedosv1.GrantTurnRequest{TurnId: "audited",
			Context:   &sharedosv1.AccessContext{Principal: "mallory", Tenant: "victim", Roles: []string{"admin", "engineer"}},
			ExpiresAt: timestamppb.New(exp)}); err != nil {
			t.Fatal(err)
		}
		var line struct {
			Msg       string    `json:"msg"`
			Turn      string    `json:"turn_id"`
			Principal string    `json:"principal"`
			Tenant    string    `json:"tenant"`
			Roles     []string  `json:"roles"`
			ExpiresAt time.Time `json:"expires_at"`
			Caller    *string   `json:"caller"`
		}
		for l := range strings.Lines(buf.String()) {
			if strings.Contains(l, `"turn granted"`) {
				if err := json.Unmarshal([]byte(l), &line); err != nil {
					t.Fatal(err)
				}
			}
		}
		if line.Turn != "audited" || line.Principal != "mallory" || line.Tenant != "victim" ||
			!slices.Equal(line.Roles, []string{"admin", "engineer"}) || !line.ExpiresAt.Equal(exp) || line.Caller == nil {
			t.Fatalf("turn granted line = %+v; log:\n%s", line, buf.String())
		}
	})
}

// syncBuffer is a bytes.Buffer a logger and a test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// GrantTurn refuses a context authz-svc would refuse, InvalidArgument
// naming the field (accesscontext.Check), before the catalogue is asked:
// the caller's input, not authz-svc failing to list (found by attack: each
// was answered Unavailable, AUTHZ_UNAVAILABLE, and logged at ERROR). A
// harness name or model holding a C1 control or a bidi override is refused
// by the same printable rule.
func TestGrantTurnRefusesAContextAuthzWouldRefuse(t *testing.T) {
	store := memory.New()
	h := newHarness(t, store, store.Len, options{})
	rpc := server.NewRuntimeServer(newKernelWith(t, h, realCatalogue(t, h)))
	future := timestamppb.New(time.Now().Add(time.Hour))
	for _, c := range accesscontexttest.Bad() {
		if c.Field == "context.principal" && c.Rule == "must not be empty" {
			c.Rule = "is required" // GrantTurn's own words
		}
		t.Run(c.Name, func(t *testing.T) {
			actx := &sharedosv1.AccessContext{Principal: "p", Tenant: "acme", Roles: []string{"engineer"}, Attributes: map[string]string{"k": "v"}}
			c.Edit(actx)
			_, err := rpc.GrantTurn(context.Background(), &sharedosv1.GrantTurnRequest{TurnId: "t-ctx", Context: actx, ExpiresAt: future})
			assertFieldRefused(t, err, c.Field, c.Rule)
		})
	}
	for name, req := range map[string]*sharedosv1.GrantTurnRequest{
		"harness.name":    {Harness: &sharedosv1.HarnessIdentity{Name: "h\x1b[31m"}},
		"harness.version": {Harness: &sharedosv1.HarnessIdentity{Name: "h", Version: "1\u009b31m"}},
		"declared_model":  {DeclaredModel: "model\u202e"},
	} {
		req.TurnId, req.Context, req.ExpiresAt = "t-ctx", alice(), future
		_, err := rpc.GrantTurn(context.Background(), req)
		assertFieldRefused(t, err, name, "control or format")
	}
	// Names are not ASCII.
	if _, err := rpc.GrantTurn(context.Background(), &sharedosv1.GrantTurnRequest{TurnId: "t-ctx", ExpiresAt: future,
		Context: &sharedosv1.AccessContext{Principal: "José", Tenant: "株式会社", Roles: []string{"工程师"}}, DeclaredModel: "modèle"}); err != nil {
		t.Errorf("GrantTurn with a Unicode context: %v", err)
	}
}

func assertFieldRefused(t *testing.T, err error, field, rule string) {
	t.Helper()
	st := status.Convert(err)
	var br *errdetails.BadRequest
	for _, d := range st.Details() {
		if b, ok := d.(*errdetails.BadRequest); ok {
			br = b
		}
	}
	if st.Code() != codes.InvalidArgument || len(br.GetFieldViolations()) != 1 || br.GetFieldViolations()[0].GetField() != field ||
		!strings.Contains(br.GetFieldViolations()[0].GetDescription(), rule) {
		t.Errorf("GrantTurn = %v (%v), want InvalidArgument on %s: …%s…", err, br, field, rule)
	}
}
