package memory

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/sharedos/toolshare/catalog-svc/internal/store"
)

var _ store.Entries = (*Store)(nil)

type entryKey struct {
	kind store.Kind
	key  string
}

// PutEntry implements store.Entries.
func (s *Store) PutEntry(ctx context.Context, kind store.Kind, e store.Entry) (store.Entry, error) {
	if err := ctx.Err(); err != nil {
		return store.Entry{}, err
	}
	if n := utf8.RuneCountInString(e.Key); n == 0 || n > store.MaxKeyLen(kind) {
		return store.Entry{}, fmt.Errorf("%w: a %s key of %d characters (1–%d)", store.ErrInvalid, kind, n, store.MaxKeyLen(kind))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := entryKey{kind, e.Key}
	e = cloneEntry(e)
	e.Revision = s.entries[k].Revision + 1
	e.UpdatedAt = s.now()
	s.entries[k] = e
	return cloneEntry(e), nil
}

// DeleteEntry implements store.Entries.
func (s *Store) DeleteEntry(ctx context.Context, kind store.Kind, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := entryKey{kind, key}
	if _, ok := s.entries[k]; !ok {
		return store.ErrNotFound
	}
	delete(s.entries, k)
	return nil
}

// Entries implements store.Entries.
func (s *Store) Entries(ctx context.Context, kind store.Kind) ([]store.Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []store.Entry
	for k, e := range s.entries {
		if k.kind == kind {
			out = append(out, cloneEntry(e))
		}
	}
	slices.SortFunc(out, func(a, b store.Entry) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// EntryKeys implements store.Entries.
func (s *Store) EntryKeys(ctx context.Context, kind store.Kind) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for k := range s.entries {
		if k.kind == kind {
			out = append(out, k.key)
		}
	}
	slices.Sort(out)
	return out, nil
}

func cloneEntry(e store.Entry) store.Entry {
	e.Registration = slices.Clone(e.Registration)
	e.Canonical = slices.Clone(e.Canonical)
	return e
}

// GetEntry implements store.Entries.
func (s *Store) GetEntry(ctx context.Context, kind store.Kind, key string) (store.Entry, error) {
	if err := ctx.Err(); err != nil {
		return store.Entry{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[entryKey{kind, key}]
	if !ok {
		return store.Entry{}, store.ErrNotFound
	}
	return cloneEntry(e), nil
}

// EntriesMatching implements store.Entries.
func (s *Store) EntriesMatching(ctx context.Context, kind store.Kind, scope, matchKey string) ([]store.Entry, error) {
	all, err := s.Entries(ctx, kind)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(all, func(e store.Entry) bool {
		return e.MatchKey != matchKey && strings.HasPrefix(e.MatchKey, scope)
	}), nil
}

// SetMatchKey implements store.Entries.
func (s *Store) SetMatchKey(ctx context.Context, kind store.Kind, key, matchKey string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := entryKey{kind, key}
	e, ok := s.entries[k]
	if !ok {
		return store.ErrNotFound
	}
	e.MatchKey = matchKey
	s.entries[k] = e
	return nil
}
