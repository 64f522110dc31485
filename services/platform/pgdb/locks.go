package pgdb

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Locks are PostgreSQL session-level advisory locks, named within a space:
// what orders work across the replicas of a service. Every lock this
// process holds lives on one session (one connection of the pool, kept for
// as long as a lock is held), so any number of held locks costs one
// connection, and a lock never outlives its process: PostgreSQL drops a
// session's locks when the session ends (a crash, a lost connection).
//
// Lock asks with pg_try_advisory_lock and, while another replica holds the
// lock, asks again after a short pause (1 ms doubling to 50 ms): a blocking
// pg_advisory_lock would hold the one session for everyone. Within the
// process, a second Lock of a held name waits for its unlock (a session's
// advisory locks are re-entrant, so the session alone would not).
//
// If the session is lost while locks are held, they are gone at once for the
// other replicas; Lock logs it and later Locks open a new session.
type Locks struct {
	pool  *pgxpool.Pool
	space string
	log   *slog.Logger

	sem     chan struct{} // one statement at a time on the session
	session *pgxpool.Conn // guarded by sem; nil until used, or after it broke
	held    map[int64]*heldLock

	waited func() // tests: called each time Lock finds the lock taken
}

type heldLock struct {
	session *pgxpool.Conn // the session that took it
	free    chan struct{} // closed on unlock
}

// NewLocks returns the locks of space on pool; log (nil: slog's default)
// hears of a lost session.
func NewLocks(pool *pgxpool.Pool, space string, log *slog.Logger) *Locks {
	if log == nil {
		log = slog.Default()
	}
	return &Locks{pool: pool, space: space, log: log, sem: make(chan struct{}, 1), held: map[int64]*heldLock{}}
}

// statementTimeout bounds each statement on the session: a statement
// cancelled midway would end the session and every lock on it, so no
// caller's context ever reaches one.
const statementTimeout = 5 * time.Second

// maxPause bounds the pause between two asks for a lock held elsewhere.
const maxPause = 50 * time.Millisecond

// errSessionLost: the session broke; its locks are gone.
var errSessionLost = errors.New("the lock session was lost")

// Lock waits until name's lock is free or ctx ends, takes it and returns
// its unlock. Names hash to PostgreSQL's 64-bit lock keys: two names that
// collide only wait for each other.
func (l *Locks) Lock(ctx context.Context, name string) (unlock func(), err error) {
	key := lockKey(l.space, name)
	pause := time.Millisecond
	for {
		select {
		case l.sem <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if h := l.held[key]; h != nil { // held by this process: wait for its unlock
			<-l.sem
			if l.waited != nil {
				l.waited()
			}
			select {
			case <-h.free:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		got, err := l.try(key)
		var h *heldLock
		if got {
			h = &heldLock{session: l.session, free: make(chan struct{})}
			l.held[key] = h
		}
		<-l.sem
		switch {
		case err != nil:
			return nil, fmt.Errorf("lock %s: %w", l.space, err)
		case got:
			return func() { l.unlock(key, h) }, nil
		}
		if l.waited != nil {
			l.waited()
		}
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		pause = min(2*pause, maxPause)
	}
}

// try asks for key's lock on the session (opening one if needed); sem is
// held. A session that broke (a failover, idle_session_timeout) is ended
// and the ask made once more on a new one: nothing it took is held any
// more. A session that holds nothing goes back to the pool, where the
// pool's health checks see it, rather than waiting on this process.
func (l *Locks) try(key int64) (bool, error) {
	got, err := l.ask(key)
	if err != nil && l.session == nil && !errors.Is(err, errNoSession) {
		got, err = l.ask(key)
	}
	if err == nil && !got && len(l.held) == 0 {
		l.session.Release()
		l.session = nil
	}
	return got, err
}

// errNoSession: the pool gave no connection for the lock session.
var errNoSession = errors.New("no connection for the lock session")

// ask is one pg_try_advisory_lock of key on the session, opened if there
// is none; a failed one ends the session (lose). sem is held.
func (l *Locks) ask(key int64) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), statementTimeout)
	defer cancel()
	if l.session == nil {
		s, err := l.pool.Acquire(ctx)
		if err != nil {
			return false, fmt.Errorf("%w: %w", errNoSession, err)
		}
		l.session = s
	}
	var got bool
	if err := l.session.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, key).Scan(&got); err != nil {
		l.lose(err)
		return false, err
	}
	return got, nil
}

// unlock releases key's lock if the session that took it still runs.
func (l *Locks) unlock(key int64, h *heldLock) {
	l.sem <- struct{}{}
	defer func() { <-l.sem }()
	if l.held[key] != h {
		return // unlocked already
	}
	delete(l.held, key)
	close(h.free)
	if h.session == l.session { // else that session is gone, and the lock with it
		ctx, cancel := context.WithTimeout(context.Background(), statementTimeout)
		defer cancel()
		var released bool
		if err := l.session.QueryRow(ctx, `SELECT pg_advisory_unlock($1)`, key).Scan(&released); err != nil {
			l.lose(err)
			return
		}
		if !released {
			l.log.Error("advisory lock was not held at unlock", slog.String("space", l.space))
		}
	}
	if len(l.held) == 0 && l.session != nil {
		// Nothing held: give the connection back to the pool.
		l.session.Release()
		l.session = nil
	}
}

// lose ends a broken session (sem is held): its locks are gone for the
// other replicas, whatever this process still runs under them.
func (l *Locks) lose(err error) {
	if n := len(l.held); n > 0 {
		l.log.Error("advisory lock session lost; the locks it held are released for every replica",
			slog.String("space", l.space), slog.Int("held", n), slog.Any("error", fmt.Errorf("%w: %w", errSessionLost, err)))
	}
	l.endSession()
}

// endSession closes the session's connection, never returning it to the
// pool (its locks end with it); sem is held.
func (l *Locks) endSession() {
	ctx, cancel := context.WithTimeout(context.Background(), statementTimeout)
	defer cancel()
	_ = l.session.Hijack().Close(ctx)
	l.session = nil
}

// Close ends the session, and with it every lock still held (a process
// shutting down); later Locks open a new one.
func (l *Locks) Close() error {
	l.sem <- struct{}{}
	defer func() { <-l.sem }()
	if l.session != nil {
		l.endSession()
	}
	return nil
}

// lockKey is the advisory lock key of name in space: the first 8 bytes of
// SHA-256(space NUL name).
func lockKey(space, name string) int64 {
	sum := sha256.Sum256([]byte(space + "\x00" + name))
	return int64(binary.BigEndian.Uint64(sum[:8])) //nolint:gosec // a key, not a size: any 64 bits do
}
