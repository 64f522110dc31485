package leases

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/base64"
	"errors"
	"slices"
	"strings"
	"time"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
)

// Lease is one turn: the catalogue it pinned, who it runs for and what it
// declared. The token itself is never part of a Lease; only its SHA-256.
type Lease struct {
	TurnID        string
	TokenHash     [sha256.Size]byte
	Context       *sharedosv1.AccessContext
	Policy        *sharedosv1.ToolPolicy
	Harness       *sharedosv1.HarnessIdentity
	DeclaredModel string
	CatalogHash   string
	// Tools is the pinned snapshot, sorted by name, canonical_json included.
	Tools []*sharedosv1.PublishedTool
	// Prompts (by name), Resources (by URI) and their hash are the turn's
	// other pinned entries (ADR 0018).
	Prompts              []*sharedosv1.PublishedPrompt
	Resources            []*sharedosv1.PublishedResource
	PromptsResourcesHash string
	PortableNames        bool
	// Grant is the kernel's signed turn grant (ADR 0015): context, pin and
	// expiry, sent with every call of the turn.
	Grant     string
	OpenedAt  time.Time
	ExpiresAt time.Time
	// ClosedAt is zero while the lease has not been closed.
	ClosedAt time.Time
}

// Status is the cheap per-request view of a lease: enough to authenticate a
// request and to tell whether the turn is still open, without loading the
// catalogue.
type Status struct {
	TokenHash [sha256.Size]byte
	ExpiresAt time.Time
	ClosedAt  time.Time
	// Expired is decided by the store's clock (PostgreSQL's now() for the
	// postgres store), so every pod agrees regardless of its own clock.
	Expired bool
	// StoreNow is the store's clock at the read; a pod caching the status
	// uses it to judge expiry later on the store's clock, not its own.
	StoreNow time.Time
	// TerminatedSessions are the 2025-era session ids a client ended with
	// DELETE: every pod answers them 404 from then on.
	TerminatedSessions []string
}

// Terminated reports whether session was ended with DELETE.
func (s Status) Terminated(session string) bool {
	return slices.Contains(s.TerminatedSessions, session)
}

// MaxTerminatedSessions bounds the sessions one lease remembers as ended; a
// DELETE past it is refused (ErrTooManySessions) and the session stays
// usable until the turn ends.
const MaxTerminatedSessions = 256

// ErrTooManySessions is TerminateSession's answer past MaxTerminatedSessions.
var ErrTooManySessions = errors.New("leases: too many terminated sessions on this turn")

// Open reports whether the lease can still serve requests.
func (s Status) Open() bool { return s.ClosedAt.IsZero() && !s.Expired }

// State is the lease's TurnState as of the store's clock.
func (s Status) State() sharedosv1.TurnState {
	switch {
	case !s.ClosedAt.IsZero():
		return sharedosv1.TurnState_TURN_STATE_CLOSED
	case s.Expired:
		return sharedosv1.TurnState_TURN_STATE_EXPIRED
	default:
		return sharedosv1.TurnState_TURN_STATE_OPEN
	}
}

// ErrNotFound is returned by a Store for an unknown turn id.
var ErrNotFound = errors.New("leases: turn not found")

// ErrExists is returned by Create when the turn id is already taken (a
// 128-bit random collision: practically never, but never silently).
var ErrExists = errors.New("leases: turn id already exists")

