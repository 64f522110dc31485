package catalog

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/cataloghash"
	"github.com/sharedos/toolshare/services/contract/mcptool"
	"github.com/sharedos/toolshare/services/contract/requirement"
	"github.com/sharedos/toolshare/services/contract/toolname"
	"github.com/sharedos/toolshare/services/platform/telemetry"

	"github.com/sharedos/toolshare/catalog-svc/internal/store"
)

// ToolFilter is the one authz-svc call ListTools needs.
// sharedosv1.AuthzServiceClient satisfies it.
type ToolFilter interface {
	FilterTools(ctx context.Context, in *sharedosv1.FilterToolsRequest, opts ...grpc.CallOption) (*sharedosv1.FilterToolsResponse, error)
}

var _ ToolFilter = (sharedosv1.AuthzServiceClient)(nil)

// Config wires a Service.
type Config struct {
	// Store holds the registrations (store/postgres or store/memory).
	Store store.Store
	// Filter decides per-context visibility for ListTools. It may be nil
	// only where ListTools is never called with a context (tests, tools);
	// then such calls fail with ErrAuthzUnavailable.
	Filter ToolFilter
	// FilterPage bounds the tools of one FilterTools call (default
	// DefaultFilterPage): a larger catalogue is asked about in pages.
	FilterPage int
	// Logger; slog.Default() when nil.
	Logger *slog.Logger
	// Locks orders the registrations of resources across replicas that
	// share the store (pgdb.Locks; nil: this process only), so two
	// spellings of one URI, or two sources' resources that overlap,
	// cannot both land.
	Locks Locker
}

// Locker takes a lock by name across the replicas sharing the store.
type Locker interface {
	Lock(ctx context.Context, name string) (unlock func(), err error)
}

// processLock is the Locker of a Service alone on its store: one mutex
// for every name (registrations of resources are rare).
type processLock struct{ mu sync.Mutex }

func (l *processLock) Lock(context.Context, string) (func(), error) {
	l.mu.Lock()
	return l.mu.Unlock, nil
}

// DefaultFilterPage is the tools per FilterTools call, well below the
// 10,000 authz-svc accepts.
const DefaultFilterPage = 5000

// MaxFilterPageBytes bounds the tool facts of one FilterTools call too: a
// page of DefaultFilterPage tools whose annotations are large (each may be
// MaxAnnotationsBytes) would pass the 64 MiB a message may be, and every
// listing of every context would fail (review finding: 1,024 such tools
// were enough).
const MaxFilterPageBytes = 16 << 20

// filterPageEnd is where the FilterTools page of facts that starts at
// start ends: at most count facts of at most MaxFilterPageBytes together
// (size(i) is fact i's encoded size), and never empty.
func filterPageEnd(start, n, count int, size func(int) int) int {
	end, total := start, 0
	for end < n && end-start < count {
		b := size(end)
		if end > start && total+b > MaxFilterPageBytes {
			break
		}
		total += b
		end++
	}
	return end
}

// Service is the catalogue: registration (write-through to the store), and
// the cache of published tools every read is served from.
type Service struct {
	store  store.Store
	filter ToolFilter
	page   int
	log    *slog.Logger

	snap atomic.Pointer[snapshot]

	// refreshMu serialises cache updates: each update reads the store's
	// current state and applies it while holding the lock, so updates from
	// the write path and from the change feed cannot reorder. A batch
	// holds it across its write (createBatch).
	refreshMu sync.Mutex
	feed      *store.Feed

	// locks order the check and the write of a resource registration
	// (lockResource): Config.Locks, or this process's.
	locks Locker
	// lockingResource, when set (tests), hears each lockResource before
	// it waits.
	lockingResource func(key string)
	// checkedOverlap, when set (tests), hears the work of each
	// CheckResourceOverlap (resourceuri.Work).
	checkedOverlap func(work int)

	cancel context.CancelFunc
	done   chan struct{}
}

