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
// puts in every notification): CreateBatch asks its transaction's backend
// for its PID (pg_backend_pid(), the process that will send the notice,
// also behind a pooler that gives clients made-up PIDs) and registers it
// with every listening feed before the commit, so the notice, delivered
// only after the commit, always finds it. Each feed keeps its own
// registrations: one feed's listener taking a notice leaves another's
// untouched. Every doubt is resolved towards a reload:
//   - a batch whose outcome CreateBatch cannot confirm withdraws its
//     registrations; a feed whose listener skipped its notice meanwhile
//     (the commit happened after all) gets AllChanged;
//   - a listener that reconnects forgets its feed's registrations (it
//     pushes AllChanged anyway): a notice it missed cannot be skipped
//     later, and a registration whose notice it missed cannot match a
//     notice another replica sends from a backend that reuses the PID;
//   - a feed that stops takes its registrations with it, and nothing is
//     registered while no feed listens.
type ownBatches struct {
	mu sync.Mutex
	// pending counts, per listening feed and backend PID, this Store's
	// committed batches whose notice that feed's listener has not seen.
	pending map[*store.Feed]map[uint32]int
}

// watch adds a listening feed; the returned func removes it.
func (o *ownBatches) watch(f *store.Feed) (stop func()) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.pending == nil {
		o.pending = map[*store.Feed]map[uint32]int{}
	}
	o.pending[f] = map[uint32]int{}
	return func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		delete(o.pending, f)
	}
}

// expect registers a batch about to commit on backend pid with every
// listening feed; false when none listens (then there is nothing to
// withdraw either).
func (o *ownBatches) expect(pid uint32) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, m := range o.pending {
		m[pid]++
	}
	return len(o.pending) > 0
}

// withdraw takes back the registrations of a batch CreateBatch cannot
// confirm. A feed whose listener has skipped its notice already gets
// AllChanged: the batch did commit.
func (o *ownBatches) withdraw(pid uint32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for f, m := range o.pending {
		if m[pid] > 0 {
			decrement(m, pid)
			continue
		}
		f.Push(store.AllChanged)
	}
}

// skip reports whether an AllChanged notice from backend pid, heard by
// f's listener, is a batch of this Store's, and consumes f's registration.
func (o *ownBatches) skip(f *store.Feed, pid uint32) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	m := o.pending[f]
	if m[pid] == 0 {
		return false
	}
	decrement(m, pid)
	return true
}

// forget drops f's registrations (its listener reconnected).
func (o *ownBatches) forget(f *store.Feed) {
	o.mu.Lock()
	defer o.mu.Unlock()
	clear(o.pending[f])
}

func decrement(m map[uint32]int, pid uint32) {
	if m[pid]--; m[pid] == 0 {
		delete(m, pid)
	}
}
