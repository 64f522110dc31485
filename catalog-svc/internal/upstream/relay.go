package upstream

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"

	"github.com/sharedos/toolshare/catalog-svc/internal/budget"
	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline"
)

// A 2025-era upstream asks its client while a call runs: elicitation/create,
// sampling/createMessage or roots/list as a JSON-RPC request of its own
// (ADR 0019, "server requests"). SharedOS answers none itself: the request
// becomes an input round of the kernel (contract v3 input_required), so the
// harness answers it through the bridge exactly as it answers a 2026-07-28
// upstream's input_required, and the answer goes back to the upstream as
// that request's result. The upstream call stays open meanwhile: it is
// parked on this replica under an unguessable handle, which is the round's
// provider state; the next round finds it there, answers, and waits on.
//
// Which call a request belongs to: over Streamable HTTP the request arrives
// on the call's own response stream (mcp-go hands it over with that
// request's context, and the stream closes when SharedOS stops waiting for
// the call), so it is exact. Over stdio nothing in the message says: a
// 2025-era server puts the request it serves nowhere in it (2025-11-25's
// io.modelcontextprotocol/related-task names a task, and SharedOS starts
// none), so the request is attributed only where no other call could have
// sent it (callOf):
//
//   - A candidate is a call whose request (tools/call, prompts/get) was
//     sent and not yet answered by the server — whether or not SharedOS
//     still waits for it: a call whose caller left (a timeout, a
//     cancellation) may still run on a server that does not heed
//     notifications/cancelled, and may still ask. It stops being one when
//     the server's response to its id arrives, when its request turns out
//     never to have reached the server whole, or when the session ends
//     (outlast).
//   - Of several candidates, a call parked on requests it handed out (its
//     harness holds the round, none more of its requests queued) for at
//     least parkedQuiet is left out: a 2025-era tool waits for its
//     request's result before it goes on, so a harness that never answers
//     holds its own call, not every other turn's rounds with the upstream.
//     The quiet period keeps requests a tool sends together (several
//     questions at once) from being taken for another call's. (The rule
//     assumes what the SDKs' elicit and createMessage do: a tool waits for
//     a request's answer before it asks again; one that asked again for
//     the same call past the quiet period, its first request unanswered,
//     beside another call, would have it taken for that call's.) A parked
//     call is a candidate again once resumed or ended.
//   - Exactly one candidate left: the request is its. None, or several:
//     refused (an error to the server), never guessed.
//
// roots/list (which stdio servers send unprompted, to scope themselves) is
// never relayed over stdio. A request that belongs to no call is answered
// as before: an error.
const (
	// maxParked bounds the calls parked per upstream connection; see
	// also maxParkedPerTurn.
	maxParked = 256
	// parkedState prefixes the provider state of a parked call's round.
	parkedState = "sharedos-upstream-call:"
)

// maxParkedPerTurn bounds one turn's calls parked on one upstream, so a
// harness that never answers (or never retries) cannot hold every parked
// slot of the upstream, for every other turn, until the calls run out. A
// variable for tests.
var maxParkedPerTurn = 16

// parkedQuiet is how long a call must have been parked on the requests it
// handed out, with none more of its own queued, before a stdio server's
// request is no longer taken for possibly its (callOf). A variable for
// tests.
var parkedQuiet = time.Second

// leftCallGrace bounds how long a call whose caller left stays its stdio
// server's (callOf's candidate) while the server has not answered it. A
// server that heeds notifications/cancelled stops and sends no answer
// (MCP: it SHOULD NOT), so without a bound every left call stayed a
// candidate, and its wait a goroutine, until the session ended, and from
// the first cancellation on every other call's request to that server was
// ambiguous, refused (review). A server that goes on with a cancelled call
// past the grace could have a later request of it given to another call
// that is then the only one running: the risk left, for servers that do
// not heed cancellation. A variable for tests.
var leftCallGrace = 10 * time.Second

// parkedFor bounds how long a parked call waits for its next round: the
// kernel's own wait. (Over Streamable HTTP mcp-go gives a server request
// 30 s to be answered; past that the upstream gets an error and its tool
// goes on as it decides.) A variable for tests.
var parkedFor = pipeline.DefaultInputWait

