package qp

// CQ is a completion queue: a ring of Completion values with a fixed
// capacity. The engine writes, the owner polls; like the engine it is not
// safe for concurrent use.
type CQ struct {
	ring       []Completion
	mask       uint32
	head, tail uint32 // read at head, write at tail
	capacity   uint32
	// Overflowed is set when a completion found the ring full and was
	// lost (IBV_EVENT_CQ_ERR); the CQ is unusable after it.
	Overflowed bool
	// OnComplete, when set, is called after each completion is written,
	// for notification channels.
	OnComplete func()
	refs       int
}

// NewCQ returns a CQ that holds at least n completions.
func NewCQ(n int) *CQ {
	if n < 1 {
		n = 1
	}
	size := 1
	for size < n {
		size <<= 1
	}
	return &CQ{ring: make([]Completion, size), mask: uint32(size - 1), capacity: uint32(n)}
}

// Len returns how many completions are waiting.
func (c *CQ) Len() int { return int(c.tail - c.head) }

// Cap returns the CQ's capacity.
func (c *CQ) Cap() int { return int(c.capacity) }

// slot returns the ring's next entry for a completion to be written in
// place, with commit after, or nil when the ring is full (which sets
// Overflowed): a completion written field by field is not built on the
// stack and copied.
func (c *CQ) slot() *Completion {
	if c.tail-c.head >= c.capacity {
		c.Overflowed = true
		return nil
	}
	return &c.ring[c.tail&c.mask]
}

// commit publishes the entry slot returned.
func (c *CQ) commit() {
	c.tail++
	if c.OnComplete != nil {
		c.OnComplete()
	}
}

// Poll moves up to len(dst) completions into dst, oldest first, and returns
// how many.
func (c *CQ) Poll(dst []Completion) int {
	n := 0
	for n < len(dst) && c.head != c.tail {
		dst[n] = c.ring[c.head&c.mask]
		c.head++
		n++
	}
	return n
}
