package main

import (
	"context"
	"errors"
	"testing"

	"github.com/uroce/uroce/verbs"
)

// floor is a bare verbs SEND ping-pong between two devices (ib_send_lat's
// exchange, with the same waiting as the RPC layer: each side sleeps in
// CQ.Wait): what an RPC costs without the layer's slots, locks and
// headers, measured in the same run as the RPC.
type floor struct {
	cq   *verbs.CQ
	qp   *verbs.QueuePair
	mr   *verbs.MR
	recv verbs.RecvWR
	send verbs.SendWR
	wc   [8]verbs.WC

	sqp  *verbs.QueuePair // the echoing side's
	scq  *verbs.CQ
	stop context.CancelFunc
	done chan struct{}
}

const floorMax = 16 << 10

// newFloor connects a client QP on dc to an echoing QP on ds, whose
// goroutine runs until close.
func newFloor(b *testing.B, dc, ds *verbs.Device) *floor {
	mk := func(d *verbs.Device) (*verbs.CQ, *verbs.QueuePair, *verbs.MR) {
		cq := d.CreateCQ(16)
		pd := d.AllocPD()
		q, err := pd.CreateQP(&verbs.QPInit{SendCQ: cq, RecvCQ: cq,
			Cap: verbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInline: floorMax}})
		if err != nil {
			b.Fatal(err)
		}
		mr, err := pd.RegMR(make([]byte, floorMax), verbs.AccessLocalWrite)
		if err != nil {
			b.Fatal(err)
		}
		return cq, q, mr
	}
	f := &floor{done: make(chan struct{})}
	f.cq, f.qp, f.mr = mk(dc)
	scq, sqp, smr := mk(ds)
	f.scq, f.sqp = scq, sqp
	if err := f.qp.Connect(sqp.Endpoint(2), verbs.ConnectOptions{PSN: 1}); err != nil {
		b.Fatal(err)
	}
	if err := sqp.Connect(f.qp.Endpoint(1), verbs.ConnectOptions{PSN: 2}); err != nil {
		b.Fatal(err)
	}
	f.recv = verbs.RecvWR{ID: 1, SGL: []verbs.SGE{f.mr.SGE(0, floorMax)}}
	srecv := verbs.RecvWR{ID: 1, SGL: []verbs.SGE{smr.SGE(0, floorMax)}}
	if err := f.qp.PostRecv(&f.recv); err != nil {
		b.Fatal(err)
	}
	if err := sqp.PostRecv(&srecv); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.stop = cancel
	go func() {
		defer close(f.done)
		var wc [8]verbs.WC
		var reply verbs.SendWR
		for {
			n, err := scq.Wait(ctx, wc[:])
			if err != nil {
				return
			}
			for _, c := range wc[:n] {
				if c.Status != verbs.WCSuccess || c.Opcode != verbs.WCRecv {
					continue
				}
				// Repost before replying: the client's next SEND follows
				// the reply at once.
				if sqp.PostRecv(&srecv) != nil {
					return
				}
				reply = verbs.SendWR{Opcode: verbs.WRSend, Flags: verbs.SendSignaled | verbs.SendInline,
					InlineData: smr.Buf()[:c.ByteLen]}
				for {
					err := sqp.PostSend(&reply)
					if !errors.Is(err, verbs.ErrQueueFull) {
						break
					}
					scq.Poll(wc[:0])
				}
			}
		}
	}()
	return f
}

// call sends req and waits for its echo.
func (f *floor) call(req, _ []byte, _ *pending) error {
	f.send = verbs.SendWR{Opcode: verbs.WRSend, Flags: verbs.SendSignaled | verbs.SendInline, InlineData: req}
	for {
		err := f.qp.PostSend(&f.send)
		if err == nil {
			break
		}
		if !errors.Is(err, verbs.ErrQueueFull) {
			return err
		}
		f.cq.Poll(f.wc[:0])
	}
	for {
		n, err := f.cq.Wait(context.Background(), f.wc[:])
		if err != nil {
			return err
		}
		for _, c := range f.wc[:n] {
			if c.Status != verbs.WCSuccess {
				return errors.New(c.Status.String())
			}
			if c.Opcode == verbs.WCRecv {
				return f.qp.PostRecv(&f.recv)
			}
		}
	}
}

// close stops the echoing goroutine and destroys both QPs and CQs (the
// regions and PDs go with their devices).
func (f *floor) close() {
	f.stop()
	<-f.done
	f.qp.Destroy()
	f.sqp.Destroy()
	f.cq.Destroy()
	f.scq.Destroy()
}
