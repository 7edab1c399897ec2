package cm

import (
	"fmt"
	"time"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/pkg/cm/mad"
)

// SIDRState is where a service ID resolution stands (IBA 12.11).
type SIDRState uint8

// SIDR states.
const (
	// SIDRIdle: resolved, failed, given up, or forgotten.
	SIDRIdle SIDRState = iota
	// SIDRREQSent (active): the SIDR_REQ is out, retried until a
	// SIDR_REP or the last retry's timeout.
	SIDRREQSent
	// SIDRREQRcvd (passive): the request went to the application, which
	// has not answered; repeated SIDR_REQs are dropped (SIDR has no MRA).
	SIDRREQRcvd
	// SIDRREPSent (passive): answered; a repeated SIDR_REQ, which means
	// the SIDR_REP was lost, gets the same SIDR_REP again until the
	// requester's retries must be over.
	SIDRREPSent
)

var sidrStateNames = [...]string{
	SIDRIdle:    "Idle",
	SIDRREQSent: "SIDR_REQ Sent",
	SIDRREQRcvd: "SIDR_REQ Rcvd",
	SIDRREPSent: "SIDR_REP Sent",
}

func (s SIDRState) String() string {
	if int(s) < len(sidrStateNames) {
		return sidrStateNames[s]
	}
	return fmt.Sprintf("SIDRState(%d)", uint8(s))
}

// SIDR is one service ID resolution (IBA 12.11): the active side asks
// which UD QP serves a service ID, and the passive side's application
// answers with the QP's number and Q_Key, or a status that says why not.
// Nothing is connected: there are no communication IDs, RTU or time-wait,
// only the requester's Request ID that the reply echoes. It is how
// rdma_cm's UDP port space (rdma_connect on a UD ID) finds its peer.
type SIDR struct {
	m         *Manager
	state     SIDRState
	active    bool
	requestID uint32
	peer      Address
	service   uint64
	// req is the SIDR_REQ as sent or received; out the last message that
	// may have to go again (SIDR_REQ or SIDR_REP), or the SIDR_REP that
	// resolved an active request.
	req, out   [mad.Size]byte
	retries    int
	maxRetries int
	timeout    time.Duration
	deadline   time.Time
	// Context is the verbs layer's.
	Context any
}

// State returns where the resolution stands.
func (s *SIDR) State() SIDRState { return s.state }

// Active reports whether this side sent the SIDR_REQ.
func (s *SIDR) Active() bool { return s.active }

// RequestID returns the requester's Request ID (IBA 12.11.1).
func (s *SIDR) RequestID() uint32 { return s.requestID }

// Peer returns the other side's QP1.
func (s *SIDR) Peer() Address { return s.peer }

// ServiceID returns the service ID asked for.
func (s *SIDR) ServiceID() uint64 { return s.service }

// Request returns the SIDR_REQ's fields; PrivateData is a view of the
// resolution's copy.
func (s *SIDR) Request() mad.SIDRREQFields { return mad.MAD(s.req[:]).SIDRREQ().Fields() }

// Reply returns the SIDR_REP's fields once an active resolution got one
// (its event was Established or Rejected); PrivateData is a view.
func (s *SIDR) Reply() mad.SIDRREPFields { return mad.MAD(s.out[:]).SIDRREP().Fields() }

// SIDRParams is what the active side asks (rdma_connect on an rdma_cm ID
// of the UDP port space, after address and route resolution).
type SIDRParams struct {
	ServiceID uint64 // mad.IPServiceID(mad.PortSpaceUDP, port) for rdma_cm
	Dest      mad.GID
	PKey      uint16 // 0 means 0xffff
	// PrivateData goes in the SIDR_REQ: at most 216 bytes. rdma_cm
	// callers put a mad.CMAHeader first and leave 180 for the
	// application.
	PrivateData []byte
	Context     any
}

