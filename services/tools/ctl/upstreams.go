package ctl

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/google/shlex"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"sigs.k8s.io/yaml"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/callers"
	"github.com/sharedos/toolshare/services/contract/projection"
	"github.com/sharedos/toolshare/services/tools/regfile"
)

// Upstream MCP servers (ADR 0019): `providers …` manage them, `tools
// approve|reject|diff` decide about their quarantined tools.

func upstreamClient(e *env) (sharedosv1.UpstreamServiceClient, error) {
	c, err := e.conn(e.g.catalog, callers.Catalog)
	if err != nil {
		return nil, err
	}
	return sharedosv1.NewUpstreamServiceClient(c), nil
}

// onUpstream runs f with the command's one argument (what names it) and
// an UpstreamService client; an error f returns from the service is
// described.
func onUpstream(e *env, args []string, what string, f func(uc sharedosv1.UpstreamServiceClient, arg string) error) error {
	arg, err := oneArg(args, what)
	if err != nil {
		return err
	}
	uc, err := upstreamClient(e)
	if err != nil {
		return err
	}
	return f(uc, arg)
}

type addFlags struct {
	namespace, url, command, credentialRef, requirementsFile string
	oauthTokenURL, oauthClientID, oauthSecretRef             string
	oauthScopes                                              multiFlag
	refresh, timeout                                         time.Duration
	autoApproveNew                                           bool
	headers                                                  kvFlag
	requirements, readOnly                                   multiFlag
}

func (f *addFlags) bind(fs *flag.FlagSet) {
	f.headers = kvFlag{}
	fs.StringVar(&f.namespace, "namespace", "", "namespace of the upstream's tools (the first name segment)")
	fs.StringVar(&f.url, "url", "", "Streamable HTTP endpoint of the upstream")
	fs.StringVar(&f.command, "command", "", "command line of a stdio upstream catalog-svc starts (split like a shell would, no expansion)")
	fs.Var(f.headers, "header", "K=SECRETREF: an HTTP header (for stdio: an environment variable) and the secret reference of its value (repeatable)")
	fs.StringVar(&f.credentialRef, "credential-ref", "", "secret reference (NAME, env:NAME or file:/path) of a bearer token sent to this upstream only")
	fs.StringVar(&f.oauthTokenURL, "oauth-token-url", "", "token endpoint of the OAuth 2 client credentials grant the bearer token comes from (instead of --credential-ref)")
	fs.StringVar(&f.oauthClientID, "oauth-client-id", "", "OAuth client id")
	fs.StringVar(&f.oauthSecretRef, "oauth-client-secret-ref", "", "secret reference of the OAuth client secret")
	fs.Var(&f.oauthScopes, "oauth-scope", "OAuth scope to ask for (repeatable)")
	fs.DurationVar(&f.refresh, "refresh", 10*time.Minute, "how often the tools are listed again (0: only on \"providers refresh\")")
	fs.DurationVar(&f.timeout, "timeout", 0, "bound of one upstream call (0: the kernel's default)")
	fs.Var(&f.requirements, "requirement", "NAME=ACTION:TEMPLATE: the requirement of one tool instead of call on mcp:NS/<name> (repeatable)")
	fs.StringVar(&f.requirementsFile, "requirements-file", "", "YAML or JSON map of NAME to ACTION:TEMPLATE")
	fs.BoolVar(&f.autoApproveNew, "auto-approve-new", false, "publish tools the upstream newly lists without an operator's approval (changed definitions still wait)")
	fs.Var(&f.readOnly, "read-only", "NAME of a tool the operator confirms is read-only (repeatable)")
}

