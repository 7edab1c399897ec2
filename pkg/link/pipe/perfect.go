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
// parses and verifies them.
type perfect struct {
	// q is a ring whose length is a power of two (or zero): the packets
	// in flight are q[i&(len(q)-1)] for head <= i < tail.
	q          []inFlight
	head, tail uint
}

type inFlight struct {
	fl flight
	at time.Time
}

func (w *perfect) Send(now time.Time, fl flight) {
	if w.tail-w.head == uint(len(w.q)) {
		w.grow()
	}
	// Filled field by field: an inFlight literal is built on the stack
	// and copied in 16-byte loads that cannot be forwarded from the
	// stores that built it (170 ms of 3.6 s in the profile of qp's
	// BenchmarkBandwidth/RDMA_WRITE/64).
	e := &w.q[w.tail&uint(len(w.q)-1)]
	e.fl, e.at = fl, now
	w.tail++
}

// grow doubles the ring, or makes its first 64 entries.
func (w *perfect) grow() {
	q := make([]inFlight, max(2*len(w.q), 64))
	for i := w.head; i != w.tail; i++ {
		q[i-w.head] = w.q[i&uint(len(w.q)-1)]
	}
	w.q, w.head, w.tail = q, 0, w.tail-w.head
}

func (w *perfect) ReleaseHeld(time.Time) {}

func (w *perfect) Deliver(time.Time) (flight, bool) {
	if w.head == w.tail {
		return flight{}, false
	}
	// Every packet is due: it was sent at a time no later than now,
	// since the pipe's clock does not go back (Advance keeps a manual
	// one from it). Time.After is a call, not inlined, and cost 27
	// instructions a packet in qp's BenchmarkBandwidth.
	e := &w.q[w.head&uint(len(w.q)-1)]
	fl := e.fl
	// The buffer is the receiver's now: the ring keeps no pointer to
	// it. The pool is every entry's and stays.
	e.fl.p = nil
	w.head++
	return fl, true
}

func (w *perfect) Next() (time.Time, bool) {
	if w.head == w.tail {
		return time.Time{}, false
	}
	return w.q[w.head&uint(len(w.q)-1)].at, true
}

func (w *perfect) Due(time.Time) (time.Time, bool) { return w.Next() }

func (w *perfect) Discard() {
	for ; w.head != w.tail; w.head++ {
		e := &w.q[w.head&uint(len(w.q)-1)]
		e.fl.Free()
		e.fl.p = nil
	}
}

func (w *perfect) Stats() netem.Stats { return netem.Stats{} }
