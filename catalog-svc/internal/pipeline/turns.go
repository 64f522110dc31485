package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/accesscontext"
	"github.com/sharedos/toolshare/services/contract/pinproof"
	"github.com/sharedos/toolshare/services/contract/resourceuri"
	"github.com/sharedos/toolshare/services/contract/systemidentity"
	"github.com/sharedos/toolshare/services/platform/grpcx"
	"github.com/sharedos/toolshare/services/platform/mtls"
	"github.com/sharedos/toolshare/services/platform/telemetry"

	"github.com/sharedos/toolshare/catalog-svc/internal/catalog"
	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline/grants"
)

// CatalogueLister is the per-context catalogue GrantTurn pins;
// *catalog.Service implements it.
type CatalogueLister interface {
	ListTools(ctx context.Context, actx *sharedosv1.AccessContext) (catalog.Listing, error)
	ListPromptsResources(ctx context.Context, actx *sharedosv1.AccessContext) (catalog.PromptsResources, error)
}

// errTurnClosed is the cancellation cause of a call whose turn was revoked.
var errTurnClosed = errors.New("the turn was closed")

// ErrRevocationUnfinished: RevokeTurn wrote the revocation but calls of the
// turn were still running when its deadline came; retrying is safe.
var ErrRevocationUnfinished = &Error{codes.Unavailable, "REVOCATION_UNFINISHED",
	"the turn is revoked, but some of its calls were still ending when the deadline came; retry"}

// ErrRevocationUnavailable: the turn's revocation could not be written or
// read.
var ErrRevocationUnavailable = &Error{codes.Unavailable, "REVOCATION_UNAVAILABLE",
	"the turn's revocation could not be written or read"}

// ErrTurnClosed: GrantTurn for a turn that was revoked.
var ErrTurnClosed = &Error{codes.FailedPrecondition, "TURN_CLOSED", "the turn was closed; its id is never granted again"}

