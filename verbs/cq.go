package verbs

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/uroce/uroce/qp"
)

// CQ is a completion queue (ibv_cq). The engine writes completions into
// its own ring (package qp, owned by the engine's owner); the owner moves
// them into the CQ's lock-free ring, which any goroutine may poll.
type CQ struct {
	d        *Device
	c        *qp.CQ
	r        *ring[WC]
	notify   chan struct{}
	overflow atomic.Bool
	spin     spinLimit // how long recent Waits took (started device)

	// Owner only: the CQ is on d.dirty; completions taken from the
	// engine's ring that did not fit into r yet.
	dirty   bool
	pend    [32]WC
	pendOff int
	pendN   int
}

// CreateCQ makes a completion queue for at least n completions.
func (d *Device) CreateCQ(n int) *CQ {
	cq := &CQ{d: d, c: qp.NewCQ(n), notify: make(chan struct{}, 1)}
	cq.r = newRing[WC](cq.c.Cap())
	cq.c.OnComplete = cq.completed
	return cq
}

// completed runs in the engine, for each completion it writes.
func (c *CQ) completed() {
	if !c.dirty {
		c.dirty = true
		c.d.dirty = append(c.d.dirty, c)
	}
}

// transfer moves the engine's completions into the ring and reports
// whether it moved them all; the caller owns the engine.
func (c *CQ) transfer() bool {
	moved := false
	for {
		for c.pendOff < c.pendN {
			if !c.r.push(&c.pend[c.pendOff]) {
				c.signal(moved)
				return false
			}
			c.pendOff++
			moved = true
		}
		c.pendOff, c.pendN = 0, c.c.Poll(c.pend[:])
		if c.pendN == 0 {
			break
		}
	}
	if c.c.Overflowed {
		c.overflow.Store(true)
	}
	c.dirty = false
	c.signal(moved)
	return true
}

func (c *CQ) signal(moved bool) {
	if !moved {
		return
	}
	select {
	case c.notify <- struct{}{}:
	default:
	}
}

// Notify returns a channel that receives a value after completions arrive
// (a completion channel that is always armed; drain with Poll).
func (c *CQ) Notify() <-chan struct{} { return c.notify }

// Poll moves completions into wc and returns how many (ibv_poll_cq). In
// inline mode it first drives the engine, if no other goroutine does at
// the moment: reads the link, runs timers. Any goroutine may poll.
func (c *CQ) Poll(wc []WC) int {
	d := c.d
	if !d.bg.Load() && !d.closed.Load() && d.tryOwn() {
		d.runHandedOver()
		d.receiveAndRun()
		d.letGo()
	}
	n := 0
	for n < len(wc) && c.r.pop(&wc[n]) {
		n++
	}
	if n > 0 && !c.r.empty() {
		// More are waiting: let another waiter on this CQ see them.
		c.signal(true)
	}
	return n
}

// Wait blocks until at least one completion is in wc or ctx is done, and
// returns how many it moved, the context's error, or ErrClosed. In inline
// mode the waiting goroutine drives the engine and sleeps in the link
// while no one else does.
//
// On a started device it first spins, polling the CQ's ring, for about
// twice what recent Waits on this CQ took, at most 50 µs, and only while
// at least half of them ended within 75 µs (spin.go) and the device's
// goroutine is awake; then it parks until that goroutine delivers. A CQ
// whose completions follow each post within µs is answered without a
// wake-up; one that waits for a client's next request parks at once and
// costs no CPU. A device goroutine asleep in a link that parks in the
// runtime's poller (udp, afpacket, afxdp) is woken by the thread that
// parks this Wait, so spinning then would only delay it.
func (c *CQ) Wait(ctx context.Context, wc []WC) (int, error) {
	d := c.d
	var start time.Time
	for {
		if n := c.Poll(wc); n > 0 {
			if !start.IsZero() {
				c.spin.record(time.Since(start))
			}
			return n, nil
		}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		if d.closed.Load() {
			return 0, fmt.Errorf("wait: %w", ErrClosed)
		}
		if start.IsZero() {
			start = time.Now()
			if d.bg.Load() && c.spinFor(ctx, start) {
				continue
			}
		}
		owned, counted, err := d.ownOrCount(func() error { return c.sleep(ctx) })
		if owned {
			if err != nil && !d.closed.Load() {
				return 0, fmt.Errorf("wait: %w", err)
			}
			continue
		}
		select {
		case <-c.notify:
		case <-d.released:
		case <-ctx.Done():
		case <-d.done:
		}
		if counted {
			d.waiters.Add(-1)
		}
	}
}

// spinFor polls the ring for the budget that recent Waits earned and
// reports whether it spun at all.
func (c *CQ) spinFor(ctx context.Context, start time.Time) bool {
	b := c.spin.budget()
	if b == 0 || c.d.sleeping.Load() {
		return false
	}
	d := c.d
	done := ctx.Done()
	// A device goroutine asleep in the link is woken by the runtime's
	// poller, which a spinning goroutine keeps from running: spin only
	// while that goroutine is awake to deliver.
	for c.r.empty() && !d.sleeping.Load() && time.Since(start) < b && !d.closed.Load() {
		select {
		case <-done:
			return true
		default:
		}
		runtime.Gosched()
	}
	return true
}

// sleep waits in the link as the engine's owner, unless there is work.
func (c *CQ) sleep(ctx context.Context) error {
	d := c.d
	d.runHandedOver()
	d.receiveAndRun()
	if !c.r.empty() {
		return nil
	}
	limit := bgWait
	if ctx.Done() != nil {
		limit = inlineWait // the link cannot see ctx: look again soon
	}
	return d.sleep(limit)
}

// Overflowed reports whether a completion was lost for lack of room.
func (c *CQ) Overflowed() bool { return c.overflow.Load() }

// Destroy releases the CQ; it returns ErrBusy while a QP uses it.
func (c *CQ) Destroy() error {
	return c.d.withEngine(func() error {
		if c.d.e.CQInUse(c.c) {
			return fmt.Errorf("destroy CQ: %w", ErrBusy)
		}
		return nil
	})
}
