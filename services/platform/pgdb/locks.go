package pgdb

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Locks are PostgreSQL session-level advisory locks, named within a space:
// what orders work across the replicas of a service. A held lock keeps its
// connection out of the pool until it is unlocked, so it never outlives the
// process holding it — PostgreSQL drops a session's locks when the session
// ends (a crash, a lost connection) — and it never waits for a poll: a
// second holder's Lock blocks in PostgreSQL until the first unlocks.
//
// Give Locks a pool of its own: each held lock occupies one of its
// connections, and a lock waits for a free one.
type Locks struct {
	pool  *pgxpool.Pool
	space string
}

// NewLocks returns the locks of space on pool.
func NewLocks(pool *pgxpool.Pool, space string) *Locks { return &Locks{pool: pool, space: space} }

// unlockTimeout bounds the unlock statement; past it the session is closed,
// which releases the lock as surely.
const unlockTimeout = 5 * time.Second

// Lock waits until name's lock is free or ctx ends, takes it and returns
// its unlock. Names hash to PostgreSQL's 64-bit lock keys: two names that
// collide only wait for each other.
func (l *Locks) Lock(ctx context.Context, name string) (unlock func(), err error) {
	conn, err := l.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("lock %s: no connection of the lock pool free: %w", l.space, err)
	}
	key := lockKey(l.space, name)
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, key); err != nil {
		// The server may still be waiting for the lock (a backend blocked on
		// a lock does not notice its client leave) or may have granted it as
		// the request failed: cancel the request, then end the session,
		// which surely drops the lock.
		cctx, cancel := context.WithTimeout(context.Background(), unlockTimeout)
		_ = conn.Conn().PgConn().CancelRequest(cctx)
		cancel()
		closeSession(conn)
		return nil, fmt.Errorf("lock %s: %w", l.space, err)
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), unlockTimeout)
		defer cancel()
		var released bool
		if err := conn.QueryRow(ctx, `SELECT pg_advisory_unlock($1)`, key).Scan(&released); err != nil || !released {
			closeSession(conn)
			return
		}
		conn.Release()
	}, nil
}

// closeSession takes conn out of its pool and ends its session.
func closeSession(conn *pgxpool.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), unlockTimeout)
	defer cancel()
	_ = conn.Hijack().Close(ctx)
}

// lockKey is the advisory lock key of name in space: the first 8 bytes of
// SHA-256(space NUL name).
func lockKey(space, name string) int64 {
	sum := sha256.Sum256([]byte(space + "\x00" + name))
	return int64(binary.BigEndian.Uint64(sum[:8])) //nolint:gosec // a key, not a size: any 64 bits do
}
