package postgres

import (
	"sync"

	"github.com/sharedos/toolshare/catalog-svc/internal/store"
)

// ownBatches keeps a batch's AllChanged notice out of the feed of the Store
// that wrote it. That Store's caller already has the batch: CreateBatch
// returns the stored records and the catalogue applies them under its cache
// lock. Reloading every tool on hearing its own notice again (10,000 tools:
// ≈ 150 ms holding that lock, longer as the table grows) only delayed the
// next batch. Other replicas hear the notice as before; its payload is
// unchanged, so replicas of an older build still reload on it.
//
// A notice is recognised by the backend that sent it (the PID PostgreSQL
// puts in every notification): CreateBatch registers its transaction's
// backend before the commit, so the notice, delivered only after the
// commit, always finds it. Every doubt is resolved towards a reload:
//   - a batch whose outcome CreateBatch cannot confirm withdraws its
//     registration; if its notice was skipped meanwhile (the commit
//     happened after all), the feeds get AllChanged;
//   - a listener that reconnects forgets every registration (it pushes
//     AllChanged anyway): a notice it missed cannot be skipped later, and a
//     registration whose notice it missed cannot match a notice another
//     replica sends from a backend that reuses the PID;
//   - nothing is registered while no feed listens.
type ownBatches struct {
	mu sync.Mutex
	// pending counts, per backend PID, this Store's committed batches
	// whose notice no listener has seen yet.
	pending map[uint32]int
	feeds   map[*store.Feed]struct{}
}

// watch adds a listening feed; the returned func removes it.
func (o *ownBatches) watch(f *store.Feed) (stop func()) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.feeds == nil {
		o.feeds, o.pending = map[*store.Feed]struct{}{}, map[uint32]int{}
	}
	o.feeds[f] = struct{}{}
	return func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		delete(o.feeds, f)
		if len(o.feeds) == 0 {
			clear(o.pending)
		}
	}
}

// expect registers a batch about to commit on backend pid; false when no
// feed listens (then there is nothing to withdraw either).
func (o *ownBatches) expect(pid uint32) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.feeds) == 0 {
		return false
	}
	o.pending[pid]++
	return true
}

// withdraw takes back the registration of a batch CreateBatch cannot
// confirm. If a listener has skipped its notice already, the batch did
// commit and the feeds get AllChanged.
func (o *ownBatches) withdraw(pid uint32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.pending[pid] > 0 {
		o.decrement(pid)
		return
	}
	for f := range o.feeds {
		f.Push(store.AllChanged)
	}
}

// skip reports whether a listener's AllChanged notice from backend pid is
// a batch of this Store's, and consumes its registration.
func (o *ownBatches) skip(pid uint32) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.pending[pid] == 0 {
		return false
	}
	o.decrement(pid)
	return true
}

// forget drops every registration (a listener reconnected).
func (o *ownBatches) forget() {
	o.mu.Lock()
	defer o.mu.Unlock()
	clear(o.pending)
}

func (o *ownBatches) decrement(pid uint32) {
	if o.pending[pid]--; o.pending[pid] == 0 {
		delete(o.pending, pid)
	}
}
