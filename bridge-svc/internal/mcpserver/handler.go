package mcpserver

import (
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/server"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"

	"github.com/sharedos/toolshare/bridge-svc/internal/forward"
	"github.com/sharedos/toolshare/bridge-svc/internal/leases"
	"github.com/sharedos/toolshare/bridge-svc/internal/protocol"
	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/toolname"
	"github.com/sharedos/toolshare/services/platform/memrelief"
	"github.com/sharedos/toolshare/services/platform/telemetry"
)

var tracer = otel.Tracer(telemetry.ScopeBridge)

// Pattern is the ServeMux pattern the Handler is mounted on.
const Pattern = "/turns/{turnId}/mcp"

// Config configures a Handler.
type Config struct {
	Store     leases.Store
	Forwarder *forward.Forwarder
	Edge      *protocol.Edge
	Logger    *slog.Logger
	// StatusCacheTTL lets a pod reuse a lease's status read for this long
	// (ADR 0005): a close made through another pod is seen within it, one
	// made through this pod at once; expiry is always judged on the store's
	// clock. Zero reads the store on every request.
	StatusCacheTTL time.Duration
	// LeaseTimeout bounds one lease read (default DefaultLeaseTimeout): a
	// hung store answers 503 within it instead of holding the request.
	LeaseTimeout time.Duration
	// FailureRate and FailureBurst are the refused requests a source
	// address may cause per second before its requests are refused without
	// a lease lookup (defaults DefaultFailureRate, DefaultFailureBurst).
	FailureRate  float64
	FailureBurst int
	// TrustedProxies are the peers whose X-Forwarded-For names the source
	// address the refusal budget is kept for (an Ingress, a load balancer).
	TrustedProxies []netip.Prefix
	// NegativeCacheTTL lets a pod answer 404 for a turn id it found unknown,
	// closed or expired this recently without reading the store again
	// (default DefaultNegativeCacheTTL, negative: off; a turn that is gone
	// stays gone).
	NegativeCacheTTL time.Duration
	// InitializeRate and InitializeBurst are the initialize requests one
	// turn may make per second on this pod before they are refused 429
	// (defaults DefaultInitializeRate, DefaultInitializeBurst).
	InitializeRate  float64
	InitializeBurst int
	// IdleEvict drops a turn's cached server after this long without a
	// request (default DefaultIdleEvict, negative: never): a pod's memory
	// follows its active turns, not every open one. The next request
	// rebuilds it from the lease, as a request landing on another pod does.
	IdleEvict time.Duration
	// Now replaces time.Now (tests).
	Now func() time.Time
	// TracerProvider replaces the global one (tests).
	TracerProvider trace.TracerProvider
}

// DefaultLeaseTimeout bounds one lease read.
const DefaultLeaseTimeout = 3 * time.Second

// DefaultNegativeCacheTTL is how long a pod remembers a turn id it found
// unknown, closed or expired.
const DefaultNegativeCacheTTL = time.Second

// maxNegative bounds the negative cache; past it the cache starts over.
const maxNegative = 10_000

// DefaultIdleEvict is how long a turn's cached server outlives its last
// request on a pod.
const DefaultIdleEvict = 10 * time.Minute

// Defaults of the initialize budget per turn and pod.
const (
	DefaultInitializeRate  = 10
	DefaultInitializeBurst = 100
)

// Handler serves every turn's MCP endpoint and caches one turnServer per
// open turn seen by this pod.
type Handler struct {
	cfg      Config
	tracer   trace.Tracer
	failures *failures
	// asks are this pod's input requests to 2025-era clients.
	asks *asks

	mu       sync.Mutex
	turns    map[string]*entry
	statuses map[string]cachedStatus
	// negative holds when this pod last found a turn id unknown, closed or
	// expired (the status, or ErrNotFound as a zero status).
	negative map[string]negativeStatus
	// holders are the token hashes of the open turns whose right token
	// this pod has seen (the gate let a request of the turn in): a request
	// presenting one is a caller of a live turn, not a prober, and is
	// subject to its own token check only, never to its source's refusal
	// budget (reliability row 34). Dropped with the turn (Evict), so
	// bounded by the open turns this pod serves.
	holders map[string][sha256.Size]byte
	// evictions counts Evict calls: a status read that an eviction
	// overtook is not cached (it may predate the close it evicted for).
	evictions uint64
}

type cachedStatus struct {
	st leases.Status
	// fetched is this pod's clock at the read; skew = store clock - pod clock.
	fetched time.Time
	skew    time.Duration
}

type negativeStatus struct {
	st      leases.Status
	unknown bool
	fetched time.Time
}

type entry struct {
	once sync.Once
	srv  *turnServer
	err  error
	// built is set once srv is ready; Served reads it without e.once.
	built atomic.Bool
	// used is the pod clock (UnixNano) at the turn's latest request.
	used atomic.Int64
}

