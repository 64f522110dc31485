package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
)

// Record is one stored registration together with the canonical bytes of
// its published projection, computed once at write time so that hashing and
// listing never re-canonicalize.
type Record struct {
	// Registration is the admin view. On writes the store ignores Revision,
	// CreatedAt and UpdatedAt and sets them itself.
	Registration *sharedosv1.ToolRegistration
	// Canonical is the RFC 8785 text of the published projection.
	Canonical []byte
	// Digest is projection.Digest(Canonical).
	Digest string
}

// Name is the registration's tool name ("" for a nil registration).
func (r Record) Name() string { return r.Registration.GetName() }

// Store persists registrations. Implementations never alias the caller's
// messages: records passed in and handed out are copies.
type Store interface {
	// Create inserts a new registration at revision 1 or, when a tool of
	// that exact name was deleted before, at that tool's last revision + 1:
	// no revision of a name ever repeats, so an update prepared against a
	// deleted tool's revision fails with ErrRevisionMismatch on the tool
	// registered after it instead of overwriting it. The deleted name's last
	// revision is kept in the backing data (Postgres: catalog.tool_tombstones,
	// written with the delete), so every replica honours it. A taken name is
	// ErrAlreadyExists; a name whose collision key or lower-case form equals
	// another tool's is a *ConflictError.
	Create(ctx context.Context, rec Record) (Record, error)
	// CreateBatch inserts every record in one transaction, all or nothing,
	// with the same errors as Create (naming the first offending tool in
	// batch order), and returns them as stored (revision 1, or continuing a
	// deleted predecessor's as Create does; the store's timestamps), in
	// order.
	CreateBatch(ctx context.Context, recs []Record) ([]Record, error)
	// Update replaces the registration with the same name and increments
	// its revision. A missing name is ErrNotFound; a non-zero
	// expectedRevision that differs from the stored one is
	// ErrRevisionMismatch. CreatedAt is kept.
	Update(ctx context.Context, rec Record, expectedRevision int64) (Record, error)
	// Delete removes a registration and keeps its last revision for a later
	// Create of the name; a missing name is ErrNotFound.
	Delete(ctx context.Context, name string) error
	// Get returns one registration by exact name, or ErrNotFound.
	Get(ctx context.Context, name string) (Record, error)
	// List returns up to limit registrations with names > after, ascending.
	List(ctx context.Context, after string, limit int) ([]Record, error)
	// Snapshot returns every registration, ascending by name.
	Snapshot(ctx context.Context) ([]Record, error)
	// Watch subscribes to changes made through any store sharing the same
	// backing data (every replica for Postgres). It returns once the
	// subscription is live, so a Snapshot taken afterwards misses nothing.
	// The feed stops when ctx ends. A batch written through this same value
	// may be left out (Postgres, where a Store is one replica's, leaves it
	// out: CreateBatch's caller has the records it returned).
	Watch(ctx context.Context) (*Feed, error)

	// Entries keeps the prompt and resource registrations (ADR 0018).
	Entries
}

var (
	// ErrNotFound: no registration with that name.
	ErrNotFound = errors.New("store: tool not found")
	// ErrAlreadyExists: a registration with that exact name exists.
	ErrAlreadyExists = errors.New("store: tool already exists")
	// ErrRevisionMismatch: a conditional update lost a race.
	ErrRevisionMismatch = errors.New("store: revision mismatch")
	// ErrConflict matches every *ConflictError.
	ErrConflict = errors.New("store: name conflicts with an existing tool")
	// ErrInvalid: the backend refused a value (e.g. JSON PostgreSQL's jsonb
	// cannot hold, such as a \u0000 escape).
	ErrInvalid = errors.New("store: value not storable")
)

// Conflict rules, as reported in ConflictError.Rule.
const (
	// RuleCollisionKey: the names differ but share FoldedKey (files.read vs
	// files_read, or Files_Read), so a harness that rewrites '.' and '-' to
	// '_' would present them as one tool.
	RuleCollisionKey = "collision_key_unique"
	// RuleCaseInsensitive: the names differ only in letter case
	// (GitHub.search vs github.search).
	RuleCaseInsensitive = "case_insensitive_unique"
)

// ConflictRule names the rule two distinct names with the same folded key
// break: RuleCaseInsensitive when they differ only in case, else
// RuleCollisionKey.
func ConflictRule(name, existing string) string {
	if strings.EqualFold(name, existing) {
		return RuleCaseInsensitive
	}
	return RuleCollisionKey
}

// ConflictError reports that Name cannot be registered next to Existing.
type ConflictError struct {
	Name     string
	Existing string // may be "" when a concurrent writer removed it again
	Rule     string // RuleCollisionKey or RuleCaseInsensitive
}

func (e *ConflictError) Error() string {
	switch e.Rule {
	case RuleCaseInsensitive:
		return fmt.Sprintf("name %q equals existing tool %q case-insensitively", e.Name, e.Existing)
	default:
		return fmt.Sprintf("name %q has the same collision key as existing tool %q ('.' and '-' read as '_')", e.Name, e.Existing)
	}
}

// Unwrap lets callers test errors.Is(err, ErrConflict).
func (e *ConflictError) Unwrap() error { return ErrConflict }
