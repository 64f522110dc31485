package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/toolname"

	"github.com/sharedos/toolshare/catalog-svc/internal/store"
)

// Channel is the NOTIFY channel; the payload is a tool name, or
// store.AllChanged after a batch (which the writing Store's own feed leaves
// out: ownBatches).
const Channel = "catalog_changes"

// Store is the PostgreSQL store.
type Store struct {
	pool *pgxpool.Pool
	log  *slog.Logger
	// reconnectMin/Max bound the LISTEN reconnect backoff.
	reconnectMin, reconnectMax time.Duration
	// own keeps this Store's batch notices out of its own feeds.
	own ownBatches
}

var _ store.Store = (*Store)(nil)

// Option configures a Store.
type Option func(*Store)

// WithLogger sets the logger for change-feed connection problems.
func WithLogger(l *slog.Logger) Option { return func(s *Store) { s.log = l } }

// New returns a store over pool (see platform/pgdb.Open). The schema must
// have been migrated (migrations.Up).
func New(pool *pgxpool.Pool, opts ...Option) *Store {
	s := &Store{pool: pool, log: slog.Default(), reconnectMin: 50 * time.Millisecond, reconnectMax: 5 * time.Second}
	for _, o := range opts {
		o(s)
	}
	return s
}

// writeColumns are the columns a registration sets; the rest are the store's.
var writeColumns = []string{
	"name", "collision_key", "description",
	"input_schema", "input_schema_raw", "output_schema", "output_schema_raw", "annotations", "annotations_raw",
	"namespace", "source", "class",
	"requirement_action", "requirement_resource", "path_cleaning",
	"handler_target", "handler_timeout_ns", "credential_ref",
	"canonical", "digest", "requirement_open_arguments", "read_only",
}

const readColumns = `name, description, input_schema_raw, output_schema_raw, annotations_raw,
	namespace, source, class, requirement_action, requirement_resource, path_cleaning,
	handler_target, handler_timeout_ns, credential_ref, canonical, digest,
	revision, created_at, updated_at, requirement_open_arguments, read_only`

// Rows is recs as the rows of catalog.tools that CreateBatch copies in:
// the columns and each record's values (a bare COPY of the same rows is
// RegisterBatch's benchmark baseline).
func Rows(recs []store.Record) (columns []string, rows [][]any) {
	rows = make([][]any, len(recs))
	for i, r := range recs {
		rows[i] = values(r)
	}
	return slices.Clone(writeColumns), rows
}

// values is rec as writeColumns values. Empty JSON is NULL (absent).
func values(rec store.Record) []any {
	r := rec.Registration
	var timeout any
	if t := r.GetHandler().GetTimeout(); t != nil {
		timeout = t.AsDuration().Nanoseconds()
	}
	return []any{
		r.GetName(), toolname.FoldedKey(r.GetName()), r.GetDescription(),
		jsonArg(r.GetInputSchemaJson()), r.GetInputSchemaJson(),
		jsonArg(r.GetOutputSchemaJson()), bytesArg(r.GetOutputSchemaJson()),
		jsonArg(r.GetAnnotationsJson()), bytesArg(r.GetAnnotationsJson()),
		r.GetMetadata().GetNamespace(), r.GetMetadata().GetSource(), int16(r.GetClass()),
		r.GetRequirement().GetAction(), r.GetRequirement().GetResource(), int16(r.GetRequirement().GetPathCleaning()),
		r.GetHandler().GetTarget(), timeout, r.GetCredentialRef(),
		rec.Canonical, rec.Digest, r.GetRequirement().GetOpenArguments(), r.GetReadOnly(),
	}
}