func (f *addFlags) spec() (*sharedosv1.UpstreamProvider, error) {
	if f.namespace == "" {
		return nil, usagef("--namespace is required")
	}
	if (f.url == "") == (f.command == "") {
		return nil, usagef("exactly one of --url and --command is required")
	}
	spec := &sharedosv1.UpstreamProvider{Namespace: f.namespace, Url: f.url, CredentialRef: f.credentialRef,
		AutoApproveNew: f.autoApproveNew, ReadOnly: f.readOnly, Headers: map[string]string(f.headers)}
	if f.oauthTokenURL != "" || f.oauthClientID != "" || f.oauthSecretRef != "" {
		spec.Oauth = &sharedosv1.OAuthClientCredentials{TokenUrl: f.oauthTokenURL, ClientId: f.oauthClientID,
			ClientSecretRef: f.oauthSecretRef, Scopes: f.oauthScopes}
	}
	if f.command != "" {
		argv, err := shlex.Split(f.command)
		if err != nil || len(argv) == 0 {
			return nil, usagef("--command %q: %v", f.command, err)
		}
		spec.Command = argv
	}
	if f.refresh < 0 || f.timeout < 0 {
		return nil, usagef("--refresh and --timeout are 0 or positive (got %s, %s)", f.refresh, f.timeout)
	}
	if f.refresh > 0 {
		spec.Refresh = durationpb.New(f.refresh)
	}
	if f.timeout > 0 {
		spec.Timeout = durationpb.New(f.timeout)
	}
	reqs := map[string]string{}
	if f.requirementsFile != "" {
		b, err := os.ReadFile(f.requirementsFile)
		if err != nil {
			return nil, err
		}
		if err := yaml.UnmarshalStrict(b, &reqs); err != nil {
			return nil, fmt.Errorf("%s: want a map of tool name to ACTION:TEMPLATE: %w", f.requirementsFile, err)
		}
	}
	for _, r := range f.requirements {
		name, rest, ok := strings.Cut(r, "=")
		if !ok || name == "" {
			return nil, usagef("--requirement %q: want NAME=ACTION:TEMPLATE", r)
		}
		reqs[name] = rest
	}
	for name, r := range reqs {
		action, template, ok := strings.Cut(r, ":")
		if !ok || action == "" || template == "" {
			return nil, usagef("requirement of %s %q: want ACTION:TEMPLATE", name, r)
		}
		if spec.Requirements == nil {
			spec.Requirements = map[string]*sharedosv1.Requirement{}
		}
		spec.Requirements[name] = &sharedosv1.Requirement{Action: action, Resource: template}
	}
	return spec, nil
}

