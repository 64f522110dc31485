package upstream_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sharedos/toolshare/catalog-svc/internal/store"
	"github.com/sharedos/toolshare/catalog-svc/internal/store/memory"
	"github.com/sharedos/toolshare/catalog-svc/internal/upstream"
	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
)

// gatedStore is a store whose next read of one upstream's record, once
// gated, answers what the record was then only when the test opens the
// gate (or the read's context ends): a slow store.
type gatedStore struct {
	*memory.Store
	mu      sync.Mutex
	key     string        // the record whose next read waits
	entered chan struct{} // closed once that read waits
	gate    chan struct{} // lets it answer
	ended   atomic.Bool   // that read answered
}

// gateNext makes the next read of ns's record wait for the gate.
func (s *gatedStore) gateNext(ns string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.key, s.entered, s.gate = ns, make(chan struct{}), make(chan struct{})
	s.ended.Store(false)
}

func (s *gatedStore) GetEntry(ctx context.Context, k store.Kind, key string) (store.Entry, error) {
	s.mu.Lock()
	gated := k == store.KindUpstream && key == s.key
	if gated {
		s.key = ""
	}
	s.mu.Unlock()
	e, err := s.Store.GetEntry(ctx, k, key)
	if gated {
		close(s.entered)
		select {
		case <-s.gate:
		case <-ctx.Done():
		}
		s.ended.Store(true)
	}
	return e, err
}

// gatedManager is a manager over a gatedStore with upstreams aa and bb
// (the fixture), their connections open and due for the spec check.
func gatedManager(t *testing.T) (*upstream.Manager, upstream.Handlers, *gatedStore) {
	t.Helper()
	h := newHarness(t, upstream.Guard{})
	mem := memory.New()
	st := &gatedStore{Store: mem}
	m := upstream.New(upstream.Config{Store: st, Registry: newCatalog(t, mem)})
	t.Cleanup(func() { _ = m.Close() })
	hs := upstream.Handlers{Upstreams: m}
	for _, ns := range []string{"aa", "bb"} {
		if _, err := m.Add(t.Context(), &sharedosv1.UpstreamProvider{Namespace: ns, Url: h.url, AutoApproveNew: true}, "op"); err != nil {
			t.Fatal(err)
		}
		if _, err := hs.Client(upstream.Target(ns)); err != nil {
			t.Fatal(err)
		}
	}
	upstream.ExpireSpecChecks(m)
	return m, hs, st
}

// clientOf asks hs for ns's client in the background; its error arrives
// on the channel returned.
func clientOf(hs upstream.Handlers, ns string) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := hs.Client(upstream.Target(ns))
		done <- err
	}()
	return done
}

// A connection's spec check reads the provider's record holding no lock
// the others need: while one upstream's record is slow to read, another
// upstream's calls (their own check included) and the turns' cancellation
// go on. Those needing the slow one wait for its one reading.
func TestASlowSpecCheckHoldsUpNoOtherUpstream(t *testing.T) {
	_, hs, st := gatedManager(t)
	st.gateNext("aa")
	aa := clientOf(hs, "aa")
	<-st.entered
	again := clientOf(hs, "aa") // joins the reading under way

	c, err := hs.Client(upstream.Target("bb"))
	if err != nil {
		t.Fatal(err)
	}
	if res, err := c.Handle(t.Context(), &sharedosv1.HandleRequest{Tool: "bb.echo", ArgumentsJson: []byte(`{"text":"hi"}`)}); err != nil || res.GetIsError() {
		t.Fatalf("bb's call while aa's record is read: %v %v", res, err)
	}
	_ = hs.HeldTurns()
	_ = hs.CancelTurn("some turn")
	if st.ended.Load() {
		t.Fatal("bb's check, its call and the turns' sweep waited for aa's record")
	}

	close(st.gate)
	for _, done := range []<-chan error{aa, again} {
		if err := <-done; err != nil {
			t.Errorf("aa once its record is read: %v", err)
		}
	}
}

// A reading that began before the provider was removed on this replica is
// not taken for the record: the connection is not made again for the
// removed provider.
func TestASpecCheckOverlappingARemovalIsReadAgain(t *testing.T) {
	m, hs, st := gatedManager(t)
	st.gateNext("aa")
	aa := clientOf(hs, "aa")
	<-st.entered // it read the record as it was: aa still there
	if err := m.Remove(t.Context(), "aa"); err != nil {
		t.Fatal(err)
	}
	close(st.gate)
	if err := <-aa; !errors.Is(err, upstream.ErrNotFound) {
		t.Errorf("aa's client once it was removed: %v, want ErrNotFound", err)
	}
	if _, err := hs.Client(upstream.Target("aa")); !errors.Is(err, upstream.ErrNotFound) {
		t.Errorf("aa's client later: %v, want ErrNotFound", err)
	}
}
