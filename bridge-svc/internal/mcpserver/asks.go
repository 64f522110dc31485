package mcpserver

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/sharedos/toolshare/bridge-svc/internal/forward"
	"github.com/sharedos/toolshare/bridge-svc/internal/leases"
	"github.com/sharedos/toolshare/bridge-svc/internal/protocol"
)

// Input rounds on a 2025-era session (ADR 0017): a tool's input requests
// go to the client as server-to-client JSON-RPC requests on the call's own
// response stream, and the client POSTs each answer back with its session
// id. asks holds this pod's requests waiting for their answers.
type asks struct {
	mu sync.Mutex
	m  map[string]*ask
	// stopping is closed when the pod begins to shut down (StopAsking).
	stopping chan struct{}
	stop     sync.Once
}

type ask struct {
	turnID, sessionID string
	answer            chan answer
}

// answer is a client's response to an ask, or, ended, word that its
// session was ended with DELETE (asks.end).
type answer struct {
	result, err json.RawMessage
	ended       bool
}

func newAsks() *asks { return &asks{m: map[string]*ask{}, stopping: make(chan struct{})} }

// StopAsking ends every input request of this pod waiting for its client's
// answer, and any asked from now on, with forward.ErrBridgeStopping: a
// pod that is shutting down takes no new answer POSTs and stops relaying
// answers, so a round it asked can no longer be answered here, and waiting
// would only hold its drain until the connection is cut and the attempt
// recorded as its client's leaving. Called once the pod begins to drain.
func (h *Handler) StopAsking() { h.asks.stop.Do(func() { close(h.asks.stopping) }) }

// add registers a request of turnID's session and returns its id (a JSON
// string nobody can guess) and where its answer arrives.
func (a *asks) add(turnID, sessionID string) (string, <-chan answer) {
	var b [askRandomBytes]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	id := askPrefix + hex.EncodeToString(b[:]) + `"`
	k := &ask{turnID: turnID, sessionID: sessionID, answer: make(chan answer, 1)}
	a.mu.Lock()
	a.m[id] = k
	a.mu.Unlock()
	return id, k.answer
}

func (a *asks) remove(id string) {
	a.mu.Lock()
	delete(a.m, id)
	a.mu.Unlock()
}

// deliver hands a response to the request it answers, when that request is
// this pod's and of the same turn and session; false otherwise.
func (a *asks) deliver(turnID, sessionID string, id, result, rpcErr json.RawMessage) bool {
	a.mu.Lock()
	k, ok := a.m[string(id)]
	if ok && k.turnID == turnID && k.sessionID == sessionID {
		delete(a.m, string(id))
	} else {
		ok = false
	}
	a.mu.Unlock()
	if ok {
		k.answer <- answer{result: result, err: rpcErr}
	}
	return ok
}

// end ends every request of turnID's session sessionID waiting on this
// pod: the client ended the session with DELETE, and no answer of it is
// taken from then on.
func (a *asks) end(turnID, sessionID string) {
	var ended []*ask
	a.mu.Lock()
	for id, k := range a.m {
		if k.turnID == turnID && k.sessionID == sessionID {
			delete(a.m, id)
			ended = append(ended, k)
		}
	}
	a.mu.Unlock()
	for _, k := range ended {
		k.answer <- answer{ended: true}
	}
}

// has reports whether request id (JSON) is this pod's and still waits.
func (a *asks) has(id []byte) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.m[string(id)]
	return ok
}

// ids are the requests of this pod still waiting.
func (a *asks) ids() [][]byte {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([][]byte, 0, len(a.m))
	for id := range a.m {
		out = append(out, []byte(id))
	}
	return out
}

// askPrefix starts every input request id the bridge sends (as JSON).
const askPrefix = `"sharedos-ask-`

// askRandomBytes are the random bytes of an input request id, written in
// lowercase hex after askPrefix.
const askRandomBytes = 16

