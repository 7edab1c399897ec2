package netem

// Timed is the pointer to a value that knows when it falls due relative
// to another of its kind, as time.Time's Compare does: negative if
// earlier, zero if at the same time, positive if later. Compare takes
// pointers because a generic call cannot be inlined, and copying the
// values into every call doubled the simulator's run time.
type Timed[T any] interface {
	*T
	Compare(*T) int
}

// Heap is a min-queue of values by time, declared as Heap[T, *T] for a T
// whose pointer has Compare. Values due at the same time come out in the
// order they went in, so a seeded run replays exactly. It is written out
// (not container/heap) so a push does not box its value. The zero value
// is empty.
//
// Most values arrive in time order: a delay line with a fixed delay and
// no jitter hands packets out as they went in. Such a value goes to a
// FIFO lane instead of the binary heap: one comparison to push, none to
// pop while the heap part is empty. A value earlier than the lane's last
// goes to the heap. Pop takes the earlier of the two fronts, so the order
// is that of one heap whatever the mix.
type Heap[T any, P Timed[T]] struct {
	s    []heapEntry[T] // the binary heap
	lane []heapEntry[T] // values in (time, push order) order, from head on
	head int
	seq  uint64
}

type heapEntry[T any] struct {
	v   T
	seq uint64 // push order, for ties
}

func (h *Heap[T, P]) less(i, j int) bool { return entryLess[T, P](&h.s[i], &h.s[j]) }

func entryLess[T any, P Timed[T]](a, b *heapEntry[T]) bool {
	if c := P(&a.v).Compare(&b.v); c != 0 {
		return c < 0
	}
	return a.seq < b.seq
}

// Len returns how many values the heap holds.
func (h *Heap[T, P]) Len() int { return len(h.s) + len(h.lane) - h.head }

// Push adds v.
func (h *Heap[T, P]) Push(v T) {
	h.seq++
	if n := len(h.lane); n == cap(h.lane) && h.head > 0 {
		// Reuse the popped front rather than grow.
		n = copy(h.lane, h.lane[h.head:])
		clear(h.lane[n:])
		h.lane = h.lane[:n]
		h.head = 0
	}
	// v is compared where it is stored: a pointer to v itself would make
	// it escape through the generic Compare, an allocation per push.
	h.lane = append(h.lane, heapEntry[T]{v, h.seq})
	n := len(h.lane)
	if n-1 == h.head || P(&h.lane[n-1].v).Compare(&h.lane[n-2].v) >= 0 {
		return
	}
	h.s = append(h.s, h.lane[n-1])
	h.lane[n-1] = heapEntry[T]{}
	h.lane = h.lane[:n-1]
	h.up(len(h.s) - 1)
}

// up moves the value at i towards the root until its parent is earlier.
func (h *Heap[T, P]) up(i int) {
	q := h.s
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
			break
		}
		q[i], q[p] = q[p], q[i]
		i = p
	}
}

// fromLane reports whether the earliest value is the lane's front. The
// heap must not be empty.
func (h *Heap[T, P]) fromLane() bool {
	if h.head == len(h.lane) {
		return false
	}
	return len(h.s) == 0 || entryLess[T, P](&h.lane[h.head], &h.s[0])
}

// Peek returns the earliest value without removing it. The heap must not
// be empty.
func (h *Heap[T, P]) Peek() T {
	if h.fromLane() {
		return h.lane[h.head].v
	}
	return h.s[0].v
}

// Pop removes and returns the earliest value. The heap must not be empty.
func (h *Heap[T, P]) Pop() T {
	if !h.fromLane() {
		return h.popHeap()
	}
	e := &h.lane[h.head]
	v := e.v
	*e = heapEntry[T]{} // drop what it points to
	if h.head++; h.head == len(h.lane) {
		h.lane = h.lane[:0]
		h.head = 0
	}
	return v
}

// popHeap removes the binary heap's root.
//
// It moves the hole at the root down along the earlier child to a leaf,
// then fills it with the last value and sifts that up (Floyd's bottom-up
// variant): about half the comparisons of the textbook sift-down, which
// matters because a generic Compare cannot be inlined. The order of pops
// is the same, as (time, push order) is a total order.
func (h *Heap[T, P]) popHeap() T {
	q := h.s
	top := q[0].v
	n := len(q) - 1
	i := 0
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if c+1 < n && h.less(c+1, c) {
			c++
		}
		q[i] = q[c]
		i = c
	}
	if i != n {
		q[i] = q[n]
		h.up(i)
	}
	q[n] = heapEntry[T]{} // drop what it points to
	h.s = q[:n]
	return top
}
