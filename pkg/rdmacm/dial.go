package rdmacm

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/uroce/uroce/pkg/cm"
	"github.com/uroce/uroce/pkg/cm/mad"
	"github.com/uroce/uroce/verbs"
)

// maxREQData is what rdma_cm leaves the application of the REQ's private
// data (librdmacm's RDMA_MAX_PRIVATE_DATA less the header, on IB/RoCE).
const maxREQData = mad.REQPrivateDataLen - mad.CMAHeaderLen

// Dial connects q, a QP of this CM's device in RESET or INIT, to the
// listener at addr (rdma_resolve_addr, rdma_resolve_route and
// rdma_connect): it sends the REQ with rdma_cm's header and p's private
// data, and returns when the connection is established, with q in RTS.
// A REJ returns a *RejectError; an unanswered REQ ErrUnreachable; the
// context's end ErrTimeout or ErrCanceled, after the REQ was withdrawn
// with a REJ as ib_cm does when an ID is destroyed while connecting.
func (m *CM) Dial(ctx context.Context, addr netip.AddrPort, q *verbs.QueuePair, p *Params) (*Conn, error) {
	if q == nil {
		return nil, fmt.Errorf("dial %v: %w: no QP", addr, ErrBadParam)
	}
	return m.dial(ctx, addr, q, q.QPN(), p)
}

func (m *CM) dial(ctx context.Context, addr netip.AddrPort, q *verbs.QueuePair, qpn uint32, p *Params) (*Conn, error) {
	prm := p.withDefaults()
	if len(prm.PrivateData) > maxREQData {
		return nil, fmt.Errorf("dial %v: %w: %d bytes of private data, at most %d", addr, ErrBadParam, len(prm.PrivateData), maxREQData)
	}
	dst := addr.Addr().Unmap()
	if dst.Is4() != m.local.Is4() {
		return nil, fmt.Errorf("dial %v: %w: not the family of %v", addr, ErrBadParam, m.local)
	}
	if err := initQP(q, prm.Access); err != nil {
		return nil, fmt.Errorf("dial %v: %w", addr, err)
	}
	c := newConn(m, q, qpn, true)
	c.retrans = prm.Retrans &^ verbs.RetransSelective
	c.local = netip.AddrPortFrom(m.local, prm.LocalPort)
	c.remote = netip.AddrPortFrom(dst, addr.Port())

	// rdma_cm's header, then the application's data (cma_format_hdr).
	var pd [mad.REQPrivateDataLen]byte
	ipv := uint8(6)
	if dst.Is4() {
		ipv = 4
	}
	mad.CMAHeader(pd[:]).Encode(&mad.CMAHeaderFields{Version: mad.CMAVersion, IPVersion: ipv, SrcPort: prm.LocalPort, Src: m.local, Dst: dst})
	n := mad.CMAHeaderLen + copy(pd[mad.CMAHeaderLen:], prm.PrivateData)

	var err error
	if e := m.do(func(now time.Time) {
		if m.byQPN[qpn] != nil {
			err = fmt.Errorf("%w: QP %#x already has a connection", ErrBadParam, qpn)
			return
		}
		m.byQPN[qpn] = c
		c.cc, err = m.mgr.Connect(now, &cm.ConnectParams{
			ServiceID: mad.IPServiceID(mad.PortSpaceTCP, addr.Port()),
			Dest:      mad.GIDFromAddr(dst), QPN: qpn, StartingPSN: prm.PSN,
			PathMTU:            mtu(prm.PathMTU, m.maxMTU),
			ResponderResources: prm.ResponderResources, InitiatorDepth: prm.InitiatorDepth,
			RetryCount: prm.RetryCount, RNRRetryCount: prm.RNRRetryCount, FlowControl: prm.FlowControl,
			PrivateData: pd[:n], Context: c, SelectiveRepeat: !prm.GoBackN,
		})
		if err != nil {
			delete(m.byQPN, qpn)
		}
	}); e != nil {
		return nil, fmt.Errorf("dial %v: %w", addr, e)
	}
	if err != nil {
		return nil, wrapState(fmt.Sprintf("dial %v", addr), err)
	}
	if err := c.wait(ctx); err != nil {
		return nil, fmt.Errorf("dial %v: %w", addr, err)
	}
	return c, nil
}

// wait waits for the connection's answer; when ctx ends first it
// withdraws: a REJ while still connecting (ib_cm's cm_destroy_id sends
// REJ "timeout" in REQ Sent), a DREQ once the REP went out or came in.
func (c *Conn) wait(ctx context.Context) error {
	select {
	case err := <-c.result:
		return err
	case <-c.m.exit:
		return ErrClosed
	case <-ctx.Done():
	}
	var err error
	e := c.m.do(func(now time.Time) {
		if c.answered {
			// The answer came with the cancellation: take it.
			err = <-c.result
			return
		}
		c.answered = true
		switch s := c.cc.State(); {
		case s == cm.StateREQSent || s == cm.StateREPWait:
			c.cc.Reject(now, mad.RejTimeout, nil)
			c.m.forget(c)
		case s.Connected():
			c.cc.Disconnect(now, nil)
		default:
			c.m.forget(c)
		}
		err = errLate
	})
	if e != nil {
		return e
	}
	if err != errLate {
		return err
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", ErrTimeout, ctx.Err())
	}
	return fmt.Errorf("%w: %w", ErrCanceled, ctx.Err())
}

// errLate marks a wait the context ended.
var errLate = errors.New("late")