// NewHandler returns a Handler.
func NewHandler(cfg Config) *Handler {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.LeaseTimeout <= 0 {
		cfg.LeaseTimeout = DefaultLeaseTimeout
	}
	if cfg.InitializeRate <= 0 {
		cfg.InitializeRate = DefaultInitializeRate
	}
	if cfg.InitializeBurst <= 0 {
		cfg.InitializeBurst = DefaultInitializeBurst
	}
	if cfg.NegativeCacheTTL == 0 {
		cfg.NegativeCacheTTL = DefaultNegativeCacheTTL
	}
	if cfg.IdleEvict == 0 {
		cfg.IdleEvict = DefaultIdleEvict
	}
	h := &Handler{cfg: cfg, tracer: tracer, turns: make(map[string]*entry), statuses: make(map[string]cachedStatus), asks: newAsks(),
		negative: make(map[string]negativeStatus), holders: make(map[string][sha256.Size]byte),
		failures: newFailures(cfg.FailureRate, cfg.FailureBurst)}
	if cfg.TracerProvider != nil {
		h.tracer = cfg.TracerProvider.Tracer(telemetry.ScopeBridge)
	}
	return h
}

// ServeHTTP is the gate, then the router: nothing of a turn is touched
// before the gate has let the request in.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	admitted := h.cfg.Now()
	turnID, st, ok := h.gate(w, r)
	if !ok {
		return
	}
	// The memory of a large result goes back once its answer is written
	// (memrelief; reliability row 48).
	ctx, relieve := memrelief.Scope(r.Context())
	defer relieve()
	h.route(w, r.WithContext(ctx), turnID, st, admitted)
}

// expiredSince reports whether a lease the gate found open at admitted
// (this pod's clock) has expired since, on the store's clock.
func expiredSince(lease leases.Status, admitted, now time.Time) bool {
	return !lease.StoreNow.IsZero() && !lease.StoreNow.Add(now.Sub(admitted)).Before(lease.ExpiresAt)
}

// gate checks, in order: the edge rules (Host, Origin, method,
// Content-Type, declared length), the turn id, the bearer, the lease
// (unknown, closed or expired → 404 and nothing else happens) and the
// token's binding to this turn. It answers every refusal itself and
// reports whether the request may go on.
func (h *Handler) gate(w http.ResponseWriter, r *http.Request) (turnID string, _ leases.Status, ok bool) {
	if herr := h.cfg.Edge.Check(r); herr != nil {
		h.refuse(w, r, herr.Status, herr.Reason)
		return "", leases.Status{}, false
	}
	turnID = r.PathValue("turnId")
	if !leases.ValidTurnID(turnID) {
		h.refuse(w, r, http.StatusNotFound, "turn not found")
		return "", leases.Status{}, false
	}
	token, ok := bearer(r)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="sharedos-turn"`)
		h.refuse(w, r, http.StatusUnauthorized, "bearer token required")
		return "", leases.Status{}, false
	}
	ctx := r.Context()
	src := source(r, h.cfg.TrustedProxies)
	limited := h.failures.exhausted(src)
	// The budget bounds the store reads of requests that may name no turn
	// at all. A caller presenting the token of a turn this pod has served
	// is not one: it would otherwise be refused with whoever shares its
	// address (a NAT, loopback, an Ingress not trusted) each time its
	// turn's status is older than StatusCacheTTL, and its tool calls left
	// unrecorded.
	if limited && !h.statusCached(turnID) && !h.holder(turnID, token) {
		w.Header().Set("Retry-After", "1")
		h.refuse(w, r, http.StatusTooManyRequests, "too many refused requests from this address")
		return "", leases.Status{}, false
	}
	gen := h.evictionCount()
	st, err := h.status(ctx, turnID)
	switch {
	case errors.Is(err, leases.ErrNotFound):
		h.failures.spend(src)
		h.refuse(w, r, http.StatusNotFound, "turn not found")
		return "", leases.Status{}, false
	case err != nil:
		h.cfg.Logger.ErrorContext(ctx, "lease lookup failed", slog.String(telemetry.LogTurnID, turnID), slog.String("error", err.Error()))
		h.refuse(w, r, http.StatusServiceUnavailable, "lease store unavailable")
		return "", leases.Status{}, false
	case !st.Open():
		h.failures.spend(src)
		h.Evict(turnID)
		h.refuse(w, r, http.StatusNotFound, "turn not found")
		return "", leases.Status{}, false
	}
	if !leases.TokenMatches(token, st.TokenHash) {
		turnLimited := h.failures.exhausted(turnKey(turnID))
		h.failures.spend(src)
		h.failures.spend(turnKey(turnID))
		// Another turn's token names a turn that is not this one: 404, as if
		// this turn did not exist for its holder. No valid token at all: 401.
		// A source or a turn past its refusal budget is not worth the second
		// lookup.
		if !limited && !turnLimited {
			lctx, cancel := context.WithTimeout(ctx, h.cfg.LeaseTimeout)
			_, err := h.cfg.Store.TurnByToken(lctx, leases.HashToken(token))
			cancel()
			if err == nil {
				h.refuse(w, r, http.StatusNotFound, "turn not found")
				return "", leases.Status{}, false
			}
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="sharedos-turn", error="invalid_token"`)
		h.refuse(w, r, http.StatusUnauthorized, "invalid bearer token")
		return "", leases.Status{}, false
	}
	h.noteHolder(turnID, st.TokenHash, gen)
	return turnID, st, true
}