// relayed is whether a server request of method is handed to the harness
// over this transport (stdio: not roots/list, see above).
func relayed(method string, stdio bool) bool {
	switch method {
	case string(mcp.MethodElicitationCreate), string(mcp.MethodSamplingCreateMessage):
		return true
	case string(mcp.MethodListRoots):
		return !stdio
	}
	return false
}

// running is one upstream request (tools/call or prompts/get) that may
// outlive the kernel's round that started it.
type running struct {
	turn   string
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{} // closed once body and err are set
	body   json.RawMessage
	err    error
	asks   chan *ask // the upstream's requests, not yet handed out
	// lease is what the request's result holds of the kernel's result
	// budget (budget.go): charged as its response is read, released once
	// a round has handed the result on (await), or once the request failed
	// or its caller left (settle, leave).
	lease *budget.Lease
	// waiting counts the upstream's requests this call holds (queued in
	// asks, or handed out and not yet answered): past maxWaitingAsks one
	// is refused at once, not held until the call ends.
	waiting atomic.Int32

	mu       sync.Mutex
	finished bool                                 // do returned
	gone     bool                                 // no round will take the result (end, abandon)
	progress func(mcp.ProgressNotificationParams) // the waiting round's; nil between rounds
	open     map[string]*ask                      // handed out, by key, until the next round
	seq      int
}

// ask is one server request waiting for the harness's answer.
type ask struct {
	method string
	params json.RawMessage
	answer chan json.RawMessage // one result; closed without one: no answer
}

type runningKey struct{}

