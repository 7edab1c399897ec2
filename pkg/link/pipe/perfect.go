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
	q    []inFlight // from head on
	head int
}

type inFlight struct {
	fl flight
	at time.Time
}

func (w *perfect) Send(now time.Time, fl flight) {
	if len(w.q) == cap(w.q) && w.head > 0 {
		// Reuse the delivered front rather than grow.
		n := copy(w.q, w.q[w.head:])
		clear(w.q[n:])
		w.q, w.head = w.q[:n], 0
	}
	// Grown by a zero entry and then filled: appending an inFlight
	// literal builds it on the stack and copies it in 16-byte loads that
	// cannot be forwarded from the stores that built it (170 ms of 3.6 s
	// in the profile of qp's BenchmarkBandwidth/RDMA_WRITE/64).
	w.q = append(w.q, inFlight{})
	e := &w.q[len(w.q)-1]
	e.fl, e.at = fl, now
}

func (w *perfect) ReleaseHeld(time.Time) {}

func (w *perfect) Deliver(now time.Time) (flight, bool) {
	if w.head == len(w.q) || w.q[w.head].at.After(now) {
		return flight{}, false
	}
	fl := w.q[w.head].fl
	w.q[w.head] = inFlight{}
	if w.head++; w.head == len(w.q) {
		w.q, w.head = w.q[:0], 0
	}
	return fl, true
}

func (w *perfect) Next() (time.Time, bool) {
	if w.head == len(w.q) {
		return time.Time{}, false
	}
	return w.q[w.head].at, true
}

func (w *perfect) Due(now time.Time) (time.Time, bool) {
	next, ok := w.Next()
	return next, ok && !next.After(now)
}

func (w *perfect) Discard() {
	for _, f := range w.q[w.head:] {
		f.fl.Free()
	}
	clear(w.q)
	w.q, w.head = w.q[:0], 0
}

func (w *perfect) Stats() netem.Stats { return netem.Stats{} }
