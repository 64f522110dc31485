package upstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/requirement"
	"github.com/sharedos/toolshare/services/contract/toolname"
	"github.com/sharedos/toolshare/services/platform/secretref"
	"github.com/sharedos/toolshare/services/platform/telemetry"

	"github.com/sharedos/toolshare/catalog-svc/internal/budget"
	"github.com/sharedos/toolshare/catalog-svc/internal/catalog"
	"github.com/sharedos/toolshare/catalog-svc/internal/store"
)

// Registry is the part of the catalogue the manager writes acquired tools
// to (catalog.Service).
type Registry interface {
	Check(reg *sharedosv1.ToolRegistration) (*sharedosv1.PublishedTool, error)
	Register(ctx context.Context, reg *sharedosv1.ToolRegistration) (*sharedosv1.ToolRegistration, *sharedosv1.PublishedTool, error)
	Update(ctx context.Context, reg *sharedosv1.ToolRegistration, expectedRevision int64) (*sharedosv1.ToolRegistration, *sharedosv1.PublishedTool, error)
	Deregister(ctx context.Context, name string) error
	Get(ctx context.Context, name string) (*sharedosv1.ToolRegistration, *sharedosv1.PublishedTool, error)
	// NamespaceHeldBy names a tool of namespace ns, however spelled
	// (toolname.FoldedKey), from another source than source ("" when
	// there is none).
	NamespaceHeldBy(ns, source string) (name, holder string, err error)
	// Resolve is the published tool from the cache: a call's definition
	// (its x-mcp-header bindings, send.go) on every replica.
	Resolve(ctx context.Context, name string) (*catalog.Resolved, error)

	// Prompts and resources (ADR 0018).
	CheckPrompt(reg *sharedosv1.PromptRegistration) (*sharedosv1.PublishedPrompt, error)
	CheckResource(reg *sharedosv1.ResourceRegistration) (*sharedosv1.PublishedResource, error)
	RegisterPrompt(ctx context.Context, reg *sharedosv1.PromptRegistration) (*sharedosv1.PromptRegistration, *sharedosv1.PublishedPrompt, error)
	RegisterResource(ctx context.Context, reg *sharedosv1.ResourceRegistration) (*sharedosv1.ResourceRegistration, *sharedosv1.PublishedResource, error)
	DeregisterPrompt(ctx context.Context, name string) error
	DeregisterResource(ctx context.Context, uri string) error
	ResolvePrompt(ctx context.Context, name string) (*catalog.ResolvedEntry, error)
	ResolveResource(ctx context.Context, uri string) (*catalog.ResolvedEntry, error)
	// CheckResourceOverlap refuses a resource one of whose URIs may also
	// be read through another source's resource (RegisterResource refuses
	// it too).
	CheckResourceOverlap(ctx context.Context, reg *sharedosv1.ResourceRegistration) error
}

// Config wires a Manager.
type Config struct {
	Store    store.Entries
	Registry Registry
	Guard    Guard
	// Screening is the poisoning rule set (nil: DefaultScreening).
	Screening *Screening
	Logger    *slog.Logger
	// Locks orders changes of upstream records across catalog-svc
	// replicas (pgdb.Locks on the shared database; nil: this process only).
	Locks Locker
	// Now is this replica's clock (nil: time.Now): when a listing began
	// and when a refresh is due. Which of two listings is the later never
	// depends on it (UpstreamStatus.listings).
	Now func() time.Time
	// ResultBudget bounds the bytes of upstream results held at once,
	// across every upstream (catalog-svc --upstream-result-budget; nil:
	// only each response's own cap).
	ResultBudget *budget.Budget
	// OverlapWork bounds the comparisons of one refresh's new resources
	// with other sources' (catalog.WithOverlapBudget), all together; 0:
	// catalog.MaxRefreshOverlapWork.
	OverlapWork int
}

// Locker takes a named lock across replicas.
type Locker interface {
	Lock(ctx context.Context, name string) (unlock func(), err error)
}

// recordsLock is the one lock every change of an upstream record takes:
// changes are rare (an operator, a refresh interval) and short (a refresh
// lists its upstream before it takes the lock), and a prompt's or
// resource's approval does not name its upstream.
const recordsLock = "records"

var (
	// ErrNotFound: no upstream with that namespace, or no acquired tool of
	// that name.
	ErrNotFound = errors.New("upstream: not found")
	// ErrAlreadyExists: an upstream with that namespace exists.
	ErrAlreadyExists = errors.New("upstream: namespace already added")
	// ErrPrecondition: an approval or rejection that does not match the
	// tool's state (a digest other than the pending one, a tool that waits
	// for nothing).
	ErrPrecondition = errors.New("upstream: precondition failed")
)

// ValidationError names the field of a provider that is wrong.
type ValidationError struct{ Field, Detail string }

func (e *ValidationError) Error() string { return e.Field + ": " + e.Detail }

// maxEvents is how many state changes an upstream keeps (within
// maxEventsBytes: fitEvents).
const maxEvents = 256

// Manager keeps the upstreams: their specs and tool states in the store,
// one connection each, the acquired tools in the registry.
type Manager struct {
	cfg Config
	log *slog.Logger

	life   context.Context
	cancel context.CancelFunc

	// mu serializes every change of an upstream's record and its tools in
	// this process, and the catalogue API's changes (Exclusive); cfg.Locks
	// across replicas (Exclusive takes both). A one-slot channel, so a
	// caller waits for it only as long as its context allows.
	mu chan struct{}

	// connsMu guards conns, checks and taken; it is never held over a
	// store read or an upstream's request.
	connsMu sync.Mutex
	conns   map[string]*conn
	// checks are the readings of a provider's record under way to check
	// its connection's spec (conn), one per namespace.
	checks map[string]*specCheck
	// taken counts takeConn's and Close's calls (a record written, a
	// connection detached): a reading begun before one may be of the
	// record as it was, and is done again.
	taken uint64

	// changed is each upstream's list_changed state (listchanged.go);
	// bg counts the refreshes they started, which Close waits for.
	changedMu sync.Mutex
	changed   map[string]*changeState
	bg        sync.WaitGroup
}

