package rdmacm

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/uroce/uroce/pkg/cm"
	"github.com/uroce/uroce/pkg/cm/mad"
	"github.com/uroce/uroce/verbs"
)

// UDPQKey is the Q_Key of the UD QPs of rdma_cm's UDP port space: the
// kernel's RDMA_UDP_QKEY, which cma_set_qkey gives an ID of RDMA_PS_UDP
// and rdma_create_qp puts in its QP, and which rdma_accept sends in the
// SIDR_REP unless the application names another.
const UDPQKey = 0x01234567

// maxSIDRData is what rdma_cm leaves the application of the SIDR_REQ's
// private data (IB_CM_SIDR_REQ_PRIVATE_DATA_SIZE less the header).
const maxSIDRData = mad.SIDRREQPrivateDataLen - mad.CMAHeaderLen

// UDParams are a side's parameters for a UD service (rdma_conn_param on
// an ID of the UDP port space).
type UDParams struct {
	// PrivateData goes to the peer: at most 180 bytes in DialUD's
	// SIDR_REQ (rdma_cm's header takes the rest of 216), 136 in the
	// SIDR_REP of UDRequest.Accept.
	PrivateData []byte
	// QKey is the Q_Key of the local QP (taken to RTS with it from
	// RESET) and, on the passive side, the one the SIDR_REP announces;
	// 0 means UDPQKey.
	QKey uint32
	// LocalPort is the source port DialUD puts in rdma_cm's header; 0
	// picks an ephemeral one.
	LocalPort uint16
}

func (p *UDParams) withDefaults() UDParams {
	var q UDParams
	if p != nil {
		q = *p
	}
	if q.QKey == 0 {
		q.QKey = UDPQKey
	}
	if q.LocalPort == 0 {
		q.LocalPort = uint16(32768 + rand.IntN(28232))
	}
	return q
}

// InitUDQP takes a new UD QP from RESET to RTS with a Q_Key (0 means
// UDPQKey), as rdma_create_qp does for an ID of the UDP port space
// (ucma_init_ud_qp), so receives can be posted before DialUD or Accept.
// DialUD and UDRequest.Accept do it themselves for a QP still in RESET.
func InitUDQP(q *verbs.QueuePair, qkey uint32) error {
	if qkey == 0 {
		qkey = UDPQKey
	}
	return initUDQP(q, qkey)
}

func initUDQP(q *verbs.QueuePair, qkey uint32) error {
	if q == nil {
		return nil
	}
	switch s := q.State(); s {
	case verbs.StateRTS:
		return nil
	case verbs.StateReset:
		return q.ActivateUD(qkey, verbs.RandomPSN()&0xffffff)
	default:
		return fmt.Errorf("UD QP %#x in %v: %w: want RESET or RTS", q.QPN(), s, ErrBadParam)
	}
}

// UDPeer is where a UD service lives, as a resolution delivered it
// (rdma_cm's RDMA_CM_EVENT_ESTABLISHED with its param.ud): the address
// to send datagrams to, the remote QP's number and its Q_Key.
type UDPeer struct {
	Addr netip.AddrPort
	QPN  uint32
	QKey uint32
	// PrivateData is the SIDR_REP's, the whole 136-byte field.
	PrivateData []byte
}

// AHAttr returns the attributes of an address handle to the peer
// (param.ud.ah_attr).
func (p *UDPeer) AHAttr() verbs.AHAttr {
	return verbs.AHAttr{DGID: p.Addr.Addr(), HopLimit: 64}
}

// SIDRError is a SIDR_REP whose status was not "valid": the peer's CM
// or application refused (rdma_cm reports RDMA_CM_EVENT_UNREACHABLE
// with the status).
type SIDRError struct {
	Status mad.SIDRStatus
	// PrivateData is the SIDR_REP's, the whole 136-byte field
	// (rdma_reject's data first).
	PrivateData []byte
}

func (e *SIDRError) Error() string {
	return fmt.Sprintf("%v: SIDR status %v", ErrRejected, e.Status)
}

// Is makes errors.Is(err, ErrRejected) true, and ErrRefused for "service
// ID not supported" (nobody listens on the port).
func (e *SIDRError) Is(target error) bool {
	return target == ErrRejected || target == ErrRefused && e.Status == mad.SIDRServiceNotSupported
}

// udDial is one DialUD waiting for its answer; the loop's.
type udDial struct {
	addr     netip.AddrPort
	result   chan udResult
	answered bool
}

type udResult struct {
	peer *UDPeer
	err  error
}

func (w *udDial) finish(r udResult) {
	if !w.answered {
		w.answered = true
		w.result <- r
	}
}

