package verbs

import "sync/atomic"

// slotStack holds the free request slots (handoff.go) as a lock-free stack
// (Treiber's, its head tagged against ABA): the slot freed last is the
// next one taken, so a device serving one hand-over at a time reuses one
// slot, whose lines and done channel stay in cache, where a queue would
// cycle through all numRequests of them.
type slotStack struct {
	// head is a tag (bumped by every change) in the high 32 bits and the
	// top slot's index+1 in the low 32; 0 there means empty.
	head atomic.Uint64
	// next[i] is the index+1 of the slot below slot i.
	next []atomic.Uint32
}

func newSlotStack(n int) *slotStack { return &slotStack{next: make([]atomic.Uint32, n)} }

// push puts free slot i on top.
func (s *slotStack) push(i uint32) {
	for {
		h := s.head.Load()
		s.next[i].Store(uint32(h))
		if s.head.CompareAndSwap(h, (h>>32+1)<<32|uint64(i+1)) {
			return
		}
	}
}

// pop takes the top slot and reports false when none is free.
func (s *slotStack) pop(i *uint32) bool {
	for {
		h := s.head.Load()
		top := uint32(h)
		if top == 0 {
			return false
		}
		// A slot popped and pushed again meanwhile changed the tag, so
		// a stale next fails the swap.
		below := s.next[top-1].Load()
		if s.head.CompareAndSwap(h, (h>>32+1)<<32|uint64(below)) {
			*i = top - 1
			return true
		}
	}
}
