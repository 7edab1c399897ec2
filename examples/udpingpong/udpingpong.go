package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/uroce/uroce/examples/internal/pingdest"
	"github.com/uroce/uroce/verbs"
)

// qkey is ibv_ud_pingpong's Q_Key, on its QP and in every send.
const qkey = 0x11111111

// Work request IDs, ud_pingpong.c's PINGPONG_RECV_WRID and
// PINGPONG_SEND_WRID; the loop's pending bits are the same values.
const (
	recvWRID = 1
	sendWRID = 2
)

var (
	errData    = errors.New("echo differs from the datagram sent")
	errTimeout = errors.New("no completion in time: a datagram was lost (UD does not retransmit)")
)

// pingPong is one side's verbs objects. The region is one buffer, as in
// ud_pingpong.c: receives land in all of it (40 bytes of GRH area, then the
// datagram), sends go from byte 40 on, so each side sends back what it last
// received.
type pingPong struct {
	size, depth int
	d           *verbs.Device
	pd          *verbs.PD
	mr          *verbs.MR
	cq          *verbs.CQ
	qp          *verbs.QueuePair
	ah          *verbs.AH
	remoteQPN   uint32

	sendWR verbs.SendWR
	recvWR verbs.RecvWR
}

// newPingPong creates the objects, moves the QP to INIT with the Q_Key and
// posts depth receives, all before the exchange: once the peer knows our
// QPN it may send at any time, and a datagram without a receive is lost.
//
// A size of 0 is ibv_ud_pingpong's default, 2048, lowered to the port MTU
// when that is smaller (1024 on a 1500-byte Ethernet), where
// ibv_ud_pingpong would refuse its own default. A size given explicitly
// over the port MTU is refused, as ibv_ud_pingpong refuses it.
func newPingPong(d *verbs.Device, size, depth int) (*pingPong, error) {
	mtu := d.MaxPathMTU()
	if size == 0 {
		size = min(defaultSize, mtu)
	}
	if size > mtu {
		return nil, fmt.Errorf("requested size larger than port MTU (%d)", mtu)
	}
	p := &pingPong{size: size, depth: depth, d: d, pd: d.AllocPD()}
	buf := make([]byte, verbs.GRHLen+size)
	for i := range buf {
		buf[i] = 0x7b // ud_pingpong.c's fill
	}
	var err error
	if p.mr, err = p.pd.RegMR(buf, verbs.AccessLocalWrite); err != nil {
		return nil, fmt.Errorf("register memory: %w", err)
	}
	p.cq = d.CreateCQ(depth + 1)
	p.qp, err = p.pd.CreateQP(&verbs.QPInit{Type: verbs.QPTypeUD, SendCQ: p.cq, RecvCQ: p.cq,
		Cap: verbs.QPCap{MaxSendWR: 1, MaxRecvWR: depth}})
	if err != nil {
		return nil, fmt.Errorf("create QP: %w", err)
	}
	init := verbs.QPAttr{State: verbs.StateInit, QKey: qkey}
	if err := p.qp.Modify(&init, verbs.AttrState|verbs.AttrPKeyIndex|verbs.AttrPort|verbs.AttrQKey); err != nil {
		return nil, fmt.Errorf("modify QP to INIT: %w", err)
	}
	p.recvWR = verbs.RecvWR{ID: recvWRID, SGL: []verbs.SGE{p.mr.SGE(0, verbs.GRHLen+size)}}
	if n := p.postRecv(depth); n < depth {
		return nil, fmt.Errorf("couldn't post receive (%d)", n)
	}
	return p, nil
}

// postRecv posts up to n receives of the whole buffer and returns how many.
func (p *pingPong) postRecv(n int) int {
	for i := range n {
		if p.qp.PostRecv(&p.recvWR) != nil {
			return i
		}
	}
	return n
}

