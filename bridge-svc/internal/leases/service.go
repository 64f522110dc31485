package leases

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/accesscontext"
	"github.com/sharedos/toolshare/services/platform/mtls"
	"github.com/sharedos/toolshare/services/platform/telemetry"
	"github.com/sharedos/toolshare/services/platform/tenancy"
)

var tracer = otel.Tracer(telemetry.ScopeBridge)

// Kernel is what leases ask of the kernel: a turn's grant at OpenTurn and
// its revocation at CloseTurn (ADR 0015); sharedosv1.RuntimeServiceClient
// satisfies it.
type Kernel interface {
	GrantTurn(ctx context.Context, in *sharedosv1.GrantTurnRequest, opts ...grpc.CallOption) (*sharedosv1.GrantTurnResponse, error)
	RevokeTurn(ctx context.Context, in *sharedosv1.RevokeTurnRequest, opts ...grpc.CallOption) (*sharedosv1.RevokeTurnResponse, error)
}

// RevokeTimeout bounds CloseTurn's wait for the kernel to revoke the turn
// (which includes the turn's calls in flight ending).
const RevokeTimeout = 10 * time.Second

// Defaults for lease lifetimes.
const (
	DefaultTTL = 15 * time.Minute
	MaxTTL     = 24 * time.Hour
)

// ServiceConfig configures a Service.
type ServiceConfig struct {
	Store  Store
	Kernel Kernel
	// PublicURL is the base the harness reaches the bridge's HTTP port on,
	// e.g. "http://127.0.0.1:7480"; mcp_url is PublicURL + /turns/{id}/mcp.
	PublicURL  string
	DefaultTTL time.Duration
	// OnClose, when set, is told about every turn this pod closes, so the
	// pod's cached MCP server goes at once rather than at the next sweep.
	OnClose func(turnID string)
	// ValidateTools, when set, refuses a catalogue the MCP edge could not
	// serve (FailedPrecondition), before any lease is stored.
	ValidateTools func([]*sharedosv1.PublishedTool) error
	// Tenants binds host identities to the tenants they may open turns for.
	Tenants tenancy.Policy
	// Users verifies end users' ID tokens (OpenTurnRequest.user_token); nil:
	// none are accepted.
	Users  *UserTokens
	Logger *slog.Logger
	// Now replaces time.Now (tests).
	Now func() time.Time
}

// Service implements sharedosv1.BridgeServiceServer.
type Service struct {
	sharedosv1.UnimplementedBridgeServiceServer
	cfg ServiceConfig
}

var _ sharedosv1.BridgeServiceServer = (*Service)(nil)

