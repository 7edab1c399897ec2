package cm

import (
	"fmt"
	"time"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/pkg/cm/mad"
)

// ConnectParams is what the active side offers (rdma_connect's
// rdma_conn_param plus the resolved route).
type ConnectParams struct {
	ServiceID uint64 // mad.IPServiceID(mad.PortSpaceTCP, port) for rdma_cm
	// Dest is the peer's GID; Src the local one (Config.GID when zero).
	Dest, Src mad.GID
	// QPN of the local QP, which is in INIT, and StartingPSN, the PSN
	// it receives first: the peer's send queue starts there.
	QPN         uint32
	StartingPSN uint32
	PathMTU     mad.MTU
	PKey        uint16 // 0 means 0xffff
	// ResponderResources: READ/atomic this side will answer at once;
	// InitiatorDepth: those it will have outstanding.
	ResponderResources, InitiatorDepth uint8
	RetryCount, RNRRetryCount          uint8 // 3 bits each; 7 is what rping and perftest ask
	FlowControl                        bool
	SRQ                                bool
	// The path's GRH (IP) fields.
	FlowLabel    uint32
	HopLimit     uint8 // 0 means 64
	TrafficClass uint8
	SL           uint8
	// PrivateData goes in the REQ: at most 92 bytes. rdma_cm callers put
	// a mad.CMAHeader first and leave 56 for the application.
	PrivateData []byte
	// SelectiveRepeat offers uroce's selective repeat in the REQ's
	// reserved bits (mad.CapSelectiveRepeat). It is on when the REP takes
	// it, which only a uroce passive side does; false sends the REQ ib_cm
	// sends.
	SelectiveRepeat bool
	// Context is stored in the Conn for the caller.
	Context any
}

// Connect sends a REQ and returns the connection in REQ Sent. Events
// follow: Established, Rejected, Unreachable or ConnectError. It returns
// ErrBadParam for out-of-range parameters.
func (m *Manager) Connect(now time.Time, p *ConnectParams) (*Conn, error) {
	switch {
	case p.QPN == 0 || p.QPN > bth.QPNMask:
		return nil, fmt.Errorf("connect: QPN %#x: %w", p.QPN, ErrBadParam)
	case p.StartingPSN > bth.QPNMask:
		return nil, fmt.Errorf("connect: PSN %#x: %w", p.StartingPSN, ErrBadParam)
	case p.PathMTU.Bytes() == 0:
		return nil, fmt.Errorf("connect: path MTU %d: %w", p.PathMTU, ErrBadParam)
	case p.RetryCount > 7 || p.RNRRetryCount > 7 || p.SL > 15 || p.FlowLabel > 0xfffff:
		return nil, fmt.Errorf("connect: field too wide: %w", ErrBadParam)
	case len(p.PrivateData) > mad.REQPrivateDataLen:
		return nil, fmt.Errorf("connect: %d bytes of private data: %w", len(p.PrivateData), ErrBadParam)
	}
	src := p.Src
	if src.IsZero() {
		src = m.cfg.GID
	}
	pkey := p.PKey
	if pkey == 0 {
		pkey = 0xffff
	}
	hop := p.HopLimit
	if hop == 0 {
		hop = 64
	}
	c := &Conn{m: m, active: true, localID: m.newLocalID(), peer: gsiAddress(p.Dest), service: p.ServiceID, Context: p.Context}
	c.tid = m.tid(c.localID)
	cfg := &m.cfg
	req := mad.REQFields{
		LocalCommID:             c.localID,
		ServiceID:               p.ServiceID,
		LocalCAGUID:             cfg.CAGUID,
		LocalQPN:                p.QPN,
		ResponderResources:      p.ResponderResources,
		InitiatorDepth:          p.InitiatorDepth,
		RemoteCMResponseTimeout: cfg.CMResponseTimeout,
		TransportService:        mad.ServiceRC,
		EndToEndFlowControl:     p.FlowControl,
		StartingPSN:             p.StartingPSN,
		LocalCMResponseTimeout:  cfg.CMResponseTimeout,
		RetryCount:              p.RetryCount,
		PKey:                    pkey,
		PathMTU:                 p.PathMTU,
		RNRRetryCount:           p.RNRRetryCount,
		MaxCMRetries:            cfg.MaxCMRetries,
		SRQ:                     p.SRQ,
		Primary: mad.Path{
			// RoCE has no LIDs: ib_cm writes the permissive LID.
			LocalLID:     0xffff,
			RemoteLID:    0xffff,
			LocalGID:     src,
			RemoteGID:    p.Dest,
			FlowLabel:    p.FlowLabel,
			HopLimit:     hop,
			TrafficClass: p.TrafficClass,
			SL:           p.SL,
			// The REQ carries the ACK timeout the passive side's QP will
			// need: our ACK delay plus a round trip.
			LocalACKTimeout: ackTimeout(cfg.TargetACKDelay, cfg.PacketLifetime),
		},
		PrivateData: p.PrivateData,
	}
	if p.SelectiveRepeat {
		req.UroceCaps |= mad.CapSelectiveRepeat
	}
	mad.NewCM(c.req[:], mad.AttrREQ, c.tid).REQ().Encode(&req)
	c.attr = QPAttr{
		QPN:             p.QPN,
		RQPSN:           p.StartingPSN,
		PathMTU:         p.PathMTU,
		PKey:            pkey,
		DestGID:         p.Dest,
		SrcGID:          src,
		FlowLabel:       p.FlowLabel,
		HopLimit:        hop,
		TrafficClass:    p.TrafficClass,
		SL:              p.SL,
		RetryCount:      p.RetryCount,
		MinRNRTimer:     cfg.MinRNRTimer,
		MaxRdAtomic:     p.InitiatorDepth,
		MaxDestRdAtomic: p.ResponderResources,
		SRQ:             p.SRQ,
	}
	c.out = c.req
	m.conns[c.localID] = c
	c.state = StateREQSent
	c.setTimer(now, c.peerResponse(), c.peerRetries())
	c.sendOut()
	return c, nil
}