// New returns a Service; call Start before serving.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil {
		return nil, errors.New("catalog: Config.Store is required")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	page := cfg.FilterPage
	if page <= 0 {
		page = DefaultFilterPage
	}
	locks := cfg.Locks
	if locks == nil {
		locks = &processLock{}
	}
	return &Service{store: cfg.Store, filter: cfg.Filter, page: page, log: log, locks: locks}, nil
}

// Start subscribes to the store's change feed, loads the cache and keeps it
// current in the background until ctx ends or Close is called.
func (s *Service) Start(ctx context.Context) error {
	if s.done != nil {
		return errors.New("catalog: already started")
	}
	watchCtx, cancel := context.WithCancel(ctx)
	// Subscribe before loading: a change committed between the two is then
	// in the feed rather than lost.
	feed, err := s.store.Watch(watchCtx)
	if err != nil {
		cancel()
		return fmt.Errorf("catalog: watch changes: %w", err)
	}
	s.feed = feed
	if err := s.reloadAll(ctx, nil); err != nil {
		cancel()
		return err
	}
	s.cancel = cancel
	s.done = make(chan struct{})
	go s.follow(watchCtx)
	return nil
}

// Close stops following changes. It is safe to call more than once.
func (s *Service) Close() error {
	if s.cancel != nil {
		s.cancel()
		<-s.done
	}
	return nil
}

// Ready reports whether the cache has been loaded.
func (s *Service) Ready() bool { return s.snap.Load() != nil }

const retryDelay = 200 * time.Millisecond

// follow applies the change feed to the cache. A failed refresh is retried
// as a full reload, so a store outage delays visibility but never leaves a
// deleted tool cached once the store is back.
func (s *Service) follow(ctx context.Context) {
	defer close(s.done)
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.feed.Ready():
		}
		names, all := s.feed.Take()
		var err error
		if all {
			err = s.reloadAll(ctx, nil)
		} else {
			for _, n := range names {
				if err = s.refresh(ctx, n, nil); err != nil {
					break
				}
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			s.log.WarnContext(ctx, "catalog cache refresh failed; retrying", "err", err)
			s.feed.Push(store.AllChanged)
			select {
			case <-ctx.Done():
				return
			case <-time.After(retryDelay):
			}
		}
	}
}

// reloadAll replaces the cache with the store's full contents.
func (s *Service) reloadAll(ctx context.Context, h hints) error {
	s.refreshMu.Lock()
	defer s.refreshMu.Unlock()
	recs, err := s.store.Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("catalog: load registrations: %w", err)
	}
	s.snap.Store(newSnapshot(s.entries(ctx, s.snap.Load(), recs, h)))
	return nil
}

// entries builds the cache entries of recs, each over its predecessor in
// prev (nil: none), reporting the tools that became unservable.
func (s *Service) entries(ctx context.Context, prev *snapshot, recs []store.Record, h hints) []*entry {
	out := make([]*entry, len(recs))
	for i, rec := range recs {
		var old *entry
		if prev != nil {
			old, _ = prev.lookup(rec.Name())
		}
		out[i] = buildEntry(rec, old, h)
		s.reportUnservable(ctx, out[i], old)
	}
	return out
}

// reportUnservable says that a stored tool is left out of every turn (it was
// registered before the catalogue checked what the bridge can serve), once:
// when e is unservable and its predecessor old was not.
func (s *Service) reportUnservable(ctx context.Context, e, old *entry) {
	if e.unservable == nil || (old != nil && old.unservable != nil) {
		return
	}
	s.log.WarnContext(ctx, "tool left out of every turn: the bridge cannot serve it over MCP; update or deregister it",
		slog.String(telemetry.LogTool, e.name()), slog.String("reason", e.unservable.Error()))
}

// refresh re-reads one tool from the store and applies it to the cache.
func (s *Service) refresh(ctx context.Context, name string, h hints) error {
	s.refreshMu.Lock()
	defer s.refreshMu.Unlock()
	cur := s.snap.Load()
	if cur == nil {
		return ErrNotReady
	}
	rec, err := s.store.Get(ctx, name)
	switch {
	case errors.Is(err, store.ErrNotFound):
		if _, ok := cur.lookup(name); ok {
			s.snap.Store(cur.withChange(name, nil))
		}
		return nil
	case err != nil:
		return fmt.Errorf("catalog: refresh %q: %w", name, err)
	}
	old, _ := cur.lookup(name)
	e := buildEntry(rec, old, h)
	s.reportUnservable(ctx, e, old)
	s.snap.Store(cur.withChange(name, e))
	return nil
}

