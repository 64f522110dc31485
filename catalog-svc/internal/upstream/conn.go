package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/inputround"

	"github.com/sharedos/toolshare/catalog-svc/internal/budget"
)

// clientInfo is how SharedOS introduces itself to an upstream.
var clientInfo = mcp.Implementation{Name: "sharedos-toolshare", Version: "1"}

// conn is the one MCP client session SharedOS holds to an upstream. It
// connects on first use and again after the session broke (a stdio server
// that exited is started anew): that is the supervision.
type conn struct {
	spec  *sharedosv1.UpstreamProvider
	guard Guard
	log   *slog.Logger
	// life bounds a stdio process: the connection's, not a request's;
	// end ends it (and its process group).
	life context.Context
	end  context.CancelFunc

	// checked is when the manager last compared spec with the stored one
	// (guarded by the manager's connsMu).
	checked time.Time

	// mu guards live, the session now (its client is nil when there is
	// none); dialing is held by the one caller connecting.
	mu      sync.Mutex
	live    session
	dialing chan struct{}
	// ids numbers the requests sent directly (send.go).
	ids atomic.Int64
	// exact holds the requests to send with their arguments' own bytes
	// (exact.go).
	exact exactBodies

	progressMu sync.Mutex
	progress   map[string]func(mcp.ProgressNotificationParams)
	// changed is told when the upstream says a list of its changed
	// (notifications/tools/list_changed and the like).
	changed func()

	// callsMu guards the requests running now and those parked between
	// the kernel's rounds (relay.go).
	callsMu sync.Mutex
	running map[*running]struct{}
	parked  map[string]parked
	// unanswered counts, per call, its stdio requests the server has not
	// answered yet, its caller there or not (relay.go: outlast).
	unanswered map[*running]int
	// jobs hands a request to an idle worker; idle counts them (relay.go).
	jobs chan func()
	idle chan struct{}
	// handling holds a token per request of the upstream's being handled
	// or answered, replying one per answer on its way to it; asked and
	// dropped count its requests and those dropped unanswered (relay.go:
	// serverRequest).
	handling, replying chan struct{}
	asked, dropped     atomic.Int64
	// budget bounds the result bytes of every upstream's requests together
	// (Config.ResultBudget; nil: no bound but the per-response cap).
	budget *budget.Budget
}

type serverInfo struct {
	protocol, name, version string
}

func newConn(parent context.Context, spec *sharedosv1.UpstreamProvider, g Guard, log *slog.Logger, changed func()) *conn {
	life, end := context.WithCancel(parent)
	return &conn{spec: spec, guard: g, log: log, life: life, end: end, checked: time.Now(), changed: changed,
		progress: map[string]func(mcp.ProgressNotificationParams){}, running: map[*running]struct{}{}, parked: map[string]parked{},
		jobs: make(chan func()), idle: make(chan struct{}, maxIdleWorkers), dialing: make(chan struct{}, 1),
		handling: make(chan struct{}, maxServerRequests), replying: make(chan struct{}, maxReplies)}
}

// capabilities are what mcp-go's client declares to an upstream: once, in
// a 2025-era session's handshake (its requests belong to no call yet), and
// in every request that client sends on a 2026-07-28 session (prompts/get,
// resources/read; a listing, which SharedOS sends itself, declares the
// same: acquire.go). Every input capability is declared: the
// kernel refuses a request the harness cannot answer (missing_capability).
// A tools/call on a 2026-07-28 session declares only the capabilities of
// the input its harness can answer (send.go).
var capabilities = capabilitiesFor(inputround.Names())

// capabilitiesFor declares the client capabilities that answer the input
// requests methods (inputround).
func capabilitiesFor(methods []string) mcp.ClientCapabilities {
	var c mcp.ClientCapabilities
	for _, name := range inputround.Capabilities(methods) {
		switch name {
		case "elicitation":
			c.Elicitation = &mcp.ElicitationCapability{}
		case "sampling":
			c.Sampling = &mcp.SamplingCapability{}
		case "roots":
			c.Roots = &struct {
				ListChanged bool `json:"listChanged,omitempty"`
			}{}
		}
	}
	return c
}

// session returns the live session, connecting when there is none. One
// caller connects at a time; the others wait for it as long as their own
// context allows (a handshake that hangs holds up no caller past its
// deadline, and no close).
func (c *conn) session(ctx context.Context) (session, error) {
	s, _, err := c.dial(ctx)
	return s, err
}