// holder reports whether token is the token of turnID as this pod knows it
// from a request it let in (a hash comparison, no store read).
func (h *Handler) holder(turnID, token string) bool {
	h.mu.Lock()
	known, ok := h.holders[turnID]
	h.mu.Unlock()
	return ok && leases.TokenMatches(token, known)
}

// evictionCount is the number of evictions so far (noteHolder's guard).
func (h *Handler) evictionCount() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.evictions
}

// noteHolder remembers turnID's token hash once a request presented it on
// the open lease, unless an eviction came since gen (the turn may have
// been closed after its status was read: a closed turn is not noted).
func (h *Handler) noteHolder(turnID string, hash [sha256.Size]byte, gen uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.holders[turnID]; !ok && h.evictions == gen {
		h.holders[turnID] = hash
	}
}

// route handles a request the gate let in: a POST's body is read under the
// size cap and pre-parsed strictly (a protocol error is answered here), a
// request whose Mcp-Method or Mcp-Name header disagrees with it is refused
// (recorded when either names an attempt), a modern cancellation is
// absorbed, the request gets its server span, and everything else goes to
// the turn's mcp-go server with the body already read.
func (h *Handler) route(w http.ResponseWriter, r *http.Request, turnID string, lease leases.Status, admitted time.Time) {
	ctx := r.Context()
	if r.Method != http.MethodPost && len(r.Header.Values(protocol.HeaderSessionID)) > 1 {
		// The first would be ended (or streamed), where a proxy may have
		// read the last; a POST's is refused with its body, recorded
		// (protocol.NameHeaderMismatch).
		h.refuse(w, r, http.StatusBadRequest, protocol.HeaderSessionID+" header repeated")
		return
	}
	version := r.Header.Get(protocol.HeaderProtocolVersion)
	if r.Method != http.MethodPost && protocol.UnsupportedVersion(version) {
		// mcp-go checks the version on its own paths; a DELETE the bridge
		// answers itself (below) is owed the same check.
		h.refuse(w, r, http.StatusBadRequest, "unsupported protocol version")
		return
	}
	if r.Method == http.MethodDelete && !protocol.IsModern(version) && r.Header.Get(server.HeaderKeySessionID) == "" {
		// Nothing to end: mcp-go would ask the session manager to end ""
		// and answer its refusal 500. A request that lacks the session id
		// it needs is a 400 (2025-11-25 transports).
		h.refuse(w, r, http.StatusBadRequest, protocol.HeaderSessionID+" header required")
		return
	}
	if sid := r.Header.Get(server.HeaderKeySessionID); sid != "" && !protocol.IsModern(version) {
		if lease.Terminated(sid) {
			status, reason, why := http.StatusNotFound, "session terminated", "the session was ended with DELETE"
			if protocol.UnsupportedVersion(version) {
				// A POST's version is checked before its session, as
				// mcp-go checks it.
				status, reason, why = http.StatusBadRequest, "unsupported protocol version", "unsupported protocol version"
			}
			if r.Method == http.MethodPost {
				// A tools/call on it is an attempt all the same: recorded —
				// unless the turn expired while its body arrived, which
				// leaves a request 404 with nothing recorded, as below
				// (invariant 6).
				body, _ := h.cfg.Edge.ReadBody(w, r)
				if expiredSince(lease, admitted, h.cfg.Now()) {
					h.Evict(turnID)
					h.refuse(w, r, http.StatusNotFound, "turn not found")
					return
				}
				h.recordRefused(ctx, turnID, r.Header, body, why)
			}
			h.refuse(w, r, status, reason)
			return
		}
		if r.Method == http.MethodDelete {
			h.terminate(w, r, turnID, sid)
			return
		}
	}
	var body []byte
	var msg *protocol.Message
	if r.Method == http.MethodPost {
		var herr *protocol.HTTPError
		body, herr = h.cfg.Edge.ReadBody(w, r)
		// The turn may have expired while the body arrived or failed to
		// (up to the edge's read timeout): on the store's clock, as the
		// gate judged it, the request is then 404 with nothing parsed, run
		// or recorded (invariant 6).
		if expiredSince(lease, admitted, h.cfg.Now()) {
			h.Evict(turnID)
			h.refuse(w, r, http.StatusNotFound, "turn not found")
			return
		}
		if herr != nil {
			h.recordRefused(ctx, turnID, r.Header, body, herr.Reason)
			h.refuse(w, r, herr.Status, herr.Reason)
			return
		}
		var rerr *protocol.RPCError
		msg, rerr = protocol.Parse(body)
		if rerr != nil {
			h.recordRefused(ctx, turnID, r.Header, body, rerr.Message)
			status := http.StatusBadRequest
			if rerr.Code == protocol.CodeInvalidParams {
				// A valid request with invalid params: answered with the
				// status its handler's error would have in its era (a
				// 2026-07-28 client sends the header).
				status = protocol.ErrorStatus(protocol.IsModern(version), rerr.Code)
			}
			writeRPCErrorStatus(w, status, rerr)
			return
		}
		if reason := protocol.NameHeaderMismatch(r.Header, msg); reason != "" {
			// mcp-go would refuse most of these too, but with a message that
			// quotes neither name, and a notification not at all: refused
			// here, before any other reading of the message, with the
			// protocol error a 2026-07-28 server owes (400, -32020) —
			// recorded first when its Mcp-Method header or its method names
			// an attempt.
			h.refuseHeaders(w, r, turnID, body, msg, reason)
			return
		}
		modern := protocol.IsModern(version) || protocol.IsModern(msg.MetaProtocolVersion)
		if !modern && msg.Method != "initialize" && protocol.UnsupportedVersion(version) {
			// mcp-go checks it on its own paths (an initialize negotiates
			// the version instead); the answers the bridge gives below
			// itself are owed the same check. An attempt is recorded, as
			// mcp-go's refusal of it would be.
			h.recordRefused(ctx, turnID, r.Header, body, "unsupported protocol version")
			h.refuse(w, r, http.StatusBadRequest, "unsupported protocol version")
			return
		}
		if !modern && msg.Method != "" && msg.Method != "initialize" && r.Header.Get(server.HeaderKeySessionID) == "" {
			// mcp-go answers 404 "Invalid session ID", which tells a 2025
			// client its session is gone; this request never named one, and
			// one is required after initialize: 400 (2025-11-25
			// transports). An attempt is recorded.
			h.recordRefused(ctx, turnID, r.Header, body, protocol.HeaderSessionID+" header required")
			h.refuse(w, r, http.StatusBadRequest, protocol.HeaderSessionID+" header required")
			return
		}
		if msg.Method == "notifications/cancelled" && msg.IsNotification() && modern {
			// 2026-07-28 cancels by closing the request's stream. mcp-go keys
			// modern in-flight requests by id alone (every modern session is
			// ""), so passing this on would let one client cancel another's
			// request with the same id. One with an id is a request, owed an
			// answer: mcp-go's, as for any notification method sent as a
			// request (404, -32601; it cancels nothing).
			w.WriteHeader(http.StatusAccepted)
			return
		}
		if msg.Method == "" && modern {
			// A client-to-server response answers a server-initiated
			// request, which 2026-07-28 replaced with multi round-trip
			// requests: refused as mcp-go refuses it (400, -32600), and
			// never delivered below — a 2026-07-28 header skips the check
			// of an ended session, so such an answer reached a call of a
			// session ended with DELETE.
			reason := "client-to-server responses are not supported in protocol version " + protocol.Version20260728
			h.recordRefused(ctx, turnID, r.Header, body, reason)
			writeRPCError(w, &protocol.RPCError{Code: protocol.CodeInvalidRequest, Message: "invalid request: " + reason, ID: msg.ID})
			return
		}
		if sid := r.Header.Get(server.HeaderKeySessionID); msg.Method == "" && sid != "" {
			// A 2025-era client's answer to an input request: of a call this
			// pod runs, or passed on to the pod that does.
			if h.asks.deliver(turnID, sid, msg.ID, msg.Result, msg.Error) {
				w.WriteHeader(http.StatusAccepted)
				return
			}
			if !h.sessionValid(ctx, turnID, sid) {
				h.refuse(w, r, http.StatusNotFound, "invalid session id")
				return
			}
			switch passed, err := h.pass(ctx, turnID, sid, msg); {
			case errors.Is(err, leases.ErrAnswerBudget):
				h.refuse(w, r, http.StatusTooManyRequests, "too many input answers of this turn wait to be taken")
				return
			case err != nil:
				h.cfg.Logger.ErrorContext(ctx, "input answer not passed on", slog.String(telemetry.LogTurnID, turnID), slog.String("error", err.Error()))
				h.refuse(w, r, http.StatusServiceUnavailable, "lease store unavailable")
				return
			case passed:
				w.WriteHeader(http.StatusAccepted)
				return
			}
		}
		if (msg.Method == "resources/subscribe" || msg.Method == "resources/unsubscribe") && !modern {
			// 2025 eras: acknowledged; a turn's resources are pinned, and
			// no update is ever pushed (ADR 0018). 2026-07-28 removed the
			// methods: mcp-go answers them 404.
			if !h.sessionValid(ctx, turnID, r.Header.Get(server.HeaderKeySessionID)) {
				h.refuse(w, r, http.StatusNotFound, "invalid session id")
				return
			}
			if msg.Target == "" {
				// Both methods take the URI (MCP schema: required); a
				// 2025-era request's invalid params are answered as mcp-go
				// answers them, HTTP 200.
				writeRPCErrorStatus(w, http.StatusOK, &protocol.RPCError{Code: protocol.CodeInvalidParams,
					Message: `invalid params: "params.uri" is required for ` + msg.Method, ID: msg.ID})
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(msg.ID) + `,"result":{}}`))
			return
		}
		if msg.Method == "subscriptions/listen" {
			// A turn's catalogue is pinned for its lifetime: there is no list
			// change to announce (the standalone GET stream is off for the
			// same reason). Refused here, the same way every time.
			writeRPCErrorStatus(w, http.StatusNotFound, &protocol.RPCError{Code: protocol.CodeMethodNotFound,
				Message: "method not found: subscriptions/listen (a turn's catalogue is pinned; nothing changes to listen for)", ID: msg.ID})
			return
		}
		var span trace.Span
		ctx, span = h.startSpan(ctx, r, turnID, msg)
		defer span.End()
	}
	srv, err := h.server(ctx, turnID)
	if err != nil {
		h.cfg.Logger.ErrorContext(ctx, "turn server unavailable", slog.String(telemetry.LogTurnID, turnID), slog.String("error", err.Error()))
		if errors.Is(err, leases.ErrNotFound) {
			h.refuse(w, r, http.StatusNotFound, "turn not found")
			return
		}
		h.refuse(w, r, http.StatusServiceUnavailable, "turn unavailable")
		return
	}
	if msg != nil && msg.Method == "initialize" && !srv.initialize.Allow() {
		w.Header().Set("Retry-After", "1")
		h.refuse(w, r, http.StatusTooManyRequests, "too many initialize requests on this turn")
		return
	}
	kind, call := sharedosv1.CallKind(0), false
	if msg != nil {
		// Its Mcp-Method header or its method says so. (One whose header
		// alone says so was refused above: it does not reach mcp-go.)
		kind, call = attemptKinds[protocol.AttemptMethod(r.Header, msg.Method)]
	}
	ctx, st := withCallState(ctx)
	if msg != nil {
		st.msg = msg
		st.modern = protocol.IsModern(r.Header.Get(protocol.HeaderProtocolVersion)) || protocol.IsModern(msg.MetaProtocolVersion)
		if sid := r.Header.Get(server.HeaderKeySessionID); call && !st.modern && sid != "" {
			// The session's declared input capabilities travel in its id.
			if caps, err := srv.sessions.capabilities(sid); err == nil {
				st.inputMethods = protocol.InputMethods(caps)
				st.ask = h.asker(turnID, sid, st)
			}
		}
	}
	if r.Method == http.MethodGet {
		// mcp-go answers every GET 405 (streaming is off), a 2025-era one
		// without the Allow header RFC 9110 requires of a 405.
		w.Header().Set("Allow", protocol.AllowedMethods(r.Header))
	}
	resp := newResponse(w, st, call)
	st.resp = resp
	srv.http.Handle(resp, &server.HTTPRequest{
		Method: r.Method, URL: r.URL, Header: r.Header, Body: body, Context: ctx,
	})
	switch {
	case resp.held && st.lookedUp.Load() && h.refuseUnpinned(w, ctx, srv, msg):
		// mcp-go checked the request (transport, session, params) and found
		// no such prompt or resource: the turn did not pin it, and the
		// kernel's refusal, recorded, is the answer in place of mcp-go's.
	case resp.held:
		// mcp-go refused the call before its handler: recorded all the
		// same, then answered as mcp-go answered.
		h.cfg.Forwarder.RejectKind(ctx, srv.turn, kind, msg.Target, resp.refusal())
		resp.release()
	case call && !st.handled.Load() && !resp.answered() && ctx.Err() != nil:
		// The client left before mcp-go answered, and mcp-go then writes
		// nothing, refusal or not: recorded all the same, never run.
		h.cfg.Forwarder.RejectKind(ctx, srv.turn, kind, msg.Target, forward.ClientLeftReason)
	case msg != nil && msg.Method == "initialize":
		srv.forget(ctx, w.Header().Get(server.HeaderKeySessionID))
	}
}

