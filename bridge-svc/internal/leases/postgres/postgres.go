package postgres

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/sharedos/toolshare/bridge-svc/internal/leases"
	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/platform/memo"
	"github.com/sharedos/toolshare/services/platform/pgdb"
)

// Store is a leases.Store over a pgx pool.
type Store struct {
	pool *pgxpool.Pool
	// stored: digests of catalogues this Store wrote lately.
	stored *memo.Bounded[[sha256.Size]byte, struct{}]
}

var (
	_ leases.Store  = (*Store)(nil)
	_ leases.Pinger = (*Store)(nil)
)

// New returns a Store on pool; the schema must already be migrated.
func New(pool *pgxpool.Pool) *Store {
	return &Store{pool: pool, stored: memo.New[[sha256.Size]byte, struct{}](maxKnownCatalogues)}
}

// Ping implements leases.Pinger.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("leases/postgres: ping: %w", err)
	}
	return nil
}

const (
	uniqueViolation     = "23505"
	foreignKeyViolation = "23503"
)

// Create implements leases.Store.
func (s *Store) Create(ctx context.Context, l *leases.Lease) error {
	ctxJSON, err := protojson.Marshal(orEmpty(l.Context, &sharedosv1.AccessContext{}))
	if err != nil {
		return fmt.Errorf("leases/postgres: encode context: %w", err)
	}
	policyJSON, err := protojson.Marshal(orEmpty(l.Policy, &sharedosv1.ToolPolicy{}))
	if err != nil {
		return fmt.Errorf("leases/postgres: encode policy: %w", err)
	}
	harnessJSON, err := protojson.Marshal(orEmpty(l.Harness, &sharedosv1.HarnessIdentity{}))
	if err != nil {
		return fmt.Errorf("leases/postgres: encode harness: %w", err)
	}
	catalogue, err := proto.MarshalOptions{Deterministic: true}.Marshal(&sharedosv1.LeaseCatalogue{Tools: l.Tools,
		CatalogHash: l.CatalogHash, Prompts: l.Prompts, Resources: l.Resources, PromptsResourcesHash: l.PromptsResourcesHash})
	if err != nil {
		return fmt.Errorf("leases/postgres: encode catalogue: %w", err)
	}
	sum := sha256.Sum256(catalogue)
	args := []any{l.TurnID, l.TokenHash[:], ctxJSON, policyJSON, harnessJSON, l.DeclaredModel,
		l.CatalogHash, sum[:], l.PortableNames, l.Grant, l.OpenedAt, l.ExpiresAt}
	// The catalogue is stored once per content (migration 00008) and a
	// lease names it by digest. A catalogue this store wrote lately is
	// named without being sent again. The foreign key catches a catalogue
	// a purge deleted meanwhile — after it was remembered here, or between
	// this statement's conflict check and its key check — and the next
	// attempt stores it again.
	_, known := s.stored.Get(sum)
	for attempt := 0; ; attempt++ {
		q, a := insertLease, args
		if !known {
			q, a = insertLeaseAndCatalogue, append(args[:len(args):len(args)], catalogue)
		}
		_, err = s.pool.Exec(ctx, q, a...)
		var pgErr *pgconn.PgError
		switch {
		case err == nil:
			s.stored.Put(sum, struct{}{})
			return nil
		case errors.As(err, &pgErr) && pgErr.Code == uniqueViolation:
			return leases.ErrExists
		case errors.As(err, &pgErr) && pgErr.Code == foreignKeyViolation && attempt < 2:
			known = false
		default:
			return fmt.Errorf("leases/postgres: insert lease: %w", err)
		}
	}
}

const (
	insertLease = `
		INSERT INTO bridge.leases (turn_id, token_sha256, context, policy, harness, declared_model,
			catalog_hash, catalogue_sha256, portable_names, grant_token, opened_at, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`
	insertLeaseAndCatalogue = `
		WITH stored AS (
			INSERT INTO bridge.catalogues (sha256, catalogue) VALUES ($8, $13)
			ON CONFLICT (sha256) DO NOTHING)` + insertLease
)