// isAskID reports whether id (JSON) has the shape of the input request ids
// add mints: askPrefix, 2·askRandomBytes lowercase hex digits and the
// closing quote. Any other id is none of the bridge's requests, and the
// client chose it: the store keys and announces a passed answer by its id,
// and one of 8 KB failed its announcement (pg_notify), which the client
// got as a store outage (503) and the pod logged as an error.
func isAskID(id []byte) bool {
	hexID, ok := bytes.CutPrefix(id, []byte(askPrefix))
	if !ok || len(hexID) != 2*askRandomBytes+1 || hexID[2*askRandomBytes] != '"' {
		return false
	}
	for _, c := range hexID[:2*askRandomBytes] {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// pass hands an answer this pod does not wait for to the pod that does,
// through the store (leases.Answers); false when it is not such an answer
// (its id is none the bridge mints: mcp-go answers it as any response to
// an unknown request) or the store relays none (one pod: every answer
// reaches the asker).
func (h *Handler) pass(ctx context.Context, turnID, sessionID string, msg *protocol.Message) (bool, error) {
	relay, ok := h.cfg.Store.(leases.Answers)
	if !ok || !isAskID(msg.ID) {
		return false, nil
	}
	lctx, cancel := context.WithTimeout(ctx, h.cfg.LeaseTimeout)
	defer cancel()
	return true, relay.PassAnswer(lctx, leases.Answer{TurnID: turnID, SessionID: sessionID, ID: msg.ID, Result: msg.Result, Error: msg.Error})
}

// RunAnswerRelay takes the answers other pods pass on for this pod's input
// requests (their clients' answer POSTs reached another pod), until ctx is
// done. After each (re)connection it also takes what was passed for every
// request still waiting, so an answer passed while it was not listening is
// not lost. A store that relays nothing returns at once.
func (h *Handler) RunAnswerRelay(ctx context.Context) {
	relay, ok := h.cfg.Store.(leases.Answers)
	if !ok {
		return
	}
	take := func(id []byte) {
		if !h.asks.has(id) {
			return // another pod's request
		}
		a, err := relay.TakeAnswer(ctx, id)
		if err == nil {
			h.asks.deliver(a.TurnID, a.SessionID, a.ID, a.Result, a.Error)
		}
	}
	for backoff := time.Second; ; backoff = min(2*backoff, 30*time.Second) {
		err := relay.WatchAnswers(ctx, func() {
			for _, id := range h.asks.ids() {
				take(id)
			}
		}, take)
		if err == nil || ctx.Err() != nil {
			return
		}
		h.cfg.Logger.WarnContext(ctx, "input answer relay lost; reconnecting", slog.String("error", err.Error()))
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
	}
}

// errStream: the call's response can no longer carry a request.
var errStream = errors.New("the call's response stream cannot carry the request")

// sessionCheckInterval is how often a call waiting for its client's answer
// reads whether the session was ended with DELETE through another pod (the
// pod that took the DELETE ends its own asks at once, asks.end).
const sessionCheckInterval = time.Second

// asker returns the function that asks a 2025-era session's client for a
// round's input on the call's response stream and returns its answers as
// an inputResponses object; it gives up at until or when ctx ends, and
// ends with forward.ErrSessionEnded once the session is ended with DELETE
// (its answers are refused from then on: 404).
func (h *Handler) asker(turnID, sessionID string, st *callState) func(context.Context, json.RawMessage, time.Time) (json.RawMessage, error) {
	// ended reads the lease status, as a request of the session would: on
	// the pod that took the DELETE it is read afresh, on others within the
	// status cache's TTL.
	ended := func(ctx context.Context) bool {
		lease, err := h.status(ctx, turnID)
		return err == nil && lease.Terminated(sessionID)
	}
	return func(ctx context.Context, requests json.RawMessage, until time.Time) (json.RawMessage, error) {
		var reqs map[string]struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if err := json.Unmarshal(requests, &reqs); err != nil {
			return nil, fmt.Errorf("input requests: %w", err)
		}
		select {
		case <-h.asks.stopping:
			return nil, forward.ErrBridgeStopping
		default:
		}
		keys := make([]string, 0, len(reqs))
		for k := range reqs {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		ids := make([]string, len(keys))
		waits := make([]<-chan answer, len(keys))
		defer func() {
			for _, id := range ids {
				h.asks.remove(id)
			}
		}()
		for i := range keys {
			ids[i], waits[i] = h.asks.add(turnID, sessionID)
		}
		// Registered first, then checked: a DELETE after this check ends
		// the asks registered (asks.end), one before it is read here.
		if ended(ctx) {
			return nil, forward.ErrSessionEnded
		}
		for i, k := range keys {
			params := reqs[k].Params
			if len(bytes.TrimSpace(params)) == 0 {
				params = json.RawMessage(`{}`)
			}
			msg, err := json.Marshal(struct {
				JSONRPC string          `json:"jsonrpc"`
				ID      json.RawMessage `json:"id"`
				Method  string          `json:"method"`
				Params  json.RawMessage `json:"params"`
			}{"2.0", json.RawMessage(ids[i]), reqs[k].Method, params})
			if err != nil {
				return nil, fmt.Errorf("input request %q: %w", k, err)
			}
			if st == nil || st.resp == nil || !st.resp.event(msg) {
				return nil, errStream
			}
		}
		timer := time.NewTimer(time.Until(until))
		defer timer.Stop()
		check := time.NewTicker(sessionCheckInterval)
		defer check.Stop()
		out := make(map[string]json.RawMessage, len(keys))
		// i moves on with each answer; a session check leaves it.
		for i := 0; i < len(keys); {
			k := keys[i]
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-h.asks.stopping:
				return nil, forward.ErrBridgeStopping
			case <-timer.C:
				return nil, errors.New("no answer before the round's deadline")
			case <-check.C:
				if ended(ctx) {
					return nil, forward.ErrSessionEnded
				}
			case a := <-waits[i]:
				if a.ended {
					return nil, forward.ErrSessionEnded
				}
				if len(a.err) > 0 || len(bytes.TrimSpace(a.result)) == 0 || bytes.TrimSpace(a.result)[0] != '{' {
					return nil, fmt.Errorf("the client answered %s with an error", reqs[k].Method)
				}
				out[k] = a.result
				i++
			}
		}
		return json.Marshal(out)
	}
}