// GrantTurn pins the catalogue req.context may see and signs the turn's
// grant over it (ADR 0015).
func (s *Pipeline) GrantTurn(ctx context.Context, req *sharedosv1.GrantTurnRequest) (*sharedosv1.GrantTurnResponse, error) {
	now := time.Now()
	if err := checkID("turn_id", req.GetTurnId()); err != nil {
		return nil, err
	}
	if req.GetContext().GetPrincipal() == "" {
		return nil, invalid("context.principal", "is required: a turn runs for a principal")
	}
	// The context authz-svc will decide every call of the turn under: one
	// it would refuse is the caller's, refused here, not authz-svc failing
	// to list the catalogue.
	if e := accesscontext.Check(req.GetContext()); e != nil {
		return nil, invalid(e.Field, e.Rule)
	}
	exp := req.GetExpiresAt()
	switch {
	case exp == nil || exp.CheckValid() != nil:
		return nil, invalid("expires_at", "is required and must be a valid time")
	case !exp.AsTime().After(now):
		return nil, invalid("expires_at", "must be in the future")
	case exp.AsTime().After(now.Add(grants.MaxLifetime + grants.ClockSkew)):
		return nil, invalid("expires_at", fmt.Sprintf("must be at most %s ahead", grants.MaxLifetime))
	}
	id, err := grantIdentity(req)
	if err != nil {
		return nil, err
	}
	if s.catalogue == nil {
		return nil, &Error{codes.FailedPrecondition, "NO_CATALOGUE", "this kernel has no catalogue to grant"}
	}
	// A closed turn stays closed: its id is never granted again.
	switch revoked, err := s.records.TurnRevoked(ctx, req.GetTurnId()); {
	case err != nil:
		s.logger.ErrorContext(ctx, "turn revocation unreadable; grant refused", slog.Any("error", err))
		return nil, ErrRevocationUnavailable
	case revoked:
		return nil, ErrTurnClosed
	}
	listing, pr, err := s.listTurn(ctx, req.GetContext())
	if err != nil {
		return nil, err
	}
	out := &sharedosv1.GrantTurnResponse{CatalogHash: listing.CatalogHash, Tools: listing.Tools,
		Prompts: pr.Prompts, Resources: pr.Resources, PromptsResourcesHash: pr.Hash}
	if n := proto.Size(out); n > maxGrantedBytes {
		return nil, &Error{codes.FailedPrecondition, "CATALOGUE_TOO_LARGE", fmt.Sprintf(
			"the context sees %d tools, %d prompts and %d resources, %d MiB in all: more than one turn carries (%d MiB); let it see fewer",
			len(out.Tools), len(out.Prompts), len(out.Resources), n>>20, maxGrantedBytes>>20)}
	}
	pin := make(map[string]string, len(listing.Tools))
	for _, t := range listing.Tools {
		pin[t.GetName()] = t.GetDigest()
	}
	prompts := make(map[string]string, len(pr.Prompts))
	for _, p := range pr.Prompts {
		prompts[p.GetName()] = p.GetDigest()
	}
	// The grant signs the root of a Merkle tree over the pinned tools and
	// prompts, and one over the concrete resource URIs, not the pin: each
	// call carries its one entry's proof (services/contract/pinproof). URI
	// templates are listed: a URI not pinned itself is read through the
	// first template it matches.
	tree, err := pinproof.Build(pin, prompts)
	if err != nil {
		return nil, fmt.Errorf("pin tree: %w", err)
	}
	resources, templates := map[string]string{}, map[string]string{}
	for _, r := range pr.Resources {
		resources[r.GetUri()] = r.GetDigest()
		if resourceuri.IsTemplate(r.GetUri()) {
			templates[r.GetUri()] = r.GetDigest()
		}
	}
	resTree, err := pinproof.BuildResources(resources)
	if err != nil {
		return nil, fmt.Errorf("resource pin tree: %w", err)
	}
	grant, err := s.grants.Issue(grants.Grant{
		TurnID: req.GetTurnId(), Context: req.GetContext(), CatalogHash: listing.CatalogHash,
		PinRoot: tree.Root(), PinSize: tree.Size(),
		ResourceRoot: resTree.Root(), ResourceSize: resTree.Size(), ResourceTemplates: templates,
		PromptsResourcesHash: pr.Hash, ExpiresAt: exp.AsTime(),
		Identity: id,
	}, now)
	if err != nil {
		return nil, err
	}
	// The context and who asked for it: a bridge identity may ask for any
	// context (docs/security.md, Limits), so this line is the audit of it.
	s.logger.InfoContext(ctx, "turn granted", slog.String(telemetry.LogTurnID, req.GetTurnId()),
		slog.String(telemetry.LogPrincipal, req.GetContext().GetPrincipal()),
		slog.String(telemetry.LogTenant, req.GetContext().GetTenant()),
		slog.Any(telemetry.LogRoles, req.GetContext().GetRoles()),
		slog.String(telemetry.LogCaller, mtls.Caller(ctx)), slog.Time("expires_at", exp.AsTime()),
		slog.String(telemetry.LogCatalogHash, listing.CatalogHash), slog.Int("tools", len(pin)),
		slog.String("grant_key_id", s.grants.KeyID()))
	out.Grant = grant
	return out, nil
}

// maxGrantedBytes bounds what GrantTurn answers, but its grant: a message
// may be grpcx.MaxMessageSize, and the grant (signed identity, roots and
// URI templates) is given 1 MiB of it. A larger catalogue for one context
// is refused with CATALOGUE_TOO_LARGE, where the bridge would have failed
// to receive it (ResourceExhausted, and an OpenTurn failing without a
// reason; review finding: 66 tools of 250 KiB schemas were enough).
const maxGrantedBytes = grpcx.MaxMessageSize - 1<<20