// sessionValid reports whether sid is a 2025-era session id minted for
// turnID (and not ended by DELETE: the gate's lease status holds those).
func (h *Handler) sessionValid(ctx context.Context, turnID, sid string) bool {
	srv, err := h.server(ctx, turnID)
	if err != nil {
		return false
	}
	_, err = srv.sessions.Validate(sid)
	return err == nil
}

// terminate ends a 2025-era session on every pod (ADR 0005, amended): the
// lease remembers it, this pod forgets its cached status at once, other
// pods within the status cache TTL.
func (h *Handler) terminate(w http.ResponseWriter, r *http.Request, turnID, sid string) {
	ctx := r.Context()
	srv, err := h.server(ctx, turnID)
	if err != nil {
		h.refuse(w, r, http.StatusServiceUnavailable, "turn unavailable")
		return
	}
	if _, err := srv.sessions.Validate(sid); err != nil {
		h.refuse(w, r, http.StatusNotFound, "invalid session id")
		return
	}
	lctx, cancel := context.WithTimeout(ctx, h.cfg.LeaseTimeout)
	err = h.cfg.Store.TerminateSession(lctx, turnID, sid)
	cancel()
	switch {
	case errors.Is(err, leases.ErrTooManySessions):
		w.Header().Set("Allow", http.MethodPost) // DELETE is what this turn no longer takes
		h.refuse(w, r, http.StatusMethodNotAllowed, "no more sessions can be ended on this turn")
		return
	case errors.Is(err, leases.ErrNotFound):
		h.refuse(w, r, http.StatusNotFound, "turn not found")
		return
	case err != nil:
		h.cfg.Logger.ErrorContext(ctx, "session termination not stored", slog.String(telemetry.LogTurnID, turnID), slog.String("error", err.Error()))
		h.refuse(w, r, http.StatusServiceUnavailable, "lease store unavailable")
		return
	}
	h.mu.Lock()
	h.dropStatusLocked(turnID) // the cached status predates the termination
	h.mu.Unlock()
	// The session's calls waiting on this pod for its answers end as calls
	// whose client left (cancelled): no answer of it is taken from now on.
	// Other pods see the termination in the status (asker).
	h.asks.end(turnID, sid)
	w.WriteHeader(http.StatusOK)
}

