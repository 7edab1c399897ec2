package cm

import (
	"fmt"
	"time"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/pkg/cm/mad"
)

// handleREQ: a connection request (IBA 12.6.5). A repeated REQ (same
// peer, same communication ID) is answered from the connection's state
// (IBA 12.9.6 passive diagram; ib_cm's cm_dup_req_handler); a new one goes
// to the listener, or is rejected.
func (m *Manager) handleREQ(now time.Time, src Address, msg mad.MAD) error {
	r := msg.REQ()
	if c := m.remote[remoteKey{src.GID, r.LocalCommID()}]; c != nil && !c.active {
		return c.duplicateREQ(now)
	}
	reason := mad.RejectReason(0)
	switch {
	case !m.listeners[r.ServiceID()]:
		reason = mad.RejInvalidServiceID
	case r.TransportService() != mad.ServiceRC && r.TransportService() != mad.ServiceUC:
		reason = mad.RejInvalidTransportType
	case r.PathMTU().Bytes() == 0:
		reason = mad.RejInvalidMTU
	case r.LocalQPN() == 0:
		reason = mad.RejNoQP
	case len(m.conns) >= m.cfg.MaxConns:
		// Rejected from no connection, so a flood of forged REQs
		// costs a REJ each and no memory (Config.MaxConns).
		m.Counters.Overloaded++
		reason = mad.RejNoResources
	case m.staleQPN(src.GID, r.LocalQPN()):
		// A new REQ from a QP we are still connected to: the peer lost
		// the old connection (IBA 12.9.8.3.2 "stale connection"). The
		// kernel also DREQs the old one; here it stays until its own
		// traffic or a DREQ ends it, so a stray REQ cannot break it.
		reason = mad.RejStaleConn
	}
	if reason != 0 {
		m.rejectREQ(src, msg, reason)
		return nil
	}
	c := &Conn{m: m, localID: m.newLocalID(), remoteID: r.LocalCommID(), peer: gsiAddress(src.GID), service: r.ServiceID(), tid: msg.Header().TID()}
	copy(c.req[:], msg)
	m.conns[c.localID] = c
	m.remote[remoteKey{src.GID, c.remoteID}] = c
	c.state = StateREQRcvd
	m.emit(Event{Type: EventConnectRequest, Conn: c})
	return nil
}

// staleQPN reports whether a connection to this peer QP is up or coming
// up.
func (m *Manager) staleQPN(g mad.GID, qpn uint32) bool {
	for _, c := range m.conns {
		if c.peer.GID == g && c.attr.DestQPN == qpn && (c.state.Connected() || c.state == StateDREQSent) {
			return true
		}
	}
	return false
}

// duplicateREQ answers a repeated REQ: the active side's timer ran out
// before our answer arrived, or the answer was lost.
func (c *Conn) duplicateREQ(now time.Time) error {
	c.m.Counters.Duplicates++
	switch c.state {
	case StateREQRcvd:
		// The application has not answered: tell the active side to
		// stop retrying and wait (IBA 12.6.6), as ib_cm does for a
		// consumer that is slow to accept.
		c.sendMRA(c.m.cfg.MRAServiceTimeout)
		c.state = StateMRAREQSent
	case StateMRAREQSent:
		c.sendOut() // the MRA again
	case StateREPSent, StateMRAREPRcvd:
		// Our REP was lost or is slow: send it again now rather than at
		// the next timeout (IBA 12.9.6: REP Sent, "REQ received: resend
		// REP"), and count the next timeout from now so the two do
		// not go out back to back.
		c.sendOut()
		if c.state == StateREPSent {
			c.deadline = now.Add(c.timeout)
		}
	case StateTimewait:
		// A REQ from a connection that is over (or that we rejected).
		if mad.MAD(c.out[:]).Header().AttrID() == mad.AttrREJ {
			c.sendOut()
		} else {
			c.m.rejectREQ(c.peer, mad.MAD(c.req[:]), mad.RejStaleConn)
		}
	default:
		// Established or disconnecting: the REQ is an old copy.
		return ErrUnexpected
	}
	return nil
}

func (c *Conn) sendMRA(timeout uint8) {
	out := mad.NewCM(c.out[:], mad.AttrMRA, c.tid)
	out.MRA().Encode(&mad.MRAFields{LocalCommID: c.localID, RemoteCommID: c.remoteID, MessageMRAed: mad.MsgREQ, ServiceTimeout: timeout})
	c.sendOut()
}

