package pipe

import (
	"time"

	"github.com/uroce/uroce/pkg/netem"
)

// direction is what carries one direction's packets: a netem.Path, or
// perfect when the direction has no faults.
type direction interface {
	Send(now time.Time, fl flight)
	ReleaseHeld(now time.Time)
	Deliver(now time.Time) (flight, bool)
	Next() (time.Time, bool)
	Due(now time.Time) (next time.Time, ready bool)
	Discard()
	Stats() netem.Stats
}

var (
	_ direction = (*netem.Path[flight])(nil)
	_ direction = (*perfect)(nil)
)

// perfect is a direction without faults. A perfect wire delivers each
// packet at the time it was sent, in the order sent, which is what a
// netem.Path with zero Faults does on a clock that does not go back; a
// ring does it without the path's stages and delay line, which cost more
// per packet than the engine's own work on small packets (the engine's
// benchmarks run over this pipe). Nothing a real wire does is left out:
// Send still writes the IP and UDP headers and the ICRC, Recv still
// parses and verifies them. The pipe calls its Send and Deliver directly,
// inlined, rather than through direction.
type perfect struct {
	// q is a ring whose length is a power of two (or zero): the packets
	// in flight are q[i&(len(q)-1)] for head <= i < tail.
	q          []flight
	head, tail uint
	// since is when the oldest packet in flight, or one sent before it,
	// was sent: every packet is due from then on, since the pipe's
	// clock does not go back. One time for the ring rather than one a
	// packet keeps Send to the flight's four words.
	since time.Time
}

func (w *perfect) Send(now time.Time, fl flight) {
	w.reserve(now, 1)
	w.put(fl)
}

// reserve makes room in the ring for n packets sent at now.
func (w *perfect) reserve(now time.Time, n int) {
	if w.head == w.tail {
		w.since = now
	}
	for w.tail-w.head+uint(n) > uint(len(w.q)) {
		w.grow()
	}
}

// put adds a packet to the ring, which reserve has made room for.
func (w *perfect) put(fl flight) {
	// Field by field: a literal is built on the stack and copied in
	// 16-byte loads that cannot be forwarded from the stores that built
	// it (170 ms of 3.6 s in the profile of qp's
	// BenchmarkBandwidth/RDMA_WRITE/64).
	e := &w.q[w.tail&uint(len(w.q)-1)]
	e.p, e.ip, e.n, e.pool = fl.p, fl.ip, fl.n, fl.pool
	w.tail++
}

// grow doubles the ring, or makes its first 64 entries.
func (w *perfect) grow() {
	q := make([]flight, max(2*len(w.q), 64))
	for i := w.head; i != w.tail; i++ {
		q[i-w.head] = w.q[i&uint(len(w.q)-1)]
	}
	w.q, w.head, w.tail = q, 0, w.tail-w.head
}

func (w *perfect) ReleaseHeld(time.Time) {}

// Deliver returns the oldest packet: every packet is due (since).
func (w *perfect) Deliver(time.Time) (flight, bool) {
	if w.head == w.tail {
		return flight{}, false
	}
	e := &w.q[w.head&uint(len(w.q)-1)]
	fl := *e
	// The buffer is the receiver's now: the ring keeps no pointer to
	// it.
	e.p = nil
	w.head++
	return fl, true
}

func (w *perfect) Next() (time.Time, bool) {
	if w.head == w.tail {
		return time.Time{}, false
	}
	return w.since, true
}

func (w *perfect) Due(time.Time) (time.Time, bool) { return w.Next() }

func (w *perfect) Discard() {
	for ; w.head != w.tail; w.head++ {
		e := &w.q[w.head&uint(len(w.q)-1)]
		e.Free()
		e.p = nil
	}
}

func (w *perfect) Stats() netem.Stats { return netem.Stats{} }
