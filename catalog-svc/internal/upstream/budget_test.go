package upstream_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/platform/testwait"

	"github.com/sharedos/toolshare/catalog-svc/internal/budget"
	"github.com/sharedos/toolshare/catalog-svc/internal/store/memory"
	"github.com/sharedos/toolshare/catalog-svc/internal/upstream"
)

// bigUpstream serves the tool big {"kib": n}, whose result is one text of
// n KiB. declared: every response carries its Content-Length (else mcp-go
// writes a large one chunked, of no declared length).
func bigUpstream(t *testing.T, declared bool) string {
	t.Helper()
	s := server.NewMCPServer("big", "1", server.WithToolCapabilities(true), server.WithResourceCapabilities(false, false))
	s.AddTool(mcp.NewTool("big", mcp.WithNumber("kib")), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText(strings.Repeat("A", int(req.GetFloat("kib", 1))<<10)), nil
	})
	s.AddResource(mcp.NewResource("big://doc", "doc"), func(_ context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		return []mcp.ResourceContents{mcp.TextResourceContents{URI: req.Params.URI, Text: strings.Repeat("A", 2<<20)}}, nil
	})
	var h http.Handler = server.NewStreamableHTTPServer(s)
	if declared {
		next := h
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec := httptest.NewRecorder()
			next.ServeHTTP(rec, r)
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.Header().Set("Content-Length", strconv.Itoa(rec.Body.Len()))
			w.WriteHeader(rec.Code)
			_, _ = w.Write(rec.Body.Bytes())
		})
	}
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return hs.URL + "/mcp"
}

// budgetedUpstream is the upstream at url as namespace ns on a manager
// whose result budget is b.
func budgetedUpstream(t *testing.T, ns, url string, b *budget.Budget) sharedosv1.ToolHandlerServiceClient {
	t.Helper()
	c, _, _ := upstreamAtBudget(t, ns, url, b)
	return c
}

func bigCall(kib int) *sharedosv1.HandleRequest {
	return &sharedosv1.HandleRequest{Tool: "bg.big", ArgumentsJson: []byte(`{"kib":` + strconv.Itoa(kib) + `}`)}
}

// Upstream results in flight are bounded together (reliability row 48): a
// result holds its bytes of the kernel's budget from its read until its
// answer is sent (the call's scope ends); a call that finds no room waits
// for it until its caller leaves, and is served once room is made; a
// response larger than the whole budget fails at once, upstream_unavailable;
// every path gives its bytes back. Before, nothing bounded the sum: every
// call was read at once.
func TestResultBudgetBoundsResultsInFlight(t *testing.T) {
	b := budget.New(1 << 20)
	c := budgetedUpstream(t, "bg", bigUpstream(t, true), b)

	held, endHeld := budget.WithScope(t.Context())
	resp, err := c.Handle(held, bigCall(600))
	if err != nil || len(resp.GetContentJson()) < 600<<10 {
		t.Fatalf("first call: %v", err)
	}
	if n := b.InUse(); n < 600<<10 {
		t.Fatalf("a result not yet sent holds %d bytes of the budget, want its size", n)
	}

	// No room: the call waits, and its caller leaving ends the wait.
	leaving, leave := context.WithCancel(t.Context())
	left := make(chan error, 1)
	go func() { _, err := c.Handle(leaving, bigCall(600)); left <- err }()
	testwait.Until(t, "the second call waits for room", func() bool { return b.Waiting() == 1 })
	leave()
	if err := <-left; status.Code(err) != codes.Canceled {
		t.Fatalf("a call whose caller left while it waited: %v, want Canceled", err)
	}
	testwait.Until(t, "the left call gives back what it took", func() bool { return b.Waiting() == 0 && b.InUse() < 700<<10 })

	// No room: the call waits, and is served once the first answer is sent.
	served := make(chan error, 1)
	go func() {
		ctx, end := budget.WithScope(t.Context())
		defer end()
		_, err := c.Handle(ctx, bigCall(600))
		served <- err
	}()
	testwait.Until(t, "the third call waits for room", func() bool { return b.Waiting() == 1 })
	endHeld()
	if err := <-served; err != nil {
		t.Fatalf("a call that waited for room: %v", err)
	}

	// More than the whole budget can never be held: refused at once.
	_, err = c.Handle(t.Context(), bigCall(2048))
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "result budget") {
		t.Fatalf("a result larger than the budget: %v, want ResourceExhausted naming the result budget", err)
	}
	testwait.Until(t, "every call gave its bytes back", func() bool { return b.InUse() == 0 && b.Waiting() == 0 })
}

// A call or a read whose deadline passes while its result waits for room
// in the budget fails ResourceExhausted naming the budget — the kernel's
// refusal, recorded upstream_unavailable with that reason — never as a
// deadline (recorded "the tool did not answer"), which the upstream did.
func TestResultBudgetADeadlineSpentWaitingIsTheBudgets(t *testing.T) {
	b := budget.New(4 << 20) // the read is of 2 MiB
	c := budgetedUpstream(t, "bg", bigUpstream(t, true), b)
	hog := b.Lease()
	if err := hog.Take(t.Context(), b.Size()); err != nil {
		t.Fatal(err)
	}
	defer hog.Release()
	for _, read := range []bool{false, true} {
		ctx := newExpiring()
		got := make(chan error, 1)
		go func() {
			var err error
			if read {
				_, err = c.ReadResource(ctx, &sharedosv1.HandleRequest{Tool: "big://doc"})
			} else {
				_, err = c.Handle(ctx, bigCall(1))
			}
			got <- err
		}()
		testwait.Until(t, "the request waits for room", func() bool { return b.Waiting() == 1 })
		ctx.expire()
		if err := <-got; status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "result budget") {
			t.Fatalf("read %v: a deadline spent waiting for the budget: %v, want ResourceExhausted naming the result budget", read, err)
		}
		testwait.Until(t, "the request left the queue", func() bool { return b.Waiting() == 0 })
	}
}

