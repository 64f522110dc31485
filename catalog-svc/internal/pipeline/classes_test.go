package pipeline_test

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"
	"sync"
	"testing"
	"time"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/outcome"
	"github.com/sharedos/toolshare/services/platform/grpcx"
	"github.com/sharedos/toolshare/services/platform/pgdb"
	"github.com/sharedos/toolshare/services/platform/pgdb/pgtest"

	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline"
	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline/records/postgres"
	"github.com/sharedos/toolshare/catalog-svc/internal/server"
	"github.com/sharedos/toolshare/catalog-svc/migrations"
)

// gateHandler holds every call until the test lets it go, and tells the
// test which calls are running.
type gateHandler struct {
	sharedosv1.UnimplementedToolHandlerServiceServer
	started chan string // the call id, when its Handle began
	mu      sync.Mutex
	release map[string]chan struct{}
	running map[string]bool
}

func (g *gateHandler) gate(id string) chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.release[id] == nil {
		g.release[id] = make(chan struct{})
	}
	return g.release[id]
}

func (g *gateHandler) Handle(ctx context.Context, req *sharedosv1.HandleRequest) (*sharedosv1.HandleResponse, error) {
	g.mu.Lock()
	g.running[req.GetCallId()] = true
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		delete(g.running, req.GetCallId())
		g.mu.Unlock()
	}()
	g.started <- req.GetCallId()
	select {
	case <-g.gate(req.GetCallId()):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &sharedosv1.HandleResponse{ContentJson: []byte(`[{"type":"text","text":"done"}]`)}, nil
}

func (g *gateHandler) isRunning(id string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.running[id]
}

// Concurrency classes: in one turn, reads run while a slow write runs; a
// second write starts only once the first has ended; a write that waits
// longer than its tool's timeout fails timeout, without running; another
// turn's write does not wait.
func TestWritesOfATurnAreSerialized(t *testing.T) {
	forEachStore(t, options{}, func(t *testing.T, h *harness) {
		g := &gateHandler{started: make(chan string, 8), release: map[string]chan struct{}{}, running: map[string]bool{}}
		addr := serveGRPC(t, func(s *grpcx.Server) { sharedosv1.RegisterToolHandlerServiceServer(s.GRPC(), g) })
		managed := sharedosv1.ToolClass_TOOL_CLASS_MANAGED
		h.resolver.add(t, "slow.read", sleepSchema, "read", "file:/public/r", addr, managed, 0)
		h.resolver.add(t, "slow.write", sleepSchema, "write", "file:/public/w", addr, managed, 0)
		h.resolver.add(t, "slow.write_quick", sleepSchema, "write", "file:/public/w", addr, managed, 300*time.Millisecond)
		h.resolver.mu.Lock()
		h.resolver.tools["slow.write"].ReadOnly = false
		h.resolver.tools["slow.write_quick"].ReadOnly = false
		h.resolver.mu.Unlock()

		results := make(chan *sharedosv1.ToolResult, 8)
		start := func(call *sharedosv1.ToolCall) {
			go func() {
				res, err := h.invoke(context.Background(), call)
				if err != nil {
					t.Errorf("InvokeTool %s: %v", call.GetCallId(), err)
				}
				results <- res
			}()
		}
		w1 := h.newCall("turn-c", "slow.write", `{}`)
		start(w1)
		if id := wait(t, g.started, "the first write"); id != w1.GetCallId() {
			t.Fatalf("started %s", id)
		}
		// Two reads of the same turn run beside the write.
		r1, r2 := h.newCall("turn-c", "slow.read", `{}`), h.newCall("turn-c", "slow.read", `{}`)
		start(r1)
		start(r2)
		wait(t, g.started, "a read")
		wait(t, g.started, "the other read")
		if !g.isRunning(w1.GetCallId()) || !g.isRunning(r1.GetCallId()) || !g.isRunning(r2.GetCallId()) {
			t.Fatal("reads did not run while the write ran")
		}
		// Another turn's write does not wait for this turn's.
		other := h.newCall("turn-d", "slow.write", `{}`)
		start(other)
		if id := wait(t, g.started, "the other turn's write"); id != other.GetCallId() {
			t.Fatalf("started %s", id)
		}
		// A second write of the turn waits; one with a short timeout gives up.
		w2 := h.newCall("turn-c", "slow.write", `{}`)
		start(w2)
		quick := h.newCall("turn-c", "slow.write_quick", `{}`)
		res, err := h.invoke(context.Background(), quick)
		if err != nil {
			t.Fatal(err)
		}
		expect(t, res, sharedosv1.OperationStatus_OPERATION_STATUS_FAILED, outcome.Timeout)
		if g.isRunning(w2.GetCallId()) || g.isRunning(quick.GetCallId()) {
			t.Fatal("a write ran while the turn's first write ran")
		}
		close(g.gate(w1.GetCallId()))
		if id := wait(t, g.started, "the second write"); id != w2.GetCallId() {
			t.Fatalf("started %s after the first write ended", id)
		}
		for _, c := range []*sharedosv1.ToolCall{r1, r2, w2, other} {
			close(g.gate(c.GetCallId()))
		}
		for range 5 {
			res := wait(t, results, "a result")
			expect(t, res, sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED, "")
		}
	})
}

