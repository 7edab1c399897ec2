package cm

import (
	"time"

	"github.com/uroce/uroce/pkg/cm/mad"
)

// Conn is one connection, active or passive. Its methods, like the
// Manager's, are called by the manager's owner only.
type Conn struct {
	m        *Manager
	state    State
	active   bool
	localID  uint32
	remoteID uint32 // 0 until the peer's first message names it
	peer     Address
	service  uint64
	tid      uint64 // the REQ's: REP, RTU, MRA and REJ carry it
	// req is the REQ as sent (active) or received (passive): the terms
	// of the connection.
	req  [mad.Size]byte
	attr QPAttr
	// out is the last message that may have to go again: REQ, REP or
	// DREQ (retransmitted on timeout), MRA or REJ (resent on a repeated
	// REQ).
	out        [mad.Size]byte
	retries    int
	maxRetries int
	timeout    time.Duration // between retransmissions of out
	deadline   time.Time     // zero: no timer
	// established is set once the connection came up, so time-wait's end
	// is reported only for connections that did (rdma_cm does the same).
	established bool
	// Context is the verbs layer's: the rdma_cm ID or QP this is for.
	Context any
}

// State returns the connection's state.
func (c *Conn) State() State { return c.state }

// Active reports whether this side sent the REQ.
func (c *Conn) Active() bool { return c.active }

// LocalID and RemoteID return the communication IDs (IBA 12.6.3.1);
// RemoteID is 0 until the peer named its own.
func (c *Conn) LocalID() uint32  { return c.localID }
func (c *Conn) RemoteID() uint32 { return c.remoteID }

// Peer returns the address the connection's MADs go to.
func (c *Conn) Peer() Address { return c.peer }

// ServiceID returns the service ID of the REQ.
func (c *Conn) ServiceID() uint64 { return c.service }

// Request returns the REQ's fields: what the active side offered. Its
// PrivateData is a view of the connection's copy; do not change it.
func (c *Conn) Request() mad.REQFields { return mad.MAD(c.req[:]).REQ().Fields() }

// Attr returns the QP attributes negotiated so far (complete once the
// connection is established, or Accept returned).
func (c *Conn) Attr() QPAttr { return c.attr }

// setTimer arms the retransmission timer of out.
func (c *Conn) setTimer(now time.Time, timeout time.Duration, maxRetries int) {
	c.retries, c.maxRetries, c.timeout = 0, maxRetries, timeout
	c.deadline = now.Add(timeout)
}

// wait arms a single deadline with no retransmission.
func (c *Conn) wait(now time.Time, d time.Duration) {
	c.retries, c.maxRetries, c.timeout = 0, 0, d
	c.deadline = now.Add(d)
}

func (c *Conn) stopTimer() { c.deadline = time.Time{} }

// lifetime is the packet lifetime (one way) the timeouts add twice: our
// own on the active side; on the passive side the REQ's primary path's,
// recovered from its Local ACK Timeout as the kernel's
// cm_format_path_lid_from_req does (timeout - 1).
func (c *Conn) lifetime() time.Duration {
	if c.active {
		return mad.Timeout(c.m.cfg.PacketLifetime)
	}
	t := mad.MAD(c.req[:]).REQ().Primary().LocalACKTimeout
	if t > 0 {
		t--
	}
	return mad.Timeout(t)
}

// peerResponse is how long the peer may take to answer us (IBA 12.7.34):
// the REQ's Remote CM Response Timeout on the active side, its Local CM
// Response Timeout on the passive side; plus a round trip.
func (c *Conn) peerResponse() time.Duration {
	r := mad.MAD(c.req[:]).REQ()
	e := r.RemoteCMResponseTimeout()
	if !c.active {
		e = r.LocalCMResponseTimeout()
	}
	return mad.Timeout(e) + 2*c.lifetime()
}

// peerRetries is how often we retransmit to the peer: our own setting on
// the active side, the REQ's Max CM Retries on the passive side.
func (c *Conn) peerRetries() int {
	if c.active {
		return int(c.m.cfg.MaxCMRetries)
	}
	return int(mad.MAD(c.req[:]).REQ().MaxCMRetries())
}

