package postgres

import (
	"testing"

	"github.com/sharedos/toolshare/catalog-svc/internal/store"
)

// pushed reports whether f has a pending "all changed", taking it.
func pushed(f *store.Feed) bool {
	select {
	case <-f.Ready():
		_, all := f.Take()
		return all
	default:
		return false
	}
}

// Every doubt ends in a reload, never in a skipped notice.
func TestOwnBatches(t *testing.T) {
	var o ownBatches
	if o.expect(7) {
		t.Fatal("registered a batch while no feed listens")
	}
	f := store.NewFeed()
	stop := o.watch(f)

	// Committed: its notice is skipped once.
	if !o.expect(7) || !o.skip(f, 7) || o.skip(f, 7) {
		t.Fatal("a committed batch's notice is not skipped exactly once")
	}
	// Not committed: withdrawn, and the PID no longer matches.
	o.expect(7)
	o.withdraw(7)
	if pushed(f) || o.skip(f, 7) {
		t.Fatal("a withdrawn batch left a push or a registration")
	}
	// Outcome unknown, but its notice was skipped: it committed, so reload.
	o.expect(7)
	if !o.skip(f, 7) {
		t.Fatal("notice not skipped")
	}
	o.withdraw(7)
	if !pushed(f) {
		t.Fatal("a batch whose notice was skipped and whose outcome is unknown did not reload the feed")
	}
	// Two batches on two backends, in any order.
	o.expect(7)
	o.expect(9)
	if !o.skip(f, 9) || !o.skip(f, 7) || o.skip(f, 9) {
		t.Fatal("two pending batches not matched by their backends")
	}
	// A reconnected listener forgets: a later notice from the PID is not skipped.
	o.expect(7)
	o.forget(f)
	if o.skip(f, 7) {
		t.Fatal("a registration survived the listener's reconnect")
	}
	// The last feed gone: nothing registered is kept.
	o.expect(7)
	stop()
	if o.skip(f, 7) || o.expect(7) {
		t.Fatal("registrations kept with no feed listening")
	}
}

// Two feeds on one Store keep their registrations apart: each skips the
// batch's notice once, one's reconnect or stop leaves the other's
// registration, and an unconfirmed batch reloads only the feed that
// skipped its notice.
func TestOwnBatchesPerFeed(t *testing.T) {
	var o ownBatches
	f, g := store.NewFeed(), store.NewFeed()
	o.watch(f)
	stopG := o.watch(g)

	o.expect(7)
	if !o.skip(f, 7) || o.skip(f, 7) || !o.skip(g, 7) || o.skip(g, 7) {
		t.Fatal("each feed must skip a batch's notice exactly once")
	}
	o.expect(7)
	o.forget(f)
	if o.skip(f, 7) || !o.skip(g, 7) {
		t.Fatal("a reconnect of one feed's listener touched the other's registration")
	}
	o.expect(7)
	if !o.skip(f, 7) {
		t.Fatal("notice not skipped")
	}
	o.withdraw(7)
	if !pushed(f) || pushed(g) || o.skip(g, 7) {
		t.Fatal("an unconfirmed batch must reload the feed that skipped its notice and only withdraw the other's")
	}
	o.expect(7)
	stopG()
	if o.skip(g, 7) || !o.skip(f, 7) {
		t.Fatal("a stopped feed kept its registration, or took the other's")
	}
	if !o.expect(9) {
		t.Fatal("no registration while a feed still listens")
	}
}
