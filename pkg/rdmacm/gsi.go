package rdmacm

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/uroce/uroce/pkg/cm"
	"github.com/uroce/uroce/pkg/cm/mad"
	"github.com/uroce/uroce/verbs"
)

// GSI QP sizing: receives posted ahead (a burst of MADs beyond it is lost,
// as on any QP1, and the CM's retries bring it again) and sends in flight.
const (
	gsiRecvs = 64
	gsiSends = 64
	gsiSlot  = verbs.GRHLen + mad.Size
)

// gsi is the transport over the device's GSI QP: MADs go out as UD SEND
// Only to the peer's QP1 with the GSI Q_Key (IBA 13.5.3; rxe's QP1 does
// the same for the kernel's MAD layer), and every receive comes in with
// the 40-byte GRH area first.
type gsi struct {
	qp     *verbs.QueuePair
	cq     *verbs.CQ
	mr     *verbs.MR
	pd     *verbs.PD
	in     chan datagram
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

func openGSI(dev *verbs.Device) (_ transport, err error) {
	g := &gsi{pd: dev.AllocPD(), cq: dev.CreateCQ(gsiRecvs + gsiSends), in: make(chan datagram, gsiRecvs), done: make(chan struct{})}
	defer func() {
		if err != nil {
			g.release()
		}
	}()
	// Go memory, not AllocMR's mapping: the receive goroutine may still
	// copy out of a slot while the device closes, and Close unmaps what
	// AllocMR mapped (a fault under the copy, seen in pkg/rsocket's
	// tests under -race); Go memory stays valid while it is referenced.
	if g.mr, err = g.pd.RegMR(make([]byte, gsiRecvs*gsiSlot), verbs.AccessLocalWrite); err != nil {
		return nil, fmt.Errorf("GSI QP: %w", err)
	}
	// Sends are inline (the MAD is copied at post time) and unsignaled:
	// nothing to track per send, and the manager may reuse its buffer at
	// once, as cm.MADSender requires.
	g.qp, err = g.pd.CreateQP(&verbs.QPInit{Type: verbs.QPTypeGSI, SendCQ: g.cq, RecvCQ: g.cq,
		Cap: verbs.QPCap{MaxSendWR: gsiSends, MaxRecvWR: gsiRecvs, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInline: mad.Size}})
	if err != nil {
		return nil, fmt.Errorf("GSI QP: %w", err)
	}
	if err = g.qp.ActivateUD(verbs.GSIQKey, 0); err != nil {
		return nil, fmt.Errorf("GSI QP: %w", err)
	}
	for i := range gsiRecvs {
		if err = g.post(i); err != nil {
			return nil, fmt.Errorf("GSI QP: %w", err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	g.cancel = cancel
	go g.recv(ctx)
	return g, nil
}

func (g *gsi) post(slot int) error {
	return g.qp.PostRecv(&verbs.RecvWR{ID: uint64(slot), SGL: []verbs.SGE{g.mr.SGE(slot*gsiSlot, gsiSlot)}})
}

// SendMAD posts the MAD as one UD SEND to dst's QP1.
func (g *gsi) SendMAD(dst cm.Address, b []byte) error {
	ah := verbs.AH{DGID: dst.GID.Addr().Unmap(), HopLimit: 64}
	return g.qp.PostSend(&verbs.SendWR{Opcode: verbs.WRSend, Flags: verbs.SendInline, InlineData: b,
		AH: &ah, RemoteQPN: dst.QPN, RemoteQKey: dst.QKey})
}

func (g *gsi) Incoming() <-chan datagram { return g.in }

// recv hands every received MAD to the CM loop and posts its buffer again.
func (g *gsi) recv(ctx context.Context) {
	defer close(g.done)
	var wc [16]verbs.WC
	for {
		n, err := g.cq.Wait(ctx, wc[:])
		if err != nil {
			return
		}
		for _, w := range wc[:n] {
			if w.Opcode != verbs.WCRecv {
				continue // a failed send: a lost datagram
			}
			slot := int(w.WRID)
			if w.Status == verbs.WCSuccess && w.ByteLen >= verbs.GRHLen {
				buf := g.mr.Buf()[slot*gsiSlot:]
				dg := datagram{
					src: cm.Address{GID: mad.GIDFromAddr(w.SrcGID), QPN: w.SrcQP, QKey: mad.GSIQKey, PKey: 0xffff},
					b:   append([]byte(nil), buf[verbs.GRHLen:w.ByteLen]...),
				}
				select {
				case g.in <- dg:
				case <-ctx.Done():
					return
				}
			}
			if w.Status == verbs.WCWRFlushErr {
				continue // the QP is going away
			}
			if err := g.post(slot); err != nil {
				return
			}
		}
	}
}

func (g *gsi) Close() error {
	g.once.Do(func() {
		if g.cancel != nil {
			g.cancel()
			<-g.done
		}
		g.release()
	})
	return nil
}

func (g *gsi) release() {
	var errs []error
	if g.qp != nil {
		errs = append(errs, g.qp.Destroy())
	}
	if g.mr != nil {
		errs = append(errs, g.mr.Dereg())
	}
	errs = append(errs, g.cq.Destroy())
	_ = errors.Join(errs...) // the device may be closed already
}
