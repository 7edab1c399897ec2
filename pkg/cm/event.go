package cm

import (
	"fmt"

	"github.com/uroce/uroce/pkg/cm/mad"
)

// EventType is what happened to a connection. The names follow
// rdma_cm's enum rdma_cm_event_type, which the verbs layer forwards them
// as.
type EventType uint8

// Event types.
const (
	// EventConnectRequest: a REQ for a listened service arrived (passive).
	// Conn.Request has its fields; answer with Accept, Reject or MRA. For
	// a SIDR_REQ, Event.SIDR is set instead: answer with SIDR.Accept or
	// SIDR.Reject.
	EventConnectRequest EventType = iota + 1
	// EventEstablished: REP+RTU done (active), RTU or first data
	// (passive); for a SIDR, a SIDR_REP with status valid (active).
	EventEstablished
	// EventRejected: the peer sent a REJ; Reason and PrivateData say why.
	// For a SIDR, a SIDR_REP with another status: Status says which.
	EventRejected
	// EventUnreachable: every retry of the REQ, REP or SIDR_REQ went
	// unanswered (rdma_cm maps ib_cm's REQ_ERROR, REP_ERROR and
	// SIDR_REQ_ERROR to UNREACHABLE).
	EventUnreachable
	// EventConnectError: a local failure while connecting (Modify QP).
	EventConnectError
	// EventDisconnected: the peer's DREQ arrived, our DREQ was answered
	// or its retries ran out; the QP is in error.
	EventDisconnected
	// EventTimewaitExit: time-wait is over; the QP may be reused.
	EventTimewaitExit
)

var eventNames = [...]string{
	EventConnectRequest: "CONNECT_REQUEST",
	EventEstablished:    "ESTABLISHED",
	EventRejected:       "REJECTED",
	EventUnreachable:    "UNREACHABLE",
	EventConnectError:   "CONNECT_ERROR",
	EventDisconnected:   "DISCONNECTED",
	EventTimewaitExit:   "TIMEWAIT_EXIT",
}

func (t EventType) String() string {
	if int(t) < len(eventNames) && eventNames[t] != "" {
		return eventNames[t]
	}
	return fmt.Sprintf("EventType(%d)", uint8(t))
}

// Event is one thing that happened to one connection, or to one service
// ID resolution (then SIDR is set and Conn is nil).
type Event struct {
	Type EventType
	Conn *Conn
	SIDR *SIDR
	// Status is the SIDR_REP's status for a SIDR's Established or
	// Rejected.
	Status mad.SIDRStatus
	// Reason is the REJ's reason for EventRejected.
	Reason mad.RejectReason
	// PrivateData is a copy of the private data of the message behind
	// the event (REP for active Established, RTU for passive, REJ, DREQ),
	// the whole field as sent, so it has the field's fixed length.
	PrivateData []byte
	// Err says what failed for EventConnectError.
	Err error
}

func (e Event) String() string {
	s := e.Type.String()
	if e.Conn != nil {
		s += fmt.Sprintf(" conn %#x", e.Conn.LocalID())
	}
	if e.SIDR != nil {
		s += fmt.Sprintf(" SIDR %#x", e.SIDR.RequestID())
	}
	if e.Type == EventRejected && e.SIDR != nil {
		s += fmt.Sprintf(" (%v)", e.Status)
	} else if e.Type == EventRejected {
		s += fmt.Sprintf(" (%v)", e.Reason)
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}