// start runs do in the background on a context of its own: the round's
// values, not its end (a round ending with input_required must not cancel
// the upstream request); it ends when a round's caller leaves, when a
// parked call runs out, or when the connection closes. The upstream's
// progress for token, when set, goes to whichever round waits for r:
// progress, the first round's, from the start.
func (c *conn) start(ctx context.Context, turn, token string, progress func(mcp.ProgressNotificationParams), do func(context.Context) (json.RawMessage, error)) *running {
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(c.life, cancel)
	r := &running{turn: turn, cancel: cancel, done: make(chan struct{}), asks: make(chan *ask, maxRoundRequests), progress: progress,
		lease: c.budget.Lease()}
	r.ctx = budget.WithLease(context.WithValue(rctx, runningKey{}, r), r.lease)
	unregister := func() {}
	if token != "" {
		unregister = c.onProgress(token, r.report)
	}
	c.callsMu.Lock()
	c.running[r] = struct{}{}
	c.callsMu.Unlock()
	c.work(func() {
		defer func() {
			unregister()
			stop()
			cancel()
		}()
		func() {
			// A panic in the client library is the call's error, not the
			// process's end (on the caller's goroutine grpcx's recovery
			// would have caught it).
			defer func() {
				if p := recover(); p != nil {
					c.log.Error("upstream request panicked", slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
					r.body, r.err = nil, status.Error(codes.Internal, "internal error")
				}
			}()
			r.body, r.err = do(r.ctx)
		}()
		// No longer running (a listing's timeout may take the server for
		// wedged: acquire.go) before its caller hears it ended. Whether
		// the server's requests may still be this call's is whether its
		// request was answered (outlast), not whether SharedOS waits.
		c.callsMu.Lock()
		delete(c.running, r)
		c.callsMu.Unlock()
		r.settle()
		close(r.done)
	})
	return r
}

// settle releases r's lease once do returned, unless a round is still to
// take its result: a failed request holds nothing, nor one whose caller
// left.
func (r *running) settle() {
	r.mu.Lock()
	r.finished = true
	drop := r.err != nil || r.gone
	r.mu.Unlock()
	if drop {
		r.lease.Release()
	}
}

// leave says no round will take r's result: its lease goes back once do
// returned (now, if it has).
func (r *running) leave() {
	r.mu.Lock()
	r.gone = true
	fin := r.finished
	r.mu.Unlock()
	if fin {
		r.lease.Release()
	}
}

// maxIdleWorkers bounds the goroutines a connection keeps between requests.
const maxIdleWorkers = 64

// work runs job on one of the connection's goroutines, kept for the next
// request when it ends (up to maxIdleWorkers, until the connection
// closes): a stack grown by mcp-go's decoding stays grown, where a fresh
// goroutine per request regrew it (runtime.copystack, ≈ 6 % of
// catalog-svc's CPU on the upstream path).
func (c *conn) work(job func()) {
	select {
	case c.jobs <- job: // an idle worker took it
	default:
		go c.worker(job)
	}
}

func (c *conn) worker(job func()) {
	for {
		job()
		select {
		case c.idle <- struct{}{}:
		default:
			return // enough wait already
		}
		select {
		case job = <-c.jobs:
			<-c.idle
		case <-c.life.Done():
			<-c.idle
			return
		}
	}
}

// The kernel's bounds of a round: at most maxRoundRequests server requests
// are handed out per round (more wait for the next); a round larger than
// maxRoundRequestsBytes, or past maxRounds, the kernel refuses.
const (
	maxRoundRequests      = pipeline.MaxInputRequests
	maxRoundRequestsBytes = pipeline.MaxInputRequestsBytes
	maxRounds             = pipeline.MaxInputRounds
)

// errBudgetUntilDeadline is a call whose deadline passed while its result
// waited for room in the result budget: the kernel's refusal, not an
// upstream that did not answer.
const errBudgetUntilDeadline = "the call's deadline passed while its result waited for room in the kernel's upstream result budget (catalog-svc --upstream-result-budget)"

// await waits for r's outcome, or for its upstream's next requests, which
// it hands out as input_required with r parked; the caller leaving cancels
// the upstream request. round is the kernel's round now, methods what the
// harness can answer: a request it cannot ends the call (the kernel
// records missing_capability).
func (c *conn) await(ctx context.Context, r *running, round int32, methods []string, progress func(mcp.ProgressNotificationParams)) (json.RawMessage, *sharedosv1.InputRequired, error) {
	r.mu.Lock()
	r.progress = progress
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.progress = nil
		r.mu.Unlock()
	}()
	select {
	case <-r.done:
		// The result is this round's to hand on: its lease is released
		// once the kernel's answer is sent (budget.Scope), or now.
		budget.Keep(ctx, r.lease)
		return r.body, nil, r.err
	case <-ctx.Done():
		waited := r.lease.Waiting()
		r.end()
		if waited && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, nil, status.Error(codes.ResourceExhausted, errBudgetUntilDeadline)
		}
		return nil, nil, unavailable(ctx, ctx.Err())
	case a := <-r.asks:
		asks := []*ask{a}
	more:
		for len(asks) < maxRoundRequests {
			select {
			case a := <-r.asks:
				asks = append(asks, a)
			default:
				break more
			}
		}
		in, err := r.handOut(asks)
		if err != nil {
			r.end()
			return nil, nil, status.Errorf(codes.Unavailable, "upstream: %v", err)
		}
		// What the kernel will refuse — a request the harness cannot
		// answer, more than the kernel hands out, a round past its last —
		// is handed over unparked: the tool goes no further.
		refused := len(in.GetInputRequestsJson()) > maxRoundRequestsBytes || round >= maxRounds
		for _, a := range asks {
			refused = refused || !slices.Contains(methods, a.method)
		}
		if refused {
			r.end()
			return nil, in, nil
		}
		handle, err := c.park(r)
		if err != nil {
			r.end()
			return nil, nil, err
		}
		in.RequestState = []byte(parkedState + handle)
		return nil, in, nil
	}
}

// handOut keys asks (each round's keys new) and makes them contract v3's
// inputRequests: {key: {method, params}}.
func (r *running) handOut(asks []*ask) (*sharedosv1.InputRequired, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.open = map[string]*ask{}
	reqs := map[string]json.RawMessage{}
	for _, a := range asks {
		r.seq++
		key := fmt.Sprintf("upstream-%d", r.seq)
		b, err := json.Marshal(struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}{a.method, a.params})
		if err != nil {
			return nil, err
		}
		r.open[key], reqs[key] = a, b
	}
	b, err := json.Marshal(reqs)
	if err != nil {
		return nil, err
	}
	return &sharedosv1.InputRequired{InputRequestsJson: b}, nil
}