// NewService returns a Service.
func NewService(cfg ServiceConfig) *Service {
	if cfg.DefaultTTL <= 0 {
		cfg.DefaultTTL = DefaultTTL
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.PublicURL = strings.TrimRight(cfg.PublicURL, "/")
	return &Service{cfg: cfg}
}

// MCPPath is the path of a turn's MCP endpoint.
func MCPPath(turnID string) string { return "/turns/" + turnID + "/mcp" }

// OpenTurn validates the request, pins the context's catalogue and stores
// the lease. The token is returned once and never stored.
func (s *Service) OpenTurn(ctx context.Context, req *sharedosv1.OpenTurnRequest) (*sharedosv1.TurnLease, error) {
	ctx, span := tracer.Start(ctx, telemetry.SpanOpenTurn)
	defer span.End()
	// A user token replaces the asserted context with the verified one, and
	// the turn ends when the token does.
	var notAfter time.Time
	if raw := req.GetUserToken(); raw != "" {
		if req.GetContext() != nil {
			return nil, status.Error(codes.InvalidArgument, "give context or user_token, not both: with a token the context comes from its claims")
		}
		actx, exp, err := s.cfg.Users.Context(ctx, raw)
		if err != nil {
			span.RecordError(err)
			s.cfg.Logger.WarnContext(ctx, "OpenTurn refused", slog.String("reason", status.Convert(err).Message()))
			return nil, err
		}
		req = proto.Clone(req).(*sharedosv1.OpenTurnRequest)
		req.Context, req.UserToken, notAfter = actx, "", exp
	}
	// The caller asserts the AccessContext only within what its identity
	// is trusted for; a refusal stores nothing.
	if err := s.cfg.Tenants.Check(ctx, req.GetContext().GetTenant()); err != nil {
		span.RecordError(err)
		s.cfg.Logger.WarnContext(ctx, "OpenTurn refused", slog.String("reason", status.Convert(err).Message()))
		return nil, err
	}
	lease, token, err := s.open(ctx, req, notAfter)
	if err != nil {
		span.RecordError(err)
		var fe *FieldError
		if !errors.As(err, &fe) {
			// The cause (driver, upstream or tool detail) is logged here and
			// never sent to the caller.
			s.cfg.Logger.WarnContext(ctx, "OpenTurn failed", slog.String("error", err.Error()))
		}
		return nil, toStatus(err)
	}
	span.SetAttributes(attribute.String(telemetry.AttrTurnID, lease.TurnID),
		attribute.String(telemetry.AttrCatalogHash, lease.CatalogHash),
		attribute.String(telemetry.AttrHarnessName, lease.Harness.GetName()))
	return &sharedosv1.TurnLease{
		TurnId:               lease.TurnID,
		McpUrl:               s.cfg.PublicURL + MCPPath(lease.TurnID),
		Token:                token,
		ExpiresAt:            timestamppb.New(lease.ExpiresAt),
		CatalogHash:          lease.CatalogHash,
		Tools:                lease.Tools,
		Prompts:              lease.Prompts,
		Resources:            lease.Resources,
		PromptsResourcesHash: lease.PromptsResourcesHash,
	}, nil
}

// open opens the turn; one opened with a user token (notAfter set) ends
// when the token expires, however long a TTL was asked for.
func (s *Service) open(ctx context.Context, req *sharedosv1.OpenTurnRequest, notAfter time.Time) (*Lease, string, error) {
	ttl, err := validateOpen(req, s.cfg.DefaultTTL)
	if err != nil {
		return nil, "", err
	}
	id, err := NewTurnID()
	if err != nil {
		return nil, "", fmt.Errorf("leases: turn id: %w", err)
	}
	now := s.cfg.Now().UTC().Truncate(time.Microsecond)
	if !notAfter.IsZero() && now.Add(ttl).After(notAfter) {
		if ttl = notAfter.Sub(now); ttl < time.Second {
			return nil, "", errTokenExpiring
		}
	}
	// The kernel pins the context's catalogue and signs the turn's grant
	// over it; the lease keeps both.
	cat, err := s.cfg.Kernel.GrantTurn(ctx, &sharedosv1.GrantTurnRequest{
		TurnId: id, Context: req.GetContext(), ExpiresAt: timestamppb.New(now.Add(ttl)),
		// The run's identity: the kernel signs it into the grant, and every
		// record of the turn carries it from there.
		Harness: req.GetHarness(), DeclaredModel: req.GetDeclaredModel(), Policy: req.GetPolicy(),
	})
	if err != nil {
		return nil, "", kernelError(err)
	}
	if s.cfg.ValidateTools != nil {
		if err := s.cfg.ValidateTools(cat.GetTools()); err != nil {
			return nil, "", fmt.Errorf("%w: %w", errUnservable, err)
		}
	}
	token, hash, err := NewToken()
	if err != nil {
		return nil, "", fmt.Errorf("leases: token: %w", err)
	}
	l := &Lease{
		TurnID:               id,
		TokenHash:            hash,
		Context:              req.GetContext(),
		Policy:               req.GetPolicy(),
		Harness:              req.GetHarness(),
		DeclaredModel:        req.GetDeclaredModel(),
		CatalogHash:          cat.GetCatalogHash(),
		Tools:                cat.GetTools(),
		Prompts:              cat.GetPrompts(),
		Resources:            cat.GetResources(),
		PortableNames:        req.GetPortableNames(),
		PromptsResourcesHash: cat.GetPromptsResourcesHash(),
		Grant:                cat.GetGrant(),
		OpenedAt:             now,
		ExpiresAt:            now.Add(ttl),
	}
	if err := s.cfg.Store.Create(ctx, l); err != nil {
		return nil, "", fmt.Errorf("%w: %w", errStore, err)
	}
	s.cfg.Logger.InfoContext(ctx, "turn opened", slog.String(telemetry.LogTurnID, id),
		slog.String(telemetry.LogPrincipal, l.Context.GetPrincipal()), slog.String(telemetry.LogTenant, l.Context.GetTenant()),
		slog.Any(telemetry.LogRoles, l.Context.GetRoles()), slog.String(telemetry.LogCaller, mtls.Caller(ctx)),
		slog.String(telemetry.LogCatalogHash, l.CatalogHash), slog.Int("tools", len(l.Tools)),
		slog.String(telemetry.LogHarness, l.Harness.GetName()), slog.Time("expires_at", l.ExpiresAt))
	return l, token, nil
}

// validateOpen checks an OpenTurnRequest and returns the effective ttl.
func validateOpen(req *sharedosv1.OpenTurnRequest, defTTL time.Duration) (time.Duration, error) {
	if req.GetContext().GetPrincipal() == "" {
		return 0, fieldError("context.principal", "required: a turn runs for a principal")
	}
	// What authz-svc would refuse is refused here, naming the field: the
	// caller's own input, never an outage to retry.
	if e := accesscontext.Check(req.GetContext()); e != nil {
		return 0, fieldError(e.Field, e.Rule)
	}
	p := req.GetPolicy()
	if p == nil {
		return 0, fieldError("policy", "required: a run must declare its ToolPolicy")
	}
	switch p.GetMode() {
	case sharedosv1.PolicyMode_POLICY_MODE_STRICT:
		if len(p.GetExternalDirect()) > 0 {
			return 0, fieldError("policy.external_direct", "must be empty under a strict policy")
		}
		if len(p.GetHarnessLocal()) == 0 {
			return 0, fieldError("policy.harness_local",
				"misdeclared: a strict policy must name the harness's local tools (no harness runs with none)")
		}
	case sharedosv1.PolicyMode_POLICY_MODE_PERMISSIVE:
	default:
		return 0, fieldError("policy.mode", "must be POLICY_MODE_STRICT or POLICY_MODE_PERMISSIVE")
	}
	for i, n := range p.GetHarnessLocal() {
		if strings.TrimSpace(n) == "" {
			return 0, fieldError(fmt.Sprintf("policy.harness_local[%d]", i), "must name a tool")
		}
	}
	for i, n := range p.GetExternalDirect() {
		if strings.TrimSpace(n) == "" {
			return 0, fieldError(fmt.Sprintf("policy.external_direct[%d]", i), "must name a tool")
		}
	}
	h := req.GetHarness()
	if h.GetName() == "" {
		return 0, fieldError("harness.name", "required")
	}
	switch h.GetMcpSupport() {
	case sharedosv1.McpSupport_MCP_SUPPORT_NATIVE:
		if h.GetExtensionName() != "" {
			return 0, fieldError("harness.extension_name", "must be empty when mcp_support is native")
		}
	case sharedosv1.McpSupport_MCP_SUPPORT_EXTENSION:
		if h.GetExtensionName() == "" {
			return 0, fieldError("harness.extension_name", "required when mcp_support is extension")
		}
	default:
		return 0, fieldError("harness.mcp_support", "must be MCP_SUPPORT_NATIVE or MCP_SUPPORT_EXTENSION")
	}
	ttl := defTTL
	if d := req.GetTtl(); d != nil {
		if err := d.CheckValid(); err != nil {
			return 0, fieldError("ttl", "must be a valid duration")
		}
		switch v := d.AsDuration(); {
		case v < 0:
			return 0, fieldError("ttl", "must not be negative")
		case v > MaxTTL:
			return 0, fieldError("ttl", fmt.Sprintf("must be at most %s", MaxTTL))
		case v > 0:
			ttl = v
		}
	}
	return ttl, nil
}

// CloseTurn closes the turn: the kernel revokes its grant (so no handler of
// the turn starts on any kernel after CloseTurn returns, and calls in flight
// are cancelled), then the lease is closed on every pod: the store is the
// only truth each request consults (ADR 0005). A repeat is harmless.
func (s *Service) CloseTurn(ctx context.Context, req *sharedosv1.CloseTurnRequest) (*sharedosv1.CloseTurnResponse, error) {
	ctx, span := tracer.Start(ctx, telemetry.SpanCloseTurn)
	defer span.End()
	span.SetAttributes(attribute.String(telemetry.AttrTurnID, req.GetTurnId()))
	if req.GetTurnId() == "" {
		return nil, toStatus(fieldError("turn_id", "required"))
	}
	if err := s.closable(ctx, req.GetTurnId()); err != nil {
		return nil, toStatus(err)
	}
	rctx, cancel := context.WithTimeout(ctx, RevokeTimeout)
	revoked, err := s.cfg.Kernel.RevokeTurn(rctx, &sharedosv1.RevokeTurnRequest{TurnId: req.GetTurnId()})
	cancel()
	if err != nil {
		span.RecordError(err)
		s.cfg.Logger.WarnContext(ctx, "CloseTurn: the kernel did not confirm the revocation", slog.String(telemetry.LogTurnID, req.GetTurnId()),
			slog.String("error", err.Error()))
		return nil, withInfo(codes.Unavailable, "the kernel could not confirm the turn's revocation; the turn stays open: retry CloseTurn",
			ReasonRevocationUnconfirmed, nil)
	}
	if err := s.cfg.Store.Close(ctx, req.GetTurnId()); err != nil {
		return nil, toStatus(storeErr(err))
	}
	if s.cfg.OnClose != nil {
		s.cfg.OnClose(req.GetTurnId())
	}
	s.cfg.Logger.InfoContext(ctx, "turn closed", slog.String(telemetry.LogTurnID, req.GetTurnId()),
		slog.Int("cancelled", int(revoked.GetCancelled())))
	return &sharedosv1.CloseTurnResponse{}, nil
}

// closable checks that turnID is a turn the caller may close. A caller
// that may assert every tenant reads only its status: the whole lease
// (its catalogue) is not needed, and one that no longer decodes is closed
// all the same.
func (s *Service) closable(ctx context.Context, turnID string) error {
	if !s.cfg.Tenants.AnyTenant(ctx) {
		_, _, err := s.lease(ctx, turnID)
		return err
	}
	if _, err := s.cfg.Store.Status(ctx, turnID); err != nil {
		return storeErr(err)
	}
	return nil
}

// lease is the caller's lease of turnID: a turn of a tenant the caller may
// not open turns for is ErrNotFound to it, exactly as a turn that does not
// exist (a host reads and closes only its tenants' turns; an operator any).
func (s *Service) lease(ctx context.Context, turnID string) (*Lease, Status, error) {
	l, st, err := s.cfg.Store.Get(ctx, turnID)
	if err != nil {
		return nil, Status{}, storeErr(err)
	}
	if s.cfg.Tenants.Check(ctx, l.Context.GetTenant()) != nil {
		return nil, Status{}, ErrNotFound
	}
	return l, st, nil
}

// GetTurn reports a lease's state and SystemIdentity.
func (s *Service) GetTurn(ctx context.Context, req *sharedosv1.GetTurnRequest) (*sharedosv1.GetTurnResponse, error) {
	if req.GetTurnId() == "" {
		return nil, toStatus(fieldError("turn_id", "required"))
	}
	l, st, err := s.lease(ctx, req.GetTurnId())
	if err != nil {
		return nil, toStatus(err)
	}
	names := make([]string, len(l.Tools))
	for i, t := range l.Tools {
		names[i] = t.GetName()
	}
	resp := &sharedosv1.GetTurnResponse{
		TurnId:    l.TurnID,
		State:     st.State(),
		ExpiresAt: timestamppb.New(l.ExpiresAt),
		Identity:  Identity(l),
		Context:   l.Context,
		Tools:     names,
		OpenedAt:  timestamppb.New(l.OpenedAt),
	}
	if !l.ClosedAt.IsZero() {
		resp.ClosedAt = timestamppb.New(l.ClosedAt)
	}
	return resp, nil
}

// Identity is the lease's SystemIdentity.
func Identity(l *Lease) *sharedosv1.SystemIdentity {
	return &sharedosv1.SystemIdentity{
		CatalogHash:          l.CatalogHash,
		Harness:              l.Harness,
		DeclaredModel:        l.DeclaredModel,
		Policy:               l.Policy,
		PromptsResourcesHash: l.PromptsResourcesHash,
	}
}

func storeErr(err error) error {
	if errors.Is(err, ErrNotFound) {
		return err
	}
	return fmt.Errorf("%w: %w", errStore, err)
}
