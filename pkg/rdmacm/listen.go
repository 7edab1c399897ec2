package rdmacm

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/uroce/uroce/pkg/cm"
	"github.com/uroce/uroce/pkg/cm/mad"
	"github.com/uroce/uroce/verbs"
)

// Backlog is how many connection requests a Listener holds before it
// rejects more (rdma_listen's backlog).
const Backlog = 16

// Listener takes connection requests for one port (an rdma_cm ID after
// rdma_listen).
type Listener struct {
	m       *CM
	port    uint16
	service uint64
	reqs    chan *ConnRequest
	closed  chan struct{}
	// The loop's.
	isClosed bool
}

// Listen starts taking connection requests for port in rdma_cm's TCP
// port space (service ID 0x0000000001060000 | port), on every address of
// the device.
func (m *CM) Listen(port uint16) (*Listener, error) {
	l := &Listener{m: m, port: port, service: mad.IPServiceID(mad.PortSpaceTCP, port),
		reqs: make(chan *ConnRequest, Backlog), closed: make(chan struct{})}
	var err error
	if e := m.do(func(time.Time) {
		if err = m.mgr.Listen(l.service); err == nil {
			m.listeners[l.service] = l
		}
	}); e != nil {
		return nil, fmt.Errorf("listen on port %d: %w", port, e)
	}
	if err != nil {
		return nil, fmt.Errorf("listen on port %d: %w: %w", port, ErrPortInUse, err)
	}
	return l, nil
}

// Port returns the port the listener takes requests for.
func (l *Listener) Port() uint16 { return l.port }

// Accept waits for the next connection request (rdma_get_request).
func (l *Listener) Accept(ctx context.Context) (*ConnRequest, error) {
	select {
	case r := <-l.reqs:
		return r, nil
	case <-l.closed:
		return nil, fmt.Errorf("accept on port %d: %w", l.port, ErrClosed)
	case <-ctx.Done():
		return nil, fmt.Errorf("accept on port %d: %w", l.port, ctx.Err())
	}
}

// Close stops listening and rejects the requests nobody took; connections
// already made are not affected.
func (l *Listener) Close() error {
	return l.m.do(func(now time.Time) {
		l.closeLocked()
		for {
			select {
			case r := <-l.reqs:
				r.c.cc.Reject(now, 0, nil)
			default:
				return
			}
		}
	})
}

func (l *Listener) closeLocked() {
	if l.isClosed {
		return
	}
	l.isClosed = true
	l.m.mgr.Unlisten(l.service)
	delete(l.m.listeners, l.service)
	close(l.closed)
}

// ConnRequest is a REQ a Listener received: who asks and what it offers.
// Answer it with Accept or Reject; until then the CM tells the peer to
// wait (MRA) if it repeats its REQ.
type ConnRequest struct {
	c *Conn
	// Remote and Local are the two ends from rdma_cm's header in the REQ.
	Remote, Local netip.AddrPort
	// PrivateData is the application's part of the REQ's private data
	// (56 bytes, zero-padded).
	PrivateData []byte
	// ResponderResources and InitiatorDepth the peer offered.
	ResponderResources, InitiatorDepth uint8
	// Fields are all the REQ's fields (QPN, PSN, path, timeouts).
	Fields mad.REQFields
}

// request takes a REQ for a listened service to its listener, or rejects
// it: rdma_cm's header missing or wrong (cma_save_net_info fails), or the
// backlog full.
func (m *CM) request(now time.Time, cc *cm.Conn) {
	f := cc.Request()
	l := m.listeners[f.ServiceID]
	h := mad.CMAHeader(f.PrivateData)
	if l == nil || h.Check() != nil {
		cc.Reject(now, 0, nil)
		return
	}
	c := newConn(m, nil, 0, false)
	c.cc = cc
	c.local = netip.AddrPortFrom(h.Dst().Unmap(), l.port)
	c.remote = netip.AddrPortFrom(h.Src().Unmap(), h.SrcPort())
	c.privateData = f.PrivateData[mad.CMAHeaderLen:]
	cc.Context = c
	r := &ConnRequest{c: c, Remote: c.remote, Local: c.local, PrivateData: c.privateData,
		ResponderResources: f.ResponderResources, InitiatorDepth: f.InitiatorDepth, Fields: f}
	select {
	case l.reqs <- r:
	default:
		cc.Reject(now, mad.RejNoResources, nil)
	}
}

// Accept answers the request with q, a QP of this CM's device in RESET
// or INIT (rdma_accept): q goes to RTR and RTS, the REP with p's private
// data goes out, and Accept returns when the RTU arrives. When ctx ends
// first the connection is torn down and the context's error returned
// (ErrTimeout or ErrCanceled).
func (r *ConnRequest) Accept(ctx context.Context, q *verbs.QueuePair, p *Params) (*Conn, error) {
	if q == nil {
		return nil, fmt.Errorf("accept %v: %w: no QP", r.Remote, ErrBadParam)
	}
	return r.accept(ctx, q, q.QPN(), p)
}

func (r *ConnRequest) accept(ctx context.Context, q *verbs.QueuePair, qpn uint32, p *Params) (*Conn, error) {
	prm := p.withDefaults()
	if len(prm.PrivateData) > mad.REPPrivateDataLen {
		return nil, fmt.Errorf("accept %v: %w: %d bytes of private data, at most %d", r.Remote, ErrBadParam, len(prm.PrivateData), mad.REPPrivateDataLen)
	}
	if err := initQP(q, prm.Access); err != nil {
		return nil, fmt.Errorf("accept %v: %w", r.Remote, err)
	}
	c, m := r.c, r.c.m
	var err error
	if e := m.do(func(now time.Time) {
		if c.qp != nil || c.qpn != 0 {
			err = fmt.Errorf("%w: request already accepted", ErrBadState)
			return
		}
		if m.byQPN[qpn] != nil {
			err = fmt.Errorf("%w: QP %#x already has a connection", ErrBadParam, qpn)
			return
		}
		c.qp, c.qpn = q, qpn
		c.retrans = prm.Retrans &^ verbs.RetransSelective
		m.byQPN[qpn] = c
		err = c.cc.Accept(now, &cm.AcceptParams{QPN: qpn, StartingPSN: prm.PSN,
			ResponderResources: prm.ResponderResources, InitiatorDepth: prm.InitiatorDepth,
			RNRRetryCount: prm.RNRRetryCount, FlowControl: prm.FlowControl, PrivateData: prm.PrivateData,
			SelectiveRepeat: !prm.GoBackN})
		if err != nil {
			delete(m.byQPN, qpn)
			c.qp, c.qpn = nil, 0
			return
		}
		m.awaitRTU[c] = struct{}{}
	}); e != nil {
		return nil, fmt.Errorf("accept %v: %w", r.Remote, e)
	}
	if err != nil {
		return nil, wrapState(fmt.Sprintf("accept %v", r.Remote), err)
	}
	if err := c.wait(ctx); err != nil {
		return nil, fmt.Errorf("accept %v: %w", r.Remote, err)
	}
	return c, nil
}

// Reject refuses the request with a REJ "consumer defined" carrying
// privateData (rdma_reject; at most 148 bytes).
func (r *ConnRequest) Reject(privateData []byte) error {
	var err error
	if e := r.c.m.do(func(now time.Time) { err = r.c.cc.Reject(now, 0, privateData) }); e != nil {
		return fmt.Errorf("reject %v: %w", r.Remote, e)
	}
	if err != nil {
		return wrapState(fmt.Sprintf("reject %v", r.Remote), err)
	}
	return nil
}