// jsonArg passes JSON text to a jsonb parameter as text, so the server
// parses it (and rejects what jsonb cannot hold).
func jsonArg(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

func bytesArg(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return b
}

func scan(row pgx.Row) (store.Record, error) {
	var (
		name, desc, ns, src, action, resource, target, cred, digest string
		in, out, ann, canonical                                     []byte
		class, pc                                                   int16
		timeoutNS                                                   *int64
		rev                                                         int64
		created, updated                                            time.Time
		openArgs, readOnly                                          bool
	)
	if err := row.Scan(&name, &desc, &in, &out, &ann, &ns, &src, &class, &action, &resource, &pc,
		&target, &timeoutNS, &cred, &canonical, &digest, &rev, &created, &updated, &openArgs, &readOnly); err != nil {
		return store.Record{}, err
	}
	reg := &sharedosv1.ToolRegistration{
		Name:             name,
		Description:      desc,
		InputSchemaJson:  in,
		OutputSchemaJson: out,
		AnnotationsJson:  ann,
		Class:            sharedosv1.ToolClass(class),
		CredentialRef:    cred,
		Revision:         rev,
		CreatedAt:        timestamppb.New(created),
		UpdatedAt:        timestamppb.New(updated),
		ReadOnly:         readOnly,
	}
	if ns != "" || src != "" {
		reg.Metadata = &sharedosv1.ToolMetadata{Namespace: ns, Source: src}
	}
	if action != "" || resource != "" || pc != 0 || openArgs {
		reg.Requirement = &sharedosv1.Requirement{Action: action, Resource: resource, PathCleaning: sharedosv1.PathCleaning(pc), OpenArguments: openArgs}
	}
	if target != "" || timeoutNS != nil {
		reg.Handler = &sharedosv1.HandlerRef{Target: target}
		if timeoutNS != nil {
			reg.Handler.Timeout = durationpb.New(time.Duration(*timeoutNS))
		}
	}
	return store.Record{Registration: reg, Canonical: canonical, Digest: digest}, nil
}

func placeholders(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		if i > 1 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "$%d", i)
	}
	return b.String()
}

var insertSQL = `INSERT INTO catalog.tools (` + strings.Join(writeColumns, ", ") + `)
	VALUES (` + placeholders(len(writeColumns)) + `)
	ON CONFLICT (name) DO NOTHING
	RETURNING revision, created_at, updated_at`

// uniqueViolation is PostgreSQL's SQLSTATE for a unique index refusing a row.
const uniqueViolation = "23505"

const notifySQL = `SELECT pg_notify('` + Channel + `', $1)`

// resumeSQL moves tools just inserted (at revision 1) whose names were
// deleted before to their predecessor's last revision + 1, consuming the
// tombstones Delete wrote (migration 00020), so that no revision of a name
// repeats: an update prepared against the deleted tool cannot land on the
// new one. The tombstones are in the database, so a name deleted through
// another replica is continued all the same.
const resumeSQL = `WITH gone AS (
		DELETE FROM catalog.tool_tombstones WHERE name = ANY ($1::text[]) RETURNING name, last_revision)
	UPDATE catalog.tools AS t SET revision = gone.last_revision + 1 FROM gone WHERE t.name = gone.name
	RETURNING t.name, t.revision`

// resume runs resumeSQL for names, inserted by tx, and returns the
// revisions it set by name (none for a name never deleted). It must be a
// statement of its own after the insert: a read-committed statement sees
// what committed before it began, and the insert may have waited for the
// commit of a concurrent Delete of the name, tombstone and all, that an
// earlier snapshot would miss.
func resume(ctx context.Context, tx pgx.Tx, names []string) (map[string]int64, error) {
	rows, err := tx.Query(ctx, resumeSQL, names)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var name string
		var rev int64
		if err := rows.Scan(&name, &rev); err != nil {
			return nil, err
		}
		out[name] = rev
	}
	return out, rows.Err()
}

// Create implements store.Store.
func (s *Store) Create(ctx context.Context, rec store.Record) (store.Record, error) {
	name := rec.Name()
	var out store.Record
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var rev int64
		var created, updated time.Time
		err := tx.QueryRow(ctx, insertSQL, values(rec)...).Scan(&rev, &created, &updated)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: %q", store.ErrAlreadyExists, name)
		}
		if err != nil {
			return err
		}
		resumed, err := resume(ctx, tx, []string{name})
		if err != nil {
			return err
		}
		if got, ok := resumed[name]; ok {
			rev = got
		}
		if _, err := tx.Exec(ctx, notifySQL, name); err != nil {
			return err
		}
		out = withStored(rec, rev, created, updated)
		return nil
	})
	if err != nil {
		return store.Record{}, s.translate(ctx, err, name, "create")
	}
	return out, nil
}