// createBatch stores a batch and makes it visible on this replica before
// the RPC returns, from the records as the store returned them rather than
// by reading the whole table again. The cache lock is held across the
// write: no update (the change feed's) can then bring into the cache a
// change committed after the batch that the batch's own records would
// overwrite. The feed's updates wait for the batch meanwhile.
func (s *Service) createBatch(ctx context.Context, recs []store.Record, h hints) ([]store.Record, error) {
	s.refreshMu.Lock()
	defer s.refreshMu.Unlock()
	stored, err := s.store.CreateBatch(ctx, recs)
	if err != nil {
		return nil, err
	}
	if cur := s.snap.Load(); cur != nil {
		s.snap.Store(cur.withChanges(s.entries(ctx, cur, stored, h)))
	}
	return stored, nil
}

// afterWrite makes a write visible on this replica before the RPC returns
// (read-your-writes); other replicas learn it from the change feed. If the
// refresh fails the feed retries it.
func (s *Service) afterWrite(ctx context.Context, name string, h hints) {
	if s.snap.Load() == nil {
		return
	}
	var err error
	if name == store.AllChanged {
		err = s.reloadAll(ctx, h)
	} else {
		err = s.refresh(ctx, name, h)
	}
	if err != nil && s.feed != nil {
		s.feed.Push(name)
	}
}

// Resolve returns the published tool with exactly this name from the cache.
// Any string is accepted; an unknown name wraps ErrNotFound.
func (s *Service) Resolve(ctx context.Context, name string) (*Resolved, error) {
	snap := s.snap.Load()
	if snap == nil {
		return nil, ErrNotReady
	}
	e, ok := snap.lookup(name)
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	res, err := e.resolve()
	if err != nil {
		// Only possible for a row written around validation (an older
		// binary, a manual edit): the tool is withheld, not run unchecked
		// (nor its results passed on unchecked: an output schema).
		s.log.ErrorContext(ctx, "withholding stored tool whose input or output schema does not compile", "tool", name, "err", err)
		return nil, fmt.Errorf("%w: %q is withheld: its stored input or output schema does not compile", ErrNotFound, name)
	}
	return res, nil
}

// NamespaceHeldBy returns a tool of namespace ns from a source other than
// source, from the cache ("" when every tool there is source's): an
// upstream provider takes a namespace no other source holds. Namespaces
// are compared as tool names are (toolname.FoldedKey): GH.search is in
// namespace gh, whose tool search it would collide with. Every tool is
// looked at, since the spellings of ns are not one range of names; a
// provider is added rarely.
func (s *Service) NamespaceHeldBy(ns, source string) (name, holder string, err error) {
	snap := s.snap.Load()
	if snap == nil {
		return "", "", ErrNotReady
	}
	key := toolname.FoldedKey(ns)
	for _, e := range snap.entries {
		// A spelling of ns is as long as ns (FoldedKey keeps the length of
		// a valid name), and the namespace ends at the first '.'.
		n := e.name()
		if strings.IndexByte(n, '.') != len(ns) || toolname.FoldedKey(n[:len(ns)]) != key {
			continue
		}
		if src := e.resolved.Registration.GetMetadata().GetSource(); src != source {
			return n, src, nil
		}
	}
	return "", "", nil
}

// Register validates and stores a new tool and returns it as stored
// (revision 1, or continuing a deleted predecessor's: store.Create) with
// its published projection.
func (s *Service) Register(ctx context.Context, reg *sharedosv1.ToolRegistration) (*sharedosv1.ToolRegistration, *sharedosv1.PublishedTool, error) {
	rec, pub, sch, err := s.prepare(reg)
	if err != nil {
		return nil, nil, err
	}
	stored, err := s.store.Create(ctx, rec)
	if err != nil {
		return nil, nil, fromStore(err, reg.GetName())
	}
	s.afterWrite(ctx, stored.Name(), hints{stored.Name(): sch})
	return stored.Registration, pub, nil
}