// maxKnownCatalogues bounds the digests a Store remembers writing; when
// full it starts over.
const maxKnownCatalogues = 1024

func orEmpty[M proto.Message](m M, empty M) M {
	if proto.Message(m) == nil || !m.ProtoReflect().IsValid() {
		return empty
	}
	return m
}

// Get implements leases.Store.
func (s *Store) Get(ctx context.Context, turnID string) (*leases.Lease, leases.Status, error) {
	var (
		l                          leases.Lease
		st                         leases.Status
		hash                       []byte
		ctxJSON, policyJSON, hJSON []byte
		catalogue                  []byte
		closedAt                   *time.Time
	)
	err := s.pool.QueryRow(ctx, `
		SELECT turn_id, token_sha256, context, policy, harness, declared_model, catalog_hash,
			coalesce(l.catalogue, c.catalogue), portable_names, grant_token, opened_at, expires_at, closed_at,
			expires_at <= now(), now()
		FROM bridge.leases l LEFT JOIN bridge.catalogues c ON c.sha256 = l.catalogue_sha256
		WHERE turn_id = $1`, turnID).Scan(
		&l.TurnID, &hash, &ctxJSON, &policyJSON, &hJSON, &l.DeclaredModel, &l.CatalogHash,
		&catalogue, &l.PortableNames, &l.Grant, &l.OpenedAt, &l.ExpiresAt, &closedAt, &st.Expired, &st.StoreNow)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, leases.Status{}, leases.ErrNotFound
	}
	if err != nil {
		return nil, leases.Status{}, fmt.Errorf("leases/postgres: select lease: %w", err)
	}
	copy(l.TokenHash[:], hash)
	l.Context, l.Policy, l.Harness = &sharedosv1.AccessContext{}, &sharedosv1.ToolPolicy{}, &sharedosv1.HarnessIdentity{}
	for _, d := range []struct {
		b []byte
		m proto.Message
	}{{ctxJSON, l.Context}, {policyJSON, l.Policy}, {hJSON, l.Harness}} {
		if err := protojson.Unmarshal(d.b, d.m); err != nil {
			return nil, leases.Status{}, fmt.Errorf("leases/postgres: decode lease %s: %w", turnID, err)
		}
	}
	var cat sharedosv1.LeaseCatalogue
	if err := proto.Unmarshal(catalogue, &cat); err != nil {
		return nil, leases.Status{}, fmt.Errorf("leases/postgres: decode catalogue of %s: %w", turnID, err)
	}
	l.Tools, l.Prompts, l.Resources, l.PromptsResourcesHash = cat.GetTools(), cat.GetPrompts(), cat.GetResources(), cat.GetPromptsResourcesHash()
	if closedAt != nil {
		l.ClosedAt = *closedAt
	}
	l.OpenedAt, l.ExpiresAt, l.ClosedAt = utc(l.OpenedAt), utc(l.ExpiresAt), utc(l.ClosedAt)
	st.TokenHash, st.ExpiresAt, st.ClosedAt = l.TokenHash, l.ExpiresAt, l.ClosedAt
	return &l, st, nil
}

func utc(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC()
}

// Status implements leases.Store: a primary-key read of three columns, done
// on every MCP request (see ADR 0005).
func (s *Store) Status(ctx context.Context, turnID string) (leases.Status, error) {
	var (
		st       leases.Status
		hash     []byte
		closedAt *time.Time
	)
	err := s.pool.QueryRow(ctx, `
		SELECT token_sha256, expires_at, closed_at, expires_at <= now(), now(), terminated_sessions
		FROM bridge.leases WHERE turn_id = $1`, turnID).Scan(&hash, &st.ExpiresAt, &closedAt, &st.Expired, &st.StoreNow, &st.TerminatedSessions)
	if errors.Is(err, pgx.ErrNoRows) {
		return leases.Status{}, leases.ErrNotFound
	}
	if err != nil {
		return leases.Status{}, fmt.Errorf("leases/postgres: select status: %w", err)
	}
	copy(st.TokenHash[:], hash)
	st.ExpiresAt = utc(st.ExpiresAt)
	if closedAt != nil {
		st.ClosedAt = utc(*closedAt)
	}
	return st, nil
}

