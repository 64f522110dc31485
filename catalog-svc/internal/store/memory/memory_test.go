package memory_test

import (
	"testing"

	"github.com/sharedos/toolshare/catalog-svc/internal/store"
	"github.com/sharedos/toolshare/catalog-svc/internal/store/memory"
	"github.com/sharedos/toolshare/catalog-svc/internal/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(*testing.T) (store.Store, store.Store) {
		s := memory.New()
		return s, s
	})
}