// RegisterBatch validates every registration, then stores them all in one
// transaction (all or nothing). It returns them as stored, in order: each
// at revision 1, or continuing a deleted predecessor's (store.Create).
func (s *Service) RegisterBatch(ctx context.Context, regs []*sharedosv1.ToolRegistration) ([]*sharedosv1.ToolRegistration, error) {
	if len(regs) == 0 {
		return nil, nil
	}
	recs := make([]store.Record, len(regs))
	seen := make(map[string]int, len(regs))
	folded := make(map[string]int, len(regs))
	h := make(hints, len(regs))
	prepared := prepareAll(s, regs)
	for i, reg := range regs {
		rec, sch, err := prepared[i].rec, prepared[i].sch, prepared[i].err
		if err != nil {
			var ve *ValidationError
			if errors.As(err, &ve) {
				ve.Field = fmt.Sprintf("registrations[%d].%s", i, ve.Field)
			}
			return nil, err
		}
		name := reg.GetName()
		if j, dup := seen[name]; dup {
			return nil, invalid(fmt.Sprintf("registrations[%d].name", i), RuleUniqueInBatch, "%q is also registrations[%d]", name, j)
		}
		seen[name] = i
		// The stores' own key (files.read, files_read and Files_Read are
		// one), checked here so the error names both registrations.
		if j, dup := folded[toolname.FoldedKey(name)]; dup {
			other := regs[j].GetName()
			if strings.EqualFold(name, other) {
				return nil, invalid(fmt.Sprintf("registrations[%d].name", i), RuleCaseInsensitive,
					"%q equals registrations[%d] %q, another tool in the same batch, case-insensitively", name, j, other)
			}
			return nil, invalid(fmt.Sprintf("registrations[%d].name", i), RuleCollisionKey,
				"%q has the same collision key as registrations[%d] %q, another tool in the same batch ('.' and '-' read as '_', letter case ignored)", name, j, other)
		}
		folded[toolname.FoldedKey(name)] = i
		recs[i], h[name] = rec, sch
	}
	stored, err := s.createBatch(ctx, recs, h)
	if err != nil {
		return nil, fromStore(err, "")
	}
	out := make([]*sharedosv1.ToolRegistration, len(stored))
	for i, r := range stored {
		out[i] = r.Registration
	}
	return out, nil
}

// Update replaces a registration. expectedRevision, when non-zero, must
// equal the stored revision.
func (s *Service) Update(ctx context.Context, reg *sharedosv1.ToolRegistration, expectedRevision int64) (*sharedosv1.ToolRegistration, *sharedosv1.PublishedTool, error) {
	if expectedRevision < 0 {
		return nil, nil, invalid("expected_revision", "non_negative", "must be 0 (unconditional) or a revision, got %d", expectedRevision)
	}
	rec, pub, sch, err := s.prepare(reg)
	if err != nil {
		return nil, nil, err
	}
	stored, err := s.store.Update(ctx, rec, expectedRevision)
	if err != nil {
		return nil, nil, fromStore(err, reg.GetName())
	}
	s.afterWrite(ctx, stored.Name(), hints{stored.Name(): sch})
	return stored.Registration, pub, nil
}