// dial is session, and whether this caller connected it.
func (c *conn) dial(ctx context.Context) (s session, connected bool, err error) {
	if s, ok := c.current(); ok {
		return s, false, nil
	}
	select {
	case c.dialing <- struct{}{}:
	case <-ctx.Done():
		return session{}, false, ctx.Err()
	case <-c.life.Done():
		return session{}, false, errClosed
	}
	defer func() { <-c.dialing }()
	if s, ok := c.current(); ok {
		return s, false, nil // another caller connected meanwhile
	}
	live, err := c.connect(ctx)
	if err != nil {
		return session{}, false, err
	}
	c.mu.Lock()
	if c.life.Err() != nil { // closed while connecting: the session is no one's
		c.mu.Unlock()
		discard(live.cl, live.tr)
		return session{}, false, errClosed
	}
	c.live = live
	c.mu.Unlock()
	return live, true, nil
}

// errClosed: the connection was closed (its provider removed or replaced).
var errClosed = errors.New("the upstream's connection is closed")

// current is the live session, if any. A stdio session whose server's
// stdout ended between calls (the server exited, or was killed past the
// bound) is dropped here, so the next call starts the server anew instead
// of failing on the old session first.
func (c *conn) current() (session, bool) {
	c.mu.Lock()
	s := c.live
	c.mu.Unlock()
	if s.cl == nil {
		return session{}, false
	}
	if st, ok := s.tr.(*capturingStdio); ok && st.ended() {
		c.dropStdio(st)
		return session{}, false
	}
	return s, true
}

// dropStdio drops the live session when it is t's, its stdout having
// ended or its server exited, and closes it (reaping the server) in the background: no call
// waits on a server that is gone.
func (c *conn) dropStdio(t *capturingStdio) {
	c.mu.Lock()
	cl := c.live.cl
	if cl == nil || c.live.tr != transport.Interface(t) {
		c.mu.Unlock()
		return
	}
	c.live = session{}
	c.mu.Unlock()
	go func() { _ = cl.Close() }()
}

// connect starts a client and its handshake, which ends with ctx, after
// handshakeTimeout, or when the connection closes.
func (c *conn) connect(ctx context.Context) (session, error) {
	tr, err := c.transport()
	if err != nil {
		return session{}, err
	}
	// One round at a time (ADR 0017, ADR 0019): an upstream's
	// input_required ends the call with its raw result, which the provider
	// hands the kernel as contract v3 rounds; a 2025-era upstream's own
	// requests become rounds too (relay.go). SharedOS answers no input
	// request itself.
	cl := client.NewClient(tr, client.WithMaxInputRoundTrips(1), client.WithClientCapabilities(capabilities))
	if err := cl.Start(c.life); err != nil {
		discard(cl, tr)
		return session{}, fmt.Errorf("start: %w", err)
	}
	cl.OnNotification(c.notified)
	req := mcp.InitializeRequest{}
	req.Params.ClientInfo = clientInfo
	ictx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	defer cancel()
	defer context.AfterFunc(c.life, cancel)()
	res, err := cl.Initialize(ictx, req)
	if err != nil {
		discard(cl, tr)
		return session{}, fmt.Errorf("initialize: %w", err)
	}
	// The server's name and version are kept short at once: the session
	// keeps them for as long as it lives (40 MiB of a name went into the
	// provider's record before, and failed providers list).
	live, err := newSession(cl, tr, serverInfo{protocol: cl.ProtocolVersion(), name: serverString(res.ServerInfo.Name), version: serverString(res.ServerInfo.Version)})
	if err != nil {
		discard(cl, tr)
		return session{}, err
	}
	return live, nil
}

// discard ends cl, on tr, whose handshake failed or whose session is no
// one's: a stdio server is killed at once with its group (it has nothing
// to finish), and closing — reaping the server, or telling an HTTP
// upstream the session ended — happens in the background. The caller
// connecting leaves at its own end, not after the server's grace to exit
// (stdioExitWait, stdioTermWait) or an HTTP upstream's DELETE.
func discard(cl *client.Client, tr transport.Interface) {
	if t, ok := tr.(*capturingStdio); ok {
		t.kill()
	}
	go func() { _ = cl.Close() }()
}

// handshakeTimeout bounds an upstream's initialize (or server/discover).
const handshakeTimeout = 30 * time.Second

// broken drops cl after a failure that may have ended its session;
// the next call connects again. Closing it (which may wait on the
// upstream: a stdio server's grace to exit, an HTTP session's DELETE)
// happens in the background, off the caller's path, as dropStdio's.
func (c *conn) broken(cl *client.Client) {
	c.mu.Lock()
	if c.live.cl != cl {
		c.mu.Unlock()
		return
	}
	c.live = session{}
	c.mu.Unlock()
	go func() { _ = cl.Close() }()
}

