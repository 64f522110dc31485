package store

import (
	"context"
	"time"
)

// Kind is a kind of registration an Entries store keeps apart (ADR 0018).
type Kind string

// The kinds besides tools.
const (
	KindPrompt   Kind = "prompt"
	KindResource Kind = "resource"
	// KindUpstream keeps upstream MCP servers by namespace (ADR 0019).
	KindUpstream Kind = "upstream"
)

// MaxKeyLen is the longest key, in characters, an entry of kind may have
// (PostgreSQL's tables check the same: migrations 00009 and 00011); an
// empty key or a longer one is ErrInvalid on every store.
func MaxKeyLen(kind Kind) int {
	if kind == KindResource {
		return 2048 // a URI or URI template
	}
	return 128 // a prompt's name, an upstream's namespace
}

// Entry is one stored prompt or resource registration with the canonical
// bytes of its published projection, computed once at write time.
type Entry struct {
	// Key is the prompt's name or the resource's URI.
	Key string
	// Registration is the admin view, as protobuf bytes.
	Registration []byte
	Canonical    []byte
	Digest       string
	// MatchKey is what the entry is found by besides its Key
	// (EntriesMatching): for a resource, "v<resourceuri.KeyVersion>:" and
	// the resourceuri.Key of its URI; for an upstream, "ns:" and the
	// toolname.FoldedKey of its namespace. Empty: none (an entry written
	// before match keys).
	MatchKey string
	// Revision and UpdatedAt are set by the store.
	Revision  int64
	UpdatedAt time.Time
}

// Entries persists prompt and resource registrations. Implementations never
// alias the caller's bytes.
type Entries interface {
	// PutEntry stores e under (kind, e.Key): new at revision 1, or
	// replacing the entry there with its revision + 1. It returns e as
	// stored.
	PutEntry(ctx context.Context, kind Kind, e Entry) (Entry, error)
	// DeleteEntry removes (kind, key); ErrNotFound when there is none.
	DeleteEntry(ctx context.Context, kind Kind, key string) error
	// Entries returns every entry of kind, by key in byte order.
	Entries(ctx context.Context, kind Kind) ([]Entry, error)
	// EntryKeys returns the key of every entry of kind, in byte order:
	// what a search of every registration by its key reads (the resource
	// templates a read may go to), without their bytes.
	EntryKeys(ctx context.Context, kind Kind) ([]string, error)
	// GetEntry returns (kind, key); ErrNotFound when there is none.
	GetEntry(ctx context.Context, kind Kind, key string) (Entry, error)
	// EntriesMatching returns every entry of kind whose MatchKey is
	// matchKey, which begins with scope, and every one whose MatchKey does
	// not begin with scope (none, or another version's: the caller checks
	// those itself), by key in byte order. scope is non-empty ASCII; an
	// empty matchKey asks for the latter alone.
	EntriesMatching(ctx context.Context, kind Kind, scope, matchKey string) ([]Entry, error)
	// SetMatchKey sets the MatchKey of (kind, key) without a new revision;
	// ErrNotFound when there is none.
	SetMatchKey(ctx context.Context, kind Kind, key, matchKey string) error
}