// connect moves the QP to RTR and RTS and makes the address handle for the
// peer's GID (ud_pingpong.c's pp_connect_ctx). UD needs no remote QPN or
// PSN in the QP: every send names its destination.
func (p *pingPong) connect(remote pingdest.Dest, psn uint32) error {
	if !remote.GID.IsValid() || remote.GID.IsUnspecified() {
		return errors.New("the peer sent no GID: run it with -g (RoCEv2 needs a GRH)")
	}
	rtr := verbs.QPAttr{State: verbs.StateRTR}
	if err := p.qp.Modify(&rtr, verbs.AttrState); err != nil {
		return fmt.Errorf("modify QP to RTR: %w", err)
	}
	rts := verbs.QPAttr{State: verbs.StateRTS, SQPSN: psn}
	if err := p.qp.Modify(&rts, verbs.AttrState|verbs.AttrSQPSN); err != nil {
		return fmt.Errorf("modify QP to RTS: %w", err)
	}
	// ud_pingpong.c sets hop limit 1; the link sends with its own TTL.
	ah, err := p.pd.CreateAH(verbs.AHAttr{DGID: remote.GID, HopLimit: 1})
	if err != nil {
		return fmt.Errorf("create AH: %w", err)
	}
	p.ah, p.remoteQPN = ah, remote.QPN
	p.sendWR = verbs.SendWR{ID: sendWRID, Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{p.mr.SGE(verbs.GRHLen, p.size)}, AH: p.ah, RemoteQPN: remote.QPN, RemoteQKey: qkey}
	return nil
}

// run bounces iters datagrams: the client sends first; a side sends again
// when its previous send has completed and the peer's datagram has come
// (ud_pingpong.c's pending bits). The client fills its datagram with a
// pattern and checks each echo against it. timeout bounds each wait for a
// completion.
func (p *pingPong) run(ctx context.Context, iters int, client bool, timeout time.Duration) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	watchdog := time.AfterFunc(timeout, func() { cancel(errTimeout) })
	defer watchdog.Stop()

	buf := p.mr.Buf()
	var pattern []byte
	pending := recvWRID
	if client {
		pattern = make([]byte, p.size)
		for i := range pattern {
			pattern[i] = byte(i*7 + 1)
		}
		copy(buf[verbs.GRHLen:], pattern)
		if err := p.qp.PostSend(&p.sendWR); err != nil {
			return fmt.Errorf("couldn't post send: %w", err)
		}
		pending |= sendWRID
	}
	routs := p.depth
	rcnt, scnt := 0, 0
	var wc [2]verbs.WC
	for rcnt < iters || scnt < iters {
		n, err := p.cq.Wait(ctx, wc[:])
		if err != nil {
			if c := context.Cause(ctx); c != nil {
				err = c
			}
			return fmt.Errorf("after %d sends and %d receives: %w", scnt, rcnt, err)
		}
		watchdog.Reset(timeout)
		for _, w := range wc[:n] {
			if w.Status != verbs.WCSuccess {
				return fmt.Errorf("failed status %s (%d) for wr_id %d", w.Status, w.Status, w.WRID)
			}
			switch w.WRID {
			case sendWRID:
				scnt++
			case recvWRID:
				if w.ByteLen != uint32(verbs.GRHLen+p.size) || w.SrcQP != p.remoteQPN {
					return fmt.Errorf("datagram %d: %d bytes from QP %#x, want %d from %#x",
						rcnt, w.ByteLen, w.SrcQP, verbs.GRHLen+p.size, p.remoteQPN)
				}
				if client && !bytes.Equal(buf[verbs.GRHLen:], pattern) {
					return fmt.Errorf("datagram %d: %w", rcnt, errData)
				}
				if routs--; routs <= 1 {
					routs += p.postRecv(p.depth - routs)
					if routs < p.depth {
						return fmt.Errorf("couldn't post receive (%d)", routs)
					}
				}
				rcnt++
			default:
				return fmt.Errorf("completion for unknown wr_id %d", w.WRID)
			}
			pending &^= int(w.WRID)
			if scnt < iters && pending == 0 {
				if err := p.qp.PostSend(&p.sendWR); err != nil {
					return fmt.Errorf("couldn't post send: %w", err)
				}
				pending = recvWRID | sendWRID
			}
		}
	}
	return nil
}

// close releases the objects in reverse order of creation.
func (p *pingPong) close() error {
	var errs []error
	if p.qp != nil {
		errs = append(errs, p.qp.Destroy())
	}
	if p.cq != nil {
		errs = append(errs, p.cq.Destroy())
	}
	if p.mr != nil {
		errs = append(errs, p.mr.Dereg())
	}
	return errors.Join(errs...)
}
