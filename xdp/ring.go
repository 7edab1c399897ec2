package xdp

import "sync/atomic"

// ring is one single-producer single-consumer AF_XDP ring over shared
// memory. The process is the producer of Fill and TX and the consumer of RX
// and Completion; each method below is only used on the matching side.
type ring[T any] struct {
	producer *uint32
	consumer *uint32
	flags    *uint32
	entries  []T
	mask     uint32
	size     uint32
	// cachedProd and cachedCons are this side's view. On a producer ring
	// cachedCons holds consumer+size, so cachedCons-cachedProd is the free
	// space (libxdp's convention); on a consumer ring cachedProd is the
	// last producer index loaded.
	cachedProd uint32
	cachedCons uint32
}

// free returns the free entries for the producer, reloading the consumer
// index only when the cached view has fewer than want.
func (r *ring[T]) free(want uint32) uint32 {
	n := r.cachedCons - r.cachedProd
	if n >= want {
		return n
	}
	r.cachedCons = atomic.LoadUint32(r.consumer) + r.size
	return r.cachedCons - r.cachedProd
}

// produce copies as many of src as fit and publishes them.
func (r *ring[T]) produce(src []T) int {
	n := r.free(uint32(len(src)))
	if n > uint32(len(src)) {
		n = uint32(len(src))
	}
	if n == 0 {
		return 0
	}
	p := r.cachedProd
	for i := range n {
		r.entries[(p+i)&r.mask] = src[i]
	}
	r.cachedProd = p + n
	// The entries must be visible before the index: the atomic store is
	// the release the kernel's smp_load_acquire of the producer pairs with.
	atomic.StoreUint32(r.producer, r.cachedProd)
	return int(n)
}

// avail returns the entries ready for the consumer, reloading the producer
// index only when the cached view is empty.
func (r *ring[T]) avail() uint32 {
	n := r.cachedProd - r.cachedCons
	if n == 0 {
		r.cachedProd = atomic.LoadUint32(r.producer)
		n = r.cachedProd - r.cachedCons
	}
	return n
}

// peek returns the i-th ready entry (i < avail()).
func (r *ring[T]) peek(i uint32) *T { return &r.entries[(r.cachedCons+i)&r.mask] }

// release hands n consumed entries back to the producer.
func (r *ring[T]) release(n uint32) {
	r.cachedCons += n
	atomic.StoreUint32(r.consumer, r.cachedCons)
}

// consume copies up to len(dst) ready entries and releases them.
func (r *ring[T]) consume(dst []T) int {
	n := r.avail()
	if n > uint32(len(dst)) {
		n = uint32(len(dst))
	}
	if n == 0 {
		return 0
	}
	for i := range n {
		dst[i] = *r.peek(i)
	}
	r.release(n)
	return int(n)
}

func (r *ring[T]) needWakeup() bool {
	return r.flags != nil && atomic.LoadUint32(r.flags)&ringNeedWakeup != 0
}

const ringNeedWakeup = 1 // XDP_RING_NEED_WAKEUP

// Desc is an RX or TX descriptor, laid out as the kernel's struct xdp_desc.
type Desc struct {
	// Addr is the frame's byte offset in the UMEM (where the data starts).
	Addr uint64
	// Len is the number of bytes of this buffer.
	Len uint32
	// Options carries OptContinued on all but the last buffer of a
	// multi-buffer frame.
	Options uint32
}

// OptContinued is XDP_PKT_CONTD: more buffers of the same frame follow.
const OptContinued = 1

// FillRing is the process's producer side of the Fill ring.
type FillRing struct{ r ring[uint64] }

// Produce posts frame addresses for the kernel to receive into and returns
// how many fit.
func (f *FillRing) Produce(addrs []uint64) int { return f.r.produce(addrs) }

// Free returns how many addresses Produce can take now.
func (f *FillRing) Free() int { return int(f.r.free(f.r.size)) }

// Size is the ring's capacity.
func (f *FillRing) Size() int { return int(f.r.size) }

// NeedWakeup reports whether the kernel asks for a recvfrom or poll to
// resume taking frames (zero-copy drivers set it when Fill ran dry).
func (f *FillRing) NeedWakeup() bool { return f.r.needWakeup() }

// CompletionRing is the process's consumer side of the Completion ring.
type CompletionRing struct{ r ring[uint64] }

// Consume takes up to len(addrs) completed transmit frame addresses.
func (c *CompletionRing) Consume(addrs []uint64) int { return c.r.consume(addrs) }

// Size is the ring's capacity.
func (c *CompletionRing) Size() int { return int(c.r.size) }

// RXRing is the process's consumer side of the RX ring.
type RXRing struct{ r ring[Desc] }

// Consume takes up to len(descs) received descriptors. It never splits a
// multi-buffer frame: if the last descriptors that fit carry OptContinued,
// they are left for the next call, unless one frame alone fills descs (then
// descs must be made longer; MaxFrags is enough).
func (x *RXRing) Consume(descs []Desc) int {
	n := x.r.avail()
	if n > uint32(len(descs)) {
		n = uint32(len(descs))
	}
	if n == 0 {
		return 0
	}
	// The kernel publishes a frame's buffers together, so only the cut
	// made by len(descs) can split a chain.
	m := n
	for m > 0 && x.r.peek(m-1).Options&OptContinued != 0 {
		m--
	}
	if m == 0 {
		m = n
	}
	for i := range m {
		descs[i] = *x.r.peek(i)
	}
	x.r.release(m)
	return int(m)
}

// Size is the ring's capacity.
func (x *RXRing) Size() int { return int(x.r.size) }

// TXRing is the process's producer side of the TX ring.
type TXRing struct{ r ring[Desc] }

// Produce queues descriptors for transmission and returns how many fit.
// Callers keep multi-buffer chains whole by checking Free first.
func (x *TXRing) Produce(descs []Desc) int { return x.r.produce(descs) }

// Free returns how many descriptors Produce can take now.
func (x *TXRing) Free() int { return int(x.r.free(x.r.size)) }

// FreeAtLeast returns how many descriptors Produce can take, reading the
// kernel's consumer index (a cache line the kernel writes) only when the
// cached view holds fewer than n: the room a batch needs usually is
// already known from the last read (libxdp's xsk_prod_nb_free).
func (x *TXRing) FreeAtLeast(n int) int { return int(x.r.free(uint32(n))) }

// Size is the ring's capacity.
func (x *TXRing) Size() int { return int(x.r.size) }

// NeedWakeup reports whether the kernel needs a sendto to transmit what is
// queued (always, in copy mode).
func (x *TXRing) NeedWakeup() bool { return x.r.needWakeup() }

func loadConsumer[T any](r *ring[T]) uint32 { return atomic.LoadUint32(r.consumer) }

// Ready returns how many received descriptors are waiting.
func (x *RXRing) Ready() int { return int(x.r.avail()) }

// Pending returns how many queued descriptors the kernel has not consumed.
func (x *TXRing) Pending() int { return int(x.r.cachedProd - loadConsumer(&x.r)) }
