package ctl

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/callers"
	"github.com/sharedos/toolshare/services/contract/exportset"
	"github.com/sharedos/toolshare/services/contract/requirement"
	"github.com/sharedos/toolshare/services/contract/systemidentity"
	"github.com/sharedos/toolshare/services/tools/opsjson"
	"github.com/sharedos/toolshare/services/tools/regfile"
)

// accessFlags are the AccessContext flags shared by several commands.
type accessFlags struct {
	principal string
	tenant    string
	roles     multiFlag
	attrs     kvFlag
}

func (a *accessFlags) bind(fs *flag.FlagSet) {
	a.attrs = kvFlag{}
	fs.StringVar(&a.principal, "principal", "", "principal the context is for")
	fs.StringVar(&a.tenant, "tenant", "", "tenant of the principal")
	fs.Var(&a.roles, "role", "role of the principal (repeatable)")
	fs.Var(a.attrs, "attr", "attribute K=V (repeatable)")
}

func (a *accessFlags) context() *sharedosv1.AccessContext {
	return &sharedosv1.AccessContext{Principal: a.principal, Tenant: a.tenant, Roles: a.roles, Attributes: a.attrs}
}

func init() {
	register(&command{path: "status", usage: "exit 0 when every service reports SERVING", run: runStatus})

	var file string
	register(&command{path: "tools register", usage: "-f FILE (YAML or JSON: one registration or a list of at most 20000, registered all or nothing)",
		flags: func(fs *flag.FlagSet) { fs.StringVar(&file, "f", "", "registration file") },
		run: func(ctx context.Context, e *env, _ *flag.FlagSet, args []string) error {
			return runToolsRegister(ctx, e, file, args)
		}})
	register(&command{path: "tools get", usage: "NAME", run: runToolsGet})
	register(&command{path: "tools deregister", usage: "NAME", run: runToolsDeregister})
	var listAccess accessFlags
	register(&command{path: "tools list", usage: "[--principal P] [--tenant T] [--role R]... [--attr K=V]...",
		flags: listAccess.bind,
		run: func(ctx context.Context, e *env, _ *flag.FlagSet, args []string) error {
			return runToolsList(ctx, e, &listAccess, args)
		}})

	var open openFlags
	register(&command{path: "turn open", usage: "(--principal P [--tenant T] [--role R]... [--attr K=V]... | --user-token JWT) [--ttl 15m] [--harness NAME] [--harness-version V] [--mcp-support native|extension] [--extension NAME] [--model NAME] [--policy FILE] [--portable-names]",
		flags: open.bind,
		run: func(ctx context.Context, e *env, _ *flag.FlagSet, args []string) error {
			return runTurnOpen(ctx, e, &open, args)
		}})
	register(&command{path: "turn close", usage: "ID", run: runTurnClose})
	register(&command{path: "turn get", usage: "ID", run: runTurnGet})

	var turn string
	register(&command{path: "ops list", usage: "--turn ID",
		flags: func(fs *flag.FlagSet) { fs.StringVar(&turn, "turn", "", "turn id") },
		run: func(ctx context.Context, e *env, _ *flag.FlagSet, args []string) error {
			return runOpsList(ctx, e, turn, args)
		}})

	var export exportFlags
	register(&command{path: "ops export", usage: "--since TIME|DURATION [--out FILE] [--page-size N]",
		flags: export.bind,
		run: func(ctx context.Context, e *env, _ *flag.FlagSet, args []string) error {
			return runOpsExport(ctx, e, &export, args)
		}})

	var check checkFlags
	register(&command{path: "authz check", usage: "--principal P [--role R]... --tool T [--action A] --args JSON " +
		"(asks the policy alone: a call's arguments are first checked against the tool's schema, which this does not do, so a call can fail as invalid where this allows)",
		flags: check.bind,
		run: func(ctx context.Context, e *env, _ *flag.FlagSet, args []string) error {
			return runAuthzCheck(ctx, e, &check, args)
		}})
}

func noArgs(args []string) error {
	if len(args) != 0 {
		return usagef("unexpected arguments %q", args)
	}
	return nil
}

