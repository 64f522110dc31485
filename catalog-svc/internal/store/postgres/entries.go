package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sharedos/toolshare/catalog-svc/internal/store"
)

var _ store.Entries = (*Store)(nil)

// entryTables are the tables of each kind (never input: a fixed map).
var entryTables = map[store.Kind]string{
	store.KindPrompt: "catalog.prompts", store.KindResource: "catalog.resources", store.KindUpstream: "catalog.upstreams",
}

func entryTable(kind store.Kind) (string, error) {
	t, ok := entryTables[kind]
	if !ok {
		return "", fmt.Errorf("postgres: unknown registration kind %q", kind)
	}
	return t, nil
}

// PutEntry implements store.Entries.
func (s *Store) PutEntry(ctx context.Context, kind store.Kind, e store.Entry) (store.Entry, error) {
	t, err := entryTable(kind)
	if err != nil {
		return store.Entry{}, err
	}
	out := store.Entry{Key: e.Key, Registration: e.Registration, Canonical: e.Canonical, Digest: e.Digest, MatchKey: e.MatchKey}
	err = s.pool.QueryRow(ctx, `
INSERT INTO `+t+` AS e (key, registration, canonical, digest, match_key) VALUES ($1, $2, $3, $4, NULLIF($5, ''))
ON CONFLICT (key) DO UPDATE SET registration = EXCLUDED.registration, canonical = EXCLUDED.canonical,
       digest = EXCLUDED.digest, match_key = EXCLUDED.match_key, revision = e.revision + 1, updated_at = now()
RETURNING revision, updated_at`, e.Key, e.Registration, e.Canonical, e.Digest, e.MatchKey).Scan(&out.Revision, &out.UpdatedAt)
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && refusedValue(pgErr):
		return store.Entry{}, fmt.Errorf("%w: PostgreSQL refused a value of %s %q (SQLSTATE %s)", store.ErrInvalid, kind, e.Key, pgErr.Code)
	case err != nil:
		return store.Entry{}, fmt.Errorf("postgres: put %s: %w", kind, err)
	}
	return out, nil
}

// DeleteEntry implements store.Entries.
func (s *Store) DeleteEntry(ctx context.Context, kind store.Kind, key string) error {
	t, err := entryTable(kind)
	if err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM `+t+` WHERE key = $1`, key)
	if err != nil {
		return fmt.Errorf("postgres: delete %s: %w", kind, err)
	}
	if tag.RowsAffected() == 0 {
		return store.ErrNotFound
	}
	return nil
}

// Entries implements store.Entries.
func (s *Store) Entries(ctx context.Context, kind store.Kind) ([]store.Entry, error) {
	t, err := entryTable(kind)
	if err != nil {
		return nil, err
	}
	return s.listEntries(ctx, kind, `SELECT `+entryColumns+` FROM `+t+` ORDER BY key`)
}

// EntryKeys implements store.Entries.
func (s *Store) EntryKeys(ctx context.Context, kind store.Kind) ([]string, error) {
	t, err := entryTable(kind)
	if err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT key FROM `+t+` ORDER BY key`)
	if err != nil {
		return nil, fmt.Errorf("postgres: list %s keys: %w", kind, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("postgres: list %s keys: %w", kind, err)
	}
	return out, nil
}

// entryColumns are an entry's columns, as listEntries scans them.
const entryColumns = `key, registration, canonical, digest, coalesce(match_key, ''), revision, updated_at`

func (s *Store) listEntries(ctx context.Context, kind store.Kind, sql string, args ...any) ([]store.Entry, error) {
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("postgres: list %s: %w", kind, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Entry, error) {
		var e store.Entry
		err := r.Scan(&e.Key, &e.Registration, &e.Canonical, &e.Digest, &e.MatchKey, &e.Revision, &e.UpdatedAt)
		return e, err
	})
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("postgres: list %s: %w", kind, err)
	}
	return out, nil
}

// EntriesMatching implements store.Entries.
func (s *Store) EntriesMatching(ctx context.Context, kind store.Kind, scope, matchKey string) ([]store.Entry, error) {
	t, err := entryTable(kind)
	if err != nil {
		return nil, err
	}
	if scope == "" || scope[len(scope)-1] >= 0x7f {
		return nil, fmt.Errorf("postgres: match key scope %q is not non-empty ASCII", scope)
	}
	// Outside scope: below it, or at or past the first string after every
	// one that begins with it (byte order: COLLATE "C"), each an index range.
	end := scope[:len(scope)-1] + string(scope[len(scope)-1]+1)
	return s.listEntries(ctx, kind, `SELECT `+entryColumns+` FROM `+t+`
WHERE match_key = $1 OR match_key IS NULL OR match_key < $2 OR match_key >= $3 ORDER BY key`, matchKey, scope, end)
}

// SetMatchKey implements store.Entries.
func (s *Store) SetMatchKey(ctx context.Context, kind store.Kind, key, matchKey string) error {
	t, err := entryTable(kind)
	if err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, `UPDATE `+t+` SET match_key = NULLIF($2, '') WHERE key = $1`, key, matchKey)
	if err != nil {
		return fmt.Errorf("postgres: set match key %s: %w", kind, err)
	}
	if tag.RowsAffected() == 0 {
		return store.ErrNotFound
	}
	return nil
}

// GetEntry implements store.Entries.
func (s *Store) GetEntry(ctx context.Context, kind store.Kind, key string) (store.Entry, error) {
	t, err := entryTable(kind)
	if err != nil {
		return store.Entry{}, err
	}
	e := store.Entry{Key: key}
	err = s.pool.QueryRow(ctx, `SELECT registration, canonical, digest, coalesce(match_key, ''), revision, updated_at FROM `+t+` WHERE key = $1`, key).
		Scan(&e.Registration, &e.Canonical, &e.Digest, &e.MatchKey, &e.Revision, &e.UpdatedAt)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return store.Entry{}, store.ErrNotFound
	case err != nil:
		return store.Entry{}, fmt.Errorf("postgres: get %s: %w", kind, err)
	}
	return e, nil
}
