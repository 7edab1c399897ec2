package verbs

import (
	"runtime"
	"time"

	"github.com/uroce/uroce/pkg/link"
	"github.com/uroce/uroce/qp"
)

// The engine (package qp) and the link are not safe for concurrent use, so
// exactly one goroutine owns them at a time: whoever holds d.owner, a word
// taken with a compare-and-swap. In inline mode any verbs call takes it in
// passing, runs the engine to completion and lets go (as eRPC does); after
// Start the device's goroutine holds it for good. A call that finds it
// taken hands its work over instead: it fills a request slot, pushes the
// slot's index on d.sub (a lock-free ring), wakes the owner's link Wait and
// waits for the owner to run it. Whoever lets go of d.owner looks at d.sub
// once more, so a request pushed just as the owner left is not stranded.
//
// tryOwn and letGo take and give up the engine. withEngine (control
// calls), QueuePair.PostSend and postRecv run a call at once on a free
// engine, else hand it over through slot and handOver. An owner runs what
// was handed over with runHandedOver, and turns the engine with runEngine
// (without reading the link) or receiveAndRun (reading it first).

// Request kinds.
const (
	reqSend = iota + 1
	reqRecv
	reqFunc
)

// request is one call handed to the engine's owner. The poster copies its
// work request in (the SGL and inline data into slices the slot keeps, so
// nothing is allocated once they have grown) and waits for done.
type request struct {
	done   chan struct{} // capacity 1: the owner ran it
	kind   uint8
	q      *qp.QP
	srq    *qp.SRQ
	send   SendWR
	recv   RecvWR
	sgl    []SGE
	inline []byte
	ah     AH
	fn     func() error
	err    error
}

// numRequests bounds the calls in flight to an owner; more wait for a slot.
const numRequests = 256

// Idle bounds on a sleeping owner's link Wait. A link that is a
// link.Waker is woken by every hand-over, so the bound only matters for
// context cancellation in an inline Wait; others are polled at pollWait.
// bgWait is long because a sleep in a link that waits in a system call
// (ppoll, or a link of another kind) holds its P, and after the runtime's
// monitor takes the P back it polls every 20 µs for a while (about 60
// wake-ups a sleep); at 100 ms, two such idle devices cost 2 % of a core
// in context switches (TestIdleCPU). A link that parks in the runtime's
// poller costs nothing while it sleeps.
const (
	bgWait     = time.Second
	inlineWait = time.Millisecond
	pollWait   = 50 * time.Microsecond
)

func (d *Device) initOwner() {
	d.reqs = make([]request, numRequests)
	d.free = newSlotStack(numRequests)
	d.sub = newRing[uint32](numRequests)
	for i := len(d.reqs) - 1; i >= 0; i-- {
		d.reqs[i].done = make(chan struct{}, 1)
		d.free.push(uint32(i))
	}
	d.released = make(chan struct{}, 1)
	d.done = make(chan struct{})
	if w, ok := d.l.(link.Waker); ok {
		d.wake = w.Wake
	}
}

// tryOwn takes the engine if no one holds it and Start is not taking it
// for the background goroutine.
func (d *Device) tryOwn() bool { return !d.starting.Load() && d.owner.CompareAndSwap(0, 1) }

// letGo lets go of the engine, first running requests that arrived
// meanwhile, and tells a blocked inline waiter that the engine is free.
func (d *Device) letGo() {
	for {
		d.owner.Store(0)
		if d.sub.empty() || !d.tryOwn() {
			break
		}
		d.runHandedOver()
		d.runEngine()
	}
	if d.waiters.Load() > 0 {
		select {
		case d.released <- struct{}{}:
		default:
		}
	}
}

// runHandedOver runs the requests handed over and returns how many; the
// caller owns the engine.
func (d *Device) runHandedOver() int {
	var i uint32
	n := 0
	for ; d.sub.pop(&i); n++ {
		r := &d.reqs[i]
		switch r.kind {
		case reqSend:
			if d.closed.Load() {
				r.err = errSendClosed
			} else {
				r.err = r.q.PostSend(d.clock(), &r.send)
			}
		case reqRecv:
			if d.closed.Load() {
				r.err = errRecvClosed
			} else {
				r.err = engineRecv(r.q, r.srq, &r.recv)
			}
		case reqFunc:
			r.err = r.fn()
		}
		r.done <- struct{}{}
	}
	return n
}