// close ends the connection for good: what is connecting or fetching a
// token stops, and the stdio server and whatever it started are killed.
// A nil connection is none to close.
func (c *conn) close() {
	if c == nil {
		return
	}
	c.end()
	c.mu.Lock()
	cl := c.live.cl
	c.live = session{}
	c.mu.Unlock()
	if cl != nil {
		_ = cl.Close()
	}
}

// transport builds the upstream's transport, resolving its secrets now.
func (c *conn) transport() (transport.Interface, error) {
	headers := map[string]string{}
	for k, ref := range c.spec.GetHeaders() {
		v, err := c.guard.Credentials.Resolve(ref)
		if err != nil {
			return nil, fmt.Errorf("header %s: %w", k, err)
		}
		headers[k] = v
	}
	if ref := c.spec.GetCredentialRef(); ref != "" {
		v, err := c.guard.Credentials.Resolve(ref)
		if err != nil {
			return nil, fmt.Errorf("credential: %w", err)
		}
		headers["Authorization"] = "Bearer " + v
	}
	var err error
	if u := c.spec.GetUrl(); u != "" {
		if err := c.guard.CheckURL(u); err != nil {
			return nil, err
		}
		if credentialed(c.spec) {
			// Checked again at every connection: the guard may have
			// narrowed since the provider was added.
			if err := c.guard.CheckCredentialURL(u); err != nil {
				return nil, err
			}
		}
		hc := c.guard.httpClient()
		hc.Transport = exactTransport{next: hc.Transport, bodies: &c.exact}
		if o := c.spec.GetOauth(); o != nil {
			if hc, err = c.oauthClient(o, hc); err != nil {
				return nil, err
			}
		}
		tr, err := transport.NewStreamableHTTP(u, transport.WithHTTPBasicClient(hc), transport.WithHTTPHeaders(headers))
		if err != nil {
			return nil, err
		}
		return &capturingHTTP{StreamableHTTP: tr, c: c}, nil
	}
	argv := c.spec.GetCommand()
	if err := c.guard.CheckCommand(argv); err != nil {
		return nil, err
	}
	env, err := childEnv(headers)
	if err != nil {
		return nil, err
	}
	return c.stdio(argv, env)
}

// stdio starts argv as the upstream's process when its client starts:
// with env alone, in a session and process group of its own (npx and the like start
// the server as their child), its stderr discarded, its stdout read
// through a bound on the line (mcp-go's reader keeps a whole line in
// memory, however long).
func (c *conn) stdio(argv, env []string) (transport.Interface, error) {
	cmd := exec.CommandContext(c.life, argv[0], argv[1:]...)
	cmd.Env = env
	cmd.WaitDelay = 2 * time.Second
	ownProcessGroup(cmd)
	// The server's stdin is a pipe of SharedOS's own (not exec's
	// StdinPipe): a write to it can be given up (stdinPipe).
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdin = stdinR
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		_, _ = stdinR.Close(), stdinW.Close()
		return nil, err
	}
	in := &stdinPipe{f: stdinW, unwritten: map[string]*outgoing{}, dropped: func() { c.drop("", tooManyReplies) }}
	out := &boundedLines{r: stdout, max: maxResponseBytes, endc: make(chan struct{})}
	tr := transport.NewIO(out, exactWriter{WriteCloser: in, bodies: &c.exact}, nil)
	transport.WithCommandLogger(c.log)(tr)
	t := &capturingStdio{Stdio: tr, c: c, cmd: cmd, in: in, stdinR: stdinR, out: out, exited: make(chan struct{})}
	// Past the bound, the server is not heard out: killed at once, whether
	// or not a call waits for it. A message to it cut short (stdinPipe)
	// leaves no session either: the server is killed and its session
	// dropped at once, before the call that cut it short returns. Once its
	// stdout ended, for that reason or another, or the server exited
	// (watch), its session is dropped and the server reaped.
	out.onBound = t.kill
	in.broke = func() { t.kill(); c.dropStdio(t) }
	out.onEnd = func() { c.dropStdio(t) }
	return t, nil
}