// Resolve sends a SIDR_REQ and returns the resolution in SIDR_REQ Sent.
// It is sent again every CM response timeout plus a round trip, Max CM
// Retries times (ib_cm's ib_send_cm_sidr_req takes rdma_cm's timeout and
// retries the same way); then the event is Unreachable. A SIDR_REP makes
// Established (status valid: Reply has the QPN and Q_Key) or Rejected
// (Event.Status says why). It returns ErrBadParam for too much private
// data.
func (m *Manager) Resolve(now time.Time, p *SIDRParams) (*SIDR, error) {
	if len(p.PrivateData) > mad.SIDRREQPrivateDataLen {
		return nil, fmt.Errorf("resolve: %d bytes of private data: %w", len(p.PrivateData), ErrBadParam)
	}
	pkey := p.PKey
	if pkey == 0 {
		pkey = 0xffff
	}
	s := &SIDR{m: m, active: true, requestID: m.newLocalID(), peer: gsiAddress(p.Dest), service: p.ServiceID, Context: p.Context}
	mad.NewCM(s.req[:], mad.AttrSIDRREQ, m.tid(s.requestID)).SIDRREQ().Encode(&mad.SIDRREQFields{
		RequestID: s.requestID, PKey: pkey, ServiceID: p.ServiceID, PrivateData: p.PrivateData,
	})
	s.out = s.req
	m.sidrOut[s.requestID] = s
	s.state = SIDRREQSent
	s.retries, s.maxRetries = 0, int(m.cfg.MaxCMRetries)
	s.timeout = mad.Timeout(m.cfg.CMResponseTimeout) + 2*mad.Timeout(m.cfg.PacketLifetime)
	s.deadline = now.Add(s.timeout)
	s.sendOut()
	return s, nil
}

// Cancel gives up an active resolution: later replies are dropped as
// strays. SIDR has no message for it (IBA 12.11); the passive side's
// record ages out.
func (s *SIDR) Cancel() {
	if s.active {
		s.close()
	}
}

// SIDRAcceptParams is the passive side's answer (rdma_accept on a UD ID).
type SIDRAcceptParams struct {
	// QPN and QKey name the UD QP that serves the service.
	QPN, QKey uint32
	// PrivateData goes in the SIDR_REP: at most 136 bytes.
	PrivateData []byte
}

// Accept answers a request with status valid, the QPN and Q_Key. It
// returns ErrBadState unless the request is waiting for an answer, and
// ErrBadParam for a QPN of 0 or over 24 bits or too much private data.
func (s *SIDR) Accept(now time.Time, p *SIDRAcceptParams) error {
	if s.active || s.state != SIDRREQRcvd {
		return fmt.Errorf("SIDR accept in %v: %w", s.state, ErrBadState)
	}
	switch {
	case p.QPN == 0 || p.QPN > bth.QPNMask:
		return fmt.Errorf("SIDR accept: QPN %#x: %w", p.QPN, ErrBadParam)
	case len(p.PrivateData) > mad.SIDRREPPrivateDataLen:
		return fmt.Errorf("SIDR accept: %d bytes of private data: %w", len(p.PrivateData), ErrBadParam)
	}
	s.reply(now, mad.SIDRValid, p.QPN, p.QKey, p.PrivateData)
	return nil
}

// Reject answers a request with a status other than valid (0 means
// mad.SIDRRejected, what rdma_reject sends for a UD ID) and private data.
// It returns ErrBadState unless the request is waiting for an answer, and
// ErrBadParam for the status valid or too much private data.
func (s *SIDR) Reject(now time.Time, status mad.SIDRStatus, privateData []byte) error {
	if s.active || s.state != SIDRREQRcvd {
		return fmt.Errorf("SIDR reject in %v: %w", s.state, ErrBadState)
	}
	if status == mad.SIDRValid {
		status = mad.SIDRRejected
	}
	if len(privateData) > mad.SIDRREPPrivateDataLen {
		return fmt.Errorf("SIDR reject: %d bytes of private data: %w", len(privateData), ErrBadParam)
	}
	s.reply(now, status, 0, 0, privateData)
	return nil
}

// reply sends the SIDR_REP and keeps it for as long as the requester may
// repeat its SIDR_REQ: Max CM Retries + 1 times the CM response timeout
// and a round trip, by this side's settings (the SIDR_REQ carries none).
func (s *SIDR) reply(now time.Time, status mad.SIDRStatus, qpn, qkey uint32, pd []byte) {
	cfg := &s.m.cfg
	out := mad.NewCM(s.out[:], mad.AttrSIDRREP, mad.MAD(s.req[:]).Header().TID())
	out.SIDRREP().Encode(&mad.SIDRREPFields{RequestID: s.requestID, Status: status, QPN: qpn, ServiceID: s.service, QKey: qkey, PrivateData: pd})
	s.state = SIDRREPSent
	s.retries, s.maxRetries = 0, 0
	s.timeout = time.Duration(cfg.MaxCMRetries+1) * (mad.Timeout(cfg.CMResponseTimeout) + 2*mad.Timeout(cfg.PacketLifetime))
	s.deadline = now.Add(s.timeout)
	s.sendOut()
}

