package pipeline

import (
	"context"
	"sync"
)

// Concurrency classes (ADR 0019): a call of a tool the operator confirmed
// read-only (catalog.Resolved.ReadOnly) runs beside any other; every other
// call of a turn waits until the turn's previous such call has ended, at
// most the tool's own timeout. The order is taken in this process first,
// then across kernel replicas when Config.TurnLocks is set (a PostgreSQL
// advisory lock per turn, held for the call: pgdb.Locks).

// localTurnLocks holds, in this process, one lock per turn with a
// serialized call running or waiting; a turn's entry goes when its last
// holder leaves.
type localTurnLocks struct {
	mu sync.Mutex
	m  map[string]*turnLock
}

type turnLock struct {
	slot chan struct{}
	refs int
}

// acquire waits for turn's slot until ctx ends; release frees it.
func (l *localTurnLocks) acquire(ctx context.Context, turn string) (release func(), err error) {
	l.mu.Lock()
	if l.m == nil {
		l.m = map[string]*turnLock{}
	}
	t := l.m[turn]
	if t == nil {
		t = &turnLock{slot: make(chan struct{}, 1)}
		l.m[turn] = t
	}
	t.refs++
	l.mu.Unlock()
	leave := func() {
		l.mu.Lock()
		if t.refs--; t.refs == 0 {
			delete(l.m, turn)
		}
		l.mu.Unlock()
	}
	select {
	case t.slot <- struct{}{}:
		return func() { <-t.slot; leave() }, nil
	case <-ctx.Done():
		leave()
		return nil, ctx.Err()
	}
}