func init() {
	var add addFlags
	register(&command{path: "providers add", deadline: 2 * time.Minute,
		usage: "--namespace NS (--url URL | --command 'CMD ARGS…') [--header K=SECRETREF]… [--credential-ref NAME | --oauth-token-url URL --oauth-client-id ID --oauth-client-secret-ref REF [--oauth-scope S]…] [--refresh 10m] [--timeout 30s] [--requirement 'NAME=ACTION:TEMPLATE']… [--requirements-file F] [--auto-approve-new] [--read-only NAME]…",
		flags: add.bind,
		run: func(ctx context.Context, e *env, _ *flag.FlagSet, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			spec, err := add.spec()
			if err != nil {
				return err
			}
			uc, err := upstreamClient(e)
			if err != nil {
				return err
			}
			resp, err := uc.AddProvider(ctx, &sharedosv1.AddProviderRequest{Provider: spec})
			if err != nil {
				return errors.New(describe(err))
			}
			return e.emitProvider(resp.GetProvider(), resp.GetStatus())
		}})
	register(&command{path: "providers list", usage: "", run: func(ctx context.Context, e *env, _ *flag.FlagSet, args []string) error {
		if err := noArgs(args); err != nil {
			return err
		}
		uc, err := upstreamClient(e)
		if err != nil {
			return err
		}
		resp, err := uc.ListProviders(ctx, &sharedosv1.ListProvidersRequest{})
		if err != nil {
			return errors.New(describe(err))
		}
		out := make([]providerView, 0, len(resp.GetProviders()))
		rows := make([][]string, 0, len(resp.GetProviders()))
		for _, p := range resp.GetProviders() {
			v := viewProvider(p.GetProvider(), p.GetStatus())
			out = append(out, v)
			counts := map[string]int{}
			for _, t := range v.Status.Tools {
				counts[t.State]++
			}
			rows = append(rows, []string{v.Namespace, v.endpoint(), fmt.Sprint(counts["published"]), fmt.Sprint(counts["quarantined"]),
				fmt.Sprint(counts["rejected"]), fmt.Sprint(len(v.Status.Skipped)), v.Status.Error})
		}
		return e.emit(map[string]any{"providers": out}, []string{"NAMESPACE", "UPSTREAM", "PUBLISHED", "QUARANTINED", "REJECTED", "SKIPPED", "ERROR"}, rows)
	}})
	providerCmd := func(path string, call func(context.Context, sharedosv1.UpstreamServiceClient, string) (*sharedosv1.UpstreamProvider, *sharedosv1.UpstreamStatus, error)) {
		register(&command{path: path, usage: "NS", run: func(ctx context.Context, e *env, _ *flag.FlagSet, args []string) error {
			return onUpstream(e, args, "namespace NS", func(uc sharedosv1.UpstreamServiceClient, ns string) error {
				p, st, err := call(ctx, uc, ns)
				if err != nil {
					return errors.New(describe(err))
				}
				return e.emitProvider(p, st)
			})
		}})
	}
	providerCmd("providers get", func(ctx context.Context, uc sharedosv1.UpstreamServiceClient, ns string) (*sharedosv1.UpstreamProvider, *sharedosv1.UpstreamStatus, error) {
		r, err := uc.GetProvider(ctx, &sharedosv1.GetProviderRequest{Namespace: ns})
		return r.GetProvider(), r.GetStatus(), err
	})
	providerCmd("providers refresh", func(ctx context.Context, uc sharedosv1.UpstreamServiceClient, ns string) (*sharedosv1.UpstreamProvider, *sharedosv1.UpstreamStatus, error) {
		r, err := uc.RefreshProvider(ctx, &sharedosv1.RefreshProviderRequest{Namespace: ns})
		return r.GetProvider(), r.GetStatus(), err
	})
	register(&command{path: "providers remove", usage: "NS", run: func(ctx context.Context, e *env, _ *flag.FlagSet, args []string) error {
		return onUpstream(e, args, "namespace NS", func(uc sharedosv1.UpstreamServiceClient, ns string) error {
			if _, err := uc.RemoveProvider(ctx, &sharedosv1.RemoveProviderRequest{Namespace: ns}); err != nil {
				return errors.New(describe(err))
			}
			return e.emit(map[string]any{"removed": ns}, []string{"REMOVED"}, [][]string{{ns}})
		})
	}})

	var approveDigest, rejectDigest string
	decide := func(path string, digest *string, call func(context.Context, sharedosv1.UpstreamServiceClient, string, string) (*sharedosv1.UpstreamTool, error)) {
		register(&command{path: path, usage: "NAME --digest D",
			flags: func(fs *flag.FlagSet) {
				fs.StringVar(digest, "digest", "", "the pending digest being decided on (tools get shows it)")
			},
			run: func(ctx context.Context, e *env, _ *flag.FlagSet, args []string) error {
				if *digest == "" {
					return usagef("--digest is required")
				}
				return onUpstream(e, args, "tool NAME", func(uc sharedosv1.UpstreamServiceClient, name string) error {
					t, err := call(ctx, uc, name, *digest)
					if err != nil {
						return errors.New(describe(err))
					}
					return e.emit(viewUpstreamTool(t), nil, nil)
				})
			}})
	}
	decide("tools approve", &approveDigest, func(ctx context.Context, uc sharedosv1.UpstreamServiceClient, name, d string) (*sharedosv1.UpstreamTool, error) {
		r, err := uc.ApproveTool(ctx, &sharedosv1.ApproveToolRequest{Name: name, Digest: d})
		return r.GetTool(), err
	})
	decide("tools reject", &rejectDigest, func(ctx context.Context, uc sharedosv1.UpstreamServiceClient, name, d string) (*sharedosv1.UpstreamTool, error) {
		r, err := uc.RejectTool(ctx, &sharedosv1.RejectToolRequest{Name: name, Digest: d})
		return r.GetTool(), err
	})
	register(&command{path: "tools diff", usage: "NAME", run: func(ctx context.Context, e *env, _ *flag.FlagSet, args []string) error {
		return onUpstream(e, args, "tool NAME", func(uc sharedosv1.UpstreamServiceClient, name string) error {
			r, err := uc.DiffTool(ctx, &sharedosv1.DiffToolRequest{Name: name})
			if err != nil {
				return errors.New(describe(err))
			}
			if e.g.output == "table" {
				// The definitions an operator approves or rejects:
				// each line as a table cell shows it (lines), so no
				// hidden character in them drives the terminal or
				// hides text from the review.
				_, err := fmt.Fprint(e.stdout, lines(r.GetDiff()))
				return err
			}
			v := viewUpstreamTool(r.GetTool())
			return e.emit(map[string]any{"name": v.Name, "state": v.State, "digest": v.Digest, "pendingDigest": v.PendingDigest, "diff": r.GetDiff()}, nil, nil)
		})
	}})
}

