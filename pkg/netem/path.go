package netem

import (
	"math/rand/v2"
	"slices"
	"time"
)

// Packet is what a Path carries: the link's handle on one packet, whose
// bytes only the link knows. The Path draws every fault; these methods
// apply them.
type Packet[T any] interface {
	// Len is the packet's size as the bottleneck counts it, in bytes.
	Len() int
	// ECT reports whether the packet is ECN-capable (ECT(0) or ECT(1)):
	// RED marks only those.
	ECT() bool
	// MarkCE marks the packet Congestion Experienced.
	MarkCE()
	// Corrupt flips one bit that the receiver's check covers, drawing it
	// from r.
	Corrupt(r *rand.Rand)
	// Copy returns a second packet with the same bytes, or false if there
	// is no buffer for one.
	Copy() (T, bool)
	// Free gives back a packet the Path dropped or discarded.
	Free()
}

// Path is one direction of an emulated network path. Send runs a packet
// through its stages, in this order, every random choice drawn from the
// source given to NewPath, so a run replays exactly given the same calls
// and the same clock readings:
//
//  1. drop with probability Drop;
//  2. the bottleneck: with Rate set the packet leaves after those already
//     queued (serialisation at Rate bytes/s); the queue is the backlog of
//     bytes not yet serialised, or, without Rate, the bytes sent but not yet
//     delivered. Over QueueLimit it is tail-dropped. An ECN-capable packet
//     is marked CE with the RED ramp p = Pmax·(q−Kmin)/(Kmax−Kmin) between
//     Kmin and Kmax and always above Kmax; a not-ECT packet is never marked
//     nor dropped by this stage;
//  3. delay: Delay plus a uniform Jitter (jitter may reorder);
//  4. corrupt with probability Corrupt (Packet.Corrupt);
//  5. duplicate with probability Duplicate (Packet.Copy);
//  6. reorder with probability Reorder: the packet is held back and released
//     after ReorderAfter later packets have been sent, or after
//     ReorderMaxHold, whichever is first.
//
// Deliver then hands out the packets in order of delivery time, ties in
// the order they joined the delay line. A Path is not safe for concurrent
// use.
type Path[T Packet[T]] struct {
	f      Faults
	rng    *rand.Rand
	q      Heap[flight[T], *flight[T]] // the delay line
	queued int                         // bytes sent, not yet delivered
	busy   time.Time                   // when the bottleneck is free
	held   []held[T]                   // the reorder stage
	stats  Stats
	// stalledUntil is when the latest stall ends: later packets wait
	// behind it (Faults.Stall).
	stalledUntil time.Time
}

type flight[T any] struct {
	at time.Time // delivery
	v  T
}

func (f *flight[T]) Compare(g *flight[T]) int { return f.at.Compare(g.at) }

type held[T any] struct {
	flight[T]
	since time.Time // when it was held back
	left  int       // packets still to overtake it
}

// NewPath returns a path with faults f drawing from r.
func NewPath[T Packet[T]](f Faults, r *rand.Rand) *Path[T] {
	if f.ReorderAfter == 0 {
		f.ReorderAfter = 3
	}
	if f.ReorderMaxHold == 0 {
		f.ReorderMaxHold = 10 * time.Millisecond
	}
	return &Path[T]{f: f, rng: r}
}

// Stats returns what the path did so far.
func (p *Path[T]) Stats() Stats { return p.stats }