// Store persists leases. Implementations must make a Close visible to every
// reader at once (no per-process caching of the closed state).
type Store interface {
	// Create stores a new open lease.
	Create(ctx context.Context, l *Lease) error
	// Get returns the full lease and its status.
	Get(ctx context.Context, turnID string) (*Lease, Status, error)
	// TerminateSession notes that session of turnID was ended (idempotent);
	// ErrNotFound for an unknown turn, ErrTooManySessions past the bound.
	TerminateSession(ctx context.Context, turnID, session string) error
	// Status returns the per-request view of a lease.
	Status(ctx context.Context, turnID string) (Status, error)
	// Close marks the lease closed at the store's clock. Closing a closed
	// lease is not an error and keeps the first closing time.
	Close(ctx context.Context, turnID string) error
	// TurnByToken returns the turn whose token hashes to hash, or
	// ErrNotFound. It only tells a request carrying another turn's token
	// (404: that turn is not yours) from one carrying no valid token (401).
	TurnByToken(ctx context.Context, hash [sha256.Size]byte) (string, error)
	// Inactive returns the ids among turnIDs that are closed, expired or
	// unknown, so a pod can drop what it cached for them.
	Inactive(ctx context.Context, turnIDs []string) ([]string, error)
	// PurgeInactive deletes the leases closed earlier than before, or
	// expired with an expiry earlier than before, and returns how many it
	// deleted. Expiry is judged on the store's clock, as Status judges it:
	// a lease the store still holds open is never deleted, whatever cutoff
	// a pod whose clock runs ahead passes.
	PurgeInactive(ctx context.Context, before time.Time) (int64, error)
}

// Answer is a 2025-era client's answer to an input request of a call
// (ADR 0017), as it reached some pod: ID is the request's JSON id, Result
// or Error the response's member.
type Answer struct {
	TurnID, SessionID string
	ID, Result, Error []byte
}

// MaxPassedAnswers bounds the answers of one turn passed on and not (yet)
// taken: a client posting answers to requests nobody asked cannot fill the
// store (an answer goes after 15 minutes at most).
const MaxPassedAnswers = 64

// ErrAnswerBudget: the turn has MaxPassedAnswers answers nobody took.
var ErrAnswerBudget = errors.New("leases: too many input answers of the turn wait to be taken")

// Answers relays answers between pods: the pod an answer reached passes it
// on, the pod whose call asked takes it. Stores that serve one process
// only do not implement it (every answer reaches the pod that asked).
type Answers interface {
	// PassAnswer keeps a for whichever pod asked and announces its id;
	// ErrAnswerBudget when the turn already has MaxPassedAnswers answers
	// nobody took.
	PassAnswer(ctx context.Context, a Answer) error
	// TakeAnswer removes and returns the answer passed for id; exactly
	// one taker gets it, ErrNotFound when none was passed (yet).
	TakeAnswer(ctx context.Context, id []byte) (Answer, error)
	// WatchAnswers calls listening once it hears every id announced from
	// then on, then f with each, until ctx is done (nil) or the watch
	// fails.
	WatchAnswers(ctx context.Context, listening func(), f func(id []byte)) error
}

// Ping is implemented by stores that depend on an external server; readiness
// uses it.
type Pinger interface {
	Ping(ctx context.Context) error
}

var turnIDEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// NewTurnID returns a random 128-bit turn id: 26 characters of lowercase
// base32, never derived from anything (a state handle must not be guessable,
// even though it is never a credential on its own).
func NewTurnID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return "t" + strings.ToLower(turnIDEncoding.EncodeToString(b[:])), nil
}

// ValidTurnID reports whether s has the shape NewTurnID produces, so
// obviously foreign ids are refused before any store lookup.
func ValidTurnID(s string) bool {
	if len(s) != 27 || s[0] != 't' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z') && !(c >= '2' && c <= '7') {
			return false
		}
	}
	return true
}

// NewToken returns a 256-bit bearer token (base64url, 43 characters) and its
// SHA-256, the only form in which it is stored.
func NewToken() (token string, hash [sha256.Size]byte, err error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", hash, err
	}
	token = base64.RawURLEncoding.EncodeToString(b[:])
	return token, HashToken(token), nil
}

// HashToken is the stored form of a token.
func HashToken(token string) [sha256.Size]byte { return sha256.Sum256([]byte(token)) }

// TokenMatches compares a presented token with a stored hash in constant time.
func TokenMatches(presented string, stored [sha256.Size]byte) bool {
	h := HashToken(presented)
	return subtle.ConstantTimeCompare(h[:], stored[:]) == 1
}