// providerView is `providers get` output.
type providerView struct {
	Namespace      string            `json:"namespace"`
	URL            string            `json:"url,omitempty"`
	Command        []string          `json:"command,omitempty"`
	Headers        map[string]string `json:"headers,omitempty"`
	CredentialRef  string            `json:"credentialRef,omitempty"`
	OAuth          *oauthView        `json:"oauth,omitempty"`
	Refresh        string            `json:"refresh,omitempty"`
	Timeout        string            `json:"timeout,omitempty"`
	Requirements   map[string]string `json:"requirements,omitempty"`
	AutoApproveNew bool              `json:"autoApproveNew"`
	ReadOnly       []string          `json:"readOnly,omitempty"`
	CreatedAt      string            `json:"createdAt,omitempty"`
	UpdatedAt      string            `json:"updatedAt,omitempty"`
	Status         statusView        `json:"status"`
}

func (v providerView) endpoint() string {
	if v.URL != "" {
		return v.URL
	}
	return "stdio: " + strings.Join(v.Command, " ")
}

type oauthView struct {
	TokenURL        string   `json:"tokenUrl"`
	ClientID        string   `json:"clientId"`
	ClientSecretRef string   `json:"clientSecretRef"`
	Scopes          []string `json:"scopes,omitempty"`
}

type statusView struct {
	RefreshedAt     string             `json:"refreshedAt,omitempty"`
	Error           string             `json:"error,omitempty"`
	ProtocolVersion string             `json:"protocolVersion,omitempty"`
	ServerName      string             `json:"serverName,omitempty"`
	ServerVersion   string             `json:"serverVersion,omitempty"`
	Tools           []upstreamToolView `json:"tools"`
	Entries         []entryView        `json:"entries"`
	Skipped         []skippedView      `json:"skipped"`
	Events          []eventView        `json:"events,omitempty"`
}

type upstreamToolView struct {
	Name          string `json:"name"`
	UpstreamName  string `json:"upstreamName"`
	State         string `json:"state"`
	Digest        string `json:"digest,omitempty"`
	PendingDigest string `json:"pendingDigest,omitempty"`
	Reason        string `json:"reason,omitempty"`
}

// entryView is an acquired prompt or resource (key: the prompt's name, the
// resource's URI).
type entryView struct {
	Kind          string `json:"kind"`
	Key           string `json:"key"`
	UpstreamName  string `json:"upstreamName"`
	State         string `json:"state"`
	Digest        string `json:"digest,omitempty"`
	PendingDigest string `json:"pendingDigest,omitempty"`
	Reason        string `json:"reason,omitempty"`
}

type skippedView struct {
	Kind         string `json:"kind,omitempty"`
	UpstreamName string `json:"upstreamName"`
	Reason       string `json:"reason"`
}

type eventView struct {
	Tool      string `json:"tool"`
	Action    string `json:"action"`
	Actor     string `json:"actor"`
	At        string `json:"at"`
	OldDigest string `json:"oldDigest,omitempty"`
	NewDigest string `json:"newDigest,omitempty"`
	Reason    string `json:"reason,omitempty"`
}

func viewProvider(p *sharedosv1.UpstreamProvider, st *sharedosv1.UpstreamStatus) providerView {
	v := providerView{Namespace: p.GetNamespace(), URL: p.GetUrl(), Command: p.GetCommand(), Headers: p.GetHeaders(),
		CredentialRef: p.GetCredentialRef(), AutoApproveNew: p.GetAutoApproveNew(), ReadOnly: p.GetReadOnly(),
		CreatedAt: stamp(p.GetCreatedAt().AsTime(), p.GetCreatedAt() != nil), UpdatedAt: stamp(p.GetUpdatedAt().AsTime(), p.GetUpdatedAt() != nil),
		Status: statusView{RefreshedAt: stamp(st.GetRefreshedAt().AsTime(), st.GetRefreshedAt() != nil), Error: st.GetError(),
			ProtocolVersion: st.GetProtocolVersion(), ServerName: st.GetServerName(), ServerVersion: st.GetServerVersion(),
			Tools: []upstreamToolView{}, Entries: []entryView{}, Skipped: []skippedView{}}}
	if o := p.GetOauth(); o != nil {
		v.OAuth = &oauthView{TokenURL: o.GetTokenUrl(), ClientID: o.GetClientId(), ClientSecretRef: o.GetClientSecretRef(), Scopes: o.GetScopes()}
	}
	if d := p.GetRefresh(); d != nil {
		v.Refresh = d.AsDuration().String()
	}
	if d := p.GetTimeout(); d != nil {
		v.Timeout = d.AsDuration().String()
	}
	for name, r := range p.GetRequirements() {
		if v.Requirements == nil {
			v.Requirements = map[string]string{}
		}
		v.Requirements[name] = r.GetAction() + ":" + r.GetResource()
	}
	for _, t := range st.GetTools() {
		v.Status.Tools = append(v.Status.Tools, viewUpstreamTool(t))
	}
	for _, e := range st.GetEntries() {
		v.Status.Entries = append(v.Status.Entries, entryView{Kind: e.GetKind(), Key: e.GetKey(), UpstreamName: e.GetUpstreamName(),
			State: stateName(e.GetState()), Digest: e.GetDigest(), PendingDigest: e.GetPendingDigest(), Reason: e.GetReason()})
	}
	for _, s := range st.GetSkipped() {
		v.Status.Skipped = append(v.Status.Skipped, skippedView{Kind: s.GetKind(), UpstreamName: s.GetUpstreamName(), Reason: s.GetReason()})
	}
	for _, e := range st.GetEvents() {
		v.Status.Events = append(v.Status.Events, eventView{Tool: e.GetTool(), Action: e.GetAction(), Actor: e.GetActor(),
			At: stamp(e.GetAt().AsTime(), e.GetAt() != nil), OldDigest: e.GetOldDigest(), NewDigest: e.GetNewDigest(), Reason: e.GetReason()})
	}
	return v
}