func oneArg(args []string, what string) (string, error) {
	if len(args) != 1 {
		return "", usagef("want exactly one %s", what)
	}
	return args[0], nil
}

// ---- status

type serviceStatus struct {
	Service string `json:"service"`
	Address string `json:"address"`
	Status  string `json:"status"`
	Error   string `json:"error,omitempty"`
}

func runStatus(ctx context.Context, e *env, _ *flag.FlagSet, args []string) error {
	if err := noArgs(args); err != nil {
		return err
	}
	targets := []struct {
		name, addr string
		role       callers.Role
	}{
		{"catalog", e.g.catalog, callers.Catalog}, {"authz", e.g.authz, callers.Authz}, {"bridge", e.g.bridge, callers.Bridge}, {"files", e.g.files, callers.Provider},
	}
	var out []serviceStatus
	var down []string
	for _, t := range targets {
		if t.addr == "" {
			continue
		}
		s := serviceStatus{Service: t.name, Address: t.addr, Status: "UNKNOWN"}
		if c, err := e.conn(t.addr, t.role); err != nil {
			s.Error = err.Error()
		} else {
			cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			resp, err := grpc_health_v1.NewHealthClient(c).Check(cctx, &grpc_health_v1.HealthCheckRequest{})
			cancel()
			if err != nil {
				s.Error = describe(err)
			} else {
				s.Status = resp.GetStatus().String()
			}
		}
		if s.Status != "SERVING" {
			down = append(down, t.name)
		}
		out = append(out, s)
	}
	rows := make([][]string, 0, len(out))
	for _, s := range out {
		rows = append(rows, []string{s.Service, s.Address, s.Status, s.Error})
	}
	if err := e.emit(map[string]any{"ok": len(down) == 0, "services": out}, []string{"SERVICE", "ADDRESS", "STATUS", "ERROR"}, rows); err != nil {
		return err
	}
	if len(down) > 0 {
		fmt.Fprintf(e.stderr, "sharedosctl status: not serving: %s\n", strings.Join(down, ", "))
		return silentExit(1)
	}
	return nil
}

// ---- tools

func catalogClient(e *env) (sharedosv1.CatalogServiceClient, error) {
	c, err := e.conn(e.g.catalog, callers.Catalog)
	if err != nil {
		return nil, err
	}
	return sharedosv1.NewCatalogServiceClient(c), nil
}

// maxRegisterBatch is catalog-svc's bound on one RegisterTools (its
// server.MaxBatch, documented on the RPC). A longer list is refused before
// it is sent, not split into several calls: a file stays all or nothing,
// and one that fails runs again once fixed, which a file left half
// registered would not (its registered names would then be refused).
const maxRegisterBatch = 20000

func runToolsRegister(ctx context.Context, e *env, file string, args []string) error {
	if file == "" {
		return usagef("-f FILE is required")
	}
	if err := noArgs(args); err != nil {
		return err
	}
	regs, err := regfile.ReadFile(file)
	if err != nil {
		return err
	}
	if len(regs) > maxRegisterBatch {
		return fmt.Errorf("%s lists %d tools (nothing registered): a file is registered all or nothing, in one call of at most %d; "+
			"split it into files of at most %d tools, each then registered all or nothing on its own", file, len(regs), maxRegisterBatch, maxRegisterBatch)
	}
	cc, err := catalogClient(e)
	if err != nil {
		return err
	}
	type registered struct {
		Name     string `json:"name"`
		Revision int64  `json:"revision"`
	}
	out := make([]registered, 0, len(regs))
	ps := make([]*sharedosv1.ToolRegistration, len(regs))
	for i, r := range regs {
		if ps[i], err = r.ToProto(); err != nil {
			return err
		}
	}
	if len(ps) == 1 {
		resp, err := cc.RegisterTool(ctx, &sharedosv1.RegisterToolRequest{Registration: ps[0]})
		if err != nil {
			return fmt.Errorf("register %q: %w", regs[0].Name, errors.New(describe(err)))
		}
		out = append(out, registered{Name: resp.GetRegistration().GetName(), Revision: resp.GetRegistration().GetRevision()})
	} else {
		// A list is one RegisterTools, all or nothing: a file that fails
		// leaves nothing registered, and runs again once fixed. A tool
		// is new, but its revision continues a deleted one's of the same
		// name: the answer says which it was stored at.
		resp, err := cc.RegisterTools(ctx, &sharedosv1.RegisterToolsRequest{Registrations: ps})
		if err != nil {
			return fmt.Errorf("register %s (nothing registered): %w", file, errors.New(describe(err)))
		}
		revs := resp.GetRevisions()
		if len(revs) != len(ps) {
			// A catalog-svc that predates revisions in the answer: each
			// is read back.
			if revs, err = readRevisions(ctx, cc, ps); err != nil {
				return fmt.Errorf("registered every tool of %s, but %w", file, err)
			}
		}
		for i, p := range ps {
			out = append(out, registered{Name: p.GetName(), Revision: revs[i]})
		}
	}
	rows := make([][]string, 0, len(out))
	for _, r := range out {
		rows = append(rows, []string{r.Name, fmt.Sprint(r.Revision)})
	}
	return e.emit(map[string]any{"registered": out}, []string{"NAME", "REVISION"}, rows)
}