// recordRefused records a request the bridge refused itself (while
// reading or parsing it, or for its headers), when it claims to be an
// attempt — a tools/call, prompts/get or resources/read, by its Mcp-Method
// header or its body (protocol.Sniff): every attempt on an authenticated
// turn leaves a record, failed/invalid_request, and nothing runs. Anything
// else (a notification or a list under no such header, an unreadable body)
// is only answered.
func (h *Handler) recordRefused(ctx context.Context, turnID string, header http.Header, body []byte, reason string) {
	method, name := protocol.Sniff(header, body)
	if kind, ok := attemptKinds[method]; ok {
		h.reject(ctx, turnID, kind, name, reason)
	}
}

// refuseHeaders answers a request whose Mcp-Method or Mcp-Name header the
// bridge refuses (protocol.NameHeaderMismatch) with HTTP 400 and -32020,
// under the request's own span, after recording it when its header or its
// body says it is an attempt.
func (h *Handler) refuseHeaders(w http.ResponseWriter, r *http.Request, turnID string, body []byte, msg *protocol.Message, reason string) {
	ctx, span := h.startSpan(r.Context(), r, turnID, msg)
	defer span.End()
	h.recordRefused(ctx, turnID, r.Header, body, reason)
	writeRPCError(w, &protocol.RPCError{Code: protocol.CodeHeaderMismatch, Message: "header mismatch: " + reason, ID: msg.ID})
}