// New returns a manager; Close ends its connections and stdio servers.
func New(cfg Config) *Manager {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Screening == nil {
		cfg.Screening = DefaultScreening()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.OverlapWork <= 0 {
		cfg.OverlapWork = catalog.MaxRefreshOverlapWork
	}
	life, cancel := context.WithCancel(context.Background())
	return &Manager{cfg: cfg, log: cfg.Logger, life: life, cancel: cancel, mu: make(chan struct{}, 1), conns: map[string]*conn{}, checks: map[string]*specCheck{}, changed: map[string]*changeState{}}
}

// Exclusive takes the right to change upstream records: in this process,
// then across replicas (a load, change and save of one replica never
// interleaves with another's, which would lose one of them). The catalogue
// API takes it too: it checks that an entry or a namespace is not an
// upstream's and makes its change holding it, so no acquisition, approval
// or provider added falls between the two.
func (m *Manager) Exclusive(ctx context.Context) (func(), error) {
	select {
	case m.mu <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("upstream records: %w", context.Cause(ctx))
	}
	release := func() { <-m.mu }
	if m.cfg.Locks == nil {
		return release, nil
	}
	unlock, err := m.cfg.Locks.Lock(ctx, recordsLock)
	if err != nil {
		release()
		return nil, fmt.Errorf("upstream records: %w", err)
	}
	return func() { unlock(); release() }, nil
}

// Close closes every upstream connection.
func (m *Manager) Close() error {
	m.cancel()
	// A refresh a list_changed started ends with m.life; none starts
	// after it (listChanged looks at it holding changedMu).
	m.changedMu.Lock()
	m.changedMu.Unlock() //nolint:staticcheck // an empty section: every Add before it is done
	defer m.bg.Wait()
	m.connsMu.Lock()
	conns := m.conns
	m.conns = map[string]*conn{}
	m.taken++
	m.connsMu.Unlock()
	for _, c := range conns {
		c.close()
	}
	return nil
}

// Validate reports the first bad field of spec.
func (m *Manager) Validate(spec *sharedosv1.UpstreamProvider) error {
	ns := spec.GetNamespace()
	if err := toolname.ValidateNamespaceField("namespace", ns); err != nil {
		return &ValidationError{"namespace", err.Error()}
	}
	switch {
	case (spec.GetUrl() == "") == (len(spec.GetCommand()) == 0):
		return &ValidationError{"url", "exactly one of url and command is required"}
	case spec.GetUrl() != "":
		if err := m.cfg.Guard.CheckURL(spec.GetUrl()); err != nil {
			return &ValidationError{"url", err.Error()}
		}
	default:
		if err := m.cfg.Guard.CheckCommand(spec.GetCommand()); err != nil {
			return &ValidationError{"command", err.Error()}
		}
	}
	for k, ref := range spec.GetHeaders() {
		if !httpguts.ValidHeaderFieldName(k) || strings.EqualFold(k, "Authorization") && spec.GetCredentialRef() != "" {
			return &ValidationError{"headers", fmt.Sprintf("%q is not a header name this upstream can be given", k)}
		}
		if len(spec.GetCommand()) > 0 {
			if err := envHeader(k); err != nil {
				return &ValidationError{"headers", err.Error()}
			}
		}
		if err := m.cfg.Guard.Credentials.Allows(ref); err != nil {
			return &ValidationError{"headers." + k, credentialScope(err)}
		}
	}
	if ref := spec.GetCredentialRef(); ref != "" {
		if len(spec.GetCommand()) > 0 {
			// It would be an Authorization header, which a process does
			// not read: silently dropped before (review finding).
			return &ValidationError{"credential_ref", "a stdio upstream takes no bearer token: give it its credentials as --header NAME=REF (environment variables)"}
		}
		if err := m.cfg.Guard.Credentials.Allows(ref); err != nil {
			return &ValidationError{"credential_ref", credentialScope(err)}
		}
	}
	if credentialed(spec) {
		if err := m.cfg.Guard.CheckCredentialURL(spec.GetUrl()); err != nil {
			return &ValidationError{"url", err.Error()}
		}
	}
	if o := spec.GetOauth(); o != nil {
		switch {
		case spec.GetUrl() == "":
			return &ValidationError{"oauth", "only an HTTP upstream takes an OAuth token"}
		case spec.GetCredentialRef() != "":
			return &ValidationError{"oauth", "give either credential_ref or oauth, not both"}
		case o.GetClientId() == "":
			return &ValidationError{"oauth.client_id", "required"}
		}
		if err := m.cfg.Guard.CheckURL(o.GetTokenUrl()); err != nil {
			return &ValidationError{"oauth.token_url", err.Error()}
		}
		if err := m.cfg.Guard.CheckCredentialURL(o.GetTokenUrl()); err != nil {
			return &ValidationError{"oauth.token_url", err.Error()}
		}
		if err := m.cfg.Guard.Credentials.Allows(o.GetClientSecretRef()); err != nil {
			return &ValidationError{"oauth.client_secret_ref", credentialScope(err)}
		}
	}
	if d := spec.GetRefresh(); d != nil && d.AsDuration() != 0 && d.AsDuration() < 10*time.Second {
		return &ValidationError{"refresh", "must be 0 (only when asked) or at least 10s"}
	}
	if d := spec.GetTimeout(); d != nil && (d.AsDuration() < 0 || d.AsDuration() > 10*time.Minute) {
		return &ValidationError{"timeout", "must be between 0 and 10m"}
	}
	for name, req := range spec.GetRequirements() {
		if !strings.HasPrefix(name, ns+".") {
			return &ValidationError{"requirements", fmt.Sprintf("%q is not a tool of namespace %s", name, ns)}
		}
		if !requirement.IsCallAction(req.GetAction()) {
			return &ValidationError{"requirements." + name, fmt.Sprintf("action %q is not one of %v", req.GetAction(), requirement.CallActions())}
		}
		if req.GetResource() == "" {
			return &ValidationError{"requirements." + name, "resource template is required"}
		}
	}
	for _, name := range spec.GetReadOnly() {
		if !strings.HasPrefix(name, ns+".") {
			return &ValidationError{"read_only", fmt.Sprintf("%q is not a tool of namespace %s", name, ns)}
		}
	}
	return nil
}

// credentialScope is a reference's refusal as an operator reads it: one
// outside the scope says where the scope is set.
func credentialScope(err error) string {
	if errors.Is(err, secretref.ErrOutOfScope) {
		return err.Error() + ": an upstream names only the credentials catalog-svc's --upstream-credentials allows (chart: catalog.upstreams.credentials)"
	}
	return err.Error()
}

// credentialed reports whether spec sends its upstream a secret: headers
// (each a secret reference), a bearer token or an OAuth token.
func credentialed(spec *sharedosv1.UpstreamProvider) bool {
	return len(spec.GetHeaders()) > 0 || spec.GetCredentialRef() != "" || spec.GetOauth() != nil
}

// Add stores spec and acquires its tools once. An upstream that cannot be
// reached is added all the same; its status says why.
func (m *Manager) Add(ctx context.Context, spec *sharedosv1.UpstreamProvider, actor string) (*sharedosv1.GetProviderResponse, error) {
	if err := m.Validate(spec); err != nil {
		return nil, err
	}
	if err := m.create(ctx, spec); err != nil {
		return nil, err
	}
	// Acquired as any refresh: listed holding no lock, then applied.
	rec, _, err := m.refresh(ctx, spec.GetNamespace(), actor, false)
	return rec, err
}

// create stores spec as a new upstream, not listed yet.
func (m *Manager) create(ctx context.Context, spec *sharedosv1.UpstreamProvider) error {
	done, err := m.Exclusive(ctx)
	if err != nil {
		return err
	}
	var old *conn
	defer func() { done(); old.close() }()
	ns := spec.GetNamespace()
	if _, err := m.load(ctx, ns); err == nil {
		return fmt.Errorf("%w: %s", ErrAlreadyExists, ns)
	} else if !errors.Is(err, ErrNotFound) {
		return err
	}
	// Another spelling of a provider's namespace is that namespace: every
	// tool of the one would collide with the other's of the same local name.
	if other, err := m.Holder(ctx, ns); err != nil {
		return err
	} else if other != "" {
		return &ValidationError{"namespace", fmt.Sprintf("namespace %s reads as upstream %s's (%s); an upstream takes a namespace no other holds", ns, other, foldedAlike)}
	}
	// A namespace another source holds is refused whole: its tools would
	// sit beside the upstream's, and a policy granting the namespace would
	// grant both.
	if name, holder, err := m.cfg.Registry.NamespaceHeldBy(ns, Source(ns)); err != nil {
		return err
	} else if name != "" {
		return &ValidationError{"namespace", fmt.Sprintf("namespace %s holds %s from source %q; an upstream takes a namespace no other source holds", ns, name, holder)}
	}
	spec = proto.CloneOf(spec)
	now := timestamppb.Now()
	spec.CreatedAt, spec.UpdatedAt = now, now
	if err := m.save(ctx, &sharedosv1.GetProviderResponse{Provider: spec, Status: &sharedosv1.UpstreamStatus{}}); err != nil {
		return err
	}
	old = m.takeConn(ns, nil)
	return nil
}

// Get returns one upstream with its status.
func (m *Manager) Get(ctx context.Context, ns string) (*sharedosv1.GetProviderResponse, error) {
	return m.load(ctx, ns)
}

// foldedAlike says how toolname.FoldedKey compares names, for errors.
const foldedAlike = "letter case, '-' and '_' read alike, as in tool names"

// matchKeyScope begins every upstream's match key (store.Entry.MatchKey),
// by which Holder finds a namespace however it is spelled.
const matchKeyScope = "ns:"

// matchKey is the match key stored with the upstream of namespace ns: its
// toolname.FoldedKey, the key under which tool names are unique. Two
// namespaces share it exactly when ns + "." + a local name and the other
// + "." + the same local name share a tool's folded key.
func matchKey(ns string) string { return matchKeyScope + toolname.FoldedKey(ns) }

// Holder returns the namespace of the upstream provider that holds ns: ns
// itself, or another spelling of it that reads alike as tool names do
// (toolname.FoldedKey: GH and gh, g-h and g_h); "" when none does. A tool
// GH.search is in upstream gh's namespace: it would take the folded key of
// gh's own search. The store finds the upstream by its match key; one
// written without it (by a catalog-svc before match keys) is returned
// too, and compared here.
func (m *Manager) Holder(ctx context.Context, ns string) (string, error) {
	if toolname.ValidateIdentifier(ns) != nil { // as load: none can
		return "", nil
	}
	key := matchKey(ns)
	es, err := m.cfg.Store.EntriesMatching(ctx, store.KindUpstream, matchKeyScope, key)
	if err != nil {
		return "", err
	}
	holder := ""
	for _, e := range es {
		if matchKey(e.Key) != key {
			continue
		}
		if e.Key == ns {
			return ns, nil
		}
		if holder == "" {
			holder = e.Key
		}
	}
	return holder, nil
}

// List returns every upstream, by namespace.
func (m *Manager) List(ctx context.Context) ([]*sharedosv1.GetProviderResponse, error) {
	es, err := m.cfg.Store.Entries(ctx, store.KindUpstream)
	if err != nil {
		return nil, err
	}
	out := make([]*sharedosv1.GetProviderResponse, 0, len(es))
	for _, e := range es {
		rec := &sharedosv1.GetProviderResponse{}
		if err := proto.Unmarshal(e.Registration, rec); err != nil {
			return nil, fmt.Errorf("upstream %s: %w", e.Key, err)
		}
		out = append(out, rec)
	}
	return out, nil
}

// Refresh lists the upstream's tools again now.
func (m *Manager) Refresh(ctx context.Context, ns, actor string) (*sharedosv1.GetProviderResponse, error) {
	rec, _, err := m.refresh(ctx, ns, actor, false)
	return rec, err
}

// RefreshIfDue refreshes the upstream when its refresh interval has passed
// since its last refresh on any replica (read under the lock, so replicas
// sharing a database refresh it once per interval); refreshed says whether
// it did.
func (m *Manager) RefreshIfDue(ctx context.Context, ns, actor string) (refreshed bool, err error) {
	_, refreshed, err = m.refresh(ctx, ns, actor, true)
	return refreshed, err
}

// refresh lists the upstream holding no lock — a listing waits on the
// network, up to the upstream's timeout, and must not hold every other
// change of upstream records, on every replica, while it does — and then
// applies it under the records lock to the record as it is then: an
// approval made meanwhile is kept, not saved over, and a listing begun
// before one already applied is dropped. A listing of a provider
// that was replaced meanwhile (removed and added again) is dropped and made
// again; one that was removed is ErrNotFound. With ifDue it refreshes only
// an upstream whose interval has passed, and claims it first.
func (m *Manager) refresh(ctx context.Context, ns, actor string, ifDue bool) (*sharedosv1.GetProviderResponse, bool, error) {
	claim := ifDue
	for range maxRelists {
		rec, t, err := m.numberListing(ctx, ns, claim)
		if err != nil || t.number == 0 {
			return rec, false, err
		}
		claim = false // a relist of a replaced provider is not a periodic one
		l, err := m.list(ctx, ns, t)
		if err != nil {
			return nil, false, err
		}
		rec, err = m.applyListing(ctx, ns, l, actor)
		if errors.Is(err, errSuperseded) {
			return rec, false, nil
		}
		if !errors.Is(err, errReplaced) {
			return rec, err == nil, err
		}
		m.takeConn(ns, l.created).close() // the replaced provider's: list the new one
	}
	return nil, false, fmt.Errorf("upstream %s: replaced %d times while it was listed", ns, maxRelists)
}

// ticket is the number a listing takes before it begins (its order among
// the listings of one provider, on every replica) and the provider it
// was taken from.
type ticket struct {
	number  uint64
	created *timestamppb.Timestamp
}

// numberListing gives a listing of ns, about to begin, the provider's next
// listing number, under the lock. With claim it does so only when the
// upstream's periodic refresh is due (no ticket otherwise), and claims the
// refresh for this replica: its refresh time is set to now and the listing
// counts as applied, so the other replicas find it not due while this one
// lists it (one listing per interval across replicas) and a listing begun
// before it is dropped. A replica that stops while it lists leaves the
// refresh to the next interval, as a failed listing does.
func (m *Manager) numberListing(ctx context.Context, ns string, claim bool) (*sharedosv1.GetProviderResponse, ticket, error) {
	done, err := m.Exclusive(ctx)
	if err != nil {
		return nil, ticket{}, err
	}
	defer done()
	rec, err := m.load(ctx, ns)
	if err != nil {
		return nil, ticket{}, err
	}
	if claim && !m.refreshDue(rec) {
		return rec, ticket{}, nil
	}
	st := rec.GetStatus()
	st.Listings++
	t := ticket{number: st.Listings, created: rec.GetProvider().GetCreatedAt()}
	if claim {
		st.RefreshedAt, st.AppliedListing = timestamppb.New(m.cfg.Now()), t.number
	}
	return rec, t, m.save(ctx, rec)
}

// maxRelists bounds refresh's tries when the provider keeps being replaced
// while it is listed.
const maxRelists = 3

// errReplaced: the provider was removed and added again while it was
// listed; the listing is of the old one.
var errReplaced = errors.New("upstream: replaced while it was listed")

// refreshDue reports whether rec's refresh interval has passed since its
// last refresh (on any replica: the time is in the record). A provider
// never listed is not due while Add's own first listing may still run
// (its handshake and listing timeouts since it was created): a periodic
// refresh claimed then would drop that listing, and Add would answer a
// provider with nothing acquired. Past that, the replica that added it
// stopped midway, and the periodic refresh lists it.
func (m *Manager) refreshDue(rec *sharedosv1.GetProviderResponse) bool {
	spec := rec.GetProvider()
	d := spec.GetRefresh().AsDuration()
	if d <= 0 {
		return false
	}
	if last := rec.GetStatus().GetRefreshedAt(); last != nil {
		return m.cfg.Now().Sub(last.AsTime()) >= d
	}
	return m.cfg.Now().Sub(spec.GetCreatedAt().AsTime()) >= handshakeTimeout+listTimeout(spec)
}

// applyListing reconciles the stored record with l under the records lock.
func (m *Manager) applyListing(ctx context.Context, ns string, l *listing, actor string) (*sharedosv1.GetProviderResponse, error) {
	done, err := m.Exclusive(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	rec, err := m.load(ctx, ns)
	if err != nil {
		return nil, err
	}
	if !proto.Equal(rec.GetProvider().GetCreatedAt(), l.created) || !proto.Equal(l.created, l.ticket.created) {
		return nil, errReplaced
	}
	if l.ticket.number < rec.GetStatus().GetAppliedListing() {
		// A listing numbered later was applied (or a periodic one claimed)
		// while this one ran: applied after it, this one would take the
		// record back to what the upstream served before.
		return rec, errSuperseded
	}
	m.apply(ctx, rec, l, actor)
	return rec, m.save(ctx, rec)
}

// errSuperseded: a listing begun later was applied, or claimed, first.
var errSuperseded = errors.New("upstream: a later listing came first")

// Remove deregisters every published tool of the upstream and forgets it.
func (m *Manager) Remove(ctx context.Context, ns string) error {
	done, err := m.Exclusive(ctx)
	if err != nil {
		return err
	}
	var old *conn
	defer func() { done(); old.close() }()
	rec, err := m.load(ctx, ns)
	if err != nil {
		return err
	}
	for _, t := range rec.GetStatus().GetTools() {
		if t.GetState() == sharedosv1.UpstreamToolState_UPSTREAM_TOOL_STATE_PUBLISHED {
			if err := m.cfg.Registry.Deregister(ctx, t.GetName()); err != nil && !errors.Is(err, catalog.ErrNotFound) {
				return err
			}
		}
	}
	for _, e := range rec.GetStatus().GetEntries() {
		if e.GetState() == sharedosv1.UpstreamToolState_UPSTREAM_TOOL_STATE_PUBLISHED {
			if err := m.withdrawEntry(ctx, e.GetKind(), e.GetKey()); err != nil {
				return err
			}
		}
	}
	if err := m.cfg.Store.DeleteEntry(ctx, store.KindUpstream, ns); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	old = m.takeConn(ns, nil)
	return nil
}

// Tool returns the acquired tool name, whatever its state.
func (m *Manager) Tool(ctx context.Context, name string) (*sharedosv1.UpstreamTool, error) {
	ns, _, _ := strings.Cut(name, ".")
	rec, err := m.load(ctx, ns)
	if err != nil {
		return nil, err
	}
	t := findTool(rec, name)
	if t == nil {
		return nil, fmt.Errorf("%w: upstream %s has no tool %s", ErrNotFound, ns, name)
	}
	return t, nil
}

// Approve publishes name's pending definition when digest is its pending
// digest.
func (m *Manager) Approve(ctx context.Context, name, digest, actor string) (*sharedosv1.UpstreamTool, error) {
	return m.decide(ctx, name, digest, actor, true)
}

// Reject keeps name withdrawn while the upstream serves the definition
// with digest.
func (m *Manager) Reject(ctx context.Context, name, digest, actor string) (*sharedosv1.UpstreamTool, error) {
	return m.decide(ctx, name, digest, actor, false)
}

func (m *Manager) decide(ctx context.Context, name, digest, actor string, approve bool) (*sharedosv1.UpstreamTool, error) {
	done, err := m.Exclusive(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	ns, _, _ := strings.Cut(name, ".")
	rec, err := m.load(ctx, ns)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, err
	}
	t := findTool(rec, name)
	if t == nil { // a prompt or a resource (a URI names no namespace)
		return m.decideEntry(ctx, name, digest, actor, approve)
	}
	if err := checkDecision(name, t.GetState(), t.GetPendingDigest(), digest, approve); err != nil {
		return nil, err
	}
	old := t.GetDigest()
	if approve {
		if err := m.publish(ctx, ns, t.GetPending()); err != nil {
			return nil, err
		}
		t.Published, t.Digest = t.GetPending(), t.GetPendingDigest()
		t.State, t.Pending, t.PendingDigest, t.Reason = sharedosv1.UpstreamToolState_UPSTREAM_TOOL_STATE_PUBLISHED, nil, "", ""
		addEvent(rec, name, "approved", actor, old, digest, "", "")
	} else {
		t.State = sharedosv1.UpstreamToolState_UPSTREAM_TOOL_STATE_REJECTED
		t.Reason = "rejected by " + actor
		addEvent(rec, name, "rejected", actor, old, digest, "", "")
	}
	return t, m.save(ctx, rec)
}

// Diff is the unified diff from name's published definition to its pending
// one, made anew (a quarantine event keeps only the beginning of it), at
// most maxDiffBytes of it.
func (m *Manager) Diff(ctx context.Context, name string) (*sharedosv1.UpstreamTool, string, error) {
	t, err := m.Tool(ctx, name)
	if errors.Is(err, ErrNotFound) {
		_, e, ferr := m.findEntry(ctx, name)
		if ferr != nil {
			return nil, "", ferr
		}
		if e.GetPending() == nil {
			return entryAsTool(e), "", nil
		}
		d, err := m.diffEntries(e.GetKind(), e.GetPublished(), e.GetPending(), maxDiffBytes, "")
		return entryAsTool(e), d, err
	}
	if err != nil {
		return nil, "", err
	}
	if t.GetPending() == nil {
		return t, "", nil
	}
	d, err := m.diff(t.GetPublished(), t.GetPending(), maxDiffBytes, "")
	return t, d, err
}

// Run refreshes every upstream whose refresh interval has passed, until
// ctx ends.
func (m *Manager) Run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		recs, err := m.List(ctx)
		if err != nil {
			m.log.WarnContext(ctx, "upstream refresh: list", slog.Any("error", err))
			continue
		}
		for _, rec := range recs {
			if !m.refreshDue(rec) {
				continue
			}
			if _, err := m.RefreshIfDue(ctx, rec.GetProvider().GetNamespace(), "refresh"); err != nil {
				m.log.WarnContext(ctx, "upstream refresh", slog.String(telemetry.LogUpstream, rec.GetProvider().GetNamespace()), slog.Any("error", err))
			}
		}
	}
}

