package memory

import (
	"context"
	"crypto/sha256"
	"slices"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/sharedos/toolshare/bridge-svc/internal/leases"
	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
)

// Store keeps leases in a map guarded by a RWMutex. Leases are copied in and
// out so callers can never mutate what the store holds.
type Store struct {
	now func() time.Time

	mu     sync.RWMutex
	leases map[string]*leases.Lease
	// byToken indexes leases by token hash: a request's token is looked up
	// in constant time, never by a scan (issue 17, item 12).
	byToken map[[sha256.Size]byte]string
	// terminated holds each lease's ended sessions.
	terminated map[string][]string
}

var _ leases.Store = (*Store)(nil)

// Option configures a Store.
type Option func(*Store)

// WithClock replaces time.Now (tests of expiry).
func WithClock(now func() time.Time) Option { return func(s *Store) { s.now = now } }

// New returns an empty store.
func New(opts ...Option) *Store {
	s := &Store{now: time.Now, leases: make(map[string]*leases.Lease), byToken: make(map[[sha256.Size]byte]string)}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Create implements leases.Store.
func (s *Store) Create(_ context.Context, l *leases.Lease) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.leases[l.TurnID]; ok {
		return leases.ErrExists
	}
	s.leases[l.TurnID] = clone(l)
	s.byToken[l.TokenHash] = l.TurnID
	return nil
}

// Get implements leases.Store.
func (s *Store) Get(_ context.Context, turnID string) (*leases.Lease, leases.Status, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	l, ok := s.leases[turnID]
	if !ok {
		return nil, leases.Status{}, leases.ErrNotFound
	}
	return clone(l), s.status(l), nil
}

// Status implements leases.Store.
func (s *Store) Status(_ context.Context, turnID string) (leases.Status, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	l, ok := s.leases[turnID]
	if !ok {
		return leases.Status{}, leases.ErrNotFound
	}
	return s.status(l), nil
}

func (s *Store) status(l *leases.Lease) leases.Status {
	now := s.now()
	return leases.Status{
		TokenHash: l.TokenHash,
		ExpiresAt: l.ExpiresAt,
		ClosedAt:  l.ClosedAt,
		Expired:   !now.Before(l.ExpiresAt),
		StoreNow:  now,

		TerminatedSessions: slices.Clone(s.terminated[l.TurnID]),
	}
}

// TerminateSession implements leases.Store.
func (s *Store) TerminateSession(_ context.Context, turnID, session string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.leases[turnID]; !ok {
		return leases.ErrNotFound
	}
	ended := s.terminated[turnID]
	switch {
	case slices.Contains(ended, session):
		return nil
	case len(ended) >= leases.MaxTerminatedSessions:
		return leases.ErrTooManySessions
	}
	if s.terminated == nil {
		s.terminated = map[string][]string{}
	}
	s.terminated[turnID] = append(ended, session)
	return nil
}

// Close implements leases.Store.
func (s *Store) Close(_ context.Context, turnID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.leases[turnID]
	if !ok {
		return leases.ErrNotFound
	}
	if l.ClosedAt.IsZero() {
		l.ClosedAt = s.now().UTC()
	}
	return nil
}

// TurnByToken implements leases.Store.
func (s *Store) TurnByToken(_ context.Context, hash [sha256.Size]byte) (string, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if id, ok := s.byToken[hash]; ok {
		return id, nil
	}
	return "", leases.ErrNotFound
}

// Inactive implements leases.Store.
func (s *Store) Inactive(_ context.Context, turnIDs []string) ([]string, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []string
	for _, id := range turnIDs {
		l, ok := s.leases[id]
		if !ok || !s.status(l).Open() {
			out = append(out, id)
		}
	}
	return out, nil
}

// PurgeInactive implements leases.Store.
func (s *Store) PurgeInactive(_ context.Context, before time.Time) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for id, l := range s.leases {
		closed := !l.ClosedAt.IsZero() && l.ClosedAt.Before(before)
		expired := s.status(l).Expired && l.ExpiresAt.Before(before)
		if closed || expired {
			delete(s.leases, id)
			delete(s.byToken, l.TokenHash)
			delete(s.terminated, id)
			n++
		}
	}
	return n, nil
}

func clone(l *leases.Lease) *leases.Lease {
	c := *l
	c.Context = proto.Clone(l.Context).(*sharedosv1.AccessContext)
	c.Policy = proto.Clone(l.Policy).(*sharedosv1.ToolPolicy)
	c.Harness = proto.Clone(l.Harness).(*sharedosv1.HarnessIdentity)
	c.Tools = make([]*sharedosv1.PublishedTool, len(l.Tools))
	for i, t := range l.Tools {
		c.Tools[i] = proto.Clone(t).(*sharedosv1.PublishedTool)
	}
	c.Prompts = make([]*sharedosv1.PublishedPrompt, len(l.Prompts))
	for i, p := range l.Prompts {
		c.Prompts[i] = proto.Clone(p).(*sharedosv1.PublishedPrompt)
	}
	c.Resources = make([]*sharedosv1.PublishedResource, len(l.Resources))
	for i, r := range l.Resources {
		c.Resources[i] = proto.Clone(r).(*sharedosv1.PublishedResource)
	}
	return &c
}
