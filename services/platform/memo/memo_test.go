package memo_test

import (
	"sync"
	"testing"

	"github.com/sharedos/toolshare/services/platform/memo"
)

// TestBounded: values come back for their keys; the memo never holds more
// than its bound, starting over when full; a key put again when full does
// not empty it; Clear forgets all; concurrent use is safe (-race).
func TestBounded(t *testing.T) {
	m := memo.New[int, string](3)
	for i := range 3 {
		m.Put(i, string(rune('a'+i)))
	}
	if v, ok := m.Get(1); !ok || v != "b" {
		t.Fatalf("Get(1) = %q, %v", v, ok)
	}
	m.Put(2, "c again")
	if n := m.Len(); n != 3 {
		t.Fatalf("a key put again when full: %d kept, want 3", n)
	}
	m.Put(3, "d")
	if n := m.Len(); n != 1 {
		t.Fatalf("past the bound: %d kept, want 1 (started over)", n)
	}
	if _, ok := m.Get(0); ok {
		t.Fatal("an entry from before the start-over is still kept")
	}
	if v, ok := m.Get(3); !ok || v != "d" {
		t.Fatalf("Get(3) = %q, %v", v, ok)
	}
	m.Clear()
	if n := m.Len(); n != 0 {
		t.Fatalf("after Clear: %d kept", n)
	}

	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				m.Put(g*1000+i, "x")
				m.Get(i)
			}
		})
	}
	wg.Wait()
	if n := m.Len(); n > 3 {
		t.Fatalf("%d kept, want at most 3", n)
	}
}