// listing is what one refresh read from an upstream: its tools, prompts
// and resources as listed, or why it could not.
type listing struct {
	// created names the provider that was listed (its CreatedAt: a
	// provider removed and added again is another one).
	created *timestamppb.Timestamp
	// at is when the listing began (the record's refreshed_at), by this
	// replica's clock; ticket orders it among the provider's listings.
	at      *timestamppb.Timestamp
	ticket  ticket
	info    serverInfo
	tools   []listedTool
	entries []candidate
	// err: no tools/list (nothing changes); entriesErr: no prompts or
	// resources listing.
	err, entriesErr error
}

// list reads the upstream of ns over its connection, holding no lock; an
// error when there is no connection to read it over (the provider is gone,
// or its record cannot be read).
func (m *Manager) list(ctx context.Context, ns string, t ticket) (*listing, error) {
	l := &listing{at: timestamppb.New(m.cfg.Now()), ticket: t}
	c, err := m.connFor(ctx, ns)
	if err != nil {
		return nil, err
	}
	l.created = c.spec.GetCreatedAt()
	// A listing gets the upstream's timeout: one that never answers holds
	// up no refresh of the others (Run lists them one after another). Its
	// cause tells the listing's own timeout from its caller's deadline
	// (wedged).
	ctx, cancel := context.WithTimeoutCause(ctx, listTimeout(c.spec), errListTimeout)
	defer cancel()
	if l.tools, l.info, l.err = c.listTools(ctx); l.err != nil {
		m.log.WarnContext(ctx, "upstream listing failed", slog.String(telemetry.LogUpstream, ns), slog.String("error", reported(l.err)))
		return l, nil
	}
	if l.entries, l.entriesErr = c.listEntries(ctx, c.spec); l.entriesErr != nil {
		m.log.WarnContext(ctx, "upstream prompts/resources listing failed", slog.String(telemetry.LogUpstream, ns), slog.String("error", reported(l.entriesErr)))
	}
	return l, nil
}

