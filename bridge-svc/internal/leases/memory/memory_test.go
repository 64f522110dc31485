package memory_test

import (
	"testing"

	"github.com/sharedos/toolshare/bridge-svc/internal/leases"
	"github.com/sharedos/toolshare/bridge-svc/internal/leases/memory"
	"github.com/sharedos/toolshare/bridge-svc/internal/leases/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(*testing.T) leases.Store { return memory.New() })
}
