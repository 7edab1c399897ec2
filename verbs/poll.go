package verbs

import (
	"runtime"
	"time"
)

// A started device on a link that another goroutine can sleep on
// (link.Poller: the udp backend, which parks in Go's network poller) does
// not keep its engine. Its goroutine drives the engine only while there is
// work: then it lets the engine go and parks in the link's Poll, holding
// no thread and no P, and a goroutine that posts meanwhile takes the
// engine (tryOwn) and runs it itself, as in inline mode: PostSend sends on
// the caller's goroutine with no hand-over. Poll wakes the device's
// goroutine for packets, for the engine's next timer and for Close, so
// the device answers its peers on its own and delivers completions to a
// CQ.Wait parked on the CQ's channel.
//
// Nothing here spins. Parking is what lets Go's scheduler, whose idle
// threads look at the network poller before they sleep, deliver the next
// packet within µs (issue 14, BENCHMARKS.md): a goroutine that spins
// instead keeps a thread from that look, and a goroutine asleep in a
// system call (the link's Wait) keeps its P, so that on two cores the
// goroutine it readied waited for the runtime's monitor.
//
// Who reads a packet that arrives while another goroutine drives: the
// device's goroutine wakes for it and finds the engine taken, so it sets
// d.missed before it tries once more (acquire); the owner looks at
// d.missed after it lets go (letGo) and reads the link once more. One of
// the two sees the other (Go's atomics are sequentially consistent), so
// the packet is read. An owner that armed a timer earlier than the
// goroutine's Poll deadline moves the deadline (rearm).

// pollLoop is the device's goroutine on a link.Poller. Start gave it the
// engine.
func (d *Device) pollLoop(done chan struct{}) {
	defer close(done)
	d.starting.Store(false) // from now on anyone may take the engine
	owned := true
	for !d.closed.Load() {
		if owned {
			d.runHandedOver()
			d.receiveAndRun()
			if d.e.Busy() {
				// More to send than one turn sends: yield, then
				// another turn.
				runtime.Gosched()
				continue
			}
		}
		d.pollOwns = false
		d.parked.Store(true)
		if owned {
			// The deadline is set while this goroutine owns the
			// engine, so an owner that arms an earlier timer after
			// it lets go moves it (rearm) and nothing sets it back.
			// Not owning, acquire cleared it for the owner to set.
			var deadline time.Time
			var armed int64
			if t, ok := d.e.NextDeadline(); ok {
				deadline, armed = t, max(t.UnixNano(), 1)
			}
			d.armed.Store(armed)
			d.poller.PollDeadline(deadline)
			d.letGo()
		}
		err := d.poller.Poll(d.pollFn)
		d.parked.Store(false)
		owned = d.pollOwns || d.acquire()
		if err != nil {
			break // closed
		}
	}
	if !owned {
		owned = d.tryOwn()
	}
	if owned {
		d.runHandedOver()
	}
	d.starting.Store(false)
	if owned {
		d.letGo()
	}
}

// pollReady is Poll's test, run before the goroutine parks and after
// each wake-up. It serves a turn with the engine taken and says to park
// again, so that a wake-up costs one turn and the goroutine leaves Poll
// only to move its deadline, for work left to send, or after Close
// (then it reports true).
func (d *Device) pollReady() bool {
	if d.closed.Load() {
		return true
	}
	if !d.acquire() {
		return false // the owner reads the link when it lets go
	}
	got := d.runHandedOver() + d.receiveAndRun()
	if d.e.Busy() || d.deadlineMoved() {
		d.pollOwns = true
		return true
	}
	// The turn read the link until it was empty: stay in Poll, which
	// remembers input from now on, and let a goroutine the turn readied
	// (a Wait's completion) have the processor first.
	d.letGo()
	if got > 0 {
		runtime.Gosched()
	}
	return false
}

// acquire takes the engine for the device's goroutine, or else leaves
// d.missed set for the owner to see when it lets go.
func (d *Device) acquire() bool {
	if !d.tryOwn() {
		// The Poll deadline may be stale or past: clear it before
		// saying so, and the owner sets it when it lets go after it
		// sees d.missed (rearm), or this goroutine when it next owns.
		d.armed.Store(0)
		d.poller.PollDeadline(time.Time{})
		d.missed.Store(true)
		if !d.tryOwn() {
			return false
		}
	}
	d.missed.Store(false) // this goroutine reads the link next
	return true
}

// deadlineMoved reports whether the engine's next timer is earlier than
// the goroutine's Poll deadline; the caller owns the engine.
func (d *Device) deadlineMoved() bool {
	t, ok := d.e.NextDeadline()
	if !ok {
		return false
	}
	a := d.armed.Load()
	return a == 0 || t.UnixNano() < a
}

// rearm is run by an owner about to let go while the device's goroutine
// is parked: it moves the goroutine's Poll deadline to the engine's next
// timer if that is earlier, and wakes it if the engine has packets it
// could send now.
func (d *Device) rearm() {
	if d.poller == nil || !d.parked.Load() || d.closed.Load() {
		return
	}
	if d.e.Busy() {
		d.wake()
		return
	}
	t, ok := d.e.NextDeadline()
	if !ok {
		return
	}
	ns := max(t.UnixNano(), 1)
	if a := d.armed.Load(); a != 0 && a <= ns {
		return
	}
	d.armed.Store(ns)
	d.poller.PollDeadline(t)
}
