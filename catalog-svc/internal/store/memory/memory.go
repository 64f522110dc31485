package memory

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/toolname"

	"github.com/sharedos/toolshare/catalog-svc/internal/store"
)

// Store is the in-memory store. The zero value is not usable; use New.
type Store struct {
	mu     sync.Mutex
	byName map[string]store.Record
	byKey  map[string]string // toolname.FoldedKey → name
	feeds  map[*store.Feed]struct{}
	now    func() time.Time
	// entries are the prompt and resource registrations (entries.go).
	entries map[entryKey]store.Entry
	// tombstones keeps a deleted name's last revision, so that a tool
	// registered again under it continues from there: a name's revisions
	// never repeat (store.Store).
	tombstones map[string]int64
}

var _ store.Store = (*Store)(nil)

// New returns an empty store.
func New() *Store {
	return &Store{
		byName: map[string]store.Record{},
		byKey:  map[string]string{},
		feeds:  map[*store.Feed]struct{}{},
		now:    time.Now,

		entries:    map[entryKey]store.Entry{},
		tombstones: map[string]int64{},
	}
}

// conflict checks name against the uniqueness rules; mu must be held.
func (s *Store) conflict(name string) error {
	if _, ok := s.byName[name]; ok {
		return fmt.Errorf("%w: %q", store.ErrAlreadyExists, name)
	}
	if other, ok := s.byKey[toolname.FoldedKey(name)]; ok {
		return &store.ConflictError{Name: name, Existing: other, Rule: store.ConflictRule(name, other)}
	}
	return nil
}

// insert stores rec as a new registration, at revision 1 or, for a name
// deleted before, its predecessor's last revision + 1; mu must be held.
func (s *Store) insert(rec store.Record, now time.Time) store.Record {
	stored := clone(rec)
	reg := stored.Registration
	name := reg.GetName()
	reg.Revision = s.tombstones[name] + 1
	delete(s.tombstones, name)
	reg.CreatedAt = timestamppb.New(now)
	reg.UpdatedAt = reg.CreatedAt
	s.byName[name] = stored
	s.byKey[toolname.FoldedKey(name)] = name
	return clone(stored)
}

// Create implements store.Store.
func (s *Store) Create(ctx context.Context, rec store.Record) (store.Record, error) {
	if err := ctx.Err(); err != nil {
		return store.Record{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.conflict(rec.Name()); err != nil {
		return store.Record{}, err
	}
	out := s.insert(rec, s.now())
	s.notify(rec.Name())
	return out, nil
}

// CreateBatch implements store.Store: all or nothing.
func (s *Store) CreateBatch(ctx context.Context, recs []store.Record) ([]store.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// Check against the stored tools and within the batch before touching
	// anything, so a failure leaves the store unchanged.
	names := make(map[string]bool, len(recs))
	keys := make(map[string]string, len(recs))
	for _, r := range recs {
		n := r.Name()
		if err := s.conflict(n); err != nil {
			return nil, err
		}
		if names[n] {
			return nil, fmt.Errorf("%w: %q", store.ErrAlreadyExists, n)
		}
		if other, ok := keys[toolname.FoldedKey(n)]; ok {
			return nil, &store.ConflictError{Name: n, Existing: other, Rule: store.ConflictRule(n, other)}
		}
		names[n], keys[toolname.FoldedKey(n)] = true, n
	}
	now := s.now()
	out := make([]store.Record, len(recs))
	for i, r := range recs {
		out[i] = s.insert(r, now)
	}
	if len(recs) > 0 {
		s.notify(store.AllChanged)
	}
	return out, nil
}

// Update implements store.Store.
func (s *Store) Update(ctx context.Context, rec store.Record, expectedRevision int64) (store.Record, error) {
	if err := ctx.Err(); err != nil {
		return store.Record{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	name := rec.Name()
	old, ok := s.byName[name]
	if !ok {
		return store.Record{}, fmt.Errorf("%w: %q", store.ErrNotFound, name)
	}
	if rev := old.Registration.GetRevision(); expectedRevision != 0 && rev != expectedRevision {
		return store.Record{}, fmt.Errorf("%w: %q is at revision %d, not %d", store.ErrRevisionMismatch, name, rev, expectedRevision)
	}
	stored := clone(rec)
	reg := stored.Registration
	reg.Revision = old.Registration.GetRevision() + 1
	reg.CreatedAt = old.Registration.GetCreatedAt()
	reg.UpdatedAt = timestamppb.New(s.now())
	s.byName[name] = stored
	s.notify(name)
	return clone(stored), nil
}

// Delete implements store.Store.
func (s *Store) Delete(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.byName[name]
	if !ok {
		return fmt.Errorf("%w: %q", store.ErrNotFound, name)
	}
	s.tombstones[name] = old.Registration.GetRevision()
	delete(s.byName, name)
	delete(s.byKey, toolname.FoldedKey(name))
	s.notify(name)
	return nil
}

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, name string) (store.Record, error) {
	if err := ctx.Err(); err != nil {
		return store.Record{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.byName[name]
	if !ok {
		return store.Record{}, fmt.Errorf("%w: %q", store.ErrNotFound, name)
	}
	return clone(rec), nil
}

// List implements store.Store.
func (s *Store) List(ctx context.Context, after string, limit int) ([]store.Record, error) {
	all, err := s.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	i, _ := slices.BinarySearchFunc(all, after, func(r store.Record, n string) int { return strings.Compare(r.Name(), n) })
	if i < len(all) && all[i].Name() == after {
		i++
	}
	all = all[i:]
	if limit >= 0 && len(all) > limit {
		all = all[:limit]
	}
	return all, nil
}

// Snapshot implements store.Store.
func (s *Store) Snapshot(ctx context.Context) ([]store.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	out := make([]store.Record, 0, len(s.byName))
	for _, r := range s.byName {
		out = append(out, clone(r))
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b store.Record) int { return strings.Compare(a.Name(), b.Name()) })
	return out, nil
}

// Watch implements store.Store: the feed receives every change made through
// this Store value until ctx ends.
func (s *Store) Watch(ctx context.Context) (*store.Feed, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f := store.NewFeed()
	s.mu.Lock()
	s.feeds[f] = struct{}{}
	s.mu.Unlock()
	context.AfterFunc(ctx, func() {
		s.mu.Lock()
		delete(s.feeds, f)
		s.mu.Unlock()
	})
	return f, nil
}

// notify tells every subscriber; mu must be held (so notifications follow
// commit order). Feed.Push never blocks.
func (s *Store) notify(name string) {
	for f := range s.feeds {
		f.Push(name)
	}
}

func clone(r store.Record) store.Record {
	return store.Record{
		Registration: proto.Clone(r.Registration).(*sharedosv1.ToolRegistration),
		Canonical:    slices.Clone(r.Canonical),
		Digest:       r.Digest,
	}
}