// listTimeout bounds one listing of spec's upstream (tools, prompts and
// resources): its timeout, else defaultListTimeout.
func listTimeout(spec *sharedosv1.UpstreamProvider) time.Duration {
	if d := spec.GetTimeout(); d != nil && d.AsDuration() > 0 {
		return d.AsDuration()
	}
	return time.Duration(defaultListTimeout.Load())
}

// defaultListTimeout is a listing's timeout when its upstream has none:
// 30 s (tests change it while listings run).
var defaultListTimeout = func() *atomic.Int64 {
	var d atomic.Int64
	d.Store(int64(30 * time.Second))
	return &d
}()

// apply reconciles rec's tools, prompts and resources, and the registry,
// with l. A failed listing changes no tool: it is reported in the status.
func (m *Manager) apply(ctx context.Context, rec *sharedosv1.GetProviderResponse, l *listing, actor string) {
	spec, st := rec.GetProvider(), rec.GetStatus()
	st.RefreshedAt, st.AppliedListing = l.at, l.ticket.number
	// The events and server strings a catalog-svc before the bounds kept
	// (record.go) are brought within them, whatever this listing finds.
	fitEvents(st)
	st.ProtocolVersion, st.ServerName, st.ServerVersion = serverString(st.GetProtocolVersion()), serverString(st.GetServerName()), serverString(st.GetServerVersion())
	if l.err != nil {
		st.Error = reported(l.err)
		return
	}
	listed, info := l.tools, l.info
	st.Error, st.ProtocolVersion, st.ServerName, st.ServerVersion = "", serverString(info.protocol), serverString(info.name), serverString(info.version)
	st.Skipped = nil
	r := newRoom(rec)
	defer r.done()
	index := map[string]*sharedosv1.UpstreamTool{}
	for _, t := range st.GetTools() {
		index[t.GetName()] = t
	}
	gone := map[string]*sharedosv1.UpstreamTool{}
	for _, t := range st.GetWithdrawnTools() {
		gone[t.GetName()] = t
	}
	r.goneTools = gone
	named := map[string]bool{}
	for _, lt := range listed {
		named[spec.GetNamespace()+"."+lt.Name] = true
	}
	for _, t := range st.GetTools() {
		if !named[t.GetName()] {
			r.leavingTool(t)
		}
	}
	seen := map[string]bool{}
	skip := func(name, why string) {
		r.skip(skipped("", name, why))
	}
	// Of names that read alike (folded), the one recorded already keeps
	// its place, whatever the listing's order: a look-alike the upstream
	// adds later is skipped, never the approved tool withdrawn for it. An
	// acquired tool comes before a withdrawn one; otherwise (or neither
	// recorded) the first listed wins.
	folded := map[string]string{}
	for _, recorded := range []func(string) bool{
		func(name string) bool { return index[name] != nil },
		func(name string) bool { return gone[name] != nil },
	} {
		for _, lt := range listed {
			name := spec.GetNamespace() + "." + lt.Name
			if key := toolname.FoldedKey(name); recorded(name) && folded[key] == "" {
				folded[key] = name
			}
		}
	}
	taken := map[string]bool{} // folded keys a listed tool holds
	for _, lt := range listed {
		if lt.unreadable != "" {
			skip(lt.Name, lt.unreadable)
			continue
		}
		reg, why := registration(spec, lt)
		if why != "" {
			skip(lt.Name, why)
			continue
		}
		key := toolname.FoldedKey(reg.GetName())
		if holder, dup := folded[key]; dup && (holder != reg.GetName() || taken[key]) {
			skip(lt.Name, fmt.Sprintf("%s collides with %s ('.', '-' and '_' and letter case read alike)", reg.GetName(), holder))
			continue
		}
		folded[key], taken[key] = reg.GetName(), true
		pub, err := m.cfg.Registry.Check(reg)
		if err != nil {
			skip(lt.Name, err.Error())
			continue
		}
		flag := ""
		if f, hit := m.cfg.Screening.Screen(reg); hit {
			flag = f.String()
		}
		if t := gone[reg.GetName()]; t != nil && index[reg.GetName()] == nil {
			// Listed again: judged against what was recorded of it.
			delete(gone, reg.GetName())
			st.Tools = append(st.Tools, returning(t))
			index[reg.GetName()] = t
		}
		if why := m.reconcile(ctx, rec, index, reg, pub, lt.Name, flag, actor, r); why != "" {
			skip(lt.Name, why)
			continue
		}
		seen[reg.GetName()] = true
	}
	kept, withdrawn := st.GetTools()[:0], []*sharedosv1.UpstreamTool{}
	for _, t := range st.GetTools() {
		if seen[t.GetName()] {
			kept = append(kept, t)
			continue
		}
		if t.GetState() == sharedosv1.UpstreamToolState_UPSTREAM_TOOL_STATE_PUBLISHED {
			if err := m.cfg.Registry.Deregister(ctx, t.GetName()); err != nil && !errors.Is(err, catalog.ErrNotFound) {
				m.log.WarnContext(ctx, "upstream tool withdrawal", slog.String(telemetry.LogTool, t.GetName()), slog.Any("error", err))
				kept = append(kept, t)
				continue
			}
		}
		addEvent(rec, t.GetName(), "withdrawn", actor, t.GetDigest(), "", "the upstream no longer lists it (or it can no longer be registered)", "")
		if decided(t.GetDigest(), t.GetState()) {
			withdrawn = append(withdrawn, t)
		}
	}
	st.Tools = kept
	st.WithdrawnTools = remembered(st.GetWithdrawnTools(), gone, withdrawn, (*sharedosv1.UpstreamTool).GetName)
	slices.SortFunc(st.Tools, func(a, b *sharedosv1.UpstreamTool) int { return strings.Compare(a.GetName(), b.GetName()) })
	if l.entriesErr != nil {
		st.Error = "prompts and resources: " + reported(l.entriesErr)
		return
	}
	m.applyEntries(ctx, rec, l.entries, actor, r)
}