// TerminateSession implements leases.Store: one statement appends the
// session unless it is there already or the bound is reached.
func (s *Store) TerminateSession(ctx context.Context, turnID, session string) error {
	var state string
	err := s.pool.QueryRow(ctx, `
		WITH l AS (SELECT terminated_sessions FROM bridge.leases WHERE turn_id = $1 FOR UPDATE),
		     u AS (UPDATE bridge.leases SET terminated_sessions = array_append(terminated_sessions, $2)
		            WHERE turn_id = $1 AND NOT ($2 = ANY(terminated_sessions)) AND cardinality(terminated_sessions) < $3
		            RETURNING 1)
		SELECT CASE WHEN NOT EXISTS (SELECT 1 FROM l) THEN 'unknown'
		            WHEN EXISTS (SELECT 1 FROM u) OR (SELECT $2 = ANY(terminated_sessions) FROM l) THEN 'ok'
		            ELSE 'full' END`, turnID, session, leases.MaxTerminatedSessions).Scan(&state)
	switch {
	case err != nil:
		return fmt.Errorf("leases/postgres: terminate session: %w", err)
	case state == "unknown":
		return leases.ErrNotFound
	case state == "full":
		return leases.ErrTooManySessions
	}
	return nil
}

// Close implements leases.Store.
func (s *Store) Close(ctx context.Context, turnID string) error {
	tag, err := s.pool.Exec(ctx, `
		UPDATE bridge.leases SET closed_at = COALESCE(closed_at, now()) WHERE turn_id = $1`, turnID)
	if err != nil {
		return fmt.Errorf("leases/postgres: close lease: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return leases.ErrNotFound
	}
	return nil
}

// TurnByToken implements leases.Store.
func (s *Store) TurnByToken(ctx context.Context, hash [sha256.Size]byte) (string, error) {
	var id string
	err := s.pool.QueryRow(ctx, `SELECT turn_id FROM bridge.leases WHERE token_sha256 = $1`, hash[:]).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", leases.ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("leases/postgres: select by token: %w", err)
	}
	return id, nil
}

// Inactive implements leases.Store.
func (s *Store) Inactive(ctx context.Context, turnIDs []string) ([]string, error) {
	if len(turnIDs) == 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `
		SELECT id FROM unnest($1::text[]) AS id
		WHERE NOT EXISTS (
			SELECT 1 FROM bridge.leases l
			WHERE l.turn_id = id AND l.closed_at IS NULL AND l.expires_at > now())`, turnIDs)
	if err != nil {
		return nil, fmt.Errorf("leases/postgres: select inactive: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("leases/postgres: select inactive: %w", err)
	}
	return out, nil
}

