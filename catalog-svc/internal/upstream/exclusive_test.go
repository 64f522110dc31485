package upstream_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sharedos/toolshare/catalog-svc/internal/store/memory"
)

// A caller waiting for the upstream records' lock (the catalogue API's
// changes and the manager's own) waits only as long as its context allows,
// however long the holder keeps it.
func TestExclusiveWaitsOnlyAsLongAsTheContext(t *testing.T) {
	mem := memory.New()
	m := managerOver(t, mem, nil)
	release, err := m.Exclusive(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	ctx, cancel := context.WithCancel(t.Context())
	res := make(chan error, 1)
	go func() {
		done, err := m.Exclusive(ctx)
		if err == nil {
			done()
		}
		res <- err
	}()
	cancel()
	select {
	case err := <-res:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Exclusive with its context ended = %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Exclusive went on waiting after its context ended")
	}
}
