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

// Work request IDs: the one send, and receives by slot (rc_pingpong.c uses
// PINGPONG_SEND_WRID and one RECV_WRID; slots let us check each message).
const (
	sendWRID = 1 << 32
	recvWRID = 2 << 32 // | slot
)

// What the loop waits for before it may send again (rc_pingpong.c's
// ctx->pending): our previous SEND's completion and the peer's next message.
const (
	pendingSend = 1 << iota
	pendingRecv
)

var errData = errors.New("answer differs from the message sent")

// pingPong is one side's verbs objects. The region holds the message we
// send in its first size bytes and then one slot per posted receive.
type pingPong struct {
	size, depth int
	pd          *verbs.PD
	mr          *verbs.MR
	cq          *verbs.CQ
	qp          *verbs.QueuePair

	// The work requests, built once: posting copies them into the
	// queues, so the loop reuses them and allocates nothing.
	sendWR  verbs.SendWR
	recvWRs []verbs.RecvWR

	// retryCnt is the transport retry count: ibv_rc_pingpong's 7, which
	// rxe (and uroce) read as retrying forever, unless -retry says less.
	retryCnt uint8
}

// newPingPong creates the objects, moves the QP to INIT and posts depth
// receives, all before the exchange: once our peer knows our QPN it may
// send at any time.
func newPingPong(d *verbs.Device, size, depth int) (*pingPong, error) {
	return newPingPongType(d, size, depth, verbs.QPTypeRC)
}