// reconcile brings one listed tool's state up to date; a reason when it
// cannot be registered at all, or its definition does not fit in the
// provider's record (r). flag, when set, is a screening finding: the
// definition waits for an operator even where it would be published
// without one.
func (m *Manager) reconcile(ctx context.Context, rec *sharedosv1.GetProviderResponse, index map[string]*sharedosv1.UpstreamTool,
	reg *sharedosv1.ToolRegistration, pub *sharedosv1.PublishedTool, upstreamName, flag, actor string, r *room) string {
	ns, digest := rec.GetProvider().GetNamespace(), pub.GetDigest()
	cur := index[reg.GetName()]
	s := nextStep(cur != nil, cur.GetState(), cur.GetDigest(), cur.GetPendingDigest(), digest, rec.GetProvider().GetAutoApproveNew(), flag != "")
	reason := stepReason(s, "tool", flag)
	before := 0
	if cur == nil {
		cur = &sharedosv1.UpstreamTool{Name: reg.GetName(), UpstreamName: upstreamName}
	} else {
		before = elemSize(proto.Size(cur))
	}
	// The record as this step leaves it is measured before the registry
	// is changed: a definition that does not fit changes nothing.
	was, undo := cur.GetState(), restorer(cur)
	switch s {
	case stepKeep:
		// A definition dropped to make room (room.shed) is the one
		// listed, which has its digest: it is kept again.
		switch {
		case cur.GetPendingDigest() == digest && cur.GetPending() == nil:
			cur.Pending = reg
		case cur.GetDigest() == digest && cur.GetPublished() == nil:
			cur.Published = reg
		default:
			return ""
		}
	case stepPublishNew, stepRepublish:
		cur.State, cur.Digest, cur.Published, cur.Pending, cur.PendingDigest, cur.Reason = published, digest, reg, nil, "", ""
	case stepQuarantineChanged, stepQuarantineNew:
		cur.State, cur.Pending, cur.PendingDigest, cur.Reason = sharedosv1.UpstreamToolState_UPSTREAM_TOOL_STATE_QUARANTINED, reg, digest, reason
	}
	grown := elemSize(proto.Size(cur)) - before
	if !r.take(grown) {
		undo()
		return full(proto.Size(reg))
	}
	fail := func(err error) string {
		undo()
		r.give(grown)
		return err.Error()
	}
	switch s {
	case stepPublishNew, stepRepublish:
		if err := m.publish(ctx, ns, reg); err != nil {
			return fail(err)
		}
		addEvent(rec, cur.GetName(), "published", actor, "", digest, reason, "")
	case stepQuarantineChanged, stepQuarantineNew:
		if was == published {
			if err := m.cfg.Registry.Deregister(ctx, cur.GetName()); err != nil && !errors.Is(err, catalog.ErrNotFound) {
				return fail(err)
			}
		}
		d, err := m.diff(cur.GetPublished(), reg, maxEventDiffBytes, diffMore(cur.GetName()))
		if err != nil {
			d = "(no diff: " + clip(err.Error(), maxSkippedReason) + ")"
		}
		addEvent(rec, cur.GetName(), "quarantined", actor, cur.GetDigest(), digest, reason, d)
	}
	if s == stepPublishNew || s == stepQuarantineNew {
		rec.Status.Tools = append(rec.Status.Tools, cur)
		index[cur.GetName()] = cur
	}
	return ""
}