// DialUD finds the UD QP behind addr, a port of rdma_cm's UDP port space
// (service ID 0x0000000001110000 | port), with a SIDR_REQ carrying
// rdma_cm's header and p's private data (rdma_resolve_addr,
// rdma_resolve_route and rdma_connect on a UD ID). q, a UD QP of this
// device, is taken to RTS with p's Q_Key if it is still in RESET; it may
// be nil. A refusal returns a *SIDRError (ErrRefused when nobody
// listens); no answer after the CM's retries ErrUnreachable; the
// context's end ErrTimeout or ErrCanceled.
func (m *CM) DialUD(ctx context.Context, addr netip.AddrPort, q *verbs.QueuePair, p *UDParams) (*UDPeer, error) {
	prm := p.withDefaults()
	if len(prm.PrivateData) > maxSIDRData {
		return nil, fmt.Errorf("dial UD %v: %w: %d bytes of private data, at most %d", addr, ErrBadParam, len(prm.PrivateData), maxSIDRData)
	}
	dst := addr.Addr().Unmap()
	if dst.Is4() != m.local.Is4() {
		return nil, fmt.Errorf("dial UD %v: %w: not the family of %v", addr, ErrBadParam, m.local)
	}
	if err := initUDQP(q, prm.QKey); err != nil {
		return nil, fmt.Errorf("dial UD %v: %w", addr, err)
	}
	// rdma_cm's header, then the application's data: cma_resolve_ib_udp
	// formats the SIDR_REQ's private data as cma_connect_ib does the
	// REQ's.
	var pd [mad.SIDRREQPrivateDataLen]byte
	ipv := uint8(6)
	if dst.Is4() {
		ipv = 4
	}
	mad.CMAHeader(pd[:]).Encode(&mad.CMAHeaderFields{Version: mad.CMAVersion, IPVersion: ipv, SrcPort: prm.LocalPort, Src: m.local, Dst: dst})
	n := mad.CMAHeaderLen + copy(pd[mad.CMAHeaderLen:], prm.PrivateData)

	w := &udDial{addr: netip.AddrPortFrom(dst, addr.Port()), result: make(chan udResult, 1)}
	var s *cm.SIDR
	var err error
	if e := m.do(func(now time.Time) {
		s, err = m.mgr.Resolve(now, &cm.SIDRParams{ServiceID: mad.IPServiceID(mad.PortSpaceUDP, addr.Port()),
			Dest: mad.GIDFromAddr(dst), PrivateData: pd[:n], Context: w})
	}); e != nil {
		return nil, fmt.Errorf("dial UD %v: %w", addr, e)
	}
	if err != nil {
		return nil, wrapState(fmt.Sprintf("dial UD %v", addr), err)
	}
	select {
	case r := <-w.result:
		if r.err != nil {
			return nil, fmt.Errorf("dial UD %v: %w", addr, r.err)
		}
		return r.peer, nil
	case <-m.exit:
		return nil, fmt.Errorf("dial UD %v: %w", addr, ErrClosed)
	case <-ctx.Done():
	}
	var r udResult
	late := false
	if e := m.do(func(time.Time) {
		if w.answered {
			r = <-w.result
			return
		}
		w.answered, late = true, true
		s.Cancel()
	}); e != nil {
		return nil, fmt.Errorf("dial UD %v: %w", addr, e)
	}
	if !late {
		if r.err != nil {
			return nil, fmt.Errorf("dial UD %v: %w", addr, r.err)
		}
		return r.peer, nil
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return nil, fmt.Errorf("dial UD %v: %w: %w", addr, ErrTimeout, ctx.Err())
	}
	return nil, fmt.Errorf("dial UD %v: %w: %w", addr, ErrCanceled, ctx.Err())
}

// handleSIDR turns a resolution's event into the API's.
func (m *CM) handleSIDR(now time.Time, e cm.Event) {
	if e.Type == cm.EventConnectRequest {
		m.sidrRequest(now, e.SIDR)
		return
	}
	w, _ := e.SIDR.Context.(*udDial)
	if w == nil {
		return
	}
	switch e.Type {
	case cm.EventEstablished:
		r := e.SIDR.Reply()
		w.finish(udResult{peer: &UDPeer{Addr: w.addr, QPN: r.QPN, QKey: r.QKey, PrivateData: e.PrivateData}})
	case cm.EventRejected:
		w.finish(udResult{err: &SIDRError{Status: e.Status, PrivateData: e.PrivateData}})
	case cm.EventUnreachable:
		w.finish(udResult{err: ErrUnreachable})
	}
}

// UDListener takes requests for one port of the UDP port space (an
// rdma_cm ID of RDMA_PS_UDP after rdma_listen).
type UDListener struct {
	m        *CM
	port     uint16
	service  uint64
	reqs     chan *UDRequest
	closed   chan struct{}
	isClosed bool // the loop's
}

// ListenUD starts taking SIDR_REQs for port in rdma_cm's UDP port space
// (service ID 0x0000000001110000 | port), on every address of the
// device. It returns ErrPortInUse for a port already listened on.
func (m *CM) ListenUD(port uint16) (*UDListener, error) {
	l := &UDListener{m: m, port: port, service: mad.IPServiceID(mad.PortSpaceUDP, port),
		reqs: make(chan *UDRequest, Backlog), closed: make(chan struct{})}
	var err error
	if e := m.do(func(time.Time) {
		if err = m.mgr.Listen(l.service); err == nil {
			m.udListeners[l.service] = l
		}
	}); e != nil {
		return nil, fmt.Errorf("listen on UD port %d: %w", port, e)
	}
	if err != nil {
		return nil, fmt.Errorf("listen on UD port %d: %w: %w", port, ErrPortInUse, err)
	}
	return l, nil
}