func viewUpstreamTool(t *sharedosv1.UpstreamTool) upstreamToolView {
	return upstreamToolView{Name: t.GetName(), UpstreamName: t.GetUpstreamName(), State: stateName(t.GetState()),
		Digest: t.GetDigest(), PendingDigest: t.GetPendingDigest(), Reason: t.GetReason()}
}

func stateName(s sharedosv1.UpstreamToolState) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "UPSTREAM_TOOL_STATE_"))
}

func stamp(t time.Time, ok bool) string {
	if !ok {
		return ""
	}
	return t.Format(time.RFC3339Nano)
}

// emitProvider prints one upstream: JSON, or a table of its tools.
func (e *env) emitProvider(p *sharedosv1.UpstreamProvider, st *sharedosv1.UpstreamStatus) error {
	v := viewProvider(p, st)
	rows := make([][]string, 0, len(v.Status.Tools)+len(v.Status.Skipped))
	for _, t := range v.Status.Tools {
		rows = append(rows, []string{t.Name, t.State, t.Digest, t.PendingDigest, t.Reason})
	}
	for _, e := range v.Status.Entries {
		rows = append(rows, []string{e.Kind + " " + e.Key, e.State, e.Digest, e.PendingDigest, e.Reason})
	}
	for _, s := range v.Status.Skipped {
		what := v.Namespace + "." + s.UpstreamName
		if s.Kind != "" {
			what = s.Kind + " " + s.UpstreamName
		}
		rows = append(rows, []string{what, "skipped", "", "", s.Reason})
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i][0] < rows[j][0] })
	return e.emit(v, []string{"TOOL / ENTRY", "STATE", "DIGEST", "PENDING", "REASON"}, rows)
}

// upstreamState adds to `tools get` where an acquired tool stands; for a
// tool of no upstream it is published with its registry digest. A tool
// withheld from the registry (quarantined, rejected) is shown from the
// upstream's record.
func upstreamState(ctx context.Context, e *env, name string, reg *sharedosv1.ToolRegistration, digest string) (*adminTool, error) {
	ns, _, _ := strings.Cut(name, ".")
	out := &adminTool{State: "published", Digest: digest}
	if reg != nil {
		out.Registration = regfile.FromProto(reg)
		out.Revision = reg.GetRevision()
		if !strings.HasPrefix(reg.GetMetadata().GetSource(), projection.UpstreamSourcePrefix) {
			return out, nil
		}
	}
	uc, err := upstreamClient(e)
	if err != nil {
		return nil, err
	}
	p, err := uc.GetProvider(ctx, &sharedosv1.GetProviderRequest{Namespace: ns})
	if err != nil {
		if reg == nil && status.Code(err) == codes.NotFound {
			return nil, nil
		}
		return nil, errors.New(describe(err))
	}
	for _, t := range p.GetStatus().GetTools() {
		if t.GetName() != name {
			continue
		}
		out.State, out.Digest, out.PendingDigest, out.Reason = stateName(t.GetState()), t.GetDigest(), t.GetPendingDigest(), t.GetReason()
		if reg == nil {
			shown := t.GetPublished()
			if shown == nil {
				shown = t.GetPending()
			}
			out.Registration = regfile.FromProto(shown)
		}
		return out, nil
	}
	if reg == nil {
		return nil, nil
	}
	return out, nil
}