// oauthClient is base with the bearer token of the client credentials
// grant: fetched from the token endpoint (through the same guard) and
// renewed before it expires.
func (c *conn) oauthClient(o *sharedosv1.OAuthClientCredentials, base *http.Client) (*http.Client, error) {
	// Checked again at every connection, as the upstream's URL is: the
	// allow-list may have narrowed since the provider was added, and the
	// client secret goes there.
	if err := c.guard.CheckURL(o.GetTokenUrl()); err != nil {
		return nil, fmt.Errorf("oauth token url: %w", err)
	}
	if err := c.guard.CheckCredentialURL(o.GetTokenUrl()); err != nil {
		return nil, fmt.Errorf("oauth token url: %w", err)
	}
	secret, err := c.guard.Credentials.Resolve(o.GetClientSecretRef())
	if err != nil {
		return nil, fmt.Errorf("oauth client secret: %w", err)
	}
	next := base.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	t := &tokenTransport{
		cc:    clientcredentials.Config{ClientID: o.GetClientId(), ClientSecret: secret, TokenURL: o.GetTokenUrl(), Scopes: o.GetScopes()},
		fetch: base, timeout: tokenTimeout, next: next, life: c.life,
	}
	return &http.Client{Transport: t, CheckRedirect: base.CheckRedirect, Timeout: base.Timeout}, nil
}

// tokenTimeout bounds one request to an upstream's token endpoint.
var tokenTimeout = 30 * time.Second

// tokenTransport sets the client credentials grant's bearer token on every
// request to the upstream. One fetch at a time serves every request that
// waits for a token; each waits only as long as its own context allows,
// and the fetch ends when no request waits for it any more, when the
// connection closes, or past tokenTimeout (oauth2's token source fetched
// on a context of its own: a caller that left waited the fetch out).
type tokenTransport struct {
	cc      clientcredentials.Config
	fetch   *http.Client  // the token endpoint's: bounded by each fetch's context
	timeout time.Duration // tokenTimeout when made
	next    http.RoundTripper
	life    context.Context

	mu      sync.Mutex
	tok     *oauth2.Token
	running *tokenFetch // the fetch under way, if any
}

// tokenFetch is one request to the token endpoint and who waits for it.
type tokenFetch struct {
	done    chan struct{} // closed once tok and err are set
	tok     *oauth2.Token
	err     error
	waiters int
	cancel  context.CancelFunc
}

func (t *tokenTransport) token(ctx context.Context) (*oauth2.Token, error) {
	t.mu.Lock()
	if t.tok.Valid() { // renewed oauth2.Token.Valid's 10 s before it expires
		tok := t.tok
		t.mu.Unlock()
		return tok, nil
	}
	if err := t.life.Err(); err != nil {
		t.mu.Unlock()
		return nil, fmt.Errorf("oauth token: %w", err)
	}
	f := t.running
	if f == nil {
		fctx, cancel := context.WithTimeout(t.life, t.timeout)
		f = &tokenFetch{done: make(chan struct{}), cancel: cancel}
		t.running = f
		go t.run(context.WithValue(fctx, oauth2.HTTPClient, t.fetch), f)
	}
	f.waiters++
	t.mu.Unlock()
	select {
	case <-f.done:
		if f.err != nil {
			return nil, fmt.Errorf("oauth token: %w", f.err)
		}
		return f.tok, nil
	case <-ctx.Done():
		t.mu.Lock()
		if f.waiters--; f.waiters == 0 && t.running == f {
			t.running = nil // the next request fetches anew
			f.cancel()
		}
		t.mu.Unlock()
		return nil, ctx.Err()
	}
}

// run fetches one token for f's waiters and keeps it for later requests.
func (t *tokenTransport) run(ctx context.Context, f *tokenFetch) {
	defer f.cancel()
	tok, err := t.cc.Token(ctx)
	t.mu.Lock()
	if t.running == f {
		t.running = nil
		if err == nil {
			t.tok = tok
		}
	}
	f.tok, f.err = tok, err
	t.mu.Unlock()
	close(f.done)
}

// CloseIdleConnections closes the idle connections of the transport
// beneath (http.Client.CloseIdleConnections reaches it through this).
func (t *tokenTransport) CloseIdleConnections() { closeIdle(t.next) }

// RoundTrip sends req with the bearer token, on a copy (a RoundTripper
// leaves its request as it was given).
func (t *tokenTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	tok, err := t.token(req.Context())
	if err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, err
	}
	r := req.Clone(req.Context())
	tok.SetAuthHeader(r)
	resp, err := t.next.RoundTrip(r)
	if err == nil && resp.StatusCode == http.StatusUnauthorized {
		// Refused (revoked, or issued without an expiry it has passed):
		// the next request fetches another.
		t.mu.Lock()
		if t.tok == tok {
			t.tok = nil
		}
		t.mu.Unlock()
	}
	return resp, err
}

