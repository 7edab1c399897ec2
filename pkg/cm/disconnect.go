package cm

import (
	"fmt"
	"time"

	"github.com/uroce/uroce/pkg/cm/mad"
)

// Disconnect starts the release of an established connection (IBA
// 12.6.10): the QP goes to error, as rdma_disconnect does, and a DREQ goes
// out, retried until the DREP (EventDisconnected, then time-wait). The
// passive side may also disconnect in REP Sent, before the RTU. It
// returns ErrBadState in other states and ErrBadParam for more than 220
// bytes of private data.
func (c *Conn) Disconnect(now time.Time, privateData []byte) error {
	if len(privateData) > mad.DREQPrivateDataLen {
		return fmt.Errorf("disconnect: %d bytes of private data: %w", len(privateData), ErrBadParam)
	}
	if !c.state.Connected() {
		return fmt.Errorf("disconnect in %v: %w", c.state, ErrBadState)
	}
	c.qpError(now)
	out := mad.NewCM(c.out[:], mad.AttrDREQ, c.m.tid(c.localID))
	out.DREQ().Encode(&mad.DREQFields{LocalCommID: c.localID, RemoteCommID: c.remoteID, RemoteQPN: c.attr.DestQPN, PrivateData: privateData})
	c.state = StateDREQSent
	c.setTimer(now, c.peerResponse(), c.peerRetries())
	c.sendOut()
	return nil
}

// handleDREQ: the peer releases the connection. The DREP goes out at once
// (ib_cm leaves it to the consumer's rdma_disconnect; the QP is in error
// either way, and the peer stops retrying sooner). A repeated DREQ in
// time-wait means the DREP was lost and gets another (IBA 12.9.6).
func (c *Conn) handleDREQ(now time.Time, tid uint64, dreq mad.DREQ) error {
	// The DREQ names our QPN; one that does not is not for this
	// connection (ib_cm's cm_dreq_handler drops it too).
	if dreq.RemoteQPN() != c.attr.QPN || c.remoteID == 0 {
		return ErrUnexpected
	}
	switch c.state {
	case StateEstablished, StateREPSent, StateMRAREPRcvd, StateDREQSent:
		// DREQ Sent: both sides disconnected at once; each answers the
		// other's DREQ (IBA 12.9.6).
		c.qpError(now)
		c.sendDREP(tid)
		c.m.emit(Event{Type: EventDisconnected, Conn: c, PrivateData: copyData(dreq.PrivateData())})
		c.established = true
		c.timewait(now)
	case StateTimewait:
		c.m.Counters.Duplicates++
		c.sendDREP(tid)
	default:
		return ErrUnexpected
	}
	return nil
}

func (c *Conn) sendDREP(tid uint64) {
	out := mad.NewCM(c.m.buf[:], mad.AttrDREP, tid)
	out.DREP().Encode(&mad.CommIDsFields{LocalCommID: c.localID, RemoteCommID: c.remoteID})
	c.m.send(c.peer, out)
}

// handleDREP: our DREQ is answered.
func (c *Conn) handleDREP(now time.Time, _ mad.DREP) error {
	if c.state != StateDREQSent {
		return ErrUnexpected
	}
	c.m.emit(Event{Type: EventDisconnected, Conn: c})
	c.timewait(now)
	return nil
}
