package upstream_test

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"

	"github.com/sharedos/toolshare/catalog-svc/internal/upstream"
)

// A reply no caller waits for — the harness's answer to the stdio server's
// own elicitation, which mcp-go's transport writes — is cut short once its
// write took the reply's bound: the server, which stopped reading (here:
// stopped), is killed and its session dropped, and the next
// call starts it anew. The write was never cut: it held the session until
// a listing's own timeout found no call running.
func TestAReplyTheStdioServerDoesNotReadIsCut(t *testing.T) {
	t.Cleanup(upstream.SetReplyWriteTimeout(200 * time.Millisecond))
	h, _ := stdioUpstream(t, 0)
	pid, answered := stoppedAtAnAnswer(t, h)
	deadline := time.Now().Add(30 * time.Second)
	for h.m.StdioServer("sx") == pid {
		if time.Now().After(deadline) {
			t.Fatalf("the session of server %d, which reads none of its reply, is kept 30 s on", pid)
		}
		time.Sleep(10 * time.Millisecond) // polls the condition: the session was dropped
	}
	waitExited(t, pid)
	if err := <-answered; status.Code(err) != codes.Unavailable {
		t.Errorf("the call whose server was dropped: %v, want Unavailable", err)
	}
	if resp, err := h.call("sx", "sx.echo", `{"text":"next"}`); err != nil || !strings.Contains(string(resp.GetContentJson()), "next") {
		t.Errorf("the next call: %v, %v", resp, err)
	}
}

// Callers that leave while such a reply is being written (here before its
// bound) leave nothing waiting behind them: their messages are not
// written, and no goroutine of theirs waits on mcp-go's stdin lock for the
// reply's write to end (every one did, until the session closed).
func TestCallersLeavingBehindAReplyWaitOnNothing(t *testing.T) {
	t.Cleanup(upstream.SetReplyWriteTimeout(time.Hour))
	h, _ := stdioUpstream(t, 0)
	stoppedAtAnAnswer(t, h)
	c, err := h.h.Client(upstream.Target("sx"))
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		err := <-handleInBackground(ctx, c, "sx.echo", `{"text":"x"}`)
		cancel()
		if status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("a call behind the reply: %v, want DeadlineExceeded", err)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for n := stdinLockWaiters(); n > 0; n = stdinLockWaiters() {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines still wait on the stdin lock 20 s after their callers left", n)
		}
		time.Sleep(10 * time.Millisecond) // polls the condition: nothing waits on the lock
	}
}

// stoppedAtAnAnswer has h's stdio server ask for a name (sx.ask), stops it,
// and answers with a name past a pipe's 64 KiB: that reply's write is under
// way when it returns. It returns the server's pid and the answered call's
// end.
func stoppedAtAnAnswer(t *testing.T, h *harness) (int, <-chan error) {
	t.Helper()
	pid := stdioPid(t, h)
	c, err := h.h.Client(upstream.Target("sx"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Handle(t.Context(), &sharedosv1.HandleRequest{Tool: "sx.ask", ArgumentsJson: []byte(`{}`), InputMethods: elicit})
	if err != nil || resp.GetInputRequired() == nil {
		t.Fatalf("stdio server request: %v, %v", resp, err)
	}
	key, _, _ := oneRequest(t, resp.GetInputRequired())
	stopProcess(t, pid)
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	answer := []byte(`{"` + key + `":{"action":"accept","content":{"name":"` + strings.Repeat("x", 1<<20) + `"}}}`)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	answered := make(chan error, 1)
	go func() {
		_, err := c.Handle(ctx, &sharedosv1.HandleRequest{Tool: "sx.ask", ArgumentsJson: []byte(`{}`), InputMethods: elicit, Round: 1,
			RequestState: resp.GetInputRequired().GetRequestState(), InputResponsesJson: answer})
		answered <- err
	}()
	deadline := time.Now().Add(30 * time.Second)
	for !h.m.StdinWriting("sx") {
		if time.Now().After(deadline) {
			t.Fatal("the answer is not being written 30 s on")
		}
		time.Sleep(time.Millisecond) // polls the condition: the reply's write is under way
	}
	return pid, answered
}

// stdinLockWaiters counts the goroutines waiting on mcp-go's stdio
// transport's stdin lock.
func stdinLockWaiters() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	waiting := 0
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		if bytes.Contains(g, []byte("sync.(*Mutex).Lock")) && bytes.Contains(g, []byte("mcp-go/client/transport.(*Stdio).")) {
			waiting++
		}
	}
	return waiting
}