// readRevisions reads back the revision of each of ps as stored now.
func readRevisions(ctx context.Context, cc sharedosv1.CatalogServiceClient, ps []*sharedosv1.ToolRegistration) ([]int64, error) {
	revs := make([]int64, len(ps))
	for i, p := range ps {
		resp, err := cc.GetTool(ctx, &sharedosv1.GetToolRequest{Name: p.GetName()})
		if err != nil {
			return nil, fmt.Errorf("reading back the revision of %q failed: %w", p.GetName(), errors.New(describe(err)))
		}
		revs[i] = resp.GetRegistration().GetRevision()
	}
	return revs, nil
}

// adminTool is `tools get` output: the registration file shape plus the
// service-kept fields and, for every tool, its state: published with the
// digest turns pin, or (a tool of an upstream, ADR 0019) quarantined or
// rejected with the pending digest and the reason.
type adminTool struct {
	regfile.Registration
	Revision      int64  `json:"revision,omitempty"`
	CreatedAt     string `json:"createdAt,omitempty"`
	UpdatedAt     string `json:"updatedAt,omitempty"`
	State         string `json:"state"`
	Digest        string `json:"digest,omitempty"`
	PendingDigest string `json:"pendingDigest,omitempty"`
	Reason        string `json:"reason,omitempty"`
}

func runToolsGet(ctx context.Context, e *env, _ *flag.FlagSet, args []string) error {
	name, err := oneArg(args, "tool NAME")
	if err != nil {
		return err
	}
	cc, err := catalogClient(e)
	if err != nil {
		return err
	}
	resp, err := cc.GetTool(ctx, &sharedosv1.GetToolRequest{Name: name})
	if err != nil && status.Code(err) != codes.NotFound {
		return errors.New(describe(err))
	}
	reg := resp.GetRegistration()
	out, uerr := upstreamState(ctx, e, name, reg, resp.GetPublished().GetDigest())
	if uerr != nil {
		return uerr
	}
	if out == nil { // in neither the registry nor an upstream's record
		return errors.New(describe(err))
	}
	if reg.GetCreatedAt() != nil {
		out.CreatedAt = reg.GetCreatedAt().AsTime().Format(time.RFC3339Nano)
	}
	if reg.GetUpdatedAt() != nil {
		out.UpdatedAt = reg.GetUpdatedAt().AsTime().Format(time.RFC3339Nano)
	}
	return e.emit(out, nil, nil)
}

func runToolsDeregister(ctx context.Context, e *env, _ *flag.FlagSet, args []string) error {
	name, err := oneArg(args, "tool NAME")
	if err != nil {
		return err
	}
	cc, err := catalogClient(e)
	if err != nil {
		return err
	}
	if _, err := cc.DeregisterTool(ctx, &sharedosv1.DeregisterToolRequest{Name: name}); err != nil {
		return errors.New(describe(err))
	}
	return e.emit(map[string]any{"deregistered": name}, []string{"DEREGISTERED"}, [][]string{{name}})
}

