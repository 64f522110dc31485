// Package memo is the bounded memo SharedOS keeps of what it derives again
// and again from the same input: compiled schemas, parsed annotations,
// digests already checked or stored. It holds at most a fixed number of
// entries and, when full, starts over: no eviction bookkeeping, and a miss
// costs only the work the memo saves. Safe for concurrent use; values are
// shared, so callers must not change them.
package memo

import "sync"

// Bounded maps keys to values, keeping at most its bound.
type Bounded[K comparable, V any] struct {
	max int
	mu  sync.RWMutex
	m   map[K]V
}

// New returns an empty memo of at most bound entries (at least 1).
func New[K comparable, V any](bound int) *Bounded[K, V] {
	return &Bounded[K, V]{max: max(bound, 1), m: map[K]V{}}
}

// Get returns the value kept for k.
func (b *Bounded[K, V]) Get(k K) (V, bool) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	v, ok := b.m[k]
	return v, ok
}

// Put keeps v for k; a memo that is full starts over first.
func (b *Bounded[K, V]) Put(k K, v V) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.m[k]; !ok && len(b.m) >= b.max {
		clear(b.m)
	}
	b.m[k] = v
}

// Len is how many entries are kept.
func (b *Bounded[K, V]) Len() int {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return len(b.m)
}

// Clear forgets every entry.
func (b *Bounded[K, V]) Clear() {
	b.mu.Lock()
	defer b.mu.Unlock()
	clear(b.m)
}
