package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// stdinPipe is a stdio server's stdin. mcp-go's transport writes each
// message under one lock and heedless of its request's context, so a
// server that stops reading (a deadlock, a synchronous server busy
// elsewhere) held the message whose write filled the pipe and, on that
// lock, every later one — a request's, or mcp-go's own answer to a request
// of the server's (a ping, an elicitation the harness answered), which no
// caller waits for and so none gave up. Here mcp-go's write only queues its
// message (Write returns at once: nothing waits on mcp-go's lock), a
// notification is queued by its sender itself (send), each message known
// by who sent it, never by its bytes, and the pipe writes the queue in
// order, one message at a time, on a goroutine of its own (drain). A caller that leaves before its message was written
// whole gives its own write up: a message not begun is never written (the
// session goes on, and its caller returns at once, without waiting its turn
// at the pipe), and one under way — its own, never another caller's: a
// healthy server may pause reading while a large message is written — is
// cut short. A message no caller waits for (a reply) is cut short once its
// write took replyWriteTimeout: the server asked for it, and one that does
// not read it in that time has stopped reading. A message cut short leaves the
// server a broken stream, so the session ends with it, as it does after any
// failed write (broke kills the server, which is started anew at the next
// call).
type stdinPipe struct {
	f     *os.File
	broke func()
	// dropped, when set, is told of each reply dropped (Write).
	dropped func()

	mu       sync.Mutex
	queue    []*outgoing // to be written, in order
	writing  *outgoing   // being written now
	draining bool        // drain runs
	// failed: a write failed, or the pipe was closed; nothing more is
	// written.
	failed    error
	unwritten map[string]*outgoing // requests sent and not yet written, by their id's JSON
}

// outgoing is one message on its way to the server.
type outgoing struct {
	line []byte
	// queued: handed to the pipe; started: its write began; abandoned: its
	// caller left before that; done: its write ended, or will never begin.
	queued, started, abandoned, done bool
	// reply: no caller waits for it (replyWriteTimeout bounds its write).
	reply   bool
	written chan struct{} // closed once done, err set
	err     error
}

func newOutgoing() *outgoing { return &outgoing{written: make(chan struct{})} }

// end marks o done with err (the pipe's lock held).
func (o *outgoing) end(err error) {
	if !o.done {
		o.done, o.err, o.line = true, err, nil
		close(o.written)
	}
}

// replyWriteTimeout bounds the write of a message no caller waits for: an
// answer mcp-go's transport writes to the server's own request. A variable
// for tests.
var replyWriteTimeout = 30 * time.Second

// errAbandoned: the message's caller left before it was written.
var errAbandoned = errors.New("the request's caller left before it was sent")

// expect registers the request id (its JSON) as about to be written.
func (p *stdinPipe) expect(id string) *outgoing {
	o := newOutgoing()
	p.mu.Lock()
	p.unwritten[id] = o
	p.mu.Unlock()
	return o
}

// forget ends what expect registered.
func (p *stdinPipe) forget(id string) {
	p.mu.Lock()
	delete(p.unwritten, id)
	p.mu.Unlock()
}

// giveUp is o's caller leaving: a message not yet begun is never written
// (unsent: its caller need not wait for it), and a write of it under way
// is cut short. Another message's write goes on: its own caller gives it
// up, if it leaves.
func (p *stdinPipe) giveUp(o *outgoing) (unsent bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case !o.started:
		o.abandoned = true
		if o.queued {
			p.queue = slices.DeleteFunc(p.queue, func(x *outgoing) bool { return x == o })
		}
		o.end(errAbandoned)
		return true
	case !o.done:
		_ = p.f.SetWriteDeadline(time.Now()) // this write (o's: writes are one at a time) fails
	}
	return false
}

// release is o's caller returning with its answer while o may not be
// written whole: its write, begun or not, is bounded from now on as a
// reply's is (replyWriteTimeout), since no caller would cut it short. A
// caller's write had no deadline: once its caller had returned, a server
// that stopped reading held it, and every message behind it, for good.
func (p *stdinPipe) release(o *outgoing) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if o.done || o.reply {
		return
	}
	o.reply = true
	if o.started {
		_ = p.f.SetWriteDeadline(time.Now().Add(replyWriteTimeout)) // o's write: writes are one at a time
	}
}

// await waits until o was written, or its caller leaves (ctx): at once
// when o was not begun, or once its own write was cut short.
func (p *stdinPipe) await(ctx context.Context, o *outgoing) error {
	select {
	case <-o.written:
		return o.err
	case <-ctx.Done():
	}
	if p.giveUp(o) {
		return ctx.Err()
	}
	<-o.written
	return o.err
}

// requestHead is how every request mcp-go writes begins: its id follows.
var requestHead = []byte(`{"jsonrpc":"2.0","id":`)

// sending is the registered request that b is, if any: mcp-go writes a
// request's members in order, so its id follows requestHead and "method"
// follows its id, and ids are the session's own, one per request. A
// notification is never known by its bytes, which two may share: its
// sender queues it itself (send).
func (p *stdinPipe) sending(b []byte) *outgoing {
	rest, ok := bytes.CutPrefix(b, requestHead)
	if !ok {
		return nil
	}
	i := bytes.IndexByte(rest, ',')
	if i < 0 || !bytes.HasPrefix(rest[i:], []byte(`,"method":`)) {
		return nil // a response's id, or an id with a comma (untracked)
	}
	if o := p.unwritten[string(rest[:i])]; o != nil && !o.queued {
		return o
	}
	return nil
}

