package verbs

import "sync/atomic"

// ring is a bounded lock-free queue of values for any number of producers
// and consumers (Dmitry Vyukov's bounded MPMC queue): each cell carries a
// sequence number that says whose turn it is, so a push or pop is one
// compare-and-swap on a shared index and no goroutine ever blocks another.
// Values are copied in and out; nothing is allocated after newRing.
type ring[T any] struct {
	cells []cell[T]
	mask  uint64
	_     [64]byte // keep the indexes off the header's cache line
	head  atomic.Uint64
	_     [56]byte
	tail  atomic.Uint64
	_     [56]byte
}

type cell[T any] struct {
	seq atomic.Uint64
	v   T
}

// newRing returns a ring that holds at least n values.
func newRing[T any](n int) *ring[T] {
	size := 2
	for size < n {
		size <<= 1
	}
	r := &ring[T]{cells: make([]cell[T], size), mask: uint64(size - 1)}
	for i := range r.cells {
		r.cells[i].seq.Store(uint64(i))
	}
	return r
}

// push copies *v in and reports false when the ring is full.
func (r *ring[T]) push(v *T) bool {
	pos := r.head.Load()
	for {
		c := &r.cells[pos&r.mask]
		switch d := int64(c.seq.Load() - pos); {
		case d == 0:
			if r.head.CompareAndSwap(pos, pos+1) {
				c.v = *v
				c.seq.Store(pos + 1)
				return true
			}
			pos = r.head.Load()
		case d < 0:
			return false
		default:
			pos = r.head.Load()
		}
	}
}

// pop copies the oldest value out and reports false when the ring is empty.
func (r *ring[T]) pop(v *T) bool {
	pos := r.tail.Load()
	for {
		c := &r.cells[pos&r.mask]
		switch d := int64(c.seq.Load() - (pos + 1)); {
		case d == 0:
			if r.tail.CompareAndSwap(pos, pos+1) {
				*v = c.v
				c.seq.Store(pos + r.mask + 1)
				return true
			}
			pos = r.tail.Load()
		case d < 0:
			return false
		default:
			pos = r.tail.Load()
		}
	}
}

// empty reports whether no value has been pushed that is not yet popped
// (a snapshot: producers and consumers may be mid-call).
func (r *ring[T]) empty() bool { return r.head.Load() == r.tail.Load() }