// sendOut sends (or resends) the stored message.
func (c *Conn) sendOut() { c.m.send(c.peer, c.out[:]) }

// close forgets the connection: it goes Idle and out of the manager's
// tables.
func (c *Conn) close() {
	c.state = StateIdle
	c.stopTimer()
	if c.m.conns[c.localID] == c {
		delete(c.m.conns, c.localID)
	}
	k := remoteKey{c.peer.GID, c.remoteID}
	if c.m.remote[k] == c {
		delete(c.m.remote, k)
	}
}

// timewait enters time-wait (IBA 12.9.8.3.1): long enough for packets of
// the old connection to drain, which the kernel (cm_enter_timewait) takes
// to be the QP's local ACK timeout; never less than a round trip.
func (c *Conn) timewait(now time.Time) {
	c.state = StateTimewait
	d := max(mad.Timeout(c.attr.Timeout), 2*c.lifetime())
	c.wait(now, d)
}

// qpError moves the QP to error, as rdma_cm does before a DREQ or DREP
// (cma_modify_qp_err); a failure changes nothing for the CM.
func (c *Conn) qpError(now time.Time) {
	if c.established || c.state.Connected() {
		_ = c.m.cfg.QP.ModifyQP(now, QPStateError, &c.attr)
	}
}

// expire runs when the deadline passes.
func (c *Conn) expire(now time.Time) {
	switch c.state {
	case StateREQSent, StateREPSent, StateDREQSent:
		if c.retries < c.maxRetries {
			c.retries++
			c.m.Counters.Retransmits++
			c.deadline = now.Add(c.timeout)
			c.sendOut()
			return
		}
	}
	c.stopTimer()
	switch c.state {
	case StateREQSent, StateREPWait:
		// IBA 12.6.7.2: the active side that gave up says so with REJ
		// "timeout", its CA GUID in the ARI (which the kernel's
		// cm_acquire_rejected_id looks up).
		c.sendREJ(mad.RejTimeout, mad.MsgOther, nil)
		c.m.emit(Event{Type: EventUnreachable, Conn: c})
		c.close()
	case StateREPSent, StateMRAREPRcvd:
		// No RTU and no data: the passive side gives up the same way and
		// waits out its QP, which was in RTS.
		c.sendREJ(mad.RejTimeout, mad.MsgOther, nil)
		c.qpError(now)
		c.m.emit(Event{Type: EventUnreachable, Conn: c})
		c.timewait(now)
	case StateDREQSent:
		// No DREP: the peer is gone; the QP is already in error.
		c.m.emit(Event{Type: EventDisconnected, Conn: c})
		c.timewait(now)
	case StateTimewait:
		if c.established {
			c.m.emit(Event{Type: EventTimewaitExit, Conn: c})
		}
		c.close()
	}
}

// sendREJ builds a REJ from this connection into out and sends it.
func (c *Conn) sendREJ(reason mad.RejectReason, rejected mad.MsgKind, pd []byte) {
	out := mad.NewCM(c.out[:], mad.AttrREJ, c.tid)
	f := mad.REJFields{
		LocalCommID:     c.localID,
		RemoteCommID:    c.remoteID,
		MessageRejected: rejected,
		Reason:          reason,
		PrivateData:     pd,
	}
	var ari [8]byte
	if reason == mad.RejTimeout {
		guid := c.m.cfg.CAGUID
		for i := range ari {
			ari[i] = byte(guid >> (56 - 8*i))
		}
		f.ARI, f.ARILength = ari[:], 8
	}
	out.REJ().Encode(&f)
	c.sendOut()
}

// handleLAP answers a LAP: alternate paths (automatic path migration) do
// not exist on RoCE, so the answer is APR "not supported".
func (c *Conn) handleLAP(now time.Time, tid uint64) error {
	if c.state != StateEstablished {
		return ErrUnexpected
	}
	out := mad.NewCM(c.m.buf[:], mad.AttrAPR, tid)
	out.APR().Encode(&mad.APRFields{LocalCommID: c.localID, RemoteCommID: c.remoteID, Status: mad.APRUnsupported})
	c.m.send(c.peer, out)
	return nil
}

// copyData returns a copy of a private data field for an event.
func copyData(b []byte) []byte { return append([]byte(nil), b...) }