// loadsCode reports whether a stdio server's environment variable name is
// one SharedOS sets itself (childEnv) or one a dynamic loader, a shell, a
// language runtime or a package runner (npm, uv, pip: where uvx and npx
// fetch the server from) reads to load or fetch code: given through a
// provider's headers, it would make an allowed command run another.
func loadsCode(name string) bool {
	n := strings.ToUpper(name)
	for _, prefix := range []string{"LD_", "DYLD_", "NPM_CONFIG_", "UV_", "PIP_", "BASH_FUNC_"} {
		if strings.HasPrefix(n, prefix) {
			return true
		}
	}
	switch n {
	case "PATH", "HOME", "LANG", "TMPDIR", // childEnv's
		"BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "PS4", "IFS",
		"NODE_OPTIONS", "NODE_PATH", "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE",
		"PERL5LIB", "PERL5OPT", "PERLLIB", "RUBYOPT", "RUBYLIB", "GEM_PATH", "GEM_HOME",
		"JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "CLASSPATH", "GCONV_PATH":
		return true
	}
	return false
}

// envHeader is why a stdio server may not get its header name as a
// variable of its environment (envName, loadsCode); nil when it may.
// Validate refuses such a header at providers add, and childEnv refuses to
// start a server with one: a provider stored before a rule is held to it.
func envHeader(name string) error {
	if !envName(name) {
		return fmt.Errorf("%q: a stdio server gets its headers as its environment, and this is no "+
			"environment variable name ([A-Za-z_][A-Za-z0-9_]*; bash imports a function from a name such as BASH_FUNC_f%%%%)", name)
	}
	if loadsCode(name) {
		return fmt.Errorf("%q: a stdio server gets its headers as its environment, and this one "+
			"is set by SharedOS or read by a loader or runtime to load code (it would run what --upstream-commands does not list)", name)
	}
	return nil
}

// envName reports whether name is a portable environment variable name
// (POSIX: letters, digits and '_', not first a digit): what a stdio
// server's header may be called. Any other — bash's BASH_FUNC_f%% among
// them, which defines a function for every script the server runs — is
// not a variable a server reads its configuration from.
func envName(name string) bool {
	for i, r := range name {
		if r != '_' && (r < 'A' || r > 'Z') && (r < 'a' || r > 'z') && (i == 0 || r < '0' || r > '9') {
			return false
		}
	}
	return name != ""
}

// confinementWarned: each way stdio servers are less confined than
// Guard.Private asks (no Landlock, a private path left open) is logged
// once per process.
var confinementWarned sync.Map

func (c *conn) unconfined(err error) {
	if _, seen := confinementWarned.LoadOrStore(err.Error(), true); !seen {
		c.log.Warn("stdio upstream servers can read what the kernel keeps private", slog.Any("error", err))
	}
}

// childEnv is a stdio upstream's whole environment: enough to run, and
// none of catalog-svc's own (its database URL, its keys). A header
// configured for a stdio upstream is passed as an environment variable of
// that name: how stdio servers take their credentials. A header no server
// may get (envHeader) — one of a provider stored before the rule — is an
// error: the server is not started.
func childEnv(headers map[string]string) ([]string, error) {
	env := []string{} // never nil: exec.Cmd gives a nil Env this process's whole environment
	for _, k := range []string{"PATH", "HOME", "LANG", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(headers)) {
		if k == "Authorization" {
			continue // the credential's (transport): no variable
		}
		if err := envHeader(k); err != nil {
			return nil, fmt.Errorf("the stdio server is not started: header %w", err)
		}
		env = append(env, k+"="+headers[k])
	}
	return env, nil
}

// notified routes progress notifications to the call that asked for them,
// and tells the manager of a list the upstream says changed.
func (c *conn) notified(n mcp.JSONRPCNotification) {
	switch mcp.MCPMethod(n.Method) {
	case mcp.MethodNotificationToolsListChanged, mcp.MethodNotificationPromptsListChanged, mcp.MethodNotificationResourcesListChanged:
		if c.changed != nil {
			c.changed()
		}
		return
	case mcp.MethodNotificationProgress:
	default:
		return
	}
	b, err := json.Marshal(n.Params.AdditionalFields)
	if err != nil {
		return
	}
	var p mcp.ProgressNotificationParams
	if json.Unmarshal(b, &p) != nil {
		return
	}
	c.progressMu.Lock()
	f := c.progress[fmt.Sprint(p.ProgressToken)]
	c.progressMu.Unlock()
	if f != nil {
		f(p)
	}
}

func (c *conn) onProgress(token string, f func(mcp.ProgressNotificationParams)) func() {
	c.progressMu.Lock()
	c.progress[token] = f
	c.progressMu.Unlock()
	return func() {
		c.progressMu.Lock()
		delete(c.progress, token)
		c.progressMu.Unlock()
	}
}