// AcceptParams is the passive side's answer (rdma_accept's
// rdma_conn_param).
type AcceptParams struct {
	// QPN of the local QP, which is in INIT, and StartingPSN, the PSN
	// it receives first: the peer's send queue starts there.
	QPN         uint32
	StartingPSN uint32
	// ResponderResources and InitiatorDepth, each capped by what the REQ
	// offered the other way (IBA 12.7.29-30).
	ResponderResources, InitiatorDepth uint8
	// RNRRetryCount: how often the active side's QP retries our RNR NAKs.
	RNRRetryCount uint8
	FlowControl   bool
	SRQ           bool
	// PrivateData goes in the REP: at most 196 bytes.
	PrivateData []byte
	// SelectiveRepeat takes uroce's selective repeat if the REQ offered
	// it (an RC REQ from a uroce active side): both QPs then use it, and
	// the REP says so in its reserved bits. false answers as ib_cm does.
	SelectiveRepeat bool
}

// Accept answers a connection request: the QP goes to RTR and RTS with
// the negotiated attributes, then the REP goes out. It returns
// ErrBadState unless the connection is in REQ Rcvd or MRA(REQ) Sent,
// ErrBadParam for out-of-range parameters, and the QPModifier's error
// (the connection is then still waiting for an answer: Reject it).
func (c *Conn) Accept(now time.Time, p *AcceptParams) error {
	if c.state != StateREQRcvd && c.state != StateMRAREQSent {
		return fmt.Errorf("accept in %v: %w", c.state, ErrBadState)
	}
	switch {
	case p.QPN == 0 || p.QPN > bth.QPNMask:
		return fmt.Errorf("accept: QPN %#x: %w", p.QPN, ErrBadParam)
	case p.StartingPSN > bth.QPNMask:
		return fmt.Errorf("accept: PSN %#x: %w", p.StartingPSN, ErrBadParam)
	case p.RNRRetryCount > 7:
		return fmt.Errorf("accept: RNR retry count %d: %w", p.RNRRetryCount, ErrBadParam)
	case len(p.PrivateData) > mad.REPPrivateDataLen:
		return fmt.Errorf("accept: %d bytes of private data: %w", len(p.PrivateData), ErrBadParam)
	}
	req := mad.MAD(c.req[:]).REQ()
	path := req.Primary()
	cfg := &c.m.cfg
	mtu := req.PathMTU()
	if cfg.MaxMTU != 0 {
		mtu = min(mtu, cfg.MaxMTU)
	}
	// Our responder resources answer the peer's initiator depth and vice
	// versa; neither may exceed what the REQ offered (cma_accept_ib, IBA
	// 12.7.29-30).
	rr := min(p.ResponderResources, req.InitiatorDepth())
	id := min(p.InitiatorDepth, req.ResponderResources())
	lifetime := path.LocalACKTimeout
	if lifetime > 0 {
		lifetime--
	}
	c.attr = QPAttr{
		QPN:     p.QPN,
		DestQPN: req.LocalQPN(),
		// The REQ's Starting PSN is where the active side receives
		// from, so where we send from (ib_cm's cm_req_handler sets
		// sq_psn from it); ours, in the REP, is where we receive from.
		SQPSN:           req.StartingPSN(),
		RQPSN:           p.StartingPSN,
		PathMTU:         mtu,
		PKey:            req.PKey(),
		DestGID:         path.LocalGID,
		SrcGID:          path.RemoteGID,
		FlowLabel:       path.FlowLabel,
		HopLimit:        path.HopLimit,
		TrafficClass:    path.TrafficClass,
		SL:              path.SL,
		Timeout:         ackTimeout(cfg.TargetACKDelay, lifetime),
		RetryCount:      req.RetryCount(),
		RNRRetry:        req.RNRRetryCount(),
		MinRNRTimer:     cfg.MinRNRTimer,
		MaxRdAtomic:     id,
		MaxDestRdAtomic: rr,
		FlowControl:     req.EndToEndFlowControl(),
		SRQ:             p.SRQ,
		SelectiveRepeat: p.SelectiveRepeat && req.TransportService() == mad.ServiceRC &&
			req.UroceCaps()&mad.CapSelectiveRepeat != 0,
	}
	var caps mad.Caps
	if c.attr.SelectiveRepeat {
		caps = mad.CapSelectiveRepeat
	}
	if err := c.modifyUp(now); err != nil {
		return fmt.Errorf("accept: %w", err)
	}
	out := mad.NewCM(c.out[:], mad.AttrREP, c.tid)
	out.REP().Encode(&mad.REPFields{
		LocalCommID:         c.localID,
		RemoteCommID:        c.remoteID,
		LocalQPN:            p.QPN,
		StartingPSN:         p.StartingPSN,
		ResponderResources:  rr,
		InitiatorDepth:      id,
		TargetACKDelay:      cfg.TargetACKDelay,
		EndToEndFlowControl: p.FlowControl,
		RNRRetryCount:       p.RNRRetryCount,
		SRQ:                 p.SRQ,
		LocalCAGUID:         cfg.CAGUID,
		PrivateData:         p.PrivateData,
		UroceCaps:           caps,
	})
	c.state = StateREPSent
	c.setTimer(now, c.peerResponse(), c.peerRetries())
	c.sendOut()
	return nil
}