func (s *SIDR) sendOut() { s.m.send(s.peer, s.out[:]) }

func (s *SIDR) close() {
	s.state = SIDRIdle
	s.deadline = time.Time{}
	if s.active {
		if s.m.sidrOut[s.requestID] == s {
			delete(s.m.sidrOut, s.requestID)
		}
		return
	}
	k := remoteKey{s.peer.GID, s.requestID}
	if s.m.sidrIn[k] == s {
		delete(s.m.sidrIn, k)
	}
}

// expire runs when the deadline passes: the next retry of a SIDR_REQ, the
// end of an unanswered one, or the end of a SIDR_REP's memory.
func (s *SIDR) expire(now time.Time) {
	if s.state == SIDRREQSent && s.retries < s.maxRetries {
		s.retries++
		s.m.Counters.Retransmits++
		s.deadline = now.Add(s.timeout)
		s.sendOut()
		return
	}
	if s.state == SIDRREQSent {
		// ib_cm reports IB_CM_SIDR_REQ_ERROR, which rdma_cm turns
		// into RDMA_CM_EVENT_UNREACHABLE.
		s.close()
		s.m.emit(Event{Type: EventUnreachable, SIDR: s})
		return
	}
	s.close()
}

// handleSIDRREQ: a request for a UD service (IBA 12.11.1). A repeat from
// the same requester (GID and Request ID) is answered from the record; a
// new one goes to the application if someone listens on the service,
// else it is answered at once with "service ID not supported", as ib_cm's
// cm_sidr_req_handler does, keeping no state.
func (m *Manager) handleSIDRREQ(now time.Time, src Address, msg mad.MAD) error {
	r := msg.SIDRREQ()
	k := remoteKey{src.GID, r.RequestID()}
	if s := m.sidrIn[k]; s != nil {
		m.Counters.Duplicates++
		if s.state == SIDRREPSent {
			s.sendOut()
		}
		return nil
	}
	status := mad.SIDRValid
	switch {
	case !m.listeners[r.ServiceID()]:
		status = mad.SIDRServiceNotSupported
	case len(m.sidrIn) >= m.cfg.MaxConns:
		// As for REQs (Config.MaxConns): a flood costs an answer each
		// and no memory.
		m.Counters.Overloaded++
		status = mad.SIDRRejected
	}
	if status != mad.SIDRValid {
		m.answerSIDR(src, msg, status)
		return nil
	}
	s := &SIDR{m: m, requestID: r.RequestID(), peer: gsiAddress(src.GID), service: r.ServiceID()}
	copy(s.req[:], msg)
	m.sidrIn[k] = s
	s.state = SIDRREQRcvd
	m.emit(Event{Type: EventConnectRequest, SIDR: s})
	return nil
}

// answerSIDR answers a SIDR_REQ that makes no record with a SIDR_REP
// carrying only a status.
func (m *Manager) answerSIDR(src Address, req mad.MAD, status mad.SIDRStatus) {
	r := req.SIDRREQ()
	out := mad.NewCM(m.buf[:], mad.AttrSIDRREP, req.Header().TID())
	out.SIDRREP().Encode(&mad.SIDRREPFields{RequestID: r.RequestID(), Status: status, ServiceID: r.ServiceID()})
	m.send(gsiAddress(src.GID), out)
}

// handleSIDRREP: the answer to our SIDR_REQ (IBA 12.11.2). One that names
// no outstanding request of ours, or comes from another port than the one
// we asked, is a stray (or a repeat after the first resolved it) and is
// dropped. ib_cm looks the request up the same way (cm_sidr_rep_handler);
// the service ID is not compared, since ib_cm leaves it 0 in the "not
// supported" answer.
func (m *Manager) handleSIDRREP(now time.Time, src Address, msg mad.MAD) error {
	rep := msg.SIDRREP()
	s := m.sidrOut[rep.RequestID()]
	if s == nil || s.peer.GID != src.GID {
		return ErrUnknownConn
	}
	copy(s.out[:], msg)
	s.close()
	ev := Event{Type: EventEstablished, SIDR: s, Status: rep.Status(), PrivateData: copyData(rep.PrivateData())}
	if rep.Status() != mad.SIDRValid {
		ev.Type = EventRejected
	}
	m.emit(ev)
	return nil
}

// NumSIDRs returns how many service ID resolutions the manager holds:
// ours waiting for a SIDR_REP, and the peers' waiting for the
// application or remembered for their repeats.
func (m *Manager) NumSIDRs() int { return len(m.sidrOut) + len(m.sidrIn) }
