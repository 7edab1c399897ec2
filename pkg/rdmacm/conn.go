package rdmacm

import (
	"net/netip"
	"time"

	"github.com/uroce/uroce/pkg/cm"
	"github.com/uroce/uroce/pkg/cm/mad"
	"github.com/uroce/uroce/verbs"
)

// EventType is what happened to a connection; the names are rdma_cm's.
type EventType = cm.EventType

// Event types a Conn reports (ConnectRequest goes to a Listener instead).
const (
	EventEstablished  = cm.EventEstablished
	EventRejected     = cm.EventRejected
	EventUnreachable  = cm.EventUnreachable
	EventConnectError = cm.EventConnectError
	EventDisconnected = cm.EventDisconnected
	EventTimewaitExit = cm.EventTimewaitExit
)

// Event is one thing that happened to a connection (an rdma_cm_event).
type Event struct {
	Type EventType
	// Reason is the REJ's reason for EventRejected.
	Reason mad.RejectReason
	// PrivateData is the private data of the message behind the event
	// (REP, RTU, REJ, DREQ), the whole field as sent.
	PrivateData []byte
	// Err says what failed for EventConnectError.
	Err error
}

// eventBuffer holds a connection's events: a connection has at most
// Established, Disconnected and TimewaitExit (or one failure), so a
// reader that never reads loses nothing and never blocks the CM.
const eventBuffer = 8

// Conn is one connection (an rdma_cm_id with its QP), active or passive.
type Conn struct {
	m      *CM
	qp     *verbs.QueuePair
	qpn    uint32
	active bool
	local  netip.AddrPort
	remote netip.AddrPort
	events chan Event
	done   chan struct{}

	// The loop's: the state machine, and the one answer a Dial or
	// Accept waits for.
	cc          *cm.Conn
	result      chan error
	answered    bool
	established bool
	closed      bool

	// retrans are Params.Retrans, which the QP gets at RTR.
	retrans verbs.RetransFlags

	// Set by the loop before the result is sent; read after.
	privateData []byte
	attr        cm.QPAttr
}

func newConn(m *CM, qp *verbs.QueuePair, qpn uint32, active bool) *Conn {
	return &Conn{m: m, qp: qp, qpn: qpn, active: active, events: make(chan Event, eventBuffer),
		done: make(chan struct{}), result: make(chan error, 1)}
}

// QP returns the connection's queue pair, in RTS once connected.
func (c *Conn) QP() *verbs.QueuePair { return c.qp }

// LocalAddr and RemoteAddr return the two ends as rdma_cm names them: IP
// addresses and TCP port space ports.
func (c *Conn) LocalAddr() netip.AddrPort  { return c.local }
func (c *Conn) RemoteAddr() netip.AddrPort { return c.remote }

// PrivateData returns the peer's private data: the REP's for the active
// side (the whole 196-byte field), the REQ's application part for the
// passive side (56 bytes after rdma_cm's header).
func (c *Conn) PrivateData() []byte { return c.privateData }

// Attr returns the QP attributes the exchange negotiated (path MTU, PSNs,
// QPNs, READ depths, retry counts, ACK timeout, and whether selective
// repeat is on).
func (c *Conn) Attr() cm.QPAttr { return c.attr }

// CommIDs returns the connection's communication IDs (IBA 12.6.1), this
// side's and the peer's, as its CM messages carry them (ib_cm's local_id
// and remote_id): for logs, and for reading captures. Both are 0 before
// the CM has the connection.
func (c *Conn) CommIDs() (local, remote uint32) {
	c.m.do(func(time.Time) {
		if c.cc != nil {
			local, remote = c.cc.LocalID(), c.cc.RemoteID()
		}
	})
	return local, remote
}

// Events returns the connection's events: Established, then
// Disconnected and TimewaitExit. Reading them is optional.
func (c *Conn) Events() <-chan Event { return c.events }

// Done is closed when the connection is over: disconnected by either
// side (its QP is then in error), or failed.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Disconnect starts the release (rdma_disconnect): the QP goes to error,
// flushing what is outstanding, and a DREQ goes to the peer. Done closes
// when the peer answers (or the DREQ's retries run out). Disconnecting a
// connection the peer already disconnected does nothing.
func (c *Conn) Disconnect() error {
	var err error
	if e := c.m.do(func(now time.Time) {
		if c.closed || c.cc.State() == cm.StateTimewait || c.cc.State() == cm.StateIdle {
			return
		}
		if c.cc.State() == cm.StateDREQSent {
			return
		}
		err = c.cc.Disconnect(now, nil)
	}); e != nil {
		return e
	}
	if err != nil {
		return wrapState("disconnect", err)
	}
	return nil
}

// finish gives the waiting Dial or Accept its answer, once.
func (c *Conn) finish(err error) {
	if c.answered {
		return
	}
	c.answered = true
	c.result <- err
}

// post hands an event to the reader, dropping it if the reader left the
// buffer full.
func (c *Conn) post(e Event) {
	select {
	case c.events <- e:
	default:
	}
}

func (c *Conn) closeDone() {
	if !c.closed {
		c.closed = true
		close(c.done)
	}
}