// answer sends the round's input responses to the requests handed out
// last; one without a response gets none (the upstream sees an error).
func (r *running) answer(responses []byte) error {
	var m map[string]json.RawMessage
	if len(responses) > 0 {
		if err := json.Unmarshal(responses, &m); err != nil {
			return fmt.Errorf("input responses: %w", err)
		}
	}
	r.mu.Lock()
	open := r.open
	r.open = nil
	r.mu.Unlock()
	for key, a := range open {
		if res, ok := m[key]; ok {
			a.answer <- res
		}
		close(a.answer)
	}
	return nil
}

// end cancels r's upstream request and waits until it has ended.
func (r *running) end() {
	r.leave()
	r.cancel()
	<-r.done
}

// abandon cancels a parked r: no round of it will come, so the requests it
// handed out get no answer.
func (r *running) abandon() {
	r.leave()
	r.cancel()
	_ = r.answer(nil)
}

// report hands a progress notification to the round waiting now.
func (r *running) report(n mcp.ProgressNotificationParams) {
	r.mu.Lock()
	f := r.progress
	r.mu.Unlock()
	if f != nil {
		f(n)
	}
}

// park keeps r for its next round under a new handle, at most parkedFor.
func (c *conn) park(r *running) (string, error) {
	var b [16]byte
	_, _ = rand.Read(b[:])
	handle := hex.EncodeToString(b[:])
	c.callsMu.Lock()
	defer c.callsMu.Unlock()
	if len(c.parked) >= maxParked {
		return "", status.Errorf(codes.ResourceExhausted, "upstream: %d calls already wait for their client's input", maxParked)
	}
	ofTurn := 0
	for _, p := range c.parked {
		if p.r.turn == r.turn {
			ofTurn++
		}
	}
	if ofTurn >= maxParkedPerTurn {
		return "", status.Errorf(codes.ResourceExhausted, "upstream: %d calls of this turn already wait for its client's input", ofTurn)
	}
	c.parked[handle] = parked{r: r, at: time.Now(), expiry: time.AfterFunc(parkedFor, func() { c.cancelRound(r.turn, handle) })}
	return handle, nil
}

type parked struct {
	r      *running
	at     time.Time // when it was parked
	expiry *time.Timer
}

// unpark takes the call of turn parked under handle (nil: none, taken, or
// another turn's: a handle names a call for its own turn's rounds only).
func (c *conn) unpark(turn, handle string) *running {
	c.callsMu.Lock()
	defer c.callsMu.Unlock()
	p, ok := c.parked[handle]
	if !ok || p.r.turn != turn {
		return nil
	}
	delete(c.parked, handle)
	p.expiry.Stop()
	return p.r
}

// cancelTurn ends the parked calls of turn (it was closed or revoked: no
// round of it will come) and returns how many.
func (c *conn) cancelTurn(turn string) int {
	c.callsMu.Lock()
	var ended []*running
	for handle, p := range c.parked {
		if p.r.turn == turn {
			delete(c.parked, handle)
			p.expiry.Stop()
			ended = append(ended, p.r)
		}
	}
	c.callsMu.Unlock()
	for _, r := range ended {
		r.abandon()
	}
	return len(ended)
}

// heldTurns are the turns of the calls parked here.
func (c *conn) heldTurns() []string {
	c.callsMu.Lock()
	defer c.callsMu.Unlock()
	turns := make([]string, 0, len(c.parked))
	for _, p := range c.parked {
		turns = append(turns, p.r.turn)
	}
	return turns
}

// cancelRound ends turn's call parked here under handle; false: none.
func (c *conn) cancelRound(turn, handle string) bool {
	r := c.unpark(turn, handle)
	if r != nil {
		r.abandon()
	}
	return r != nil
}

// resumed is the call a round's provider state names: the parked call with
// the round's answers sent, (nil, nil) when the state is not a parked
// call's (a 2026-07-28 upstream's own), or an error when it names a call
// this replica no longer holds. The round's progress is the call's before
// the answers go: the upstream may report progress as soon as it has them.
func (c *conn) resumed(req *sharedosv1.HandleRequest, progress func(mcp.ProgressNotificationParams)) (*running, error) {
	handle, ok := strings.CutPrefix(string(req.GetRequestState()), parkedState)
	if !ok {
		return nil, nil
	}
	r := c.unpark(req.GetTurnId(), handle)
	if r == nil {
		return nil, status.Error(codes.Unavailable,
			"upstream: the call this round answers is no longer open on this replica (its wait ran out, its upstream was replaced, or another replica holds it)")
	}
	r.mu.Lock()
	r.progress = progress
	r.mu.Unlock()
	if err := r.answer(req.GetInputResponsesJson()); err != nil {
		r.end()
		return nil, status.Errorf(codes.InvalidArgument, "upstream: %v", err)
	}
	return r, nil
}

