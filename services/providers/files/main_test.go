package files_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test stops its server and closes its connections: no goroutine may
// outlive them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
