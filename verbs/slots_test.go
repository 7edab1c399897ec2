package verbs

import (
	"sync"
	"testing"
)

// TestSlotStackOrder checks that the slot freed last is taken first and
// that an empty stack says so.
func TestSlotStackOrder(t *testing.T) {
	s := newSlotStack(4)
	var i uint32
	if s.pop(&i) {
		t.Fatalf("empty stack popped slot %d", i)
	}
	for _, v := range []uint32{0, 3, 1} {
		s.push(v)
	}
	for _, want := range []uint32{1, 3, 0} {
		if !s.pop(&i) || i != want {
			t.Fatalf("pop: got slot %d, want %d", i, want)
		}
	}
	if s.pop(&i) {
		t.Fatalf("drained stack popped slot %d", i)
	}
}

// TestSlotStackConcurrent has goroutines take and give back slots at once:
// no slot may be held by two of them, and every slot is free at the end.
func TestSlotStackConcurrent(t *testing.T) {
	const n, workers, rounds = 8, 6, 20000
	s := newSlotStack(n)
	for i := range uint32(n) {
		s.push(i)
	}
	var held [n]sync.Mutex // TryLock fails if another goroutine holds the slot
	var wg sync.WaitGroup
	errs := make(chan string, workers)
	for range workers {
		wg.Go(func() {
			var i uint32
			for range rounds {
				if !s.pop(&i) {
					continue
				}
				if !held[i].TryLock() {
					errs <- "a slot taken twice"
					return
				}
				held[i].Unlock()
				s.push(i)
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	seen := map[uint32]bool{}
	for i := uint32(0); s.pop(&i); {
		if seen[i] {
			t.Fatalf("slot %d free twice", i)
		}
		seen[i] = true
	}
	if len(seen) != n {
		t.Fatalf("%d slots free at the end, want %d", len(seen), n)
	}
}
