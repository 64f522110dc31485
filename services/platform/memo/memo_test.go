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

// TestSized: a sized memo keeps its entries' sizes within its byte bound,
// starting over when a value would pass it; a value larger than the bound
// is not kept and empties nothing; a key put again counts its new size
// alone; Clear forgets the sizes too.
func TestSized(t *testing.T) {
	m := memo.NewSized[int, string](100, 10)
	m.PutSized(1, "a", 4)
	m.PutSized(2, "b", 4)
	if n, b := m.Len(), m.Bytes(); n != 2 || b != 8 {
		t.Fatalf("%d entries, %d bytes; want 2, 8", n, b)
	}
	m.PutSized(2, "b again", 6)
	if n, b := m.Len(), m.Bytes(); n != 2 || b != 10 {
		t.Fatalf("a key put again: %d entries, %d bytes; want 2, 10", n, b)
	}
	m.PutSized(3, "c", 1)
	if n, b := m.Len(), m.Bytes(); n != 1 || b != 1 {
		t.Fatalf("past the byte bound: %d entries, %d bytes; want 1, 1 (started over)", n, b)
	}
	if _, ok := m.Get(1); ok {
		t.Fatal("an entry from before the start-over is still kept")
	}
	m.PutSized(4, "huge", 11)
	if _, ok := m.Get(4); ok || m.Len() != 1 {
		t.Fatalf("a value past the whole bound: kept %v, %d entries; want it dropped and the memo as it was", ok, m.Len())
	}
	m.Put(5, "sizeless")
	if n, b := m.Len(), m.Bytes(); n != 2 || b != 1 {
		t.Fatalf("Put: %d entries, %d bytes; want 2, 1", n, b)
	}
	m.Clear()
	if n, b := m.Len(), m.Bytes(); n != 0 || b != 0 {
		t.Fatalf("after Clear: %d entries, %d bytes", n, b)
	}
}