// restorer returns what puts back the fields of t a step changes.
func restorer(t *sharedosv1.UpstreamTool) func() {
	state, digest, pub, pending, pendingDigest, reason := t.GetState(), t.GetDigest(), t.GetPublished(), t.GetPending(), t.GetPendingDigest(), t.GetReason()
	return func() {
		t.State, t.Digest, t.Published, t.Pending, t.PendingDigest, t.Reason = state, digest, pub, pending, pendingDigest, reason
	}
}

// publish puts reg in the registry: new, or replacing this upstream's
// earlier definition. A name some other source holds is refused.
func (m *Manager) publish(ctx context.Context, ns string, reg *sharedosv1.ToolRegistration) error {
	_, _, err := m.cfg.Registry.Register(ctx, reg)
	if !errors.Is(err, catalog.ErrAlreadyExists) {
		return err
	}
	cur, _, gerr := m.cfg.Registry.Get(ctx, reg.GetName())
	if gerr != nil {
		return gerr
	}
	if cur.GetMetadata().GetSource() != Source(ns) {
		return fmt.Errorf("%s is registered already, from source %q", reg.GetName(), cur.GetMetadata().GetSource())
	}
	_, _, err = m.cfg.Registry.Update(ctx, reg, 0)
	return err
}

// specRecheck bounds how long a replica may call an upstream under a
// provider another replica removed or replaced: the connection's spec is
// compared with the stored one at most this often.
const specRecheck = 10 * time.Second

