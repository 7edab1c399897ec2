package xdp

import (
	"sync/atomic"
	"testing"
)

// newTestRing builds a ring over ordinary memory; the test plays the kernel
// by moving the other index by hand.
func newTestRing[T any](n uint32, producerSide bool) (*ring[T], *[3]uint32) {
	idx := new([3]uint32)
	r := &ring[T]{producer: &idx[0], consumer: &idx[1], flags: &idx[2], entries: make([]T, n), size: n, mask: n - 1}
	if producerSide {
		r.cachedCons = n
	}
	return r, idx
}

func TestRingProduceWraps(t *testing.T) {
	r, idx := newTestRing[uint64](8, true)
	// Start near the 32-bit wrap so index arithmetic is exercised there.
	start := ^uint32(0) - 3
	idx[0], idx[1] = start, start
	r.cachedProd, r.cachedCons = start, start+8
	next := uint64(0)
	var got []uint64
	for round := 0; round < 20; round++ {
		src := []uint64{next, next + 1, next + 2, next + 3, next + 4}
		n := r.produce(src)
		next += uint64(n)
		if p := atomic.LoadUint32(r.producer); p != r.cachedProd {
			t.Fatalf("producer index %d not published (cached %d)", p, r.cachedProd)
		}
		// Kernel consumes three entries.
		for range 3 {
			c := idx[1]
			if c == idx[0] {
				break
			}
			got = append(got, r.entries[c&r.mask])
			idx[1] = c + 1
		}
	}
	for i, v := range got {
		if v != uint64(i) {
			t.Fatalf("entry %d = %d: order lost", i, v)
		}
	}
	if r.free(8) > 8 {
		t.Fatalf("free %d exceeds size", r.free(8))
	}
}

func TestRingFull(t *testing.T) {
	r, _ := newTestRing[uint64](4, true)
	if n := r.produce(make([]uint64, 6)); n != 4 {
		t.Fatalf("produced %d into an empty 4-ring, want 4", n)
	}
	if n := r.produce(make([]uint64, 1)); n != 0 {
		t.Fatalf("produced %d into a full ring", n)
	}
}

func TestRXKeepsChainsWhole(t *testing.T) {
	var x RXRing
	r, idx := newTestRing[Desc](16, false)
	x.r = *r
	x.r.producer, x.r.consumer = &idx[0], &idx[1]
	// Frames: [a] [b1 b2 b3] [c]
	in := []Desc{{Addr: 1}, {Addr: 2, Options: OptContinued}, {Addr: 3, Options: OptContinued}, {Addr: 4}, {Addr: 5}}
	copy(x.r.entries, in)
	atomic.StoreUint32(&idx[0], uint32(len(in)))

	buf := make([]Desc, 3)
	if n := x.Consume(buf); n != 1 || buf[0].Addr != 1 {
		t.Fatalf("first batch %d %v, want only the single frame", n, buf[:n])
	}
	if n := x.Consume(buf); n != 3 || buf[2].Addr != 4 {
		t.Fatalf("second batch %d %v, want the whole chain", n, buf[:n])
	}
	if n := x.Consume(buf); n != 1 || buf[0].Addr != 5 {
		t.Fatalf("third batch %d %v", n, buf[:n])
	}
	// A chain longer than the batch comes out anyway, in pieces, rather
	// than stalling the ring.
	copy(x.r.entries[5:], []Desc{{Addr: 6, Options: OptContinued}, {Addr: 7, Options: OptContinued}, {Addr: 8}})
	atomic.StoreUint32(&idx[0], 8)
	short := make([]Desc, 2)
	if n := x.Consume(short); n != 2 || short[1].Addr != 7 {
		t.Fatalf("long chain first piece %d %v", n, short[:n])
	}
	if n := x.Consume(short); n != 1 || short[0].Addr != 8 {
		t.Fatalf("long chain rest %d %v", n, short[:n])
	}
	if n := x.Consume(buf); n != 0 {
		t.Fatalf("empty ring gave %d", n)
	}
	if c := atomic.LoadUint32(&idx[1]); c != 8 {
		t.Fatalf("consumer index %d, want 8", c)
	}
}

func TestNeedWakeupFlag(t *testing.T) {
	var x TXRing
	r, idx := newTestRing[Desc](4, true)
	x.r = *r
	x.r.flags = &idx[2]
	if x.NeedWakeup() {
		t.Fatal("flag clear but NeedWakeup")
	}
	atomic.StoreUint32(&idx[2], ringNeedWakeup)
	if !x.NeedWakeup() {
		t.Fatal("flag set but no NeedWakeup")
	}
}

// TestTXFreeAtLeast: FreeAtLeast answers from the cached view while it
// holds enough room, never more than is really free, and reads the
// kernel's consumer index when asked for more than the view holds.
func TestTXFreeAtLeast(t *testing.T) {
	r, idx := newTestRing[Desc](8, true)
	tx := &TXRing{r: *r}
	if n := tx.Produce(make([]Desc, 6)); n != 6 {
		t.Fatalf("produced %d, want 6", n)
	}
	idx[1] += 4 // the kernel takes four; the cached view still says 2 free
	for _, tc := range []struct {
		want, got int
	}{
		{1, 2}, // the cached 2 suffice: no reload
		{2, 2},
		{3, 6}, // more than cached: reload sees the 4 taken
		{1, 6},
	} {
		if n := tx.FreeAtLeast(tc.want); n != tc.got {
			t.Fatalf("FreeAtLeast(%d) = %d, want %d", tc.want, n, tc.got)
		}
	}
	if n := tx.Free(); n != 6 {
		t.Fatalf("Free = %d, want 6", n)
	}
}