// withStored is rec as stored: the caller's values plus the store's.
func withStored(rec store.Record, rev int64, created, updated time.Time) store.Record {
	reg := cloneReg(rec.Registration)
	reg.Revision = rev
	reg.CreatedAt = timestamppb.New(created)
	reg.UpdatedAt = timestamppb.New(updated)
	return store.Record{Registration: reg, Canonical: append([]byte(nil), rec.Canonical...), Digest: rec.Digest}
}

// translate turns driver errors into store errors. Driver text is kept only
// inside the wrapped error chain (for logs), never as a domain message.
func (s *Store) translate(ctx context.Context, err error, name, op string) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		if errors.Is(err, store.ErrAlreadyExists) || errors.Is(err, store.ErrNotFound) ||
			errors.Is(err, store.ErrRevisionMismatch) || errors.Is(err, store.ErrConflict) {
			return err
		}
		return fmt.Errorf("postgres: %s %q: %w", op, name, err)
	}
	switch pgErr.Code {
	case uniqueViolation:
		switch pgErr.ConstraintName {
		case "tools_pkey":
			return fmt.Errorf("%w: %q", store.ErrAlreadyExists, name)
		case "tools_collision_key_key", "tools_name_lower_key":
			where, arg, rule := "collision_key = $1", toolname.FoldedKey(name), ""
			if pgErr.ConstraintName == "tools_name_lower_key" {
				where, arg, rule = "lower(name) = lower($1)", name, store.RuleCaseInsensitive
			}
			existing := s.existing(ctx, where, arg)
			if existing == name {
				// Two creates of one name at once: the loser's insert can
				// trip either index before the primary key its ON CONFLICT
				// names. Its clash is with itself: the name exists.
				return fmt.Errorf("%w: %q", store.ErrAlreadyExists, name)
			}
			if rule == "" {
				rule = store.ConflictRule(name, existing)
			}
			return &store.ConflictError{Name: name, Existing: existing, Rule: rule}
		}
	default:
		if refusedValue(pgErr) {
			return fmt.Errorf("%w: PostgreSQL refused a value of %q (SQLSTATE %s)", store.ErrInvalid, name, pgErr.Code)
		}
	}
	return fmt.Errorf("postgres: %s %q: %w", op, name, err)
}

// refusedValue reports whether PostgreSQL refused a value written, not the
// write: bad json, an untranslatable character (\u0000 in jsonb), a bad
// encoding (NUL in text), numeric overflow, a check constraint.
func refusedValue(pgErr *pgconn.PgError) bool {
	switch pgErr.Code {
	case "22P02", "22P05", "22021", "22003", "23514":
		return true
	}
	return false
}

// existing names the stored tool a conflicting name clashed with (best
// effort: "" if it is gone again).
func (s *Store) existing(ctx context.Context, where, arg string) string {
	var n string
	_ = s.pool.QueryRow(ctx, "SELECT name FROM catalog.tools WHERE "+where+" LIMIT 1", arg).Scan(&n)
	return n
}

