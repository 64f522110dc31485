package upstream

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// Two notifications alike — the same bytes, sent by two callers — are
// each their own caller's: the callers that leave before theirs was
// written give up theirs alone, and the one that stays has its own
// written. Matched by their bytes, the first written was taken for the
// staying caller's, and that caller's own write then for a left one's: it
// was told its notification was given up (errAbandoned), though it never
// left. Here the server reads nothing until told, so every notification
// waits behind a large one.
func TestNotificationsAlikeAreEachTheirCallers(t *testing.T) {
	dir := t.TempDir()
	gate, got := filepath.Join(dir, "go"), filepath.Join(dir, "got")
	c := newConn(t.Context(), nil, Guard{}, slog.New(slog.DiscardHandler), nil)
	t.Cleanup(c.close)
	tr, err := c.stdio([]string{"/bin/sh", "-c", `until [ -e "$GATE" ]; do sleep 0.01; done; exec cat >"$GOT"`},
		[]string{"PATH=" + os.Getenv("PATH"), "GATE=" + gate, "GOT=" + got})
	if err != nil {
		t.Fatal(err)
	}
	st := tr.(*capturingStdio)
	if err := st.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	send := func(ctx context.Context, n mcp.JSONRPCNotification) <-chan error {
		done := make(chan error, 1)
		go func() { done <- st.SendNotification(ctx, n) }()
		return done
	}
	large := send(ctx, note(map[string]any{"data": strings.Repeat("x", 1<<20)})) // past a pipe's 64 KiB
	waitFor(t, "the large notification's write", func() bool { return writingNow(st.in) })
	const callers = 8
	var sent []<-chan error
	var leave []context.CancelFunc
	for i := range callers {
		cctx, cancel := context.WithCancel(ctx) // ends with ctx, if not left
		sent, leave = append(sent, send(cctx, note(nil))), append(leave, cancel)
		waitFor(t, "the notifications alike to wait", func() bool { return waitingNow(st.in) == i+1 })
	}
	for i := range callers - 1 { // all but the last leave
		leave[i]()
		if err := <-sent[i]; err != context.Canceled {
			t.Errorf("caller %d, which left: %v, want context.Canceled", i, err)
		}
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := <-large; err != nil {
		t.Errorf("the large notification: %v", err)
	}
	if err := <-sent[callers-1]; err != nil {
		t.Errorf("the caller that stayed: %v, want its notification written", err)
	}
	waitFor(t, "the server to read both", func() bool {
		b, _ := os.ReadFile(got)
		return bytes.Count(b, []byte("\n")) >= 2
	})
	_ = st.Close() // the server reads the end of its stdin and exits
	b, err := os.ReadFile(got)
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b, []byte("\n")); n != 2 {
		t.Errorf("the server read %d lines, want 2: the large one, and the staying caller's", n)
	}
}

// note is a notifications/message with params.
func note(params map[string]any) mcp.JSONRPCNotification {
	return mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION, Notification: mcp.Notification{
		Method: "notifications/message", Params: mcp.NotificationParams{AdditionalFields: params}}}
}

// writingNow reports whether a message is being written to p.
func writingNow(p *stdinPipe) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.writing != nil
}

// waitingNow is how many messages wait to be written to p.
func waitingNow(p *stdinPipe) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.queue)
}

// waitFor polls cond until it holds, failing t after a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %s", what)
		}
		time.Sleep(time.Millisecond) // polls the condition
	}
}

// A request answered before its message was written whole — the server
// answers once it read the message's head, then stops reading — is bounded
// as a reply is: mcp-go's write only queues the message, so its caller
// returned with the answer while the write went on with no deadline, and
// no one was left to cut it; it held every later message, and the session,
// for good. Here its write is cut short after the reply's bound and the
// session ends (the server is killed).
func TestARequestAnsweredBeforeItWasWrittenIsBounded(t *testing.T) {
	t.Cleanup(set(&replyWriteTimeout, 200*time.Millisecond))
	c := newConn(t.Context(), nil, Guard{}, slog.New(slog.DiscardHandler), nil)
	t.Cleanup(c.close)
	tr, err := c.stdio([]string{"/bin/sh", "-c", `dd bs=1 count=60 2>/dev/null >/dev/null; echo '{"jsonrpc":"2.0","id":7,"result":{}}'; exec sleep 600`},
		[]string{"PATH=" + os.Getenv("PATH")})
	if err != nil {
		t.Fatal(err)
	}
	st := tr.(*capturingStdio)
	if err := st.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.kill(); _ = st.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	resp, err := st.SendRequest(ctx, transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(int64(7)),
		Method: "tools/call", Params: map[string]any{"data": strings.Repeat("x", 1<<20)}}) // past a pipe's 64 KiB
	if err != nil || resp == nil {
		t.Fatalf("the request: %v, %v", resp, err)
	}
	waitFor(t, "the unread request's write to be cut short", func() bool {
		st.in.mu.Lock()
		defer st.in.mu.Unlock()
		return st.in.failed != nil
	})
	if err := st.SendNotification(ctx, note(nil)); err == nil {
		t.Error("a notification after the cut was written: the session goes on")
	}
}

// A stdio server that sends requests faster than it reads their answers —
// here thousands of pings, and none of their answers read — has at most
// maxReplies answers queued for its stdin; the rest are dropped
// unanswered. Every one was queued, in memory, until the write of the
// first that did not fit the pipe ran out (replyWriteTimeout, 30 s): a
// server that sent pings at the pace catalog-svc reads them grew its
// queue by as many.
func TestAStdioServerFloodingItsClientHasBoundedAnswersQueued(t *testing.T) {
	t.Cleanup(set(&replyWriteTimeout, time.Hour))
	c := newConn(t.Context(), nil, Guard{}, slog.New(slog.DiscardHandler), nil)
	t.Cleanup(c.close)
	const pings = 5000 // their answers fill a pipe's 64 KiB some times over
	tr, err := c.stdio([]string{"/bin/sh", "-c", `seq 1 5000 | sed 's/.*/{"jsonrpc":"2.0","id":&,"method":"ping"}/'; exec sleep 600`},
		[]string{"PATH=" + os.Getenv("PATH")})
	if err != nil {
		t.Fatal(err)
	}
	st := tr.(*capturingStdio)
	st.SetRequestHandler(func(_ context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
		return transport.NewJSONRPCResultResponse(req.ID, []byte(`{}`)), nil
	})
	if err := st.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.kill(); _ = st.Close() })
	waitFor(t, "every ping handled", func() bool { return c.asked.Load() == pings && len(c.handling) == 0 })
	st.in.mu.Lock()
	queued := st.in.queuedReplies()
	st.in.mu.Unlock()
	if queued > maxReplies || c.dropped.Load() == 0 {
		t.Errorf("%d answers queued and %d dropped, want at most %d queued and the rest dropped", queued, c.dropped.Load(), maxReplies)
	}
}