// TestWritesOfATurnAreSerializedAcrossReplicas: two kernels on one
// PostgreSQL database (two replicas): a turn's second write, sent to the
// other replica, starts only once the first has ended; a read of the turn
// and another turn's write on that replica do not wait.
func TestWritesOfATurnAreSerializedAcrossReplicas(t *testing.T) {
	dsn := pgtest.NewDatabase(t, migrations.Up)
	ctx := context.Background()
	open := func() *pgxpool.Pool { return pgtest.Pool(t, dsn) }
	recs := open()
	h := newHarness(t, postgres.New(recs), func() int {
		var n int
		if err := recs.QueryRow(ctx, `SELECT count(*) FROM catalog.operations`).Scan(&n); err != nil {
			t.Errorf("count rows: %v", err)
		}
		return n
	}, options{})
	g := &gateHandler{started: make(chan string, 8), release: map[string]chan struct{}{}, running: map[string]bool{}}
	addr := serveGRPC(t, func(s *grpcx.Server) { sharedosv1.RegisterToolHandlerServiceServer(s.GRPC(), g) })
	managed := sharedosv1.ToolClass_TOOL_CLASS_MANAGED
	h.resolver.add(t, "slow.read", sleepSchema, "read", "file:/public/r", addr, managed, 0)
	h.resolver.add(t, "slow.write", sleepSchema, "write", "file:/public/w", addr, managed, 0)
	h.resolver.mu.Lock()
	h.resolver.tools["slow.write"].ReadOnly = false
	h.resolver.mu.Unlock()
	replica := func(locks pipeline.TurnLocker) *server.RuntimeServer {
		k, err := pipeline.New(pipeline.Config{Resolver: h.resolver, Records: h.store, Authz: h.authzClient, Grants: testKeys,
			InstanceID: "replica", Logger: quiet, TurnLocks: locks})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { k.Close() })
		return server.NewRuntimeServer(k)
	}
	// b's locks tell the test when a call has asked for its turn's lock.
	asked := make(chan string, 8)
	a := replica(pgdb.NewLocks(open(), "test-turns", quiet))
	b := replica(askingLocks{pgdb.NewLocks(open(), "test-turns", quiet), asked})
	results := make(chan *sharedosv1.ToolResult, 8)
	start := func(on *server.RuntimeServer, call *sharedosv1.ToolCall) {
		go func() {
			res, err := on.InvokeTool(ctx, call)
			if err != nil {
				t.Errorf("InvokeTool %s: %v", call.GetCallId(), err)
			} else {
				h.mu.Lock()
				h.attempts[call.GetTurnId()]++ // the harness's last check counts them
				h.mu.Unlock()
			}
			results <- res
		}()
	}
	w1 := h.newCall("turn-x", "slow.write", `{}`)
	start(a, w1)
	if id := wait(t, g.started, "the first write"); id != w1.GetCallId() {
		t.Fatalf("started %s", id)
	}
	w2 := h.newCall("turn-x", "slow.write", `{}`)
	start(b, w2)
	// The second write asks for the turn's lock, held on the other replica.
	select {
	case <-asked:
	case id := <-g.started:
		t.Fatalf("%s started on the other replica while the turn's first write ran", id)
	}
	r, other := h.newCall("turn-x", "slow.read", `{}`), h.newCall("turn-y", "slow.write", `{}`)
	start(b, r)
	start(b, other)
	wait(t, g.started, "the read")
	wait(t, g.started, "the other turn's write")
	if g.isRunning(w2.GetCallId()) || !g.isRunning(r.GetCallId()) || !g.isRunning(other.GetCallId()) {
		t.Fatal("on the other replica, the turn's second write ran beside its first, or a read or another turn's write waited")
	}
	close(g.gate(w1.GetCallId()))
	if id := wait(t, g.started, "the second write"); id != w2.GetCallId() {
		t.Fatalf("started %s after the first write ended", id)
	}
	for _, c := range []*sharedosv1.ToolCall{w2, r, other} {
		close(g.gate(c.GetCallId()))
	}
	for range 4 {
		expect(t, wait(t, results, "a result"), sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED, "")
	}
}

// askingLocks reports each Lock on asked before taking it.
type askingLocks struct {
	*pgdb.Locks
	asked chan<- string
}

func (l askingLocks) Lock(ctx context.Context, turn string) (func(), error) {
	l.asked <- turn
	return l.Locks.Lock(ctx, turn)
}