// expiring is a context whose deadline passes when the test says so
// (expire), not after a duration.
type expiring struct {
	done chan struct{}
	once sync.Once
}

func newExpiring() *expiring { return &expiring{done: make(chan struct{})} }

func (e *expiring) expire()                     { e.once.Do(func() { close(e.done) }) }
func (e *expiring) Deadline() (time.Time, bool) { return time.Time{}, false }
func (e *expiring) Done() <-chan struct{}       { return e.done }
func (e *expiring) Value(any) any               { return nil }
func (e *expiring) Err() error {
	select {
	case <-e.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// One upstream's calls hold at most their share of the result budget
// (half of it here): with its share held whole — an upstream padding its
// streams, or parking its calls on their harness — another upstream's
// call is still served. Before, one upstream's calls could hold the whole
// budget and the other's waited until their timeout (attack run).
func TestResultBudgetSharesAmongUpstreams(t *testing.T) {
	b := budget.New(256 << 20)
	mem := memory.New()
	m := managerOver(t, mem, b)
	for _, ns := range []string{"bg", "bh"} {
		if rec, err := m.Add(t.Context(), &sharedosv1.UpstreamProvider{Namespace: ns, Url: bigUpstream(t, true), AutoApproveNew: true}, "op"); err != nil || rec.GetStatus().GetError() != "" {
			t.Fatalf("add %s: %v %v", ns, err, rec.GetStatus().GetError())
		}
	}
	share, err := upstream.ResultShare(m, "bg")
	if err != nil {
		t.Fatal(err)
	}
	hog := share.Lease()
	if err := hog.Take(t.Context(), share.Size()); err != nil {
		t.Fatal(err)
	}
	defer hog.Release()
	if share.Size() >= b.Size() || b.InUse() != share.Size() {
		t.Fatalf("upstream bg's share is %d of %d (in use %d): want a part of the budget", share.Size(), b.Size(), b.InUse())
	}
	c, err := upstream.Handlers{Upstreams: m}.Client(upstream.Target("bh"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second) // a safety net: served at once, or it waits
	defer cancel()
	req := bigCall(600)
	req.Tool = "bh.big"
	if resp, err := c.Handle(ctx, req); err != nil || len(resp.GetContentJson()) < 600<<10 {
		t.Fatalf("another upstream's call beside a share held whole: %v", err)
	}
}

// A response of no declared length takes the budget as it is read: one
// that needs more room while others hold the rest fails
// upstream_unavailable at once, never waiting while it holds part of the
// budget (two half-read responses would wait on each other), and gives
// back what it took. Small results pay one take and one release.
func TestResultBudgetRefusesGrowthMidResponse(t *testing.T) {
	b := budget.New(1 << 20)
	c := budgetedUpstream(t, "bg", bigUpstream(t, false), b)

	held, endHeld := budget.WithScope(t.Context())
	if _, err := c.Handle(held, bigCall(700)); err != nil {
		t.Fatal(err)
	}
	before := b.InUse()
	_, err := c.Handle(t.Context(), bigCall(600))
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "result budget") {
		t.Fatalf("a response that outgrew the free room: %v, want ResourceExhausted naming the result budget", err)
	}
	testwait.Until(t, "the refused call gives back what it took", func() bool { return b.InUse() == before })
	endHeld()
	if n := b.InUse(); n != 0 {
		t.Fatalf("in use %d once the answer is sent, want 0", n)
	}

	// Without a scope (no kernel answer to wait for) a result's bytes go
	// back as the provider returns it.
	for range 3 {
		if _, err := c.Handle(t.Context(), bigCall(1)); err != nil {
			t.Fatal(err)
		}
		if n := b.InUse(); n != 0 {
			t.Fatalf("in use %d after a small result, want 0", n)
		}
	}
}

// A resources/read is charged to the result budget as a call is (review:
// it ran under no lease, so an upstream's 64 MiB reads were bounded by
// nothing together): a 2 MiB read under a 1 MiB budget is refused, naming
// the budget, and holds nothing after.
func TestResultBudgetBoundsResourceReads(t *testing.T) {
	for _, declared := range []bool{false, true} {
		b := budget.New(1 << 20)
		c := budgetedUpstream(t, "bg", bigUpstream(t, declared), b)
		_, err := c.ReadResource(t.Context(), &sharedosv1.HandleRequest{Tool: "big://doc"})
		if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "budget") {
			t.Errorf("declared length %v: a 2 MiB read under a 1 MiB budget: %v, want ResourceExhausted naming the budget", declared, err)
		}
		if n := b.InUse(); n != 0 {
			t.Errorf("declared length %v: %d bytes still held after the read", declared, n)
		}
	}
}
