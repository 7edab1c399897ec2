package qp

import (
	"cmp"
	"math"
	"slices"
	"time"
)

type timerKind uint8

const (
	timerRetrans timerKind = iota // local ACK timeout (IBA 9.7.6.1.3)
	timerRNR                      // RNR NAK wait (IBA 9.7.5.2.8)
	timerCC                       // the congestion control algorithm's timer
	timerPace                     // the pacer will have tokens for the requester
	timerAck                      // a held ACK must go (QPConfig.AckDelay)
)

// timer is one QP timer, embedded in the QP or its ccState. idx is its
// slot in the wheel and pos its entry there, or idx is idxStopped, or
// idxFiring while the engine's turn is about to fire it. when is the
// deadline of an armed timer, in nanoseconds since the wheel's base: 8
// bytes, where a time.Time takes 24, so the retrans timer leaves room in
// its line for rto's fields (QP).
type timer struct {
	when int64
	qp   *QP
	pos  int32
	idx  int16 // a slot of wheelSlots, or idxStopped or idxFiring
	kind timerKind
}

const (
	idxStopped = -1
	idxFiring  = -2
)

const (
	// tickShift: a wheel tick is 2^14 ns, 16.4 µs.
	tickShift = 14
	// wheelSlots ticks make one turn of the wheel, 67 ms: the local ACK
	// timeout rxe and ConnectX default to (Timeout 14) fits in one turn.
	wheelSlots = 1 << 12
	// slotCap timers fit in a slot before its entries grow.
	slotCap = 2
)

// timerEntry is a timer's place in a slot, with its deadline in
// nanoseconds since the wheel's base, so a slot is searched without
// touching the timers (each in its own QP, a cache miss apiece).
type timerEntry struct {
	t    *timer // nil once the timer stopped, moved or fired
	when int64
}

type timerSlot struct {
	e    []timerEntry
	min  int64 // at most every live entry's when
	live int32
}

// timerWheel is a hashed timing wheel (Varghese and Lauck): a timer lies
// in the slot of its tick modulo wheelSlots, so arming, moving and
// stopping it is O(1) whatever the number of QPs, and touches no other
// QP's timer: stopping leaves a hole in the slot's entries, filled when
// the slot is next looked through. A turn of the engine visits the slots
// of the ticks since the last one, skipping those whose earliest entry is
// not due; a timer farther out than one turn stays in its slot until its
// own turn comes. A timer fires once its when is not after the turn's
// time, never earlier, and the timers due in one turn fire in the order of
// their deadlines, as the heap they replace fired them.
type timerWheel struct {
	slots []timerSlot // nil until the first timer
	used  []uint64    // a bit per slot with live entries
	base  time.Time
	cur   int64 // the first tick not yet passed by a turn
	// tickEnd is where the tick cur ends; early is at most every armed
	// timer's deadline; wake is the earlier of the two (of tickEnd when
	// no timer is armed). A turn before wake looks at nothing: the common
	// turn costs one time comparison, as the heap's did.
	tickEnd time.Time
	early   time.Time
	wake    time.Time
	n       int
	due     []*timer
	// min caches the earliest timer for NextDeadline, or nil when it
	// must be looked for.
	min *timer
}

func (w *timerWheel) ns(t time.Time) int64 { return int64(t.Sub(w.base)) }

// set arms t for when, moving it if it was armed.
func (w *timerWheel) set(t *timer, when time.Time) {
	if w.slots == nil {
		w.slots = make([]timerSlot, wheelSlots)
		w.used = make([]uint64, wheelSlots/64)
		w.base = when
		// Room for slotCap timers in every slot from the start, in one
		// allocation (128 KiB): a slot a turn reaches for the first
		// time must not allocate on the data path.
		es := make([]timerEntry, wheelSlots*slotCap)
		for i := range w.slots {
			w.slots[i].e = es[i*slotCap : i*slotCap : (i+1)*slotCap]
		}
	}
	w.remove(t)
	ns := w.ns(when)
	t.when = ns
	// A timer already due goes to the slot the next turn visits first.
	s := int32(max(ns>>tickShift, w.cur) & (wheelSlots - 1))
	sl := &w.slots[s]
	if sl.live == 0 {
		sl.min = ns
		w.used[s>>6] |= 1 << (s & 63)
	} else {
		sl.min = min(sl.min, ns)
	}
	if w.n == 0 || when.Before(w.early) {
		w.early = when
	}
	if when.Before(w.wake) {
		w.wake = when
	}
	t.idx, t.pos = int16(s), int32(len(sl.e))
	sl.e = append(sl.e, timerEntry{t: t, when: ns})
	sl.live++
	w.n++
	if w.min != nil && ns < w.min.when || w.n == 1 {
		w.min = t
	}
}

// remove stops t; a stopped timer stays stopped.
func (w *timerWheel) remove(t *timer) {
	switch t.idx {
	case idxStopped:
		return
	case idxFiring:
		t.idx = idxStopped
		return
	}
	w.take(t)
	t.idx = idxStopped
}