// Port returns the port the listener takes requests for.
func (l *UDListener) Port() uint16 { return l.port }

// Accept waits for the next request (rdma_get_request).
func (l *UDListener) Accept(ctx context.Context) (*UDRequest, error) {
	select {
	case r := <-l.reqs:
		return r, nil
	case <-l.closed:
		return nil, fmt.Errorf("accept on UD port %d: %w", l.port, ErrClosed)
	case <-ctx.Done():
		return nil, fmt.Errorf("accept on UD port %d: %w", l.port, ctx.Err())
	}
}

// Close stops listening and rejects the requests nobody took.
func (l *UDListener) Close() error {
	return l.m.do(func(now time.Time) {
		l.closeLocked()
		for {
			select {
			case r := <-l.reqs:
				r.s.Reject(now, mad.SIDRRejected, nil)
			default:
				return
			}
		}
	})
}

func (l *UDListener) closeLocked() {
	if l.isClosed {
		return
	}
	l.isClosed = true
	l.m.mgr.Unlisten(l.service)
	delete(l.m.udListeners, l.service)
	close(l.closed)
}

// UDRequest is a SIDR_REQ a UDListener received. Answer it with Accept or
// Reject; until then repeats of it are dropped. The SIDR_REQ does not
// name the requester's QP: it says so in its first datagram (udaddy puts
// it in the immediate data), and every receive completion has it
// (verbs.WC's SrcQP and SrcGID).
type UDRequest struct {
	m *CM
	s *cm.SIDR
	// Remote and Local are the two ends from rdma_cm's header.
	Remote, Local netip.AddrPort
	// PrivateData is the application's part of the SIDR_REQ's private
	// data (180 bytes, zero-padded).
	PrivateData []byte
}

// sidrRequest takes a SIDR_REQ for a listened service to its listener, or
// refuses it: no UD listener (the service ID is a TCP one), rdma_cm's
// header missing or wrong, or the backlog full. The kernel answers each
// of these with status "rejected" (cm_destroy_id in SIDR_REQ Rcvd).
func (m *CM) sidrRequest(now time.Time, s *cm.SIDR) {
	f := s.Request()
	l := m.udListeners[f.ServiceID]
	h := mad.CMAHeader(f.PrivateData)
	if l == nil || h.Check() != nil {
		s.Reject(now, mad.SIDRRejected, nil)
		return
	}
	r := &UDRequest{m: m, s: s, Local: netip.AddrPortFrom(h.Dst().Unmap(), l.port),
		Remote: netip.AddrPortFrom(h.Src().Unmap(), h.SrcPort()), PrivateData: f.PrivateData[mad.CMAHeaderLen:]}
	select {
	case l.reqs <- r:
	default:
		s.Reject(now, mad.SIDRRejected, nil)
	}
}

// Accept answers the request with q, a UD QP of this device (rdma_accept
// on a UD ID): q goes to RTS with p's Q_Key if it is still in RESET, and
// a SIDR_REP with q's number, the Q_Key and p's private data goes out.
// There is nothing to wait for: SIDR has no third message.
func (r *UDRequest) Accept(q *verbs.QueuePair, p *UDParams) error {
	if q == nil {
		return fmt.Errorf("accept UD %v: %w: no QP", r.Remote, ErrBadParam)
	}
	return r.accept(q, q.QPN(), p)
}

func (r *UDRequest) accept(q *verbs.QueuePair, qpn uint32, p *UDParams) error {
	prm := p.withDefaults()
	if len(prm.PrivateData) > mad.SIDRREPPrivateDataLen {
		return fmt.Errorf("accept UD %v: %w: %d bytes of private data, at most %d", r.Remote, ErrBadParam, len(prm.PrivateData), mad.SIDRREPPrivateDataLen)
	}
	if err := initUDQP(q, prm.QKey); err != nil {
		return fmt.Errorf("accept UD %v: %w", r.Remote, err)
	}
	var err error
	if e := r.m.do(func(now time.Time) {
		err = r.s.Accept(now, &cm.SIDRAcceptParams{QPN: qpn, QKey: prm.QKey, PrivateData: prm.PrivateData})
	}); e != nil {
		return fmt.Errorf("accept UD %v: %w", r.Remote, e)
	}
	if err != nil {
		return wrapState(fmt.Sprintf("accept UD %v", r.Remote), err)
	}
	return nil
}

// Reject refuses the request with a SIDR_REP "rejected" carrying
// privateData (rdma_reject on a UD ID; at most 136 bytes).
func (r *UDRequest) Reject(privateData []byte) error {
	var err error
	if e := r.m.do(func(now time.Time) { err = r.s.Reject(now, mad.SIDRRejected, privateData) }); e != nil {
		return fmt.Errorf("reject UD %v: %w", r.Remote, e)
	}
	if err != nil {
		return wrapState(fmt.Sprintf("reject UD %v", r.Remote), err)
	}
	return nil
}
