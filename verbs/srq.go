package verbs

import (
	"context"
	"fmt"

	"github.com/uroce/uroce/qp"
)

// The SRQ and event types are the engine's (package qp); their constants
// are in types.go.

// SRQAttr are an SRQ's attributes (ibv_srq_attr) for SRQ.Modify and Query,
// with an SRQAttrMask (SRQMaxWR, SRQLimit): the engine's own struct (package
// qp). Its fields:
//
//	struct {
//		MaxWR  int
//		MaxSGE int
//		// Limit is the armed limit: when a WQE is taken and fewer than
//		// Limit remain, the engine raises EventSRQLimitReached once and
//		// disarms it (Limit becomes 0; IBA 10.2.9.2, 11.6.3). 0 is disarmed.
//		Limit int
//	}
type SRQAttr = qp.SRQAttr

// SRQAttrMask names the SRQAttr fields SRQ.Modify sets
// (ibv_srq_attr_mask): SRQMaxWR, SRQLimit.
type SRQAttrMask = qp.SRQAttrMask

// SRQCounters are an SRQ's counters (SRQ.Counters): the engine's own
// struct (package qp). Its fields:
//
//	struct {
//		Posted, Taken uint64
//		// LimitEvents counts EventSRQLimitReached raised.
//		LimitEvents uint64
//	}
//
// SRQCounters count an SRQ's WRs and events.
type SRQCounters = qp.SRQCounters

// AsyncEventType is an asynchronous event's type (ibv_event_type):
// EventSRQLimitReached, EventPortErr, EventPortActive.
type AsyncEventType = qp.AsyncEventType

// SRQInit describes a new shared receive queue (ibv_srq_init_attr): how
// many receive WRs it holds, SGEs per WR, and a limit armed from the start
// when not 0.
type SRQInit struct {
	MaxWR, MaxSGE int
	Limit         int
}

// SRQ is a shared receive queue (ibv_srq): receive WRs that the QPs created
// with it (QPInit.SRQ) take in turn as messages arrive. An RC QP whose
// message finds it empty answers with an RNR NAK, and the sender retries.
type SRQ struct {
	pd *PD
	s  *qp.SRQ
}

// CreateSRQ makes a shared receive queue (ibv_create_srq). Errors wrap
// ErrBadAttr.
func (pd *PD) CreateSRQ(init SRQInit) (*SRQ, error) {
	d := pd.d
	var s *SRQ
	err := d.withEngine(func() error {
		qs, err := d.e.CreateSRQ(qp.SRQConfig{PD: pd.id, MaxWR: init.MaxWR, MaxSGE: init.MaxSGE, Limit: init.Limit})
		if err != nil {
			return err
		}
		s = &SRQ{pd: pd, s: qs}
		d.srqs[qs] = s
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// PostRecv posts a receive WR (ibv_post_srq_recv). Errors wrap
// ErrQueueFull, ErrBadWR or ErrClosed. Like QueuePair.PostRecv it runs at
// once on a free engine, else through its owner.
func (s *SRQ) PostRecv(wr *RecvWR) error { return s.pd.d.postRecv(nil, s.s, wr) }

// Modify arms the limit (ibv_modify_srq with SRQLimit): once a message
// takes a WR and fewer than Limit remain, the device reports
// EventSRQLimitReached (GetAsyncEvent) and disarms it. Errors wrap
// ErrBadAttr, also for SRQMaxWR: the SRQ cannot be resized.
func (s *SRQ) Modify(a *SRQAttr, mask SRQAttrMask) error {
	return s.pd.d.withEngine(func() error { return s.s.Modify(a, mask) })
}

// Query returns the SRQ's attributes (ibv_query_srq); Limit is 0 once the
// limit has fired.
func (s *SRQ) Query() SRQAttr {
	var a SRQAttr
	s.pd.d.withEngine(func() error { a = s.s.Attr(); return nil })
	return a
}

// Len returns how many receive WRs the SRQ holds.
func (s *SRQ) Len() int {
	var n int
	s.pd.d.withEngine(func() error { n = s.s.Len(); return nil })
	return n
}

// Counters returns the SRQ's counters.
func (s *SRQ) Counters() SRQCounters {
	var c SRQCounters
	s.pd.d.withEngine(func() error { c = s.s.Counters; return nil })
	return c
}

// Destroy removes the SRQ (ibv_destroy_srq); it returns ErrBusy while a QP
// uses it.
func (s *SRQ) Destroy() error {
	d := s.pd.d
	return d.withEngine(func() error {
		if err := d.e.DestroySRQ(s.s); err != nil {
			return err
		}
		delete(d.srqs, s.s)
		return nil
	})
}

// AsyncEvent is an asynchronous event (ibv_async_event): its type and the
// SRQ or the port (1, the only one) it concerns.
type AsyncEvent struct {
	Type AsyncEventType
	SRQ  *SRQ
	Port int
}

// asyncEvents is how many events wait for GetAsyncEvent; more are lost
// and counted (AsyncEventsLost).
const asyncEvents = 64

// asyncEvent runs in the engine's owner as the engine raises an event.
func (d *Device) asyncEvent(ev qp.AsyncEvent) {
	e := AsyncEvent{Type: ev.Type, SRQ: d.srqs[ev.SRQ]}
	select {
	case d.events <- e:
	default:
		d.eventsLost.Add(1)
	}
}

// AsyncEventsLost counts events dropped because GetAsyncEvent did not
// take them in time.
func (d *Device) AsyncEventsLost() uint64 { return d.eventsLost.Load() }

// GetAsyncEvent waits for the device's next asynchronous event
// (ibv_get_async_event; nothing needs acknowledging). In inline mode the
// waiting goroutine drives the engine while no one else does, as CQ.Wait
// does. It returns the context's error, or ErrClosed.
func (d *Device) GetAsyncEvent(ctx context.Context) (AsyncEvent, error) {
	for {
		select {
		case ev := <-d.events:
			return ev, nil
		default:
		}
		if err := ctx.Err(); err != nil {
			return AsyncEvent{}, err
		}
		if d.closed.Load() {
			return AsyncEvent{}, fmt.Errorf("get async event: %w", ErrClosed)
		}
		owned, counted, _ := d.ownOrCount(func() error {
			d.runHandedOver()
			d.receiveAndRun()
			if len(d.events) == 0 {
				d.sleep(inlineWait)
			}
			return nil
		})
		if owned {
			continue
		}
		select {
		case ev := <-d.events:
			if counted {
				d.waiters.Add(-1)
			}
			return ev, nil
		case <-d.released:
		case <-ctx.Done():
		case <-d.done:
		}
		if counted {
			d.waiters.Add(-1)
		}
	}
}