// listTurn lists the tools and the prompts and resources a turn of actx
// sees, both decided by one policy revision: a reload between the two
// listings is listed again once, then the grant fails closed (a turn would
// pin a catalogue no one policy gives).
func (s *Pipeline) listTurn(ctx context.Context, actx *sharedosv1.AccessContext) (catalog.Listing, catalog.PromptsResources, error) {
	for attempt := 0; ; attempt++ {
		listing, err := s.catalogue.ListTools(ctx, actx)
		if err != nil {
			return catalog.Listing{}, catalog.PromptsResources{}, err
		}
		pr, err := s.catalogue.ListPromptsResources(ctx, actx)
		if err != nil {
			return catalog.Listing{}, catalog.PromptsResources{}, err
		}
		a, b := listing.PolicyRevision, pr.PolicyRevision
		switch {
		case a == "" || b == "" || a == b:
			return listing, pr, nil
		case attempt > 0:
			return catalog.Listing{}, catalog.PromptsResources{}, fmt.Errorf("%w: the policy changed while the turn's catalogue was listed (%s, then %s)", catalog.ErrAuthzUnavailable, a, b)
		}
	}
}

// grantIdentity is the run's identity as the request declares it (the
// host's strings, each bounded and printable; the policy as its digest).
func grantIdentity(req *sharedosv1.GrantTurnRequest) (grants.Identity, error) {
	h := req.GetHarness()
	id := grants.Identity{
		Harness: h.GetName(), HarnessVersion: h.GetVersion(),
		MCPSupport: systemidentity.MCPSupportName(h.GetMcpSupport()), Extension: h.GetExtensionName(),
		DeclaredModel: req.GetDeclaredModel(), ToolPolicyDigest: systemidentity.PolicyDigest(req.GetPolicy()),
	}
	for _, f := range [...]struct{ field, v string }{{"harness.name", id.Harness}, {"harness.version", id.HarnessVersion},
		{"harness.extension_name", id.Extension}, {"declared_model", id.DeclaredModel}} {
		if err := checkText(f.field, f.v); err != nil {
			return grants.Identity{}, err
		}
	}
	return id, nil
}

// RevokeTurn voids the turn's grant on every kernel, cancels its calls in
// flight here and those its providers hold between input rounds (other
// kernels hear of it from the store) and returns once no call of the turn
// is pending anywhere: after it returns, no handler of the turn starts. It
// is idempotent.
func (s *Pipeline) RevokeTurn(ctx context.Context, req *sharedosv1.RevokeTurnRequest) (*sharedosv1.RevokeTurnResponse, error) {
	turn := req.GetTurnId()
	if err := checkID("turn_id", turn); err != nil {
		return nil, err
	}
	if err := s.records.RevokeTurn(ctx, turn, time.Now().Add(grants.MaxLifetime+grants.ClockSkew)); err != nil {
		s.logger.ErrorContext(ctx, "revoke turn", slog.String(telemetry.LogTurnID, turn), slog.Any("error", err))
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, ErrRevocationUnavailable
	}
	cancelled := s.cancelTurn(turn)
	// A call that passed its revocation check before the revocation
	// committed is pending; wait for every such call, on any kernel, to end.
	for backoff := 5 * time.Millisecond; ; backoff = min(2*backoff, 200*time.Millisecond) {
		// An attempt waiting for the client's input is in no kernel's hands:
		// it ends here, cancelled (and none can start waiting now).
		_, err := s.records.CloseWaiting(ctx, turn)
		n := 0
		if err == nil {
			n, err = s.records.PendingInTurn(ctx, turn)
		}
		if err == nil && n == 0 {
			break
		}
		select {
		case <-ctx.Done():
			s.logger.WarnContext(ctx, "turn revoked; calls still ending at the deadline",
				slog.String(telemetry.LogTurnID, turn), slog.Int("pending", n), slog.Any("error", err))
			return nil, ErrRevocationUnfinished
		case <-time.After(backoff):
		}
		cancelled += s.inflight.cancel(turn)
	}
	s.logger.InfoContext(ctx, "turn revoked", slog.String(telemetry.LogTurnID, turn), slog.Int("cancelled", cancelled))
	return &sharedosv1.RevokeTurnResponse{Cancelled: int32(min(cancelled, 1<<31-1))}, nil
}