// connections are the upstream connections open now.
func (m *Manager) connections() []*conn {
	m.connsMu.Lock()
	defer m.connsMu.Unlock()
	conns := make([]*conn, 0, len(m.conns))
	for _, c := range m.conns {
		conns = append(conns, c)
	}
	return conns
}

// cancelTurn ends the parked calls of turn on every upstream.
func (m *Manager) cancelTurn(turn string) int {
	n := 0
	for _, c := range m.connections() {
		n += c.cancelTurn(turn)
	}
	return n
}

// heldTurns are the turns of the calls parked on every upstream.
func (m *Manager) heldTurns() []string {
	var turns []string
	for _, c := range m.connections() {
		turns = append(turns, c.heldTurns()...)
	}
	return turns
}

// cancelRound ends the call parked under a round's provider state, on
// whichever upstream holds it.
func (m *Manager) cancelRound(turn string, state []byte) bool {
	handle, ok := strings.CutPrefix(string(state), parkedState)
	if !ok {
		return false
	}
	for _, c := range m.connections() {
		if c.cancelRound(turn, handle) {
			return true
		}
	}
	return false
}

// conn is ns's connection, its spec compared with the stored one at most
// every specRecheck (Handlers.Client: no caller's context to wait on but
// the manager's life).
func (m *Manager) conn(ns string) (*conn, error) { return m.connFor(m.life, ns) }