// handleREP: the passive side accepted (IBA 12.6.8). The active side sets
// its QP up from the REP and answers RTU at once, as rdma_cm's
// cma_rep_recv does; a repeated REP means our RTU was lost, and gets it
// again (IBA 12.9.6: Established, "REP received: resend RTU").
func (c *Conn) handleREP(now time.Time, rep mad.REP) error {
	if !c.active {
		return ErrUnexpected
	}
	switch c.state {
	case StateEstablished:
		c.m.Counters.Duplicates++
		c.sendRTU()
		return nil
	case StateREQSent, StateREPWait:
	default:
		return ErrUnexpected
	}
	c.stopTimer()
	c.remoteID = rep.LocalCommID()
	c.m.remote[remoteKey{c.peer.GID, c.remoteID}] = c
	req := mad.MAD(c.req[:]).REQ()
	a := &c.attr
	a.DestQPN = rep.LocalQPN()
	// Each side's Starting PSN is the one it receives first: ib_cm's
	// cm_rep_handler sets the active side's sq_psn from the REP.
	a.SQPSN = rep.StartingPSN()
	// The REP's responder resources bound what we may have outstanding;
	// its initiator depth what we answer (ib_cm's cm_rep_handler).
	a.MaxRdAtomic = min(req.InitiatorDepth(), rep.ResponderResources())
	a.MaxDestRdAtomic = min(req.ResponderResources(), rep.InitiatorDepth())
	a.RNRRetry = rep.RNRRetryCount()
	a.FlowControl = rep.EndToEndFlowControl()
	a.Timeout = ackTimeout(rep.TargetACKDelay(), c.m.cfg.PacketLifetime)
	// Selective repeat only if we offered it and the passive side took
	// it: an ib_cm REP has the bits zero.
	a.SelectiveRepeat = req.UroceCaps()&rep.UroceCaps()&mad.CapSelectiveRepeat != 0
	if err := c.modifyUp(now); err != nil {
		// cma_rep_recv rejects the REP when the QP cannot be set up.
		c.sendREJ(mad.RejConsumerDefined, mad.MsgREP, nil)
		c.m.emit(Event{Type: EventConnectError, Conn: c, Err: err})
		c.close()
		return nil
	}
	c.state = StateEstablished
	c.established = true
	c.sendRTU()
	c.m.emit(Event{Type: EventEstablished, Conn: c, PrivateData: copyData(rep.PrivateData())})
	return nil
}