// Deregister removes a tool.
func (s *Service) Deregister(ctx context.Context, name string) error {
	if err := toolname.Validate(name); err != nil {
		// No invalid name can be registered, so it cannot be found either.
		return fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	if err := s.store.Delete(ctx, name); err != nil {
		return fromStore(err, name)
	}
	s.afterWrite(ctx, name, nil)
	return nil
}

// Get returns the stored registration (admin view) and its published
// projection, read from the store rather than the cache.
func (s *Service) Get(ctx context.Context, name string) (*sharedosv1.ToolRegistration, *sharedosv1.PublishedTool, error) {
	if toolname.Validate(name) != nil {
		return nil, nil, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	rec, err := s.store.Get(ctx, name)
	if err != nil {
		return nil, nil, fromStore(err, name)
	}
	return rec.Registration, publishedFrom(rec.Registration, rec.Canonical, rec.Digest), nil
}

// Page sizes for ListRegistrations.
const (
	DefaultPageSize = 100
	MaxPageSize     = 1000
)

// ListRegistrations pages through every registration by name. The page
// token is opaque to clients (the last name of the previous page).
func (s *Service) ListRegistrations(ctx context.Context, pageSize int, pageToken string) ([]*sharedosv1.ToolRegistration, string, error) {
	switch {
	case pageSize < 0:
		return nil, "", invalid("page_size", "non_negative", "got %d", pageSize)
	case pageSize == 0:
		pageSize = DefaultPageSize
	case pageSize > MaxPageSize:
		pageSize = MaxPageSize
	}
	after := ""
	if pageToken != "" {
		b, err := base64.RawURLEncoding.DecodeString(pageToken)
		if err != nil || toolname.Validate(string(b)) != nil {
			return nil, "", invalid("page_token", "page_token", "not a token returned by ListRegistrations")
		}
		after = string(b)
	}
	recs, err := s.store.List(ctx, after, pageSize+1)
	if err != nil {
		return nil, "", fromStore(err, "")
	}
	next := ""
	if len(recs) > pageSize {
		recs = recs[:pageSize]
		next = base64.RawURLEncoding.EncodeToString([]byte(recs[len(recs)-1].Name()))
	}
	out := make([]*sharedosv1.ToolRegistration, len(recs))
	for i, r := range recs {
		out[i] = r.Registration
	}
	return out, next, nil
}

// Listing is one context's effective catalogue.
type Listing struct {
	// Tools ascending by name; shared, read-only.
	Tools []*sharedosv1.PublishedTool
	// CatalogHash per spec/catalog-hash.md over exactly Tools.
	CatalogHash string
	// PolicyRevision decided which tools are listed ("" unfiltered).
	PolicyRevision string
}

// ListTools returns the managed tools actx may see, sorted by name, and
// their catalogHash (a harness-local or external-direct registration is
// never published). Visibility is decided by authz-svc in one FilterTools call
// for the whole catalogue; if that call fails, ListTools fails with
// ErrAuthzUnavailable and returns no tools. A context authz-svc would
// refuse (accesscontext.Check) is refused first, as the caller's: an
// *accesscontext.Error. A nil actx is the admin listing: every published
// tool.
func (s *Service) ListTools(ctx context.Context, actx *sharedosv1.AccessContext) (Listing, error) {
	if err := checkContext(actx); err != nil {
		return Listing{}, err
	}
	snap := s.snap.Load()
	if snap == nil {
		return Listing{}, ErrNotReady
	}
	if actx == nil {
		tools := make([]*sharedosv1.PublishedTool, len(snap.listed))
		for i, e := range snap.listed {
			tools[i] = e.resolved.Published
		}
		return Listing{Tools: tools, CatalogHash: snap.hashAll()}, nil
	}
	if len(snap.listed) == 0 {
		return Listing{Tools: []*sharedosv1.PublishedTool{}, CatalogHash: cataloghash.SumSorted(nil)}, nil
	}
	if s.filter == nil {
		return Listing{}, fmt.Errorf("%w: no filter configured", ErrAuthzUnavailable)
	}
	// One FilterTools call per page of the (name-ordered) catalogue: the
	// answers concatenate in name order. Any failed page fails the listing.
	allowed, rev, err := s.filterPages(ctx, actx, len(snap.facts),
		func(i int) int { return snap.factBytes[i] },
		func(start, end int) []*sharedosv1.ToolFacts { return snap.facts[start:end] })
	if err != nil {
		return Listing{}, err
	}
	visible := selectVisible(snap, allowed)
	tools := make([]*sharedosv1.PublishedTool, len(visible))
	hs := make([]cataloghash.Entry, len(visible))
	for i, e := range visible {
		tools[i] = e.resolved.Published
		hs[i] = e.hash
	}
	return Listing{Tools: tools, CatalogHash: cataloghash.SumSorted(hs), PolicyRevision: rev}, nil
}

// errRevisionsDiffer is a listing whose pages two policy revisions decided.
var errRevisionsDiffer = fmt.Errorf("%w: the policy changed while the catalogue was listed", ErrAuthzUnavailable)

// filterPages asks the filter which of n facts actx may list, a page at a
// time (filterPageEnd; size(i) is fact i's encoded size), and returns the
// allowed names in page order and the policy revision that decided them.
// Every page must be decided by one revision: a reload between pages, or
// replicas of authz-svc on two revisions during a rollout, would list a set
// no one policy gives (review). Pages that disagree are asked again once;
// then the listing fails closed.
func (s *Service) filterPages(ctx context.Context, actx *sharedosv1.AccessContext, n int, size func(int) int, facts func(start, end int) []*sharedosv1.ToolFacts) ([]string, string, error) {
	for attempt := 0; ; attempt++ {
		var allowed []string
		rev, agreed := "", true
		for start, end := 0, 0; start < n && agreed; start = end {
			end = filterPageEnd(start, n, s.page, size)
			resp, err := s.filter.FilterTools(ctx, &sharedosv1.FilterToolsRequest{
				Context: actx, Tools: facts(start, end), Action: requirement.ActionList,
			})
			if err != nil {
				return nil, "", filterError(err)
			}
			if start == 0 {
				rev = resp.GetPolicyRevision()
			}
			agreed = resp.GetPolicyRevision() == rev
			allowed = append(allowed, resp.GetAllowedTools()...)
		}
		switch {
		case agreed:
			return allowed, rev, nil
		case attempt > 0:
			return nil, "", errRevisionsDiffer
		}
	}
}

// selectVisible maps the allowed names back to cache entries, in name order.
// authz-svc answers in request order (which is name order), so one merge
// pass suffices; names the catalogue does not hold are ignored (authz can
// hide tools, never add them) and duplicates count once.
func selectVisible(snap *snapshot, allowed []string) []*entry {
	out := make([]*entry, 0, len(allowed))
	j := 0
	for _, name := range allowed {
		for j < len(snap.listed) && snap.listed[j].name() < name {
			j++
		}
		if j < len(snap.listed) && snap.listed[j].name() == name {
			out = append(out, snap.listed[j])
			j++
			continue
		}
		// Out of order or unknown: fall back to an index lookup and a
		// final sort-and-dedupe.
		return selectVisibleSlow(snap, allowed)
	}
	return out
}

func selectVisibleSlow(snap *snapshot, allowed []string) []*entry {
	idx := make([]bool, len(snap.listed))
	for _, name := range allowed {
		if i, ok := snap.listedByName[name]; ok {
			idx[i] = true
		}
	}
	out := make([]*entry, 0, len(allowed))
	for i, ok := range idx {
		if ok {
			out = append(out, snap.listed[i])
		}
	}
	return out
}

// Check validates reg as Register would and returns its published
// projection (with the digest a turn pins), storing nothing.
func (s *Service) Check(reg *sharedosv1.ToolRegistration) (*sharedosv1.PublishedTool, error) {
	_, pub, _, err := s.prepare(reg)
	return pub, err
}

// prepared is one registration of a batch after prepare.
type prepared struct {
	rec store.Record
	sch *lazySchema
	err error
}

// prepareAll prepares a batch's registrations on every core (validation and
// schema compilation are CPU-bound and independent); the caller reads the
// results in order, so the error reported is the one a sequential pass
// would report first.
//
// A batch does not hand its compiled input schemas to the cache: each
// compiles on its tool's first Resolve, as after a reload. Most of a large
// batch's tools are not called soon, and holding a validator for each kept
// ≈ 5 KB per tool live (10k tools: 145 → 91 MB of heap after the batch),
// which at catalog-svc's GOGC grew the heap the batch ran in and paid for
// it in page faults: RegisterBatch of 10k took ≈ 15 % longer (issue 20, P5).
func prepareAll(s *Service, regs []*sharedosv1.ToolRegistration) []prepared {
	out := make([]prepared, len(regs))
	workers := min(runtime.GOMAXPROCS(0), len(regs))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < len(regs); i = int(next.Add(1) - 1) {
				rec, _, sch, err := s.prepare(regs[i])
				out[i] = prepared{rec: rec, sch: sch.uncompiled(), err: err}
			}
		}()
	}
	wg.Wait()
	return out
}

