//go:build verify

package verify

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/callers"
	"github.com/sharedos/toolshare/services/platform/grpcx"
	"github.com/sharedos/toolshare/services/platform/mtls"
	"github.com/sharedos/toolshare/services/systemtest/launch"
)

// proc is one service process started from bin/ (services/launch.Proc:
// every system test handles processes the same way).
type proc = launch.Proc

// stackOptions tune a stack.
type stackOptions struct {
	authzTimeout time.Duration // catalog-svc --authz-timeout (default 5s)
	evalTimeout  time.Duration // authz-svc --eval-timeout (default 4s)
	bridges      int           // bridge processes on the same database (default 1)
	cluster      *cluster      // default: a new private cluster
	env          []string      // extra environment for every service
}

// stack is the whole system as separate processes (the one launcher,
// services/systemtest/launch) plus an in-process counting provider (the
// verify.* tools) and the private cluster its records live in.
type stack struct {
	*launch.Stack
	t          testing.TB
	cluster    *cluster
	dsn        string
	fileRoot   string // files-provider root (public/, private/)
	journalDir string // catalog-svc --record-journal-dir (kept across its restarts)
	provider   *provider
	db         *pgxpool.Pool
	catalogC   sharedosv1.CatalogServiceClient
	bridgeC    sharedosv1.BridgeServiceClient
}

func startStack(t testing.TB, o stackOptions) *stack {
	t.Helper()
	// Generous default deadlines: a shared 2-core box stalls for ~0.7 s at
	// times, and a test that is not about authz deadlines must not turn such
	// a stall into failed/authz_unavailable. Fault tests set their own.
	if o.authzTimeout == 0 {
		o.authzTimeout = 5 * time.Second
	}
	if o.evalTimeout == 0 {
		o.evalTimeout = 4 * time.Second
	}
	s := &stack{t: t, cluster: o.cluster}
	if s.cluster == nil {
		s.cluster = newCluster(t)
	}
	s.dsn = s.cluster.NewDatabase(t, fmt.Sprintf("verify_%d", time.Now().UnixNano()))
	s.fileRoot = makeFileRoot(t)
	s.journalDir = filepath.Join(t.TempDir(), "record-journal")

	s.Stack = launch.Start(t, launch.Options{
		DatabaseURL: s.dsn, PolicyDir: makePolicyDir(t, launch.RepoRoot(t)), FileRoot: s.fileRoot,
		JournalDir: s.journalDir, Bridges: o.bridges,
		Env: append([]string{"SHAREDOS_LOG_LEVEL=debug"}, o.env...),
		Flags: map[string][]string{
			"authz-svc":   {"--eval-timeout", o.evalTimeout.String()},
			"catalog-svc": {"--authz-timeout", o.authzTimeout.String(), "--reconcile-interval", "1s"},
			"bridge-svc":  {"--sweep-interval", "1s"},
		},
		Register: func(_ testing.TB, ls *launch.Stack) {
			s.Stack = ls
			s.catalogC = sharedosv1.NewCatalogServiceClient(s.Dial(s.Addrs["catalog"]))
			s.bridgeC = sharedosv1.NewBridgeServiceClient(s.Dial(s.BridgeGRPC[0]))
			// The counting provider serves with a provider identity of the
			// stack's CA, and admits only the kernel (callers table).
			s.provider = startProvider(t, ls.Credentials(t, ls.Identity(t, "verify-provider", callers.Provider, "verify")))
			s.register()
		},
	})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pool, err := pxpool(ctx, s.dsn)
	if err != nil {
		t.Fatalf("connect to the stack's database: %v", err)
	}
	s.db = pool
	s.OnStop(func() {
		httpTransport.CloseIdleConnections()
		pool.Close()
	})
	return s
}

func pxpool(ctx context.Context, dsn string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = 4
	return pgxpool.NewWithConfig(ctx, cfg)
}

// restart starts p again with the same arguments and waits for health.
func (s *stack) restart(p *proc, addr string) { s.Restart(s.t, p, addr) }

// ---- the catalogue and the policy