// specCheck is one reading of a provider's record to check (or make) its
// connection: the callers of conn that need it meanwhile wait for the one
// reading, each as long as its own context allows, and holding no lock —
// a slow store holds up that upstream alone, not every upstream's calls
// nor the turns' cancellation (connections).
type specCheck struct {
	done  chan struct{}
	c     *conn
	err   error
	again bool // a connection was detached meanwhile: read again
}

// connFor is ns's connection, for a caller that waits as long as ctx
// allows.
func (m *Manager) connFor(ctx context.Context, ns string) (*conn, error) {
	for {
		m.connsMu.Lock()
		c, ok := m.conns[ns]
		if ok && time.Since(c.checked) < specRecheck {
			m.connsMu.Unlock()
			return c, nil
		}
		chk := m.checks[ns]
		if chk == nil {
			chk = &specCheck{done: make(chan struct{})}
			m.checks[ns] = chk
			go m.check(ns, chk, m.taken)
		}
		m.connsMu.Unlock()
		select {
		case <-chk.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if !chk.again {
			return chk.c, chk.err
		}
	}
}

// check reads ns's record, off every lock and bounded by specLoadTimeout,
// then brings its connection in line under connsMu: kept (the same
// provider), made anew (none yet, or the provider was removed and added
// again, on another replica) or dropped (removed). A connection detached
// since the reading began (taken moved on from taken) leaves the reading
// unused (its waiters read again): it may be of the record as it was.
func (m *Manager) check(ns string, chk *specCheck, taken uint64) {
	ctx, cancel := context.WithTimeout(m.life, specLoadTimeout)
	rec, err := m.load(ctx, ns)
	cancel()
	// A connection closed here is closed once the lock is let go: closing
	// may wait on its upstream (a session's DELETE, a stdio server's exit).
	var stale *conn
	m.connsMu.Lock()
	delete(m.checks, ns)
	c, ok := m.conns[ns]
	switch {
	case m.life.Err() != nil:
		chk.err = errClosed // no connection made after Close
	case m.taken != taken:
		chk.again = true
	case err != nil:
		if ok && errors.Is(err, ErrNotFound) {
			stale = c
			delete(m.conns, ns)
		}
		chk.err = err
	case ok && proto.Equal(c.spec.GetCreatedAt(), rec.GetProvider().GetCreatedAt()):
		c.checked = time.Now()
		chk.c = c
	default:
		if ok {
			stale = c // removed and added again (on another replica): the new spec
		}
		chk.c = newConn(m.life, rec.GetProvider(), m.cfg.Guard, m.log.With(slog.String(telemetry.LogUpstream, ns)), func() { m.listChanged(ns) })
		chk.c.budget = m.cfg.ResultBudget.Share(upstreamShare(m.cfg.ResultBudget.Size()))
		m.conns[ns] = chk.c
	}
	m.connsMu.Unlock()
	close(chk.done)
	if stale != nil {
		stale.close()
	}
}

// takeConn detaches ns's connection for its caller to close, outside the
// records lock (closing may wait on the upstream); with created set, only
// when it is the connection of the provider created then (one since
// replaced).
func (m *Manager) takeConn(ns string, created *timestamppb.Timestamp) *conn {
	m.connsMu.Lock()
	m.taken++ // the record changed: a reading under way may be of it as it was
	c, ok := m.conns[ns]
	if ok && (created == nil || proto.Equal(c.spec.GetCreatedAt(), created)) {
		delete(m.conns, ns)
	} else {
		c = nil
	}
	m.connsMu.Unlock()
	return c
}

// specLoadTimeout bounds reading a provider's record to (re)check the
// spec of its connection, which every call to it waits for.
const specLoadTimeout = 10 * time.Second

// upstreamShare is what the calls of one upstream may hold of a result
// budget of size bytes together (budget.Share): half of it, but never
// less than one whole response where the budget holds one, so a share
// refuses no result the budget would take alone.
func upstreamShare(size int64) int64 {
	return max(size/2, min(size, maxResponseBytes))
}

func (m *Manager) load(ctx context.Context, ns string) (*sharedosv1.GetProviderResponse, error) {
	// A namespace no upstream can have is not looked up: every store
	// answers it alike (PostgreSQL refuses a NUL or invalid UTF-8 in a
	// query as an error of its own, which would be Internal). The test is
	// the identifier rule, which namespaces followed before the namespace
	// rule (ValidateNamespaceField, narrower) came: an upstream added
	// then ("a.b") is still found, and removed, by its namespace.
	if toolname.ValidateIdentifier(ns) != nil {
		return nil, fmt.Errorf("%w: no upstream %q", ErrNotFound, ns)
	}
	e, err := m.cfg.Store.GetEntry(ctx, store.KindUpstream, ns)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w: no upstream %q", ErrNotFound, ns)
	}
	if err != nil {
		return nil, err
	}
	rec := &sharedosv1.GetProviderResponse{}
	if err := proto.Unmarshal(e.Registration, rec); err != nil {
		return nil, fmt.Errorf("upstream %s: %w", ns, err)
	}
	if rec.Status == nil {
		rec.Status = &sharedosv1.UpstreamStatus{}
	}
	return rec, nil
}

func (m *Manager) save(ctx context.Context, rec *sharedosv1.GetProviderResponse) error {
	rec.Provider.UpdatedAt = timestamppb.Now()
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(rec)
	if err != nil {
		return err
	}
	_, err = m.cfg.Store.PutEntry(ctx, store.KindUpstream, store.Entry{Key: rec.GetProvider().GetNamespace(), Registration: b, Canonical: []byte{},
		MatchKey: matchKey(rec.GetProvider().GetNamespace())})
	return err
}

func findTool(rec *sharedosv1.GetProviderResponse, name string) *sharedosv1.UpstreamTool {
	for _, t := range rec.GetStatus().GetTools() {
		if t.GetName() == name {
			return t
		}
	}
	return nil
}

// StateName is the JSON word of a state: published, quarantined, rejected.
func StateName(s sharedosv1.UpstreamToolState) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "UPSTREAM_TOOL_STATE_"))
}