// prepare validates reg and computes its published projection. It also
// returns the input schema for the cache, compiled.
func (s *Service) prepare(reg *sharedosv1.ToolRegistration) (store.Record, *sharedosv1.PublishedTool, *lazySchema, error) {
	input, err := validate(reg)
	if err != nil {
		return store.Record{}, nil, nil, err
	}
	clean := normalize(reg)
	pub, digest, err := publish(clean)
	if err != nil {
		return store.Record{}, nil, nil, err
	}
	// Whatever the bridge cannot serve is refused here, where it enters,
	// not at every OpenTurn of a context that can see it.
	if err := mcptool.Check(pub); err != nil {
		var me *mcptool.Error
		if errors.As(err, &me) {
			return store.Record{}, nil, nil, invalid(me.Field, RuleMCPServable, "%s", me.Detail)
		}
		return store.Record{}, nil, nil, invalid("registration", RuleMCPServable, "%v", err)
	}
	// Store what is published: a value the projection omits is stored absent.
	clean.OutputSchemaJson, clean.AnnotationsJson = pub.GetOutputSchemaJson(), pub.GetAnnotationsJson()
	rec := store.Record{Registration: clean, Canonical: pub.GetCanonicalJson(), Digest: digest}
	return rec, pub, newLazySchema("inputSchema", clean.GetInputSchemaJson(), dialectOf(clean), input.compiled), nil
}