// Write queues b, one message as mcp-go's transport writes it, and returns
// at once: drain writes it. A message no caller registered (sending) is a
// reply: past maxReplies of them queued — a server that asks faster than
// it reads its answers — it is dropped unanswered (relay.go:
// serverRequest), and mcp-go is told it was written, since it would log
// each as an error. Queued without bound, a server that sent pings and
// read nothing held their answers in memory until the first one's write
// ran out (replyWriteTimeout).
func (p *stdinPipe) Write(b []byte) (int, error) {
	p.mu.Lock()
	o := p.sending(b)
	if o == nil && p.failed == nil && p.queuedReplies() >= maxReplies {
		p.mu.Unlock()
		if p.dropped != nil {
			p.dropped()
		}
		return len(b), nil
	}
	defer p.mu.Unlock()
	switch {
	case o == nil:
		o = newOutgoing()
		o.reply = true
	case o.abandoned:
		return 0, errAbandoned
	}
	if p.failed != nil {
		return 0, p.failed
	}
	p.enqueue(o, bytes.Clone(b))
	return len(b), nil
}

// queuedReplies counts the replies queued and not yet begun (the pipe's
// lock held).
func (p *stdinPipe) queuedReplies() int {
	n := 0
	for _, o := range p.queue {
		if o.reply {
			n++
		}
	}
	return n
}

// send queues line, a message its caller sends itself (a notification),
// as that caller's, and waits until it was written (await).
func (p *stdinPipe) send(ctx context.Context, line []byte) error {
	o := newOutgoing()
	p.mu.Lock()
	if p.failed != nil {
		p.mu.Unlock()
		return p.failed
	}
	p.enqueue(o, line)
	p.mu.Unlock()
	return p.await(ctx, o)
}

// enqueue queues o's line, drain writing it (the pipe's lock held).
func (p *stdinPipe) enqueue(o *outgoing, line []byte) {
	o.line, o.queued = line, true
	p.queue = append(p.queue, o)
	if !p.draining {
		p.draining = true
		go p.drain()
	}
}

// drain writes the queue, one message at a time, until it is empty. A
// write that fails ends the session (broke) before its caller hears of it.
func (p *stdinPipe) drain() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.queue) > 0 && p.failed == nil {
		o := p.queue[0]
		p.queue[0] = nil
		p.queue = p.queue[1:]
		o.started = true
		var deadline time.Time // a caller's write: until its caller leaves (giveUp)
		if o.reply {
			deadline = time.Now().Add(replyWriteTimeout)
		}
		_ = p.f.SetWriteDeadline(deadline) // under the lock: a giveUp after it cuts this write
		line := o.line
		p.writing = o
		p.mu.Unlock()
		_, err := p.f.Write(line)
		p.mu.Lock()
		p.writing = nil
		if err != nil {
			p.fail(err)
			p.mu.Unlock()
			p.broke()
			p.mu.Lock()
		}
		o.end(err)
	}
	p.draining = false
}

// fail ends the pipe with err: what is queued is never written (the
// pipe's lock held).
func (p *stdinPipe) fail(err error) {
	if p.failed == nil {
		p.failed = err
	}
	for _, o := range p.queue {
		o.end(p.failed)
	}
	p.queue = nil
}

// Close closes the pipe: the server reads its end.
func (p *stdinPipe) Close() error {
	p.mu.Lock()
	p.fail(os.ErrClosed)
	p.mu.Unlock()
	return p.f.Close()
}

// SendRequest names the bound when it is what ended the session. A caller
// that leaves before its request was written leaves at once, and the
// request is never written; one whose request is being written cuts that
// write short (stdinPipe). A call's request written whole is awaited past
// its caller leaving, until the server answers it (outlast).
func (t *capturingStdio) SendRequest(ctx context.Context, r transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	id, err := json.Marshal(r.ID)
	if err != nil {
		return nil, err
	}
	o := t.in.expect(string(id))
	resp, err := t.c.outlast(ctx, r, func(ctx context.Context) (*transport.JSONRPCResponse, error) {
		defer t.in.forget(string(id))
		return capture(ctx, r, t.Stdio.SendRequest)
	}, func() bool {
		if t.in.giveUp(o) {
			return true // never written
		}
		<-o.written
		return o.err != nil // cut short
	})
	if err != nil {
		if !t.in.giveUp(o) {
			<-o.written // written, or its write cut short: the session is dropped first
		}
		if bound := t.out.failed(); bound != nil {
			err = fmt.Errorf("%w: %w", err, bound)
		}
		return resp, err
	}
	// Answered, perhaps before its message was written whole: mcp-go's
	// write only queues it, and a server may answer once it read the
	// message's head. No caller waits for the rest any more, so it is
	// bounded as a reply is: a server that stopped reading it loses its
	// session after replyWriteTimeout, and holds no later message.
	t.in.release(o)
	return resp, err
}

// SendNotification sends n and waits until it was written; its caller
// leaving first gives the write up (stdinPipe), as a request's does. The
// line is queued here, as its caller's, not written by mcp-go's transport:
// the pipe would know it only by its bytes, and two notifications alike
// (for two callers) are the same bytes.
func (t *capturingStdio) SendNotification(ctx context.Context, n mcp.JSONRPCNotification) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if t.ended() {
		return transport.ErrTransportClosed
	}
	line, err := json.Marshal(n) // as mcp-go's transport writes it
	if err != nil {
		return err
	}
	return t.in.send(ctx, append(line, '\n'))
}