// take removes t's entry from its slot.
func (w *timerWheel) take(t *timer) {
	s := t.idx
	sl := &w.slots[s]
	sl.e[t.pos].t = nil
	sl.live--
	w.n--
	if w.min == t {
		w.min = nil
	}
	switch {
	case sl.live == 0:
		sl.e = sl.e[:0]
		w.used[s>>6] &^= 1 << (s & 63)
	case int(t.pos) == len(sl.e)-1:
		for sl.e[len(sl.e)-1].t == nil {
			sl.e = sl.e[:len(sl.e)-1]
		}
	case len(sl.e) > 32 && int(sl.live) < len(sl.e)/4:
		w.compact(sl)
	}
}

// compact closes the holes of a slot, moving the live entries down: a
// cost of O(1) per hole, paid by the timers that made them.
func (w *timerWheel) compact(sl *timerSlot) {
	k := 0
	for _, en := range sl.e {
		if en.t != nil {
			en.t.pos = int32(k)
			sl.e[k] = en
			k++
		}
	}
	clear(sl.e[k:])
	sl.e = sl.e[:k]
}

// expire takes every timer due at now out of the wheel, in the order of
// their deadlines, marked idxFiring; the caller fires those still so
// marked (a timer fired before may stop or re-arm another).
func (w *timerWheel) expire(now time.Time) []*timer {
	w.due = w.due[:0]
	if w.slots == nil || now.Before(w.wake) {
		return w.due
	}
	if w.n == 0 || now.Before(w.early) {
		// Nothing is due: the current tick may move on without a look.
		w.cur = max(w.ns(now)>>tickShift, w.cur)
		w.tickEnd = w.base.Add(time.Duration((w.cur + 1) << tickShift))
		w.wake = w.tickEnd
		if w.n > 0 && w.early.Before(w.wake) {
			w.wake = w.early
		}
		return w.due
	}
	nowNS := w.ns(now)
	// If the clock went back, only the current slot is looked at.
	end := max(nowNS>>tickShift, w.cur)
	for k := max(w.cur, end-wheelSlots+1); k <= end; k++ {
		s := int32(k & (wheelSlots - 1))
		if w.used[s>>6]&(1<<(s&63)) == 0 {
			continue
		}
		sl := &w.slots[s]
		if sl.min > nowNS {
			continue
		}
		m := int64(math.MaxInt64)
		for i := range sl.e {
			en := &sl.e[i]
			switch {
			case en.t == nil:
			case en.when <= nowNS:
				t := en.t
				en.t = nil
				sl.live--
				w.n--
				if w.min == t {
					w.min = nil
				}
				t.idx = idxFiring
				w.due = append(w.due, t)
			default:
				m = min(m, en.when)
			}
		}
		sl.min = m
		if sl.live == 0 {
			sl.e = sl.e[:0]
			w.used[s>>6] &^= 1 << (s & 63)
		} else if len(sl.e) > 32 && int(sl.live) < len(sl.e)/4 {
			w.compact(sl)
		}
	}
	w.cur = end
	// What is left is of a later tick, or of this one and in its slot.
	next := int64((end + 1) << tickShift)
	w.tickEnd = w.base.Add(time.Duration(next))
	if sl := &w.slots[end&(wheelSlots-1)]; sl.live > 0 {
		next = min(next, sl.min)
	}
	w.early = w.base.Add(time.Duration(next))
	w.wake = w.early
	if len(w.due) > 1 {
		slices.SortStableFunc(w.due, func(a, b *timer) int { return cmp.Compare(a.when, b.when) })
	}
	return w.due
}

// next returns the earliest armed timer's deadline.
func (w *timerWheel) next() (time.Time, bool) {
	if w.n == 0 {
		return time.Time{}, false
	}
	if w.min == nil {
		w.min = w.find()
	}
	return w.base.Add(time.Duration(w.min.when)), true
}

// find looks for the earliest timer: in slot order from the current
// tick, the first slot with an entry of that very tick (or one already
// due, put there) holds it, since earlier ticks have none and later ones
// are later; if a whole turn has none, every timer is farther out than a
// turn and all are compared.
func (w *timerWheel) find() *timer {
	for k := w.cur; k < w.cur+wheelSlots; k++ {
		s := int32(k & (wheelSlots - 1))
		if w.used[s>>6]>>(s&63) == 0 {
			// No timer in the rest of this word: skip to the next.
			k += int64(63 - s&63)
			continue
		}
		if w.used[s>>6]&(1<<(s&63)) == 0 {
			continue
		}
		if t := earliest(w.slots[s].e, k); t != nil {
			return t
		}
	}
	return earliestOfAll(w.slots)
}

// earliest returns the earliest live entry of the slot whose tick is at
// most k, or nil.
func earliest(es []timerEntry, k int64) *timer {
	var best *timer
	var when int64
	for _, en := range es {
		if en.t != nil && en.when>>tickShift <= k && (best == nil || en.when < when) {
			best, when = en.t, en.when
		}
	}
	return best
}

func earliestOfAll(slots []timerSlot) *timer {
	var best *timer
	var when int64
	for _, sl := range slots {
		for _, en := range sl.e {
			if en.t != nil && (best == nil || en.when < when) {
				best, when = en.t, en.when
			}
		}
	}
	return best
}