// Send runs v, sent at now, through the path's stages.
func (p *Path[T]) Send(now time.Time, v T) {
	f := &p.f
	if f.Drop > 0 && p.rng.Float64() < f.Drop {
		p.stats.Dropped++
		v.Free()
		return
	}
	n := v.Len()
	// Bottleneck queue and ECN.
	q := p.queued
	start := now
	if f.Rate > 0 {
		q = 0
		if p.busy.After(now) {
			q = int(p.busy.Sub(now).Seconds() * f.Rate)
			start = p.busy
		}
	}
	if f.QueueLimit > 0 && q+n > f.QueueLimit {
		p.stats.QueueDropped++
		v.Free()
		return
	}
	if e := f.ECN; e != nil && v.ECT() && p.mark(e, q) {
		p.stats.Marked++
		v.MarkCE()
	}
	depart := start
	if f.Rate > 0 {
		depart = start.Add(time.Duration(float64(n) / f.Rate * float64(time.Second)))
		p.busy = depart
	}
	fl := flight[T]{at: depart.Add(f.Delay), v: v}
	if f.Jitter > 0 {
		fl.at = fl.at.Add(time.Duration(p.rng.Int64N(int64(f.Jitter))))
	}
	if f.StallRate > 0 {
		if p.rng.Float64() < f.StallRate {
			p.stats.Stalled++
			fl.at = fl.at.Add(f.Stall)
			p.stalledUntil = fl.at
		} else if fl.at.Before(p.stalledUntil) {
			fl.at = p.stalledUntil
		}
	}
	if f.Corrupt > 0 && p.rng.Float64() < f.Corrupt {
		p.stats.Corrupted++
		v.Corrupt(p.rng)
	}
	var dup T
	hasDup := false
	if f.Duplicate > 0 && p.rng.Float64() < f.Duplicate {
		if dup, hasDup = v.Copy(); hasDup {
			p.stats.Duplicated++
		}
	}
	p.queued += n
	// Packets already held are overtaken by this one.
	for i := 0; i < len(p.held); {
		h := &p.held[i]
		h.left--
		if h.left <= 0 {
			r := h.flight
			if r.at.Before(fl.at) {
				r.at = fl.at
			}
			p.q.Push(r)
			p.held = slices.Delete(p.held, i, i+1)
			continue
		}
		i++
	}
	if f.Reorder > 0 && p.rng.Float64() < f.Reorder {
		p.stats.Reordered++
		p.held = append(p.held, held[T]{flight: fl, since: now, left: f.ReorderAfter})
	} else {
		p.q.Push(fl)
	}
	if hasDup {
		p.queued += n
		p.q.Push(flight[T]{at: fl.at, v: dup})
	}
}

// mark draws only on the ramp, so runs without marking keep their random
// sequence.
func (p *Path[T]) mark(e *RED, q int) bool {
	u := 0.0
	if q > e.Kmin && q <= e.Kmax {
		u = p.rng.Float64()
	}
	return e.Mark(q, u)
}

// ReleaseHeld releases held packets that have waited ReorderMaxHold by now.
func (p *Path[T]) ReleaseHeld(now time.Time) {
	for i := 0; i < len(p.held); {
		h := p.held[i]
		if t := h.since.Add(p.f.ReorderMaxHold); !now.Before(t) {
			if h.at.Before(t) {
				h.at = t
			}
			p.held = slices.Delete(p.held, i, i+1)
			p.q.Push(h.flight)
			continue
		}
		i++
	}
}

// Next returns when the next packet falls due, if any is in the delay line
// (held packets excluded).
func (p *Path[T]) Next() (time.Time, bool) {
	if p.q.Len() == 0 {
		return time.Time{}, false
	}
	return p.q.Peek().at, true
}

// Due reports whether a packet is due at now and, if not, when the path
// next needs looking at: the next delivery or the end of a hold, whichever
// is first (the zero Time if neither).
func (p *Path[T]) Due(now time.Time) (next time.Time, ready bool) {
	if p.q.Len() > 0 {
		next = p.q.Peek().at
		ready = !next.After(now)
	}
	for _, h := range p.held {
		if t := h.since.Add(p.f.ReorderMaxHold); next.IsZero() || t.Before(next) {
			next = t
		}
	}
	return next, ready
}

// Deliver removes and returns the next packet if it is due at now.
func (p *Path[T]) Deliver(now time.Time) (T, bool) {
	if p.q.Len() == 0 || p.q.Peek().at.After(now) {
		var zero T
		return zero, false
	}
	fl := p.q.Pop()
	p.queued -= fl.v.Len()
	return fl.v, true
}

// Discard frees every packet in flight or held.
func (p *Path[T]) Discard() {
	for p.q.Len() > 0 {
		p.q.Pop().v.Free()
	}
	for _, h := range p.held {
		h.v.Free()
	}
	clear(p.held)
	p.held = p.held[:0]
	p.queued = 0
}