// newPingPongType is newPingPong with a QP of type typ: RC, or UC as
// ibv_uc_pingpong, which is ibv_rc_pingpong with a UC QP.
func newPingPongType(d *verbs.Device, size, depth int, typ verbs.QPType) (*pingPong, error) {
	p := &pingPong{size: size, depth: depth, pd: d.AllocPD(), retryCnt: 7}
	var err error
	// Receives need local write; SENDs need no remote access at all.
	p.mr, err = p.pd.RegMR(make([]byte, size*(1+depth)), verbs.AccessLocalWrite)
	if err != nil {
		return nil, fmt.Errorf("register memory: %w", err)
	}
	// One CQ for both queues, room for every receive and the send
	// (ibv_create_cq(rx_depth + 1)).
	p.cq = d.CreateCQ(depth + 1)
	p.qp, err = p.pd.CreateQP(&verbs.QPInit{
		Type:   typ,
		SendCQ: p.cq, RecvCQ: p.cq,
		Cap:       verbs.QPCap{MaxSendWR: 1, MaxRecvWR: depth, MaxSendSGE: 1, MaxRecvSGE: 1},
		SignalAll: true,
	})
	if err != nil {
		return nil, fmt.Errorf("create QP: %w", err)
	}
	// RESET to INIT takes the P_Key index, port and access flags
	// (the attributes ibv_modify_qp requires); zero means the defaults.
	init := verbs.AttrState | verbs.AttrPKeyIndex | verbs.AttrPort | verbs.AttrAccessFlags
	if err := p.qp.Modify(&verbs.QPAttr{State: verbs.StateInit, AccessFlags: verbs.AccessLocalWrite}, init); err != nil {
		return nil, fmt.Errorf("modify QP to INIT: %w", err)
	}
	p.sendWR = verbs.SendWR{ID: sendWRID, Opcode: verbs.WRSend, SGL: []verbs.SGE{p.mr.SGE(0, size)}}
	p.recvWRs = make([]verbs.RecvWR, depth)
	for slot := range depth {
		p.recvWRs[slot] = verbs.RecvWR{ID: recvWRID | uint64(slot), SGL: []verbs.SGE{p.mr.SGE(size*(1+slot), size)}}
		if err := p.postRecv(slot); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func (p *pingPong) slot(i int) []byte { return p.mr.Buf()[p.size*(1+i) : p.size*(2+i)] }

func (p *pingPong) postRecv(slot int) error {
	if err := p.qp.PostRecv(&p.recvWRs[slot]); err != nil {
		return fmt.Errorf("post receive: %w", err)
	}
	return nil
}

// connect moves the QP through RTR to RTS toward remote, with
// ibv_rc_pingpong's attributes: timeout 14, 7 retries, RNR retry 7, min
// RNR timer 12, one outstanding READ/atomic each way. A UC QP takes the
// path and PSNs only, as ibv_uc_pingpong gives them (Connect leaves out
// the rest).
func (p *pingPong) connect(remote pingdest.Dest, myPSN uint32, mtu int) error {
	if !remote.GID.IsValid() || remote.GID.IsUnspecified() {
		// ibv_rc_pingpong without -g sends a zero GID: it means to
		// use no GRH, which RoCEv2 cannot do.
		return fmt.Errorf("peer QP 0x%06x sent no GID (run ibv_rc_pingpong with -g)", remote.QPN)
	}
	err := p.qp.Connect(verbs.Endpoint{Addr: remote.GID.Unmap(), QPN: remote.QPN, PSN: remote.PSN}, verbs.ConnectOptions{
		Access:      verbs.AccessLocalWrite, // no remote access (ibv_rc_pingpong grants none)
		PathMTU:     mtu,
		Timeout:     14,
		RetryCnt:    p.retryCnt,
		RNRRetry:    7,
		MinRNRTimer: 12,
		RdAtomic:    1,
		PSN:         myPSN,
	})
	if err != nil {
		return fmt.Errorf("connect to QP 0x%06x: %w", remote.QPN, err)
	}
	return nil
}

// fill writes message i of a run into b: different bytes every time, so
// that a stale or misplaced answer shows.
func fill(b []byte, i int) {
	for j := range b {
		b[j] = byte(i*7 + j)
	}
}

// run bounces iters messages as ibv_rc_pingpong does. The client sends
// first and checks each answer; the server answers every message with its
// bytes. Each side sends again only once its previous SEND has completed
// and the peer's next message has arrived, so at most one message is in
// flight each way.
func (p *pingPong) run(ctx context.Context, iters int, client bool) error {
	send := p.mr.Buf()[:p.size]
	want := make([]byte, p.size) // the client's copy of its last message
	echo := -1                   // the server's slot holding the message to answer
	pending := pendingRecv
	scnt, rcnt := 0, 0
	post := func() error {
		if client {
			fill(send, scnt)
			copy(want, send)
		} else {
			copy(send, p.slot(echo))
			if err := p.postRecv(echo); err != nil {
				return err
			}
		}
		if err := p.qp.PostSend(&p.sendWR); err != nil {
			return fmt.Errorf("post send: %w", err)
		}
		pending = pendingSend | pendingRecv
		return nil
	}
	if client {
		if err := post(); err != nil {
			return err
		}
	}
	var wc [2]verbs.WC
	for rcnt < iters || scnt < iters {
		n, err := p.cq.Wait(ctx, wc[:])
		if err != nil {
			return fmt.Errorf("poll CQ: %w", err)
		}
		for _, c := range wc[:n] {
			// A failed work request is a completion status (IBA 10.10),
			// reported like ibv_rc_pingpong's "Failed status".
			if c.Status != verbs.WCSuccess {
				return fmt.Errorf("failed status %v (%d) for wr_id %#x", c.Status, c.Status, c.WRID)
			}
			switch {
			case c.WRID == sendWRID:
				scnt++
				pending &^= pendingSend
			case c.WRID&^0xffffffff == recvWRID:
				slot := int(c.WRID & 0xffffffff)
				if int(c.ByteLen) != p.size {
					return fmt.Errorf("message %d: %d bytes, want %d", rcnt, c.ByteLen, p.size)
				}
				if client {
					if !bytes.Equal(p.slot(slot), want) {
						return fmt.Errorf("message %d: %w", rcnt, errData)
					}
					if err := p.postRecv(slot); err != nil {
						return err
					}
				} else {
					echo = slot
				}
				rcnt++
				pending &^= pendingRecv
			default:
				return fmt.Errorf("completion for unknown wr_id %#x", c.WRID)
			}
			if scnt < iters && pending == 0 {
				if err := post(); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// linger keeps the QP answering for d after the last exchange.
// ibv_rc_pingpong has no closing handshake: if our last ACK was lost, the
// peer retransmits its last SEND, and a QP already destroyed would never
// answer, failing the peer's SEND with retry exceeded. Nothing should
// complete meanwhile.
func (p *pingPong) linger(ctx context.Context, d time.Duration) error {
	lctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var wc [1]verbs.WC
	n, err := p.cq.Wait(lctx, wc[:])
	if n > 0 {
		return fmt.Errorf("completion after the last exchange: wr_id %#x, %v", wc[0].WRID, wc[0].Status)
	}
	if ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("linger: %w", err)
	}
	return nil
}

// close destroys the objects in reverse order of creation.
func (p *pingPong) close() error {
	return errors.Join(p.qp.Destroy(), p.cq.Destroy(), p.mr.Dereg())
}