// callOf is the call a server request belongs to: over HTTP the one whose
// request stream carried it; over stdio the one candidate left (see the
// top of this file), nil when there is none or more than one.
func (c *conn) callOf(ctx context.Context, stdio bool) *running {
	if !stdio {
		r, _ := ctx.Value(runningKey{}).(*running)
		return r
	}
	c.callsMu.Lock()
	defer c.callsMu.Unlock()
	if only := onlyOf(c.unanswered, nil); only != nil || len(c.unanswered) == 0 {
		return only
	}
	waits := map[*running]bool{} // parked on their own requests, long enough
	for _, p := range c.parked {
		if time.Since(p.at) >= parkedQuiet && len(p.r.asks) == 0 {
			waits[p.r] = true
		}
	}
	return onlyOf(c.unanswered, waits)
}

// onlyOf is the one call of calls not left out, nil when there is none or
// more than one.
func onlyOf(calls map[*running]int, out map[*running]bool) *running {
	var only *running
	for r := range calls {
		if out[r] {
			continue
		}
		if only != nil {
			return nil
		}
		only = r
	}
	return only
}

// outlast sends req with send and returns the server's answer; over stdio
// (the capturing transport calls it) a request of a call — tools/call or
// prompts/get on the context start gave it — is that call's unanswered one
// (callOf's candidate) from before it is written until the server answers
// it, the session ends, it turns out never to have reached the server
// whole, or its caller left leftCallGrace ago. Its caller leaving returns at once, as before, while the answer
// is still awaited apart (mcp-go's transport, left, forgets the request's
// id and drops its answer unseen): leave gives the caller's write up and
// says whether the server can no longer answer (the request was never
// written, or its write cut short, which ends the session).
func (c *conn) outlast(ctx context.Context, req transport.JSONRPCRequest, send func(context.Context) (*transport.JSONRPCResponse, error),
	leave func() (unanswerable bool)) (*transport.JSONRPCResponse, error) {
	r, _ := ctx.Value(runningKey{}).(*running)
	if r == nil || req.Method != string(mcp.MethodToolsCall) && req.Method != string(mcp.MethodPromptsGet) {
		return send(ctx)
	}
	c.callsMu.Lock()
	if c.unanswered == nil {
		c.unanswered = map[*running]int{}
	}
	c.unanswered[r]++
	c.callsMu.Unlock()
	type outcome struct {
		resp *transport.JSONRPCResponse
		err  error
	}
	got := make(chan outcome, 1)
	wctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	go func() {
		defer stop()
		resp, err := send(wctx)
		// Answered (or never to be) before the caller hears of it: its
		// next call's requests are not taken for this one's.
		c.callsMu.Lock()
		if c.unanswered[r]--; c.unanswered[r] <= 0 {
			delete(c.unanswered, r)
		}
		c.callsMu.Unlock()
		got <- outcome{resp, err}
	}()
	select {
	case o := <-got:
		return o.resp, o.err
	case <-ctx.Done():
		if leave() {
			stop()
		} else {
			time.AfterFunc(leftCallGrace, stop) // no longer awaited: a candidate no more
		}
		return nil, ctx.Err()
	}
}

// errNoAnswer: the harness gave no answer to the upstream's request.
var errNoAnswer = errors.New("the client gave no answer")

// maxWaitingAsks bounds the upstream's requests one call holds: a round
// handed out and the next one queued. The transports run each request on
// a goroutine of its own, so an upstream that floods them would otherwise
// hold that many goroutines until the call ends.
const maxWaitingAsks = 2 * maxRoundRequests

// errTooManyAsks refuses an upstream request past maxWaitingAsks.
var errTooManyAsks = fmt.Errorf("more than %d requests of this call wait for the client's answers", maxWaitingAsks)