// modifyUp moves the QP to RTR and RTS with the negotiated attributes.
func (c *Conn) modifyUp(now time.Time) error {
	if err := c.m.cfg.QP.ModifyQP(now, QPStateRTR, &c.attr); err != nil {
		return fmt.Errorf("modify QP %#x to RTR: %w", c.attr.QPN, err)
	}
	if err := c.m.cfg.QP.ModifyQP(now, QPStateRTS, &c.attr); err != nil {
		_ = c.m.cfg.QP.ModifyQP(now, QPStateError, &c.attr)
		return fmt.Errorf("modify QP %#x to RTS: %w", c.attr.QPN, err)
	}
	return nil
}

func (c *Conn) sendRTU() {
	out := mad.NewCM(c.out[:], mad.AttrRTU, c.tid)
	out.RTU().Encode(&mad.CommIDsFields{LocalCommID: c.localID, RemoteCommID: c.remoteID})
	c.sendOut()
}

// handleMRA: the peer has our REQ (or REP) and needs longer (IBA 12.6.6):
// stop retransmitting and wait its service timeout plus a round trip.
func (c *Conn) handleMRA(now time.Time, mra mad.MRA) error {
	d := mad.Timeout(mra.ServiceTimeout()) + 2*c.lifetime()
	switch {
	case c.state == StateREQSent && mra.MessageMRAed() == mad.MsgREQ:
		c.remoteID = mra.LocalCommID()
		c.m.remote[remoteKey{c.peer.GID, c.remoteID}] = c
		c.state = StateREPWait
	case c.state == StateREPWait && mra.MessageMRAed() == mad.MsgREQ,
		c.state == StateMRAREPRcvd && mra.MessageMRAed() == mad.MsgREP:
		// A repeated MRA restarts the wait, as a fresh one would.
		c.m.Counters.Duplicates++
	case c.state == StateREPSent && mra.MessageMRAed() == mad.MsgREP:
		c.state = StateMRAREPRcvd
	default:
		return ErrUnexpected
	}
	c.wait(now, d)
	return nil
}

// handleREJ: the peer refuses (IBA 12.6.7).
func (c *Conn) handleREJ(now time.Time, rej mad.REJ) error {
	ev := Event{Type: EventRejected, Conn: c, Reason: rej.Reason(), PrivateData: copyData(rej.PrivateData())}
	switch c.state {
	case StateREQSent, StateREPWait, StateREQRcvd, StateMRAREQSent:
		// Refused before any QP was set up (or, passive, the active side
		// gave up before we answered).
		c.m.emit(ev)
		c.close()
	case StateREPSent, StateMRAREPRcvd:
		// The active side could not use our REP; our QP was in RTS.
		c.qpError(now)
		c.m.emit(ev)
		c.timewait(now)
	case StateEstablished:
		// Only the peer naming both IDs and saying it timed out (its REP
		// or RTU never made it: the race of IBA 12.9.6 the kernel's
		// cm_rej_handler also honours) takes down an established
		// connection; anything else is stale.
		if c.remoteID != rej.LocalCommID() || rej.RemoteCommID() != c.localID ||
			(rej.Reason() != mad.RejTimeout && rej.Reason() != mad.RejStaleConn) {
			return ErrUnexpected
		}
		c.qpError(now)
		c.m.emit(ev)
		c.timewait(now)
	default:
		return ErrUnexpected
	}
	return nil
}