// CreateBatch implements store.Store: COPY into the table and NOTIFY, one
// transaction. A clash with a stored tool fails the COPY on a unique index;
// batchConflict then names both tools (the index error names neither). The
// notice reaches every other Store's feed, not this one's (ownBatches).
func (s *Store) CreateBatch(ctx context.Context, recs []store.Record) ([]store.Record, error) {
	if len(recs) == 0 {
		return nil, nil
	}
	if j, err := checkBatch(recs); err != nil {
		// The first offender in batch order, as on every store: a record
		// up to j may clash with a stored tool first.
		if cerr := s.batchConflict(ctx, recs[:j+1]); cerr != nil {
			return nil, cerr
		}
		return nil, err
	}
	cols, rows := Rows(recs)
	// The rows' created_at and updated_at default to now(), the
	// transaction's start: read once, they are every stored record's.
	var (
		now      time.Time
		pid      uint32
		expected bool
		resumed  map[string]int64
	)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// The backend's own PID, the one its notice will carry: the
		// connection's startup PID may be a pooler's made-up one.
		if err := tx.QueryRow(ctx, `SELECT now(), pg_backend_pid()`).Scan(&now, &pid); err != nil {
			return err
		}
		n, err := tx.CopyFrom(ctx, pgx.Identifier{"catalog", "tools"}, cols, pgx.CopyFromRows(rows))
		if err != nil {
			return err
		}
		if n != int64(len(recs)) {
			return fmt.Errorf("copied %d of %d rows", n, len(recs))
		}
		// A name deleted before continues from its last revision, as on
		// Create.
		names := make([]string, len(recs))
		for i, r := range recs {
			names[i] = r.Name()
		}
		if resumed, err = resume(ctx, tx, names); err != nil {
			return err
		}
		if _, err = tx.Exec(ctx, notifySQL, store.AllChanged); err != nil {
			return err
		}
		expected = s.own.expect(pid)
		return nil
	})
	if err != nil && expected {
		s.own.withdraw(pid)
	}
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		out := make([]store.Record, len(recs))
		for i, r := range recs {
			rev := int64(1)
			if got, ok := resumed[r.Name()]; ok {
				rev = got
			}
			out[i] = withStored(r, rev, now, now)
		}
		return out, nil
	case errors.As(err, &pgErr) && pgErr.Code == uniqueViolation:
		if cerr := s.batchConflict(ctx, recs); cerr != nil {
			return nil, cerr
		}
		// The clashing tool is gone again (deleted since).
	}
	return nil, s.translate(ctx, err, "", "create batch")
}

// batchConflict reports the stored tool the first of recs (in batch
// order) that clashes with one clashes with, by name (ErrAlreadyExists) or
// else collision key (a ConflictError naming both), as the embedded store
// does; nil when there is none.
func (s *Store) batchConflict(ctx context.Context, recs []store.Record) error {
	names, keys := make([]string, len(recs)), make([]string, len(recs))
	for i, r := range recs {
		names[i], keys[i] = r.Name(), toolname.FoldedKey(r.Name())
	}
	var newName, oldName string
	var byName bool
	err := s.pool.QueryRow(ctx, `
		WITH b (name, collision_key, ord) AS (SELECT * FROM unnest($1::text[], $2::text[]) WITH ORDINALITY)
		SELECT b.name, t.name, true, b.ord FROM b JOIN catalog.tools t ON t.name = b.name COLLATE "C"
		UNION ALL
		SELECT b.name, t.name, false, b.ord FROM b JOIN catalog.tools t ON t.collision_key = b.collision_key COLLATE "C"
		ORDER BY 4, 3 DESC
		LIMIT 1`, names, keys).Scan(&newName, &oldName, &byName, nil)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil
	case err != nil:
		return fmt.Errorf("postgres: create batch: find the clashing tool: %w", err)
	case byName:
		return fmt.Errorf("%w: %q", store.ErrAlreadyExists, newName)
	default:
		return &store.ConflictError{Name: newName, Existing: oldName, Rule: store.ConflictRule(newName, oldName)}
	}
}

// checkBatch applies the uniqueness rules within the batch, so the error
// can name both tools (a unique violation inside one INSERT cannot). It
// returns the offending record's index.
func checkBatch(recs []store.Record) (int, error) {
	names := make(map[string]bool, len(recs))
	keys := make(map[string]string, len(recs))
	for i, r := range recs {
		n := r.Name()
		if names[n] {
			return i, fmt.Errorf("%w: %q", store.ErrAlreadyExists, n)
		}
		k := toolname.FoldedKey(n)
		if other, ok := keys[k]; ok {
			return i, &store.ConflictError{Name: n, Existing: other, Rule: store.ConflictRule(n, other)}
		}
		names[n], keys[k] = true, n
	}
	return 0, nil
}