// The upstream's own requests (ping, the relayed ones above, any other)
// each run on a goroutine of mcp-go's transport, and over Streamable HTTP
// each answer goes in a POST of its own, which mcp-go waits on for up to
// 30 s. An upstream that sent thousands of them during a call or a
// listing, and answered none of those POSTs, held a goroutine and a
// connection per request: catalog-svc reached its open-file limit (attack
// run a1). So a connection handles at most maxServerRequests of them at
// once — from when its handler is called until its answer was sent (HTTP:
// the POST ended, or mcp-go gave it up; stdio: the answer was queued for
// the pipe) — and drops one past that unanswered: JSON-RPC obliges no
// client to answer a request, and an upstream that floods its client is
// the one left waiting. Of those, at most maxReplies answers are on their
// way to the upstream at once: over HTTP an answer waits for room as long
// as mcp-go gives its request, over stdio one past that many queued for
// the pipe is dropped (stdinPipe). One call's relayed requests are bounded
// further (maxWaitingAsks).
const (
	maxServerRequests = 256
	maxReplies        = 16
)

// serverRequest is the transports' handler of the upstream's requests,
// within the connection's bounds (above).
func (c *conn) serverRequest(stdio bool, next transport.RequestHandler) transport.RequestHandler {
	handle := c.relay(stdio, next)
	return func(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
		c.asked.Add(1)
		select {
		case c.handling <- struct{}{}:
		default:
			c.drop(req.Method, tooManyRequests)
			return nil, nil // mcp-go sends nothing for no response
		}
		if stdio {
			// The answer is queued (stdinPipe.Write returns at once): the
			// request is done with when its handler returns.
			defer func() { <-c.handling }()
			return handle(ctx, req)
		}
		// mcp-go ends ctx once the answer's POST ended (or could not be
		// sent): the request holds its goroutine, and its POST a
		// connection, until then.
		context.AfterFunc(ctx, func() { <-c.handling })
		resp, err := handle(ctx, req)
		select {
		case c.replying <- struct{}{}:
			context.AfterFunc(ctx, func() { <-c.replying })
			return resp, err
		case <-ctx.Done():
			return nil, nil // mcp-go could no longer send it either
		}
	}
}

// drop notes a request of the upstream (of method, when known) dropped
// unanswered, and why, in a log line at the first and at every power of
// two: a flood writes few lines.
func (c *conn) drop(method, why string) {
	if n := c.dropped.Add(1); n&(n-1) == 0 {
		c.log.Warn("upstream requests dropped unanswered", slog.String("reason", why), slog.String("method", method),
			slog.Int64("dropped", n), slog.Int64("received", c.asked.Load()))
	}
}

// Why a request of the upstream is dropped (drop).
var (
	tooManyRequests = fmt.Sprintf("more than %d of its requests handled at once", maxServerRequests)
	tooManyReplies  = fmt.Sprintf("more than %d answers queued for a server that does not read them", maxReplies)
)

// relay handles one request of the upstream: a relayed one of a running
// call waits for the harness's answer; the rest go to mcp-go's own
// handler (ping; an error for the others).
func (c *conn) relay(stdio bool, next transport.RequestHandler) transport.RequestHandler {
	return func(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
		if !relayed(req.Method, stdio) {
			return next(ctx, req)
		}
		r := c.callOf(ctx, stdio)
		if r == nil {
			c.log.Info("upstream request belongs to no one call (none, or several it may be of); refused", slog.String("method", req.Method))
			return next(ctx, req)
		}
		if r.waiting.Add(1) > maxWaitingAsks {
			r.waiting.Add(-1)
			return nil, errTooManyAsks
		}
		defer r.waiting.Add(-1)
		params, err := json.Marshal(req.Params)
		if err != nil {
			return nil, err
		}
		a := &ask{method: req.Method, params: params, answer: make(chan json.RawMessage, 1)}
		select {
		case r.asks <- a:
		case <-r.done:
			return nil, errors.New("the call this request belongs to has ended")
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		select {
		case res, ok := <-a.answer:
			if !ok {
				return nil, errNoAnswer
			}
			return transport.NewJSONRPCResultResponse(req.ID, res), nil
		case <-r.ctx.Done():
			return nil, r.ctx.Err()
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
