package testwait_test

import (
	"sync/atomic"
	"testing"

	"github.com/sharedos/toolshare/services/platform/testwait"
)

// Until returns once the condition holds, however many polls it takes.
func TestUntilReturnsOnceTheConditionHolds(t *testing.T) {
	var n atomic.Int32
	testwait.Until(t, "the third poll", func() bool { return n.Add(1) >= 3 })
	if got := n.Load(); got != 3 {
		t.Errorf("polled %d times, want 3", got)
	}
}