// MCPTool is a published tool in the MCP Tool JSON shape plus metadata.
type MCPTool struct {
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"inputSchema,omitempty"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Annotations  json.RawMessage `json:"annotations,omitempty"`
	Metadata     *MCPToolMeta    `json:"metadata,omitempty"`
}

// MCPToolMeta is the hashed metadata of a published tool.
type MCPToolMeta struct {
	Namespace string `json:"namespace,omitempty"`
	Source    string `json:"source,omitempty"`
}

// ToMCPTool renders a published tool.
func ToMCPTool(p *sharedosv1.PublishedTool) MCPTool {
	t := MCPTool{
		Name:         p.GetName(),
		Description:  p.GetDescription(),
		InputSchema:  rawOrNil(p.GetInputSchemaJson()),
		OutputSchema: rawOrNil(p.GetOutputSchemaJson()),
		Annotations:  rawOrNil(p.GetAnnotationsJson()),
	}
	if m := p.GetMetadata(); m != nil && (m.GetNamespace() != "" || m.GetSource() != "") {
		t.Metadata = &MCPToolMeta{Namespace: m.GetNamespace(), Source: m.GetSource()}
	}
	return t
}

func rawOrNil(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	return json.RawMessage(b)
}

func runToolsList(ctx context.Context, e *env, a *accessFlags, args []string) error {
	if err := noArgs(args); err != nil {
		return err
	}
	if a.principal == "" && (len(a.roles) > 0 || len(a.attrs) > 0 || a.tenant != "") {
		return usagef("--role, --attr and --tenant need --principal")
	}
	cc, err := catalogClient(e)
	if err != nil {
		return err
	}
	req := &sharedosv1.ListToolsRequest{}
	if a.principal != "" {
		req.Context = a.context()
	}
	resp, err := cc.ListTools(ctx, req)
	if err != nil {
		return errors.New(describe(err))
	}
	tools := make([]MCPTool, 0, len(resp.GetTools()))
	rows := make([][]string, 0, len(resp.GetTools()))
	for _, t := range resp.GetTools() {
		tools = append(tools, ToMCPTool(t))
		rows = append(rows, []string{t.GetName(), t.GetMetadata().GetNamespace(), t.GetDescription()})
	}
	if e.g.output == "table" {
		fmt.Fprintf(e.stdout, "catalogHash %s\n", cell(resp.GetCatalogHash()))
	}
	return e.emit(map[string]any{"catalogHash": resp.GetCatalogHash(), "tools": tools}, []string{"NAME", "NAMESPACE", "DESCRIPTION"}, rows)
}

// ---- turns

type openFlags struct {
	access         accessFlags
	ttl            time.Duration
	harness        string
	harnessVersion string
	mcpSupport     string
	extension      string
	model          string
	policy         string
	portable       bool
	userToken      string
}

// UnnamedHarness is the harness a turn opened without --harness names: the
// bridge requires one, and the records then say that none was given.
const UnnamedHarness = "unnamed"

func (o *openFlags) bind(fs *flag.FlagSet) {
	o.access.bind(fs)
	fs.DurationVar(&o.ttl, "ttl", 15*time.Minute, "lease time to live")
	fs.StringVar(&o.userToken, "user-token", "", "the end user's OIDC ID token (else env SHAREDOS_USER_TOKEN, when --principal is not given): the bridge verifies it and takes the context from its claims, instead of --principal/--role")
	fs.StringVar(&o.harness, "harness", UnnamedHarness, "harness name (e.g. claude-code), recorded with every call of the turn")
	fs.StringVar(&o.harnessVersion, "harness-version", "", "harness version")
	fs.StringVar(&o.mcpSupport, "mcp-support", "native", "native or extension")
	fs.StringVar(&o.extension, "extension", "", "MCP client extension name when --mcp-support extension")
	fs.StringVar(&o.model, "model", "", "declared model (recorded, never selected)")
	fs.StringVar(&o.policy, "policy", "", "ToolPolicy file (YAML or JSON: mode, harnessLocal, externalDirect); default permissive")
	fs.BoolVar(&o.portable, "portable-names", false, "publish portable names (files_read) mapped back before the call")
}