// reject records a refused attempt of turnID under what it named.
func (h *Handler) reject(ctx context.Context, turnID string, kind sharedosv1.CallKind, name, reason string) {
	if srv, err := h.server(ctx, turnID); err == nil {
		h.cfg.Forwarder.RejectKind(ctx, srv.turn, kind, name, reason)
	}
}

// startSpan opens the request's one server span, continuing the caller's
// trace: params._meta.traceparent (SEP-414) when the message carries one,
// else the W3C headers. mcp-go derives the handler's context from the
// request's, so the InvokeTool client span nests under it.
//
// The span opens before the bridge has refused anything (a header
// mismatch, an unknown method), so every string of the request's choosing
// on it is bounded: the method is one of MCP's or MCPMethodOther; the
// name joins the span name only when it follows the tool naming rule
// (any other — megabytes long, or with a newline or an escape sequence in
// it — leaves the span named by its method alone, since every distinct
// span name is a new operation in a trace backend); and every attribute
// value is escaped and capped (telemetry.EscapeValue). A span waiting in
// the exporter's queue keeps all it holds until it is sent.
func (h *Handler) startSpan(ctx context.Context, r *http.Request, turnID string, msg *protocol.Message) (context.Context, trace.Span) {
	version := r.Header.Get(protocol.HeaderProtocolVersion)
	if msg.MetaProtocolVersion != "" {
		version = msg.MetaProtocolVersion
	}
	method := msg.Method
	if !protocol.KnownMethod(method) {
		method = telemetry.MCPMethodOther
	}
	target := msg.ToolName
	if toolname.Validate(target) != nil {
		target = ""
	}
	ctx, span := h.tracer.Start(extractTrace(ctx, r.Header, msg.TraceMeta), telemetry.MCPSpanName(method, target),
		trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(
			attribute.String(telemetry.AttrTurnID, turnID),
			attribute.String(telemetry.AttrMCPMethod, method),
			attribute.String(telemetry.AttrMCPProtocol, telemetry.EscapeValue(version)),
		))
	if msg.ToolName != "" {
		span.SetAttributes(attribute.String(telemetry.AttrGenAIToolName, telemetry.EscapeValue(msg.ToolName)))
	}
	return ctx, span
}