// verify.* tools are served by the in-process provider; files.* by the
// files-provider process over a temporary root.
func (s *stack) register() {
	s.t.Helper()
	obj := func(props string, required ...string) []byte {
		r, _ := json.Marshal(required)
		return []byte(`{"type":"object","properties":{` + props + `},"required":` + string(r) + `,"additionalProperties":false}`)
	}
	path := `"path":{"type":"string","minLength":1,"maxLength":4096}`
	reg := func(name, ns, target, action string, schema []byte) *sharedosv1.ToolRegistration {
		return &sharedosv1.ToolRegistration{
			Name: name, Description: "verify suite tool " + name, InputSchemaJson: schema,
			AnnotationsJson: []byte(`{"readOnlyHint":false}`),
			Metadata:        &sharedosv1.ToolMetadata{Namespace: ns, Source: "provider:" + ns},
			Class:           sharedosv1.ToolClass_TOOL_CLASS_MANAGED,
			Requirement:     &sharedosv1.Requirement{Action: action, Resource: "file:{path}"},
			Handler:         &sharedosv1.HandlerRef{Target: target, Timeout: durationpb.New(20 * time.Second)},
			// Confirmed read-only (concurrency classes, ADR 0019): this
			// suite runs a turn's calls side by side; only files.write waits
			// for the turn's previous write.
			ReadOnly: action != "write",
		}
	}
	regs := []*sharedosv1.ToolRegistration{
		reg("files.read", "files", s.Addrs["files"], "read", obj(path, "path")),
		reg("files.write", "files", s.Addrs["files"], "write", obj(path+`,"content":{"type":"string","maxLength":1048576}`, "path", "content")),
		reg("verify.echo", "verify", s.provider.addr, "read", obj(path+`,"value":{"type":"string"}`, "path")),
		reg("verify.slow", "verify", s.provider.addr, "read", obj(path+`,"ms":{"type":"integer","minimum":0,"maximum":20000}`, "path", "ms")),
		reg("verify.boom", "verify", s.provider.addr, "read", obj(path, "path")),
		reg("verify.ask", "verify", s.provider.addr, "read", obj(path, "path")),
		reg("verify.sleepy", "verify", s.provider.addr, "read", obj(path+`,"ms":{"type":"integer","minimum":0,"maximum":20000}`, "path", "ms")),
	}
	// verify.sleepy: a handler deadline short enough to hit (failed/timeout).
	regs[len(regs)-1].Handler.Timeout = durationpb.New(300 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, r := range regs {
		if _, err := s.catalogC.RegisterTool(ctx, &sharedosv1.RegisterToolRequest{Registration: r}); err != nil {
			s.t.Fatalf("register %s: %v", r.GetName(), err)
		}
	}
}

// makePolicyDir copies the example Rego policy and adds the verify role
// plus one rule that makes any non-list decision on verify.boom a runtime
// evaluation error (two complete definitions of `decision` with different
// values: eval_conflict_error).
func makePolicyDir(t testing.TB, root string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "sharedos"), 0o755); err != nil {
		t.Fatal(err)
	}
	rego, err := os.ReadFile(filepath.Join(root, "deploy", "policies", "sharedos", "authz.rego"))
	if err != nil {
		t.Fatal(err)
	}
	boom := `package sharedos.authz

import rego.v1

# verify suite: an evaluation error (conflicting complete rule values) for
# any call of verify.boom; listing it stays well-defined.
decision := {"allow": true, "reason": "verify conflict"} if {
	input.tool.name == "verify.boom"
	input.action != "list"
}
`
	data := `{"sharedos":{"roles":{
  "engineer":{"tools":["files.read"],"grants":{"read":["/public"]}},
  "verify":{"tools":["files.read","files.write","verify.echo","verify.slow","verify.boom","verify.sleepy","verify.ask"],
            "grants":{"read":["/public"],"write":["/public"]}}
}}}`
	for name, body := range map[string]string{
		"sharedos/authz.rego": string(rego), "sharedos/boom.rego": boom, "data.json": data,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// privateCanary is the content of /private/secret.txt: it must never reach
// a client of the verify role.
const privateCanary = "PRIVATE-CANARY-7f3a9c"

func makeFileRoot(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{"public", "private"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{"public/a.txt": "public a\n", "private/a.txt": privateCanary + "\n", "private/secret.txt": privateCanary + "\n"}
	for n, c := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("../private", filepath.Join(dir, "public", "link")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// ---- turns

type turn struct {
	ID, URL, Token, CatalogHash string
	Tools                       []string
}

func (s *stack) openTurn(ctx context.Context, principal string, roles []string, ttl time.Duration) (turn, error) {
	l, err := s.bridgeC.OpenTurn(ctx, &sharedosv1.OpenTurnRequest{
		Context: &sharedosv1.AccessContext{Principal: principal, Tenant: "verify", Roles: roles},
		Policy:  &sharedosv1.ToolPolicy{Mode: sharedosv1.PolicyMode_POLICY_MODE_PERMISSIVE},
		Harness: &sharedosv1.HarnessIdentity{Name: "verify", McpSupport: sharedosv1.McpSupport_MCP_SUPPORT_NATIVE},
		Ttl:     durationpb.New(ttl),
	})
	if err != nil {
		return turn{}, err
	}
	tr := turn{ID: l.GetTurnId(), URL: l.GetMcpUrl(), Token: l.GetToken(), CatalogHash: l.GetCatalogHash()}
	for _, p := range l.GetTools() {
		tr.Tools = append(tr.Tools, p.GetName())
	}
	return tr, nil
}

// open opens a verify-role turn or fails the test.
func (s *stack) open(principal string) turn {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	tr, err := s.openTurn(ctx, principal, []string{"verify"}, 10*time.Minute)
	if err != nil {
		s.t.Fatalf("open turn: %v", err)
	}
	return tr
}

func (s *stack) closeTurn(id string) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.bridgeC.CloseTurn(ctx, &sharedosv1.CloseTurnRequest{TurnId: id}); err != nil {
		s.t.Fatalf("close turn %s: %v", id, err)
	}
}

// ctl runs bin/sharedosctl against the stack: stdout, stderr, exit code.
func (s *stack) ctl(args ...string) (string, string, int) {
	s.t.Helper()
	return s.Ctl(s.t, args...)
}

// opRow is one `sharedosctl ops list` record.
type opRow struct {
	CallID, Tool, Status, Code, Reason, ArgumentsDigest string
	InputRounds                                         int32
	SystemIdentity                                      struct{ Harness, MCPSupport, ToolPolicy string }
}

// ops lists a turn's records through sharedosctl.
func (s *stack) ops(turnID string) []opRow {
	s.t.Helper()
	out, errOut, code := s.ctl("ops", "list", "--turn", turnID)
	if code != 0 {
		s.t.Fatalf("sharedosctl ops list: exit %d: %s", code, errOut)
	}
	var rows []opRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		s.t.Fatalf("ops list output: %v\n%s", err, out)
	}
	return rows
}

// outcomeCounts is SELECT status, code, count(*) over a turn (all turns when
// turnID is "") on the private cluster.
func (s *stack) outcomeCounts(turnID string) map[string]int {
	s.t.Helper()
	return s.countOutcomes(`SELECT status, code, count(*) FROM catalog.operations
		WHERE $1 = '' OR turn_id = $1 GROUP BY status, code`, turnID)
}

// countOutcomes runs a (status, code, count) query on the private cluster
// and returns the counts by "status/code".
func (s *stack) countOutcomes(query string, args ...any) map[string]int {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rows, err := s.db.Query(ctx, query, args...)
	if err != nil {
		s.t.Fatalf("count operations: %v", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var st, code string
		var n int
		if err := rows.Scan(&st, &code, &n); err != nil {
			s.t.Fatal(err)
		}
		out[st+"/"+code] = n
	}
	if err := rows.Err(); err != nil {
		s.t.Fatal(err)
	}
	return out
}

func (s *stack) rowCount(turnID string) int {
	s.t.Helper()
	n := 0
	for _, c := range s.outcomeCounts(turnID) {
		n += c
	}
	return n
}

// pendingStartedBefore counts the turn's pending records begun before t.
func (s *stack) pendingStartedBefore(turnID string, t time.Time) int {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var n int
	if err := s.db.QueryRow(ctx, `SELECT count(*) FROM catalog.operations
		WHERE turn_id = $1 AND status = 'pending' AND started_at < $2`, turnID, t).Scan(&n); err != nil {
		s.t.Fatalf("count pending operations: %v", err)
	}
	return n
}

// waitSettled waits (bounded) until no record of the turn is pending.
func (s *stack) waitSettled(turnID string, limit time.Duration) {
	s.t.Helper()
	deadline := time.Now().Add(limit)
	for {
		if s.outcomeCounts(turnID)["pending/"] == 0 {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("records of turn %s still pending after %s: %v", turnID, limit, s.outcomeCounts(turnID))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ---- the counting provider

// provider is an in-process ToolHandlerService: it counts every Handle, keeps
// what each received, and implements verify.slow (sleeps, or until the
// kernel cancels) and a handler error (value "fail").
type provider struct {
	sharedosv1.UnimplementedToolHandlerServiceServer
	addr    string
	handled atomic.Int64
	started chan string // call ids of verify.slow as they start (buffered)
	// held, while set, keeps verify.slow running until it is closed (or the
	// kernel cancels) instead of for its ms: a test releases it after what
	// must happen during the handler, however slowly that happened.
	held atomic.Pointer[chan struct{}]

	mu    sync.Mutex
	calls []handled
}

type handled struct {
	CallID, TurnID, Tool string
	Args                 []byte
	Metadata             metadata.MD
}

func startProvider(t testing.TB, creds *mtls.Credentials) *provider {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpcx.NewServer(grpcx.ServerOptions{Plane: grpcx.Plane{TLS: creds}, Logger: slog.New(slog.DiscardHandler), DrainTimeout: time.Second})
	p := &provider{addr: lis.Addr().String(), started: make(chan string, 1024)}
	sharedosv1.RegisterToolHandlerServiceServer(srv.GRPC(), p)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = srv.Serve(ctx, lis); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return p
}

// hold makes verify.slow run until release is called.
func (p *provider) hold() (release func()) {
	ch := make(chan struct{})
	p.held.Store(&ch)
	return sync.OnceFunc(func() { close(ch); p.held.Store(nil) })
}

func (p *provider) Handle(ctx context.Context, req *sharedosv1.HandleRequest) (*sharedosv1.HandleResponse, error) {
	p.handled.Add(1)
	md, _ := metadata.FromIncomingContext(ctx)
	p.mu.Lock()
	p.calls = append(p.calls, handled{CallID: req.GetCallId(), TurnID: req.GetTurnId(), Tool: req.GetTool(), Args: req.GetArgumentsJson(), Metadata: md.Copy()})
	p.mu.Unlock()
	var args struct {
		Value string `json:"value"`
		MS    int    `json:"ms"`
	}
	_ = json.Unmarshal(req.GetArgumentsJson(), &args)
	if req.GetTool() == "verify.slow" || req.GetTool() == "verify.sleepy" {
		if req.GetTool() == "verify.slow" {
			select {
			case p.started <- req.GetCallId():
			default:
			}
		}
		var end <-chan struct{}
		var sleep <-chan time.Time
		if h := p.held.Load(); h != nil && req.GetTool() == "verify.slow" {
			end = *h
		} else {
			sleep = time.After(time.Duration(min(args.MS, 20000)) * time.Millisecond)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-end:
		case <-sleep:
		}
	}
	if req.GetTool() == "verify.ask" {
		// Contract v3: one elicitation round, then the answer read back.
		var answers map[string]json.RawMessage
		_ = json.Unmarshal(req.GetInputResponsesJson(), &answers)
		if answers["confirm"] == nil {
			return &sharedosv1.HandleResponse{InputRequired: &sharedosv1.InputRequired{
				InputRequestsJson: []byte(`{"confirm":{"method":"elicitation/create","params":{"message":"Really?","requestedSchema":{"type":"object","properties":{"ok":{"type":"boolean"}}}}}}`),
				RequestState:      []byte("verify-round-" + req.GetCallId()),
			}}, nil
		}
		b, _ := json.Marshal([]map[string]string{{"type": "text", "text": "confirmed " + string(req.GetRequestState()) + " " + string(answers["confirm"])}})
		return &sharedosv1.HandleResponse{ContentJson: b}, nil
	}
	if v, ok := strings.CutPrefix(args.Value, "echo:"); ok {
		// The answer carries the caller's own mark: a response routed to
		// the wrong caller shows (TestSameRequestIDsAcrossTurns).
		b, _ := json.Marshal([]map[string]string{{"type": "text", "text": "echo " + v}})
		return &sharedosv1.HandleResponse{ContentJson: b}, nil
	}
	if args.Value == "fail" {
		return &sharedosv1.HandleResponse{ContentJson: []byte(`[{"type":"text","text":"verify: asked to fail"}]`), IsError: true}, nil
	}
	return &sharedosv1.HandleResponse{ContentJson: []byte(`[{"type":"text","text":"handled ` + req.GetTool() + `"}]`)}, nil
}

// snapshot returns what the provider has handled so far.
func (p *provider) snapshot() []handled {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]handled(nil), p.calls...)
}

// waitAuthzReachable waits until catalog-svc reaches authz-svc again
// (ListTools needs FilterTools), without making any tool call: after a
// restart the kernel's channel may still be in reconnect backoff.
func (s *stack) waitAuthzReachable(limit time.Duration) time.Duration {
	s.t.Helper()
	start := time.Now()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := s.catalogC.ListTools(ctx, &sharedosv1.ListToolsRequest{Context: &sharedosv1.AccessContext{Principal: "probe", Roles: []string{"verify"}}})
		cancel()
		if err == nil {
			return time.Since(start)
		}
		if time.Since(start) > limit {
			s.t.Fatalf("catalog-svc cannot reach authz-svc %s after its restart: %v", limit, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
