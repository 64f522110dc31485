package memory_test

import (
	"testing"

	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline/records"
	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline/records/memory"
	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline/records/recordstest"
)

func TestConformance(t *testing.T) {
	recordstest.Run(t, func(*testing.T) records.Store { return memory.New() })
}