// PurgeInactive implements leases.Store. Expiry is expires_at <= now(), as
// Status decides it; leases_expires_at_idx and leases_closed_at_idx find the
// rows without a scan.
func (s *Store) PurgeInactive(ctx context.Context, before time.Time) (int64, error) {
	// In batches: each statement stays far below the statement timeout
	// however large the backlog.
	var total int64
	for {
		tag, err := s.pool.Exec(ctx, `
		DELETE FROM bridge.leases WHERE turn_id IN (
			SELECT turn_id FROM bridge.leases
			 WHERE closed_at < $1 OR (expires_at < $1 AND expires_at <= now())
			 LIMIT $2)`, before, purgeBatch)
		if err != nil {
			return total, fmt.Errorf("leases/postgres: purge leases: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < purgeBatch {
			break
		}
	}
	return total, s.purgeCatalogues(ctx)
}

// purgeCatalogues deletes the catalogues no lease names. A catalogue an
// OpenTurn is naming right now is locked by its foreign-key check and
// skipped; one named by a lease that committed after this statement began
// fails the statement's own key check, and the next purge takes the rest.
func (s *Store) purgeCatalogues(ctx context.Context) error {
	for {
		tag, err := s.pool.Exec(ctx, `
		DELETE FROM bridge.catalogues WHERE sha256 IN (
			SELECT c.sha256 FROM bridge.catalogues c
			 WHERE NOT EXISTS (SELECT 1 FROM bridge.leases l WHERE l.catalogue_sha256 = c.sha256)
			 LIMIT $1 FOR UPDATE OF c SKIP LOCKED)`, purgeBatch)
		var pgErr *pgconn.PgError
		switch {
		case errors.As(err, &pgErr) && pgErr.Code == foreignKeyViolation:
			return nil
		case err != nil:
			return fmt.Errorf("leases/postgres: purge catalogues: %w", err)
		case tag.RowsAffected() < purgeBatch:
			return nil
		}
	}
}

// answerChannel is the NOTIFY channel passed answers are announced on.
const answerChannel = "sharedos_input_answer"

var _ leases.Answers = (*Store)(nil)

// maxAnswerID is the longest id, in characters, bridge.input_answers
// holds (its CHECK); the bridge's own input request ids are 47.
const maxAnswerID = 64

// PassAnswer implements leases.Answers: the row and its announcement commit
// together; answers nobody took for 15 minutes go with the next pass, and a
// turn with leases.MaxPassedAnswers answers waiting gets no more (two
// passes at once may both see room: the bound is the budget plus the
// passes in flight).
func (s *Store) PassAnswer(ctx context.Context, a leases.Answer) error {
	if n := utf8.RuneCount(a.ID); n > maxAnswerID {
		// Refused by name: the table would refuse it by its CHECK, and
		// pg_notify one past its payload bound, each as a bare SQLSTATE.
		return fmt.Errorf("leases/postgres: pass answer: an id of %d characters, over the %d bridge.input_answers holds", n, maxAnswerID)
	}
	tag, err := s.pool.Exec(ctx, `
WITH gone AS (DELETE FROM bridge.input_answers WHERE passed_at < now() - interval '15 minutes'),
     budget AS (SELECT count(*) < $6 AS within FROM bridge.input_answers
                 WHERE turn_id = $2 AND passed_at >= now() - interval '15 minutes'),
     kept AS (INSERT INTO bridge.input_answers (id, turn_id, session_id, result, error)
              SELECT $1, $2, $3, $4, $5 FROM budget WHERE within
              ON CONFLICT (id) DO NOTHING)
SELECT pg_notify('`+answerChannel+`', $1) FROM budget WHERE within`,
		string(a.ID), a.TurnID, a.SessionID, a.Result, a.Error, leases.MaxPassedAnswers)
	if err != nil {
		return fmt.Errorf("leases/postgres: pass answer: %w", err)
	}
	if tag.RowsAffected() == 0 { // no announcement: over the budget
		return leases.ErrAnswerBudget
	}
	return nil
}

// TakeAnswer implements leases.Answers.
func (s *Store) TakeAnswer(ctx context.Context, id []byte) (leases.Answer, error) {
	a := leases.Answer{ID: id}
	err := s.pool.QueryRow(ctx, `DELETE FROM bridge.input_answers WHERE id = $1 RETURNING turn_id, session_id, result, error`,
		string(id)).Scan(&a.TurnID, &a.SessionID, &a.Result, &a.Error)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return leases.Answer{}, leases.ErrNotFound
	case err != nil:
		return leases.Answer{}, fmt.Errorf("leases/postgres: take answer: %w", err)
	}
	return a, nil
}

// WatchAnswers implements leases.Answers.
func (s *Store) WatchAnswers(ctx context.Context, listening func(), f func(id []byte)) error {
	if err := pgdb.Listen(ctx, s.pool, answerChannel, listening, func(id string) { f([]byte(id)) }); err != nil {
		return fmt.Errorf("leases/postgres: watch answers: %w", err)
	}
	return nil
}

// purgeBatch is the most leases one purge statement deletes.
const purgeBatch = 10_000