// The capturing transports keep the raw result of each request in the
// request's context (see withRaw), so SharedOS reads the upstream's
// schemas and content as sent rather than as mcp-go re-types them, and
// route the upstream's own requests to the call they belong to (relay.go).
// Embedding keeps every other method (protocol version) of the transport
// mcp-go looks for.
type capturingHTTP struct {
	*transport.StreamableHTTP
	c *conn
	// legacy: the handshake negotiated a 2025-era protocol.
	legacy atomic.Bool
}

// SetProtocolVersion implements transport.HTTPConnection: mcp-go's client
// tells the version the handshake negotiated.
func (t *capturingHTTP) SetProtocolVersion(version string) {
	t.legacy.Store(version != "" && !mcp.IsModernProtocol(version))
	t.StreamableHTTP.SetProtocolVersion(version)
}

// SendRequest sends r; on a 2025-era session a request whose caller left
// is followed by a notifications/cancelled naming it. That transport's
// servers need not take the request's stream closing for a cancellation
// (its specification: the client should send the notification), and
// mcp-go's client sends none over HTTP; on 2026-07-28 the stream closing
// is the cancellation. Every request but the handshake's, whoever sends
// it: a tools/call (send.go) or a request of mcp-go's client (prompts/get,
// resources/read, listings).
func (t *capturingHTTP) SendRequest(ctx context.Context, r transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	sent := ctx.Err() == nil
	resp, err := capture(ctx, r, t.StreamableHTTP.SendRequest)
	if err != nil && sent && ctx.Err() != nil && t.legacy.Load() &&
		r.Method != string(mcp.MethodInitialize) && r.Method != string(mcp.MethodServerDiscover) {
		cancelled(ctx, t, r.ID)
	}
	return resp, err
}

// SetRequestHandler implements transport.BidirectionalInterface.
func (t *capturingHTTP) SetRequestHandler(h transport.RequestHandler) {
	t.StreamableHTTP.SetRequestHandler(t.c.serverRequest(false, h))
}

type capturingStdio struct {
	*transport.Stdio
	c   *conn
	cmd *exec.Cmd
	in  *stdinPipe
	// stdinR is the server's end of its stdin, closed here once started.
	stdinR *os.File
	out    *boundedLines
	stop   sync.Once
	// procMu orders killing the process against reaping it: a reaped
	// process's group id may be another's.
	procMu sync.Mutex
	reaped bool
	// exited is closed once the process exited (on Linux left unreaped,
	// for Close to reap); gone is set once its session is over for that,
	// whether or not its stdout ended (watch).
	exited chan struct{}
	gone   atomic.Bool
}

// kill kills the process with its group and, on Linux, whatever else it
// started that is still running (killLeft), unless it was reaped.
func (t *capturingStdio) kill() {
	t.procMu.Lock()
	defer t.procMu.Unlock()
	if !t.reaped && t.cmd.Process != nil {
		_ = t.cmd.Cancel()
		killLeft(t.cmd.Process.Pid) // what left its group (Linux)
	}
}

// Start starts the process, with none of this process's descriptors but
// its pipes (inheritNoFiles), then mcp-go's reading of its stdout.
func (t *capturingStdio) Start(ctx context.Context) error {
	if err := inheritNoFiles(); err != nil {
		t.c.unconfined(fmt.Errorf("stdio servers may inherit descriptors of this process: %w", err))
	}
	err := startTracked(t.cmd, func() error { return startConfined(t.cmd, t.c.guard.Private, t.c.unconfined) }, t.c.unconfined)
	_ = t.stdinR.Close() // the server's now (or no one's)
	if err != nil {
		return fmt.Errorf("failed to start command: %w", err)
	}
	go t.watch()
	return t.Stdio.Start(ctx)
}

// watch ends the session once the server exits, whether or not its stdout
// ends: the session was dropped only when its stdout ended, and a child
// the server left running (in its process group or not) held that open,
// so a server that exited mid-call kept its session — every later call
// waited out its timeout on it, a zombie under catalog-svc — until a
// listing timed out with no call running. What is left of the server's
// group (and on Linux every process it left) is killed once it exited, so
// its stdout ends as soon as what it wrote before exiting was read (a
// call it answered gets its answer); past stdioOutputWait the session is
// dropped all the same, its calls in flight ending upstream_unavailable,
// as those of a server whose stdout ended.
func (t *capturingStdio) watch() {
	awaitExit(t.cmd)
	close(t.exited)
	t.kill()
	select {
	case <-t.out.endc:
	case <-time.After(stdioOutputWait):
	}
	t.gone.Store(true)
	t.c.dropStdio(t)
	_ = t.Close() // a session not live yet (its handshake) or no longer: its requests end, the server is reaped
}