// runEngine runs the engine's timers and requesters and delivers
// completions, without reading the link; the caller owns the engine.
func (d *Device) runEngine() { d.runEngineAt(d.clock()) }

// runEngineAt is runEngine at the time now.
func (d *Device) runEngineAt(now time.Time) {
	if d.closed.Load() {
		return // the link is gone, and AllocMR memory with it (unmapAll)
	}
	d.e.Process(now)
	d.deliverCompletions()
}

// receiveAndRun feeds received packets to the engine, runs its timers and
// requesters, delivers completions and returns how many packets came in;
// the caller owns the engine.
func (d *Device) receiveAndRun() int {
	if d.closed.Load() {
		return 0
	}
	now := d.clock()
	got := 0
	for {
		n, _ := d.l.Recv(d.rx[:])
		if n == 0 {
			break
		}
		got += n
		d.e.Receive(now, d.rx[:n])
		d.l.Release(d.rx[:n])
		if n < len(d.rx) {
			break
		}
	}
	d.e.Process(now)
	d.deliverCompletions()
	return got
}

// deliverCompletions moves new completions from the engine's CQs to the
// CQs' rings, where any goroutine may poll them.
func (d *Device) deliverCompletions() {
	keep := d.dirty[:0]
	for _, c := range d.dirty {
		if !c.transfer() {
			keep = append(keep, c)
		}
	}
	clear(d.dirty[len(keep):])
	d.dirty = keep
}

// waitTime is how long the owner may sleep in the link: until the next
// timer, at most limit.
func (d *Device) waitTime(limit time.Duration) time.Duration {
	if d.e.Busy() || !d.sub.empty() {
		return 0
	}
	if d.wake == nil {
		limit = min(limit, pollWait)
	}
	if t, ok := d.e.NextDeadline(); ok {
		if w := t.Sub(d.clock()); w < limit {
			return max(w, 0)
		}
	}
	return limit
}

// handOver hands a request to the engine's owner and waits for its result,
// running it itself if the engine comes free meanwhile.
func (d *Device) handOver(i uint32) error {
	r := &d.reqs[i]
	d.sub.push(&i) // cannot fail: the ring holds every slot
	// An owner that is not asleep in the link looks at d.sub before it
	// goes to sleep (after it says so in d.sleeping), so only a sleeping
	// one needs the wake.
	asleep := d.sleeping.Load()
	if d.wake != nil && asleep {
		d.wake()
	}
	// A woken owner runs once this goroutine parks: its P finds it in the
	// runtime's poller then, and not while this one spins (loop).
	for spin := 0; !asleep; spin++ {
		select {
		case <-r.done:
			return d.finish(i, r)
		default:
		}
		if d.tryOwn() {
			d.runHandedOver()
			d.runEngine()
			d.letGo()
			continue
		}
		if spin >= 16 {
			break
		}
		runtime.Gosched()
	}
	// The owner is busy or asleep: it serves d.sub before it sleeps and
	// before it lets go, and the wake above cut its sleep short.
	<-r.done
	return d.finish(i, r)
}

// finish returns a served request's slot and its result.
func (d *Device) finish(i uint32, r *request) error {
	err := r.err
	r.q, r.srq, r.fn, r.err = nil, nil, nil, nil
	d.free.push(i)
	return err
}

// slot takes a free request slot, helping the owner while there is none.
func (d *Device) slot() (uint32, *request) {
	var i uint32
	for !d.free.pop(&i) {
		if d.tryOwn() {
			d.runHandedOver()
			d.runEngine()
			d.letGo()
		} else {
			runtime.Gosched()
		}
	}
	return i, &d.reqs[i]
}