// RunRevocationWatch cancels this kernel's calls of every turn another
// kernel revokes, until ctx is done. After each (re)connection it also
// checks the turns of the calls in flight, so a revocation made while it was
// not listening still cancels them.
func (s *Pipeline) RunRevocationWatch(ctx context.Context) {
	for backoff := time.Second; ; backoff = min(2*backoff, 30*time.Second) {
		err := s.records.WatchRevocations(ctx, func() { s.sweepRevoked(ctx) }, func(turn string) {
			if n := s.cancelTurn(turn); n > 0 {
				s.logger.InfoContext(ctx, "calls of a revoked turn cancelled", slog.String(telemetry.LogTurnID, turn),
					slog.Int("cancelled", n))
			}
		})
		if err == nil || ctx.Err() != nil {
			return
		}
		s.logger.WarnContext(ctx, "revocation watch lost; reconnecting", slog.Any("error", err))
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
	}
}

// TurnCanceller is a HandlerClients whose providers hold calls of a turn
// between its input rounds (upstream.Handlers: a 2025-era upstream's call
// waits open for the client's answer); a revoked turn's are ended too, and
// the turns it holds calls of are swept like those of calls in flight.
type TurnCanceller interface {
	CancelTurn(turn string) int
	HeldTurns() []string
}

// RoundCanceller is a HandlerClients whose providers hold a call between
// its input rounds under the round's provider state (upstream.Handlers):
// told when the attempt ends at the edge (the client did not answer), so
// the held call ends at once rather than at its expiry.
type RoundCanceller interface {
	CancelRound(turn string, state []byte) bool
}

// cancelTurn cancels turn's calls in flight here and those its providers
// hold between rounds; it returns how many.
func (s *Pipeline) cancelTurn(turn string) int {
	n := s.inflight.cancel(turn)
	if tc, ok := s.handlers.(TurnCanceller); ok {
		n += tc.CancelTurn(turn)
	}
	return n
}

func (s *Pipeline) sweepRevoked(ctx context.Context) {
	turns := s.inflight.turns()
	if tc, ok := s.handlers.(TurnCanceller); ok {
		turns = append(turns, tc.HeldTurns()...)
	}
	slices.Sort(turns)
	for _, turn := range slices.Compact(turns) {
		if revoked, err := s.records.TurnRevoked(ctx, turn); err == nil && revoked {
			s.cancelTurn(turn)
		}
	}
}

// flights is the registry of calls in flight in this process, by turn.
type flights struct {
	mu     sync.Mutex
	byTurn map[string]map[*flight]struct{}
}

type flight struct {
	cancel    context.CancelCauseFunc
	cancelled bool
}

// add registers a call of turn; the returned function removes it.
func (f *flights) add(turn string, cancel context.CancelCauseFunc) func() {
	fl := &flight{cancel: cancel}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.byTurn == nil {
		f.byTurn = map[string]map[*flight]struct{}{}
	}
	set := f.byTurn[turn]
	if set == nil {
		set = map[*flight]struct{}{}
		f.byTurn[turn] = set
	}
	set[fl] = struct{}{}
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(set, fl)
		if len(f.byTurn[turn]) == 0 {
			delete(f.byTurn, turn)
		}
	}
}

// cancel cancels every call of turn in flight here and returns how many it
// had not cancelled before.
func (f *flights) cancel(turn string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for fl := range f.byTurn[turn] {
		if !fl.cancelled {
			fl.cancelled = true
			fl.cancel(errTurnClosed)
			n++
		}
	}
	return n
}

func (f *flights) turns() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, 0, len(f.byTurn))
	for t := range f.byTurn {
		out = append(out, t)
	}
	return out
}