// Close closes the process's stdin and waits for it to exit, as mcp-go's
// own transport does: a process still running after stdioExitWait gets
// SIGTERM (its whole group), and stdioTermWait later the group is killed.
// Whatever is left of the group once the process exited (a launcher's
// child), and on Linux every other process it left (killLeft), is killed
// before the process is reaped.
func (t *capturingStdio) Close() error {
	err := t.Stdio.Close()
	t.stop.Do(func() {
		if t.cmd.Process == nil {
			return // never started
		}
		exited := t.exited // watch closes it
		select {
		case <-exited:
		case <-time.After(stdioExitWait):
			_ = terminateGroup(t.cmd)
			select {
			case <-exited:
			case <-time.After(stdioTermWait):
			}
		}
		t.kill()
		<-exited
		t.kill() // what it left as it died: found while its id is still its own
		t.procMu.Lock()
		t.reaped = true
		t.procMu.Unlock()
		reapTracked(t.cmd)
	})
	return err
}

// stdioExitWait is how long a stdio upstream has to exit once its stdin
// is closed, and stdioTermWait once it got SIGTERM.
const (
	stdioExitWait = 2 * time.Second
	stdioTermWait = 3 * time.Second
)

// stdioOutputWait is how long a server's stdout may stay open once the
// server exited and what was left of it was killed (watch).
const stdioOutputWait = time.Second

// ended reports whether the server's stdout ended (it exited, or it ran
// past the bound: from the moment the bound tripped, before the server is
// killed and its stdout marked ended), or the server exited (watch): the
// session is over, whether or not a call noticed.
func (t *capturingStdio) ended() bool {
	return t.out.ended.Load() || t.out.failed() != nil || t.gone.Load()
}

// boundedLines reads a stdio upstream's stdout and fails once a line (one
// JSON-RPC message) runs past max bytes: what it answers travels on to the
// kernel in one gRPC message of at most maxResponseBytes anyway.
type boundedLines struct {
	r    io.Reader
	max  int64
	line int64 // bytes read since the last newline
	err  atomic.Pointer[error]
	// ended is set once a read failed (end of stdout, or the bound):
	// onBound runs first when the bound trips, then onEnd, once.
	ended   atomic.Bool
	endc    chan struct{} // closed once ended, when not nil
	onBound func()
	onEnd   func()
}

// end marks the stream ended, telling onEnd the first time.
func (b *boundedLines) end() {
	if b.ended.Swap(true) {
		return
	}
	if b.endc != nil {
		close(b.endc)
	}
	if b.onEnd != nil {
		b.onEnd()
	}
}

func (b *boundedLines) Read(p []byte) (int, error) {
	if err := b.failed(); err != nil {
		return 0, err
	}
	n, err := b.r.Read(p)
	line := b.line + int64(n) // the line's length so far, or at its end
	if i := bytes.IndexByte(p[:n], '\n'); i >= 0 {
		line = b.line + int64(i)
		b.line = int64(n - 1 - bytes.LastIndexByte(p[:n], '\n'))
	} else {
		b.line = line
	}
	if line > b.max || b.line > b.max {
		tooLong := fmt.Errorf("upstream message larger than %d bytes", b.max)
		b.err.Store(&tooLong)
		if b.onBound != nil {
			b.onBound()
		}
		b.end()
		return 0, tooLong
	}
	if err != nil {
		b.end()
	}
	return n, err
}

// failed is the bound's error once a line ran past it.
func (b *boundedLines) failed() error {
	if e := b.err.Load(); e != nil {
		return *e
	}
	return nil
}

// SetRequestHandler implements transport.BidirectionalInterface.
func (t *capturingStdio) SetRequestHandler(h transport.RequestHandler) {
	t.Stdio.SetRequestHandler(t.c.serverRequest(true, h))
}

type rawKey struct{}

// rawResult holds the last result of method that a request carrying it got.
type rawResult struct {
	method string
	// caps, when set, are the capabilities the request declares in its
	// _meta (2026-07-28) in place of every one mcp-go's client declares:
	// those of the input its harness can answer (send.go).
	caps json.RawMessage
	mu   sync.Mutex
	raw  json.RawMessage
	// needs is the upstream's -32021 naming a capability that answers
	// input, in full (mcp-go's client keeps one capability name of it).
	needs *needsInput
}

