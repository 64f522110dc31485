// Package memo is the bounded memo SharedOS keeps of what it derives again
// and again from the same input: compiled schemas, parsed annotations,
// digests already checked or stored. It holds at most a fixed number of
// entries — and, when told their sizes, at most a fixed number of bytes —
// and, when full, starts over: no eviction bookkeeping, and a miss costs
// only the work the memo saves. Safe for concurrent use; values are
// shared, so callers must not change them.
package memo

import "sync"

// Bounded maps keys to values, keeping at most its bounds.
type Bounded[K comparable, V any] struct {
	max      int
	maxBytes int64 // 0: entries alone are bounded
	mu       sync.RWMutex
	m        map[K]entry[V]
	bytes    int64 // the sizes of the entries kept
}

type entry[V any] struct {
	v    V
	size int64
}

// New returns an empty memo of at most bound entries (at least 1).
func New[K comparable, V any](bound int) *Bounded[K, V] {
	return &Bounded[K, V]{max: max(bound, 1), m: map[K]entry[V]{}}
}

// NewSized returns an empty memo of at most bound entries (at least 1)
// whose sizes, as PutSized is told them, add up to at most bytes: a memo
// of values whose sizes differ by orders of magnitude (a compiled schema
// of 5 KB, one of 5 MB) is bounded in memory, not only in count.
func NewSized[K comparable, V any](bound int, bytes int64) *Bounded[K, V] {
	b := New[K, V](bound)
	b.maxBytes = max(bytes, 1)
	return b
}

// Get returns the value kept for k.
func (b *Bounded[K, V]) Get(k K) (V, bool) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	e, ok := b.m[k]
	return e.v, ok
}

// Put keeps v for k; a memo that is full starts over first.
func (b *Bounded[K, V]) Put(k K, v V) { b.PutSized(k, v, 0) }

// PutSized keeps v, of size bytes, for k; a memo that would hold more
// than its bounds starts over first. A value larger than the byte bound is
// not kept (nor is the memo emptied for it).
func (b *Bounded[K, V]) PutSized(k K, v V, size int64) {
	size = max(size, 0)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.maxBytes > 0 && size > b.maxBytes {
		return
	}
	old, replaced := b.m[k]
	bytes := b.bytes - old.size + size
	if !replaced && len(b.m) >= b.max || b.maxBytes > 0 && bytes > b.maxBytes {
		clear(b.m)
		bytes = size
	}
	b.m[k] = entry[V]{v: v, size: size}
	b.bytes = bytes
}

// Len is how many entries are kept.
func (b *Bounded[K, V]) Len() int {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return len(b.m)
}

// Bytes is the sum of the sizes of the entries kept (PutSized).
func (b *Bounded[K, V]) Bytes() int64 {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.bytes
}

// Clear forgets every entry.
func (b *Bounded[K, V]) Clear() {
	b.mu.Lock()
	defer b.mu.Unlock()
	clear(b.m)
	b.bytes = 0
}