// fromStore translates store errors into catalog errors; name is the tool
// the request was about.
func fromStore(err error, name string) error {
	var ce *store.ConflictError
	switch {
	case errors.As(err, &ce):
		rule := RuleCollisionKey
		if ce.Rule == store.RuleCaseInsensitive {
			rule = RuleCaseInsensitive
		}
		return &ValidationError{Field: "name", Rule: rule, Detail: ce.Error()}
	case errors.Is(err, store.ErrAlreadyExists):
		return fmt.Errorf("%w: %s", ErrAlreadyExists, detail(err, store.ErrAlreadyExists))
	case errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("%w: %q", ErrNotFound, name)
	case errors.Is(err, store.ErrRevisionMismatch):
		return fmt.Errorf("%w: %s", ErrRevisionMismatch, detail(err, store.ErrRevisionMismatch))
	case errors.Is(err, store.ErrInvalid):
		return &ValidationError{Field: "registration", Rule: RuleJSON, Detail: detail(err, store.ErrInvalid)}
	default:
		return err
	}
}

// detail is err's message after the sentinel's own text, so store wording
// does not appear twice in a status message.
func detail(err, sentinel error) string {
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, sentinel.Error()+": "); ok {
		return rest
	}
	return msg
}

// normalize returns a copy of reg in the one shape every store returns:
// store-owned fields cleared, and empty sub-messages absent.
func normalize(reg *sharedosv1.ToolRegistration) *sharedosv1.ToolRegistration {
	c := proto.Clone(reg).(*sharedosv1.ToolRegistration)
	c.Revision, c.CreatedAt, c.UpdatedAt = 0, nil, nil
	if m := c.GetMetadata(); m.GetNamespace() == "" && m.GetSource() == "" {
		c.Metadata = nil
	}
	if r := c.GetRequirement(); r.GetAction() == "" && r.GetResource() == "" && r.GetPathCleaning() == 0 {
		c.Requirement = nil
	}
	if h := c.GetHandler(); h.GetTarget() == "" && h.GetTimeout() == nil {
		c.Handler = nil
	}
	return c
}