func withRaw(ctx context.Context, method string) (context.Context, *rawResult) {
	h := &rawResult{method: method}
	return context.WithValue(ctx, rawKey{}, h), h
}

func (h *rawResult) get() json.RawMessage {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.raw
}

func (h *rawResult) needsInput() *needsInput {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.needs
}

func capture(ctx context.Context, r transport.JSONRPCRequest, send func(context.Context, transport.JSONRPCRequest) (*transport.JSONRPCResponse, error)) (*transport.JSONRPCResponse, error) {
	if rt := roundOf(ctx); rt != nil && (r.Method == string(mcp.MethodToolsCall) || r.Method == string(mcp.MethodPromptsGet)) {
		var err error
		if r.Params, err = rt.apply(r.Params); err != nil {
			return nil, err
		}
	}
	h, _ := ctx.Value(rawKey{}).(*rawResult)
	if h != nil && h.caps != nil && r.Method == h.method {
		var err error
		if r.Params, err = declare(r.Params, h.caps); err != nil {
			return nil, err
		}
	}
	resp, err := send(ctx, r)
	if err == nil && resp != nil && resp.Error != nil && resp.ID.IsNil() {
		return nil, fmt.Errorf("%w: %d %s", errUnmatched, resp.Error.Code, resp.Error.Message)
	}
	if err == nil && resp != nil && !resp.ID.IsNil() && resp.ID.String() != r.ID.String() {
		// mcp-go's HTTP transport takes the first response on the
		// request's stream, whatever its id: another request's answer is
		// no answer to this one (the request may have run).
		return nil, fmt.Errorf("%w: id %s for request %s", errOtherID, resp.ID.String(), r.ID.String())
	}
	if h != nil && err == nil && resp != nil && r.Method == h.method {
		h.mu.Lock()
		if resp.Error != nil {
			h.needs = needsInputOf(resp.Error)
		} else {
			h.raw = append(json.RawMessage(nil), resp.Result...)
		}
		h.mu.Unlock()
	}
	return resp, err
}

// members are the members of the object params encodes to (none for
// null), each as it was sent.
func members(params any) (map[string]json.RawMessage, error) {
	b, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	if m == nil {
		m = map[string]json.RawMessage{}
	}
	return m, nil
}

// declare is params with caps as the capabilities of its _meta, every
// other member of both as they were.
func declare(params any, caps json.RawMessage) (any, error) {
	m, err := members(params)
	if err != nil {
		return nil, err
	}
	var meta map[string]json.RawMessage
	if raw, ok := m["_meta"]; ok {
		if err := json.Unmarshal(raw, &meta); err != nil {
			return nil, err
		}
	}
	if meta == nil {
		meta = map[string]json.RawMessage{}
	}
	meta[mcp.MetaKeyClientCapabilities] = caps
	if m["_meta"], err = json.Marshal(meta); err != nil {
		return nil, err
	}
	return m, nil
}

type roundKey struct{}

// round is a resumed call's answers and the upstream's state of its last
// round (SEP-2322): callTool puts them in the params of the tools/call it
// builds (send.go: before its exact bytes are registered), the capturing
// transport in those of a prompts/get (mcp-go's GetPrompt starts every
// request without them).
type round struct {
	responses json.RawMessage
	state     string
}

func withRound(ctx context.Context, responses []byte, state string) context.Context {
	if len(responses) == 0 && state == "" {
		return ctx
	}
	return context.WithValue(ctx, roundKey{}, &round{responses: responses, state: state})
}

// roundOf is the round ctx carries, if any.
func roundOf(ctx context.Context) *round {
	rt, _ := ctx.Value(roundKey{}).(*round)
	return rt
}

// withoutRound is ctx with no round for the transport to apply: the
// request's params carry it already.
func withoutRound(ctx context.Context) context.Context {
	return context.WithValue(ctx, roundKey{}, (*round)(nil))
}

func (rt *round) apply(params any) (any, error) {
	m, err := members(params)
	if err != nil {
		return nil, err
	}
	if len(rt.responses) > 0 {
		m["inputResponses"] = rt.responses
	}
	if rt.state != "" {
		st, _ := json.Marshal(rt.state)
		m["requestState"] = st
	}
	return m, nil
}

// errUnmatched: the upstream answered a request with an error that has no
// id — it could not tell which request it had (a restarted server that no
// longer knows the session answers so).
var errUnmatched = errors.New("the upstream's error answers no request")

// errOtherID: the upstream answered a request under another request's id.
var errOtherID = errors.New("the upstream answered under another request's id")

// errNoRaw: the library answered without the transport seeing a result.
var errNoRaw = errors.New("no result reached the transport")