var updateSQL = func() string {
	var set []string
	for i, c := range writeColumns {
		if c == "name" {
			continue
		}
		set = append(set, fmt.Sprintf("%s = $%d", c, i+1))
	}
	n := len(writeColumns) + 1
	return `UPDATE catalog.tools SET ` + strings.Join(set, ", ") + `, revision = revision + 1, updated_at = now()
	WHERE name = $1 AND ($` + fmt.Sprint(n) + `::bigint = 0 OR revision = $` + fmt.Sprint(n) + `)
	RETURNING revision, created_at, updated_at`
}()

// Update implements store.Store.
func (s *Store) Update(ctx context.Context, rec store.Record, expectedRevision int64) (store.Record, error) {
	name := rec.Name()
	var out store.Record
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var rev int64
		var created, updated time.Time
		args := append(values(rec), expectedRevision)
		err := tx.QueryRow(ctx, updateSQL, args...).Scan(&rev, &created, &updated)
		if errors.Is(err, pgx.ErrNoRows) {
			var cur int64
			switch err := tx.QueryRow(ctx, `SELECT revision FROM catalog.tools WHERE name = $1`, name).Scan(&cur); {
			case errors.Is(err, pgx.ErrNoRows):
				return fmt.Errorf("%w: %q", store.ErrNotFound, name)
			case err != nil:
				return err
			default:
				return fmt.Errorf("%w: %q is at revision %d, not %d", store.ErrRevisionMismatch, name, cur, expectedRevision)
			}
		}
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, notifySQL, name); err != nil {
			return err
		}
		out = withStored(rec, rev, created, updated)
		return nil
	})
	if err != nil {
		return store.Record{}, s.translate(ctx, err, name, "update")
	}
	return out, nil
}

// deleteSQL deletes a tool and keeps its last revision as the name's
// tombstone (resumeSQL), in one statement: its row count is the tools
// deleted. GREATEST keeps the highest should a tombstone be left (a tool
// re-created by a catalog-svc that predates migration 00020, during a
// rolling upgrade, does not consume it).
const deleteSQL = `WITH d AS (DELETE FROM catalog.tools WHERE name = $1 RETURNING name, revision)
	INSERT INTO catalog.tool_tombstones AS ts (name, last_revision) SELECT name, revision FROM d
	ON CONFLICT (name) DO UPDATE SET last_revision = GREATEST(ts.last_revision, EXCLUDED.last_revision)`

// Delete implements store.Store.
func (s *Store) Delete(ctx context.Context, name string) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, deleteSQL, name)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("%w: %q", store.ErrNotFound, name)
		}
		_, err = tx.Exec(ctx, notifySQL, name)
		return err
	})
	if err != nil {
		return s.translate(ctx, err, name, "delete")
	}
	return nil
}

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, name string) (store.Record, error) {
	rec, err := scan(s.pool.QueryRow(ctx, `SELECT `+readColumns+` FROM catalog.tools WHERE name = $1`, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Record{}, fmt.Errorf("%w: %q", store.ErrNotFound, name)
	}
	if err != nil {
		return store.Record{}, fmt.Errorf("postgres: get %q: %w", name, err)
	}
	return rec, nil
}

// List implements store.Store.
func (s *Store) List(ctx context.Context, after string, limit int) ([]store.Record, error) {
	return s.query(ctx, "list", `SELECT `+readColumns+` FROM catalog.tools WHERE name > $1 ORDER BY name LIMIT $2`, after, limit)
}

// Snapshot implements store.Store.
func (s *Store) Snapshot(ctx context.Context) ([]store.Record, error) {
	return s.query(ctx, "snapshot", `SELECT `+readColumns+` FROM catalog.tools ORDER BY name`)
}

func (s *Store) query(ctx context.Context, op, sql string, args ...any) ([]store.Record, error) {
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("postgres: %s: %w", op, err)
	}
	defer rows.Close()
	var out []store.Record
	for rows.Next() {
		rec, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("postgres: %s: %w", op, err)
		}
		out = append(out, rec)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: %s: %w", op, err)
	}
	return out, nil
}