// withEngine runs fn with the engine owned: at once if it is free, else
// through the owner. Control calls use it; they may allocate.
func (d *Device) withEngine(fn func() error) error {
	if d.tryOwn() {
		err := fn()
		d.runEngine()
		d.letGo()
		return err
	}
	i, r := d.slot()
	r.kind, r.fn = reqFunc, fn
	return d.handOver(i)
}

// ownOrCount is one turn of a goroutine blocked in CQ.Wait or
// GetAsyncEvent. Inline, with the engine free, it runs turn as the owner
// and lets go (owned: look again). Otherwise the caller blocks until what
// it waits for, d.released, its context or d.done comes; inline it is
// first counted in d.waiters (counted), so that letGo wakes it, and takes
// itself off with d.waiters.Add(-1) once woken.
func (d *Device) ownOrCount(turn func() error) (owned, counted bool, err error) {
	if d.bg.Load() {
		return false, false, nil
	}
	if d.tryOwn() {
		err := turn()
		d.letGo()
		return true, false, err
	}
	// Another goroutine drives the engine: wait for it to deliver, or to
	// let go so this one can drive. It may have let go before it could
	// see the count: take the engine again, so the wake is not lost.
	d.waiters.Add(1)
	if d.tryOwn() {
		d.waiters.Add(-1)
		d.letGo()
		return true, false, nil
	}
	return false, true, nil
}

// loop is the background goroutine: it owns the engine until Close.
//
// It does not spin between packets: with no work it parks in the link at
// once. The link's Wait parks the goroutine in the runtime's poller
// (pkg/link/internal/waiter), so when a goroutine on this device or its
// peer parks, the thread that was running it finds the next one ready in
// its own netpoll and runs it without a wake-up: a round trip between
// two started devices runs on one thread. A spinning goroutine breaks
// that chain: one that yields keeps its P from polling (the scheduler
// finds it on the run queue first), one that does not leaves the packet
// to a thread that must be woken. Both cost more than the park, measured
// with 32 spinning rounds and with spins learnt from the gaps between
// packets (issue 14, verbs/BENCHMARKS.md).
func (d *Device) loop(done chan struct{}) {
	defer close(done)
	for !d.closed.Load() {
		d.runHandedOver()
		d.receiveAndRun()
		// Not another look at the link first: the sleep returns at once
		// if a packet or a hand-over came meanwhile, and it lets the
		// goroutines the work readied run before it.
		if err := d.sleep(bgWait); err != nil {
			break
		}
	}
	d.runHandedOver()
	d.starting.Store(false) // callers after Close run their calls themselves
	d.letGo()
}

// sleep waits in the link as the engine's owner for at most limit, unless
// there is work; d.sleeping tells posters that it needs a wake.
func (d *Device) sleep(limit time.Duration) error {
	// The link's Wait is a system call that keeps this goroutine's P: a
	// goroutine it readied (a Wait's notify, a poster's done) would wait
	// for the runtime's monitor to take the P back, up to milliseconds on
	// an idle process. Let it run first.
	runtime.Gosched()
	d.sleeping.Store(true)
	var err error
	if w := d.waitTime(limit); w > 0 {
		err = d.l.Wait(w)
	}
	d.sleeping.Store(false)
	return err
}

// postRecv posts wr to q's receive queue, or to srq when q is nil: at once
// on a free engine, else through its owner (QueuePair.PostRecv and
// SRQ.PostRecv).
func (d *Device) postRecv(q *qp.QP, srq *qp.SRQ, wr *RecvWR) error {
	if d.tryOwn() {
		err := errRecvClosed
		if !d.closed.Load() {
			err = engineRecv(q, srq, wr)
		}
		d.runHandedOver()
		d.runEngine()
		d.letGo()
		return err
	}
	i, r := d.slot()
	r.kind, r.q, r.srq = reqRecv, q, srq
	r.sgl = append(r.sgl[:0], wr.SGL...)
	r.recv = RecvWR{ID: wr.ID, SGL: r.sgl}
	return d.handOver(i)
}

// engineRecv posts wr in the engine, to q or else to srq.
func engineRecv(q *qp.QP, srq *qp.SRQ, wr *RecvWR) error {
	if q != nil {
		return q.PostRecv(wr)
	}
	return srq.PostRecv(wr)
}