// Reject refuses the connection with a REJ (reason 0 means "consumer
// defined", what rdma_reject sends): the passive side before it accepted,
// or the active side giving up before the REP (as ib_send_cm_rej allows).
// The passive side keeps the connection in time-wait so a repeated REQ
// gets the same REJ. It returns ErrBadState in other states and
// ErrBadParam for more than 148 bytes of private data.
func (c *Conn) Reject(now time.Time, reason mad.RejectReason, privateData []byte) error {
	if len(privateData) > mad.REJPrivateDataLen {
		return fmt.Errorf("reject: %d bytes of private data: %w", len(privateData), ErrBadParam)
	}
	if reason == 0 {
		reason = mad.RejConsumerDefined
	}
	switch c.state {
	case StateREQRcvd, StateMRAREQSent:
		c.sendREJ(reason, mad.MsgREQ, privateData)
		// Remember the REJ for as long as the active side may repeat
		// its REQ (every Remote CM Response Timeout plus a round trip,
		// Max CM Retries times), so a lost REJ is sent again rather
		// than the application asked twice. ib_cm forgets at once.
		r := mad.MAD(c.req[:]).REQ()
		c.state = StateTimewait
		c.wait(now, time.Duration(r.MaxCMRetries()+1)*(mad.Timeout(r.RemoteCMResponseTimeout())+2*c.lifetime()))
	case StateREQSent, StateREPWait:
		c.sendREJ(reason, mad.MsgOther, privateData)
		c.close()
	default:
		return fmt.Errorf("reject in %v: %w", c.state, ErrBadState)
	}
	return nil
}

// MRA tells the active side the application needs longer than the REQ's
// response timeout to answer: 4.096 µs × 2^serviceTimeout (IBA 12.6.6).
// It returns ErrBadState unless the connection is in REQ Rcvd (or
// MRA(REQ) Sent, when it resends).
func (c *Conn) MRA(now time.Time, serviceTimeout uint8) error {
	if c.state != StateREQRcvd && c.state != StateMRAREQSent {
		return fmt.Errorf("MRA in %v: %w", c.state, ErrBadState)
	}
	if serviceTimeout > 31 {
		return fmt.Errorf("MRA: service timeout %d: %w", serviceTimeout, ErrBadParam)
	}
	c.sendMRA(serviceTimeout)
	c.state = StateMRAREQSent
	return nil
}

// handleRTU: the active side is ready (IBA 12.6.9).
func (c *Conn) handleRTU(now time.Time, rtu mad.RTU) error {
	switch c.state {
	case StateREPSent, StateMRAREPRcvd:
		c.establish(rtu.PrivateData())
		return nil
	case StateEstablished, StateDREQSent, StateTimewait:
		// A repeated RTU, or one that lost the race with first data.
		if !c.active {
			c.m.Counters.Duplicates++
			return nil
		}
	}
	return ErrUnexpected
}

// DataReceived is the verbs layer's hook for the first packet a
// passive connection's QP receives: in REP Sent it means the RTU was lost
// or is late, and counts as it (IBA 12.9.6 "first data is RTU"; the
// kernel's ib_cm_notify(IB_EVENT_COMM_EST)). In any other state it does
// nothing, so the QP may call it for every packet until it reports
// Established.
func (c *Conn) DataReceived(now time.Time) {
	if c.state == StateREPSent || c.state == StateMRAREPRcvd {
		c.establish(nil)
	}
}

func (c *Conn) establish(pd []byte) {
	c.stopTimer()
	c.state = StateEstablished
	c.established = true
	var data []byte
	if pd != nil {
		data = copyData(pd)
	}
	c.m.emit(Event{Type: EventEstablished, Conn: c, PrivateData: data})
}
