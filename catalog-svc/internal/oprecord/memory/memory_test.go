package memory_test

import (
	"testing"

	"github.com/sharedos/toolshare/catalog-svc/internal/oprecord"
	"github.com/sharedos/toolshare/catalog-svc/internal/oprecord/memory"
	"github.com/sharedos/toolshare/catalog-svc/internal/oprecord/oprecordtest"
)

func TestConformance(t *testing.T) {
	oprecordtest.Run(t, func(*testing.T) oprecord.Store { return memory.New() })
}