// writeRPCError answers a JSON-RPC protocol error with HTTP 400.
func writeRPCError(w http.ResponseWriter, rerr *protocol.RPCError) {
	writeRPCErrorStatus(w, http.StatusBadRequest, rerr)
}

// writeRPCErrorStatus answers a JSON-RPC protocol error with status.
func writeRPCErrorStatus(w http.ResponseWriter, status int, rerr *protocol.RPCError) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(rerr.Body())
}

// traceparentOnly shows the propagator a harness's traceparent and
// nothing else: W3C baggage, and tracestate (32 members of the harness's
// choosing), would cross the internal plane as the caller's own — gRPC
// metadata to the kernel, authz and every provider — carrying whatever the
// harness put there (review: a canary token in either reached the
// kernel). Baggage among the services themselves still passes
// (telemetry.SetupWith's propagator).
type traceparentOnly struct{ propagation.TextMapCarrier }

func (c traceparentOnly) Get(key string) string {
	if key != "traceparent" {
		return ""
	}
	return c.TextMapCarrier.Get(key)
}

// extractTrace returns ctx carrying the remote span the request continues.
// A message's own _meta traceparent wins over the HTTP header: it names
// the harness span of this very call, while headers may belong to a shared
// connection or a proxy. An invalid _meta traceparent is ignored (the
// propagator leaves the context as it was), so the header still applies.
func extractTrace(ctx context.Context, h http.Header, meta map[string]string) context.Context {
	var prop propagation.TraceContext
	ctx = prop.Extract(ctx, traceparentOnly{propagation.HeaderCarrier(h)})
	if meta["traceparent"] != "" {
		ctx = prop.Extract(ctx, traceparentOnly{propagation.MapCarrier(meta)})
	}
	return ctx
}

