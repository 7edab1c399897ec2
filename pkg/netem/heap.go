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

// Heap is a binary min-heap of values by time, declared as Heap[T, *T]
// for a T whose pointer has Compare. Values due at the same time come out
// in the order they went in, so a seeded run replays exactly. It is
// written out (not container/heap) so a push does not box its value. The
// zero value is an empty heap.
type Heap[T any, P Timed[T]] struct {
	s   []heapEntry[T]
	seq uint64
}

type heapEntry[T any] struct {
	v   T
	seq uint64 // push order, for ties
}

func (h *Heap[T, P]) less(i, j int) bool {
	a, b := &h.s[i], &h.s[j]
	if c := P(&a.v).Compare(&b.v); c != 0 {
		return c < 0
	}
	return a.seq < b.seq
}

// Len returns how many values the heap holds.
func (h *Heap[T, P]) Len() int { return len(h.s) }

// Push adds v.
func (h *Heap[T, P]) Push(v T) {
	h.seq++
	h.s = append(h.s, heapEntry[T]{v, h.seq})
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

// Peek returns the earliest value without removing it. The heap must not
// be empty.
func (h *Heap[T, P]) Peek() T { return h.s[0].v }

// Pop removes and returns the earliest value. The heap must not be empty.
//
// It moves the hole at the root down along the earlier child to a leaf,
// then fills it with the last value and sifts that up (Floyd's bottom-up
// variant): about half the comparisons of the textbook sift-down, which
// matters because a generic Compare cannot be inlined. The order of pops
// is the same, as (time, push order) is a total order.
func (h *Heap[T, P]) Pop() T {
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