func readPolicy(path string) (*sharedosv1.ToolPolicy, error) {
	if path == "" {
		return &sharedosv1.ToolPolicy{Mode: sharedosv1.PolicyMode_POLICY_MODE_PERMISSIVE}, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f systemidentity.Policy
	if err := regfile.DecodeStrict(b, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	p, err := f.Proto()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

func bridgeClient(e *env) (sharedosv1.BridgeServiceClient, error) {
	c, err := e.conn(e.g.bridge, callers.Bridge)
	if err != nil {
		return nil, err
	}
	return sharedosv1.NewBridgeServiceClient(c), nil
}

// TurnOpened is the `turn open` output.
type TurnOpened struct {
	TurnID      string   `json:"turnId"`
	McpURL      string   `json:"mcpUrl"`
	Token       string   `json:"token"`
	ExpiresAt   string   `json:"expiresAt"`
	CatalogHash string   `json:"catalogHash"`
	Tools       []string `json:"tools"`
	// Prompts (names), Resources (URIs or templates) and their hash: the
	// turn's other pinned entries (ADR 0018).
	Prompts              []string `json:"prompts,omitempty"`
	Resources            []string `json:"resources,omitempty"`
	PromptsResourcesHash string   `json:"promptsResourcesHash,omitempty"`
}

// OpenedFromLease renders a lease as `turn open` prints it.
func OpenedFromLease(l *sharedosv1.TurnLease) TurnOpened {
	out := TurnOpened{TurnID: l.GetTurnId(), McpURL: l.GetMcpUrl(), Token: l.GetToken(), CatalogHash: l.GetCatalogHash(), Tools: []string{}}
	if l.GetExpiresAt() != nil {
		out.ExpiresAt = l.GetExpiresAt().AsTime().UTC().Format(time.RFC3339)
	}
	for _, t := range l.GetTools() {
		out.Tools = append(out.Tools, t.GetName())
	}
	for _, p := range l.GetPrompts() {
		out.Prompts = append(out.Prompts, p.GetName())
	}
	for _, r := range l.GetResources() {
		out.Resources = append(out.Resources, r.GetUri())
	}
	out.PromptsResourcesHash = l.GetPromptsResourcesHash()
	return out
}

func runTurnOpen(ctx context.Context, e *env, o *openFlags, args []string) error {
	if err := noArgs(args); err != nil {
		return err
	}
	if o.userToken == "" && o.access.principal == "" {
		// Read here, never as the flag's default: a default is printed
		// with the usage, which would write the token to stderr.
		o.userToken = os.Getenv("SHAREDOS_USER_TOKEN")
	}
	switch {
	case o.userToken != "" && o.access.principal != "":
		return usagef("give --principal or --user-token, not both")
	case o.userToken == "" && o.access.principal == "":
		return usagef("--principal (or --user-token) is required")
	}
	support := systemidentity.ParseMCPSupport(o.mcpSupport)
	if support == sharedosv1.McpSupport_MCP_SUPPORT_UNSPECIFIED {
		return usagef("--mcp-support must be %s or %s, not %q", systemidentity.Native, systemidentity.Extension, o.mcpSupport)
	}
	policy, err := readPolicy(o.policy)
	if err != nil {
		return err
	}
	bc, err := bridgeClient(e)
	if err != nil {
		return err
	}
	var actx *sharedosv1.AccessContext
	if o.userToken == "" {
		actx = o.access.context()
	}
	lease, err := bc.OpenTurn(ctx, &sharedosv1.OpenTurnRequest{
		Context:   actx,
		UserToken: o.userToken,
		Policy:    policy,
		Harness: &sharedosv1.HarnessIdentity{
			Name: o.harness, Version: o.harnessVersion, McpSupport: support, ExtensionName: o.extension,
		},
		DeclaredModel: o.model,
		Ttl:           durationpb.New(o.ttl),
		PortableNames: o.portable,
	})
	if err != nil {
		return errors.New(describe(err))
	}
	out := OpenedFromLease(lease)
	return e.emit(out, []string{"TURN", "MCP URL", "EXPIRES", "CATALOG HASH", "TOOLS"},
		[][]string{{out.TurnID, out.McpURL, out.ExpiresAt, out.CatalogHash, strings.Join(out.Tools, ",")}})
}

func runTurnClose(ctx context.Context, e *env, _ *flag.FlagSet, args []string) error {
	id, err := oneArg(args, "turn ID")
	if err != nil {
		return err
	}
	bc, err := bridgeClient(e)
	if err != nil {
		return err
	}
	if _, err := bc.CloseTurn(ctx, &sharedosv1.CloseTurnRequest{TurnId: id}); err != nil {
		return errors.New(describe(err))
	}
	return e.emit(map[string]any{"closed": id}, []string{"CLOSED"}, [][]string{{id}})
}

func runTurnGet(ctx context.Context, e *env, _ *flag.FlagSet, args []string) error {
	id, err := oneArg(args, "turn ID")
	if err != nil {
		return err
	}
	bc, err := bridgeClient(e)
	if err != nil {
		return err
	}
	resp, err := bc.GetTurn(ctx, &sharedosv1.GetTurnRequest{TurnId: id})
	if err != nil {
		return errors.New(describe(err))
	}
	return e.emitProto(resp)
}

// ---- operations

func runOpsList(ctx context.Context, e *env, turn string, args []string) error {
	if err := noArgs(args); err != nil {
		return err
	}
	if turn == "" {
		return usagef("--turn ID is required")
	}
	c, err := e.conn(e.g.catalog, callers.Catalog)
	if err != nil {
		return err
	}
	resp, err := sharedosv1.NewRuntimeServiceClient(c).ListOperations(ctx, &sharedosv1.ListOperationsRequest{TurnId: turn})
	if err != nil {
		return errors.New(describe(err))
	}
	out := make([]opsjson.Operation, 0, len(resp.GetOperations()))
	rows := make([][]string, 0, len(resp.GetOperations()))
	for _, r := range resp.GetOperations() {
		o := opsjson.Of(r)
		out = append(out, o)
		rows = append(rows, []string{fmt.Sprint(o.Sequence), o.CallID, o.Tool, o.Status, o.Code, o.Reason})
	}
	return e.emit(out, []string{"SEQ", "CALL", "TOOL", "STATUS", "CODE", "REASON"}, rows)
}

type exportFlags struct {
	since    string
	out      string
	pageSize int
}

func (f *exportFlags) bind(fs *flag.FlagSet) {
	fs.StringVar(&f.since, "since", "", "export records started at or after this time (RFC 3339) or this long ago (a duration, e.g. 24h)")
	fs.StringVar(&f.out, "out", "", "archive file to write (JSON lines) and note in the export ledger; without it the records go to stdout and nothing is noted")
	fs.IntVar(&f.pageSize, "page-size", 1000, "records per ExportOperations page (at most 5000)")
}

// ExportJSON is what `ops export --out` prints once the archive is written
// and noted in the ledger.
type ExportJSON struct {
	File            string `json:"file"`
	Rows            int64  `json:"rows"`
	AfterSequence   int64  `json:"afterSequence"`
	ThroughSequence int64  `json:"throughSequence"`
	SHA256          string `json:"sha256"`
	ExportID        int64  `json:"exportId"`
}

// runOpsExport pages through ExportOperations, writes every record as one
// JSON line, and — with --out — makes the file durable (written under a
// temporary name, fsynced, renamed, the directory fsynced) before it asks
// the kernel to note it in the export ledger: a record is never noted as
// archived unless it is on disk. The export ends before the first pending
// record; the next export continues from there with --since.
func runOpsExport(ctx context.Context, e *env, f *exportFlags, args []string) error {
	if err := noArgs(args); err != nil {
		return err
	}
	since, err := parseSince(f.since, time.Now())
	if err != nil {
		return err
	}
	c, err := e.conn(e.g.catalog, callers.Catalog)
	if err != nil {
		return err
	}
	rt := sharedosv1.NewRuntimeServiceClient(c)
	w, finish, err := exportWriter(e, f.out)
	if err != nil {
		return err
	}
	// Every line is written by writeJSON, as all of sharedosctl's JSON
	// (hidden characters \u-escaped: the archive decodes to the same
	// records, and stdout may be a terminal); the sha256 noted is over the
	// bytes written.
	sum, set := sha256.New(), exportset.New()
	bw := bufio.NewWriter(io.MultiWriter(w, sum))
	req := &sharedosv1.ExportOperationsRequest{Since: timestamppb.New(since), PageSize: int32(min(f.pageSize, 1<<30))}
	var from, through, rows int64
	for first := true; ; first = false {
		resp, err := rt.ExportOperations(ctx, req)
		if err != nil {
			_ = finish(false)
			return errors.New(describe(err))
		}
		if first {
			from = resp.GetFromSequence()
		}
		for _, r := range resp.GetOperations() {
			if err := writeJSON(bw, opsjson.Of(r), ""); err != nil {
				_ = finish(false)
				return err
			}
			set.Add(r.GetSequence())
			rows++
		}
		through = resp.GetNextAfterSequence()
		if resp.GetDone() {
			break
		}
		req = &sharedosv1.ExportOperationsRequest{AfterSequence: through, PageSize: req.GetPageSize()}
	}
	if err := bw.Flush(); err != nil {
		_ = finish(false)
		return err
	}
	if f.out == "" {
		return nil
	}
	if err := finish(true); err != nil {
		return fmt.Errorf("ops export: %s could not be made durable (%v); nothing was noted", f.out, err)
	}
	out := ExportJSON{File: f.out, Rows: rows, AfterSequence: from, ThroughSequence: through, SHA256: hex.EncodeToString(sum.Sum(nil))}
	resp, err := rt.RecordExport(ctx, &sharedosv1.RecordExportRequest{
		AfterSequence: from, ThroughSequence: through, Rows: rows, Sha256: out.SHA256, RecordsDigest: set.Sum(),
	})
	if err != nil {
		return fmt.Errorf("ops export: %s is written but not noted in the export ledger: %s", f.out, describe(err))
	}
	out.ExportID = resp.GetExportId()
	return e.emit(out, nil, nil)
}

// parseSince reads --since: an RFC 3339 time, or a duration before now.
func parseSince(v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, usagef("--since TIME|DURATION is required")
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, usagef("--since %q is neither an RFC 3339 time nor a non-negative duration", v)
}

// exportWriter is where the records go: stdout, or a temporary file beside
// path that finish(true) fsyncs and links to path (never over a file
// there), fsyncing the directory, and finish(false) removes. finish(true)
// returns why the file is not durable at path (nil: it is); a name linked
// whose directory could not be synced is removed again, so the export can
// be run again.
func exportWriter(e *env, path string) (io.Writer, func(ok bool) error, error) {
	if path == "" {
		return e.stdout, func(bool) error { return nil }, nil
	}
	if _, err := os.Lstat(path); err == nil {
		return nil, nil, fmt.Errorf("ops export: %s exists; an archive is never overwritten", path)
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".partial-*")
	if err != nil {
		return nil, nil, fmt.Errorf("ops export: %w", err)
	}
	finish := func(ok bool) error {
		defer func() { _ = os.Remove(tmp.Name()) }() // path holds its own link once made
		if !ok {
			_ = tmp.Close()
			return nil
		}
		if err := tmp.Sync(); err != nil {
			_ = tmp.Close()
			return err
		}
		if err := tmp.Close(); err != nil {
			return err
		}
		if err := os.Link(tmp.Name(), path); err != nil {
			return err
		}
		d, err := os.Open(dir)
		if err == nil {
			err = d.Sync()
			_ = d.Close()
		}
		if err != nil {
			// Not durable, and not noted: the name goes too, so that
			// the same export can simply be run again.
			_ = os.Remove(path)
			return err
		}
		return nil
	}
	return tmp, finish, nil
}

// ---- authz

type checkFlags struct {
	access                accessFlags
	tool                  string
	action                string
	args                  string
	kernelCert, kernelKey string
}

// Authorize is the kernel's to call (callers table), so the check asks
// authz-svc as the kernel would, with a catalog identity: make run's by
// default. The tool is read from catalog-svc as the operator.
func (c *checkFlags) bind(fs *flag.FlagSet) {
	fs.StringVar(&c.kernelCert, "kernel-tls-cert", os.Getenv("SHAREDOS_KERNEL_TLS_CERT"), "PEM certificate of a catalog (kernel) identity to ask authz-svc with (env SHAREDOS_KERNEL_TLS_CERT; default: make run's)")
	fs.StringVar(&c.kernelKey, "kernel-tls-key", os.Getenv("SHAREDOS_KERNEL_TLS_KEY"), "PEM key of --kernel-tls-cert (env SHAREDOS_KERNEL_TLS_KEY)")
	c.access.bind(fs)
	fs.StringVar(&c.tool, "tool", "", "registered tool name")
	fs.StringVar(&c.action, "action", "", "action (default: the tool's requirement action)")
	fs.StringVar(&c.args, "args", "{}", "call arguments as a JSON object")
}

// Decision is the `authz check` output.
type Decision struct {
	Decision       string `json:"decision"`
	Reason         string `json:"reason"`
	DecisionID     string `json:"decisionId"`
	PolicyRevision string `json:"policyRevision"`
	Action         string `json:"action"`
	Resource       string `json:"resource"`
}

func runAuthzCheck(ctx context.Context, e *env, c *checkFlags, args []string) error {
	if err := noArgs(args); err != nil {
		return err
	}
	if c.access.principal == "" || c.tool == "" {
		return usagef("--principal and --tool are required")
	}
	if !json.Valid([]byte(c.args)) {
		return usagef("--args is not valid JSON")
	}
	cc, err := catalogClient(e)
	if err != nil {
		return err
	}
	// The same resolution the kernel does: the registration's requirement,
	// applied to these arguments. Not the kernel's argument checks before it
	// (the tool's schema, keys differing only in case): the usage says so.
	reg, err := cc.GetTool(ctx, &sharedosv1.GetToolRequest{Name: c.tool})
	if err != nil {
		return errors.New(describe(err))
	}
	action, resource, err := requirement.Resolve(reg.GetRegistration().GetRequirement(), []byte(c.args))
	if err != nil {
		return fmt.Errorf("resolve requirement of %q: %w", c.tool, err)
	}
	if c.action != "" {
		action = c.action
	}
	kernel, err := e.g.identity("catalog")
	if err != nil {
		return err
	}
	if c.kernelCert != "" || c.kernelKey != "" {
		kernel.Cert, kernel.Key = c.kernelCert, c.kernelKey
	}
	ac, err := e.connWith(ctx, e.g.authz, callers.Authz, kernel)
	if err != nil {
		return err
	}
	r := reg.GetRegistration()
	resp, err := sharedosv1.NewAuthzServiceClient(ac).Authorize(ctx, &sharedosv1.AuthorizeRequest{
		Context: c.access.context(),
		Tool: &sharedosv1.ToolFacts{
			Name: r.GetName(), Namespace: r.GetMetadata().GetNamespace(), Class: regfile.ClassName(r.GetClass()),
			AnnotationsJson: r.GetAnnotationsJson(), Source: r.GetMetadata().GetSource(),
		},
		Action:        action,
		Resource:      resource,
		ArgumentsJson: []byte(c.args),
	})
	if err != nil {
		return errors.New(describe(err))
	}
	d := Decision{Decision: "deny", Reason: resp.GetReason(), DecisionID: resp.GetDecisionId(), PolicyRevision: resp.GetPolicyRevision(), Action: action, Resource: resource}
	if resp.GetDecision() == sharedosv1.Decision_DECISION_ALLOW {
		d.Decision = "allow"
	}
	return e.emit(d, []string{"DECISION", "REASON", "ACTION", "RESOURCE", "DECISION ID"},
		[][]string{{d.Decision, d.Reason, d.Action, d.Resource, d.DecisionID}})
}