func bearer(r *http.Request) (string, bool) {
	v := r.Header.Values("Authorization")
	if len(v) != 1 {
		return "", false
	}
	scheme, token, ok := strings.Cut(v[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

func (h *Handler) refuse(w http.ResponseWriter, r *http.Request, status int, reason string) {
	h.cfg.Logger.DebugContext(r.Context(), "mcp request refused", slog.Int("status", status), slog.String("reason", reason))
	if status == http.StatusMethodNotAllowed && w.Header().Get("Allow") == "" {
		w.Header().Set("Allow", protocol.AllowedMethods(r.Header)) // RFC 9110: a 405 MUST list them
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if r.ContentLength != 0 && r.Method != http.MethodGet {
		// A body left unread ends the connection: net/http would otherwise
		// read it before answering, and a client that declares a body and
		// sends none would hold the connection, its goroutine and its fd
		// for as long as it likes, unauthenticated.
		w.Header().Set("Connection", "close")
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, strconv.Itoa(status)+" "+reason+"\n")
}

// cached returns turnID's status from this pod's cache while it is younger
// than StatusCacheTTL.
func (h *Handler) cached(turnID string, now time.Time) (cachedStatus, bool) {
	if h.cfg.StatusCacheTTL <= 0 {
		return cachedStatus{}, false
	}
	h.mu.Lock()
	c, ok := h.statuses[turnID]
	h.mu.Unlock()
	return c, ok && now.Sub(c.fetched) < h.cfg.StatusCacheTTL
}

// statusCached reports whether turnID's status is in this pod's cache and
// still fresh.
func (h *Handler) statusCached(turnID string) bool {
	_, ok := h.cached(turnID, h.cfg.Now())
	return ok
}

// status returns the lease's status, from this pod's cache when the last
// read is younger than StatusCacheTTL, or — for a turn id found unknown,
// closed or expired — younger than NegativeCacheTTL (a bounded cache: a
// stream of random ids cannot grow memory past maxNegative entries).
func (h *Handler) status(ctx context.Context, turnID string) (leases.Status, error) {
	now := h.cfg.Now()
	if c, ok := h.cached(turnID, now); ok {
		st := c.st
		st.StoreNow = now.Add(c.skew) // the store's clock now, as this pod reckons it
		if !st.StoreNow.Before(st.ExpiresAt) {
			st.Expired = true
		}
		return st, nil
	}
	h.mu.Lock()
	gen := h.evictions
	if n, ok := h.negative[turnID]; ok && h.cfg.NegativeCacheTTL > 0 && now.Sub(n.fetched) < h.cfg.NegativeCacheTTL {
		h.mu.Unlock()
		if n.unknown {
			return leases.Status{}, leases.ErrNotFound
		}
		return n.st, nil
	}
	h.mu.Unlock()
	// Not the request's end: a request read whole whose client left is
	// still admitted, to be recorded (invariant 4); LeaseTimeout bounds it.
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.cfg.LeaseTimeout)
	st, err := h.cfg.Store.Status(lctx, turnID)
	cancel()
	if (err == nil && !st.Open()) || errors.Is(err, leases.ErrNotFound) {
		h.remember(turnID, negativeStatus{st: st, unknown: err != nil, fetched: now})
	}
	if err != nil || h.cfg.StatusCacheTTL <= 0 || !st.Open() {
		return st, err
	}
	h.mu.Lock()
	if h.evictions == gen {
		h.statuses[turnID] = cachedStatus{st: st, fetched: now, skew: st.StoreNow.Sub(now)}
	}
	h.mu.Unlock()
	return st, nil
}

// remember puts a turn id found gone into the bounded negative cache.
func (h *Handler) remember(turnID string, n negativeStatus) {
	if h.cfg.NegativeCacheTTL <= 0 {
		return
	}
	h.mu.Lock()
	if len(h.negative) >= maxNegative {
		clear(h.negative)
	}
	h.negative[turnID] = n
	h.mu.Unlock()
}

// server returns the turn's cached server, building it from the lease once.
func (h *Handler) server(ctx context.Context, turnID string) (*turnServer, error) {
	h.mu.Lock()
	e, ok := h.turns[turnID]
	if !ok {
		e = &entry{}
		h.turns[turnID] = e
	}
	h.mu.Unlock()
	e.used.Store(h.cfg.Now().UnixNano())
	e.once.Do(func() {
		// Not the first request's own context (its client may leave while
		// the others of the turn wait here), but bounded: a hung store
		// fails the build within LeaseTimeout, and the next request retries.
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.cfg.LeaseTimeout)
		defer cancel()
		l, st, err := h.cfg.Store.Get(lctx, turnID)
		if err != nil {
			e.err = err
			return
		}
		if !st.Open() {
			e.err = leases.ErrNotFound
			return
		}
		e.srv, e.err = newTurnServer(l, h.cfg.Forwarder, h.cfg.Logger,
			rate.NewLimiter(rate.Limit(h.cfg.InitializeRate), h.cfg.InitializeBurst))
		e.built.Store(e.err == nil)
	})
	if e.err != nil {
		h.mu.Lock()
		if h.turns[turnID] == e {
			delete(h.turns, turnID)
		}
		h.mu.Unlock()
	}
	return e.srv, e.err
}

// Evict drops a turn's cached server. Requests already inside it finish;
// nothing of the turn is left running (a turn server has no goroutines of
// its own: streaming is off and sessions have no idle reaper).
func (h *Handler) Evict(turnID string) {
	h.mu.Lock()
	delete(h.turns, turnID)
	h.dropStatusLocked(turnID)
	h.mu.Unlock()
}

// dropStatusLocked (h.mu held) forgets turnID's cached status; the
// eviction counter keeps a status read already in flight from caching what
// it read before.
func (h *Handler) dropStatusLocked(turnID string) {
	delete(h.statuses, turnID)
	delete(h.holders, turnID)
	h.evictions++
}

// Cached returns the ids of the turns this pod holds a server, a status
// or a holder's token hash for.
func (h *Handler) Cached() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	ids := make([]string, 0, len(h.turns))
	for id := range h.turns {
		ids = append(ids, id)
	}
	for id := range h.statuses {
		if _, ok := h.turns[id]; !ok {
			ids = append(ids, id)
		}
	}
	for id := range h.holders {
		_, served := h.turns[id]
		if _, cached := h.statuses[id]; !served && !cached {
			ids = append(ids, id)
		}
	}
	return ids
}

// evictIdle drops the built turn servers idle for longer than IdleEvict;
// their statuses stay cached.
func (h *Handler) evictIdle() {
	if h.cfg.IdleEvict < 0 {
		return
	}
	before := h.cfg.Now().Add(-h.cfg.IdleEvict).UnixNano()
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, e := range h.turns {
		if e.built.Load() && e.used.Load() < before {
			delete(h.turns, id)
		}
	}
}

// Served is the number of turns this pod holds a built MCP server for
// (the sharedos.turns.open metric).
func (h *Handler) Served() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, e := range h.turns {
		// e.srv is written inside e.once before the entry is visible as
		// built; an entry still building (or failed) is not a served turn.
		if e.built.Load() {
			n++
		}
	}
	return n
}

// Sweep evicts every cached turn the store says is closed, expired or gone —
// how a pod frees the memory of turns closed through another pod or expired
// while idle — and every turn server idle for longer than IdleEvict.
// Correctness never depends on it (every request reads the lease status);
// only memory does.
func (h *Handler) Sweep(ctx context.Context) error {
	h.evictIdle()
	ids := h.Cached()
	if len(ids) == 0 {
		return nil
	}
	gone, err := h.cfg.Store.Inactive(ctx, ids)
	if err != nil {
		return err
	}
	for _, id := range gone {
		h.Evict(id)
	}
	return nil
}
