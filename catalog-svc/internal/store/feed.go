package store

import (
	"slices"
	"sync"
)

// AllChanged is the change-feed payload meaning "reload everything": a batch
// registration, or a reconnect after which notifications may have been
// missed. Tool names cannot contain '*', so it never collides with a name.
const AllChanged = "*"

// Feed is a coalescing queue of changed tool names. Producers never block:
// repeated changes to one name collapse into one entry, and a consumer that
// falls behind simply finds more names (or "all") on its next Take.
type Feed struct {
	mu    sync.Mutex
	names map[string]struct{}
	all   bool
	ready chan struct{}
}

// NewFeed returns an empty feed.
func NewFeed() *Feed {
	return &Feed{names: map[string]struct{}{}, ready: make(chan struct{}, 1)}
}

// Push records that name changed; AllChanged marks everything changed.
func (f *Feed) Push(name string) {
	f.mu.Lock()
	if name == AllChanged {
		f.all = true
		clear(f.names)
	} else if !f.all {
		f.names[name] = struct{}{}
	}
	f.mu.Unlock()
	select {
	case f.ready <- struct{}{}:
	default: // a wake-up is already pending
	}
}

// Ready receives a value when changes are pending.
func (f *Feed) Ready() <-chan struct{} { return f.ready }

// Take returns and clears the pending changes: either all=true, or the
// changed names in ascending order.
func (f *Feed) Take() (names []string, all bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.all {
		f.all = false
		return nil, true
	}
	for n := range f.names {
		names = append(names, n)
	}
	clear(f.names)
	slices.Sort(names)
	return names, false
}
