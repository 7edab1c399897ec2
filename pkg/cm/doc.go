// Package cm is the InfiniBand communication manager (IBA chapter 12) as
// RoCEv2 peers speak it on QP1: the state machines that set an RC
// connection up with REQ, REP and RTU, turn it down with DREQ and DREP,
// and refuse it with REJ, for both the active and the passive side. It
// is what the kernel's ib_cm does underneath rdma_cm, so a uroce process
// can rdma_connect to rping or perftest -R on an rxe or ConnectX host, and
// they to it. The messages themselves are package cm/mad.
//
// # Pure logic
//
// Like package qp, cm has no goroutines, sockets or clock. The owner
// feeds it:
//
//   - Manager.HandleMAD with every datagram QP1 receives (the UD payload,
//     which is the 256-byte MAD, and the source GID);
//   - Manager.Tick at Manager.NextDeadline, for retransmissions (REQ, REP
//     and DREQ every CM response timeout, 4.096 µs × 2^n plus a round
//     trip, up to Max CM Retries), the waits an MRA asks for, and the end
//     of time-wait;
//   - the application's decisions: Manager.Connect, Conn.Accept,
//     Conn.Reject, Conn.MRA, Conn.Disconnect;
//   - Conn.DataReceived when a passive connection's QP gets its first
//     packet, which counts as the RTU if that was lost (IBA 12.9.6).
//
// and drains what happened with Manager.PollEvents (rdma_cm's event
// types: ConnectRequest, Established, Rejected, Unreachable,
// ConnectError, Disconnected, TimewaitExit).
//
// # The seam to the verbs layer
//
// Two small interfaces, called synchronously and never re-entered:
//
//   - MADSender.SendMAD(dst, mad): send the 256 bytes as a UD SEND Only
//     from QP1 to dst (the peer's GID, QP1, Q_Key 0x80010000). A failed
//     send is a lost datagram; the retries cover it.
//   - QPModifier.ModifyQP(now, state, attr): move the connection's QP to
//     RTR, RTS or error. QPAttr is a plain struct with everything the two
//     transitions need (remote QPN, both PSNs, path MTU, the address
//     vector, local ACK timeout, retry and RNR retry counts, READ/atomic
//     depths, flow control); the verbs layer copies it into its own
//     attribute struct (qp.Attr). The CM calls RTR then RTS before
//     sending the REP (passive, as rdma_cm's cma_accept_ib) or the RTU
//     (active, as cma_rep_recv), and error on disconnect.
//
// The QP itself is created by the verbs layer (rdma_create_qp) and is in
// INIT when Connect or Accept is called with its QPN and starting PSN.
//
// # A librdmacm-like API for the verbs layer (a sketch)
//
// Package rdmacm is this layer as built: one goroutine per device owns a
// Manager and the device's GSI QP. The sketch it started from: the verbs
// layer owns a Manager per port and runs it in its engine loop; on top it
// offers, in the spirit of librdmacm:
//
//	type EventChannel struct{ C <-chan CMEvent }      // rdma_create_event_channel
//	type CMID struct{ QP *QP; ... }                    // rdma_cm_id
//
//	func (d *Device) Listen(port uint16, backlog int) (*Listener, error)
//	    // Manager.Listen(mad.IPServiceID(mad.PortSpaceTCP, port))
//	func (l *Listener) Accept(ctx context.Context) (*ConnRequest, error)
//	    // waits for EventConnectRequest; the request's mad.CMAHeader
//	    // (Conn.Request().PrivateData) gives the peer's IP and port,
//	    // the rest is the application's 56 bytes
//	func (r *ConnRequest) Accept(qp *QP, p ConnParam) (*CMID, error)
//	    // Conn.Accept with the QP's QPN and PSN; returns at Established
//	func (r *ConnRequest) Reject(privateData []byte) error
//	func (d *Device) Dial(ctx context.Context, addr netip.AddrPort, qp *QP, p ConnParam) (*CMID, error)
//	    // resolves the GID (the IP, IPv4-mapped), writes the CMAHeader,
//	    // Manager.Connect; returns at Established, or the REJ / timeout
//	    // as an error
//	func (id *CMID) Disconnect() error                 // Conn.Disconnect
//	func (id *CMID) Events() <-chan CMEvent            // Disconnected, TimewaitExit
//
// Each Event carries the *Conn, whose Context field holds the CMID.
//
// # What the state machines do (IBA 12.9.6)
//
// Active: Idle → REQ Sent (REQ retried) → [MRA: REP Wait, no retries] →
// REP: QP to RTR/RTS, RTU, Established. A REJ ends it (Rejected); running
// out of retries sends REJ "timeout" (Unreachable). A repeated REP is
// answered with the RTU again.
//
// Passive: REQ for a listened service ID → REQ Rcvd (ConnectRequest) →
// Accept: QP to RTR/RTS, REP Sent (REP retried) → RTU or first data →
// Established. A repeated REQ gets an MRA while the application has not
// answered, the REP again once it has, the REJ again after Reject. No
// listener, an unknown transport or MTU, or a REQ from a peer QP we are
// still connected to get a REJ (invalid service ID, invalid transport
// type, invalid MTU, stale connection).
//
// Disconnect: Established → QP to error, DREQ Sent (DREQ retried) → DREP →
// Timewait → Idle (TimewaitExit). A DREQ received in Established (or DREQ
// Sent, when both sides disconnect at once) is answered with DREP at once:
// Disconnected, Timewait. Time-wait lasts the QP's local ACK timeout; in
// it, repeated DREQs get a DREP again.
//
// Malformed MADs, messages for unknown connections or from the wrong
// peer, and messages a state does not expect are dropped and counted;
// they never change an established connection. The one exception is the
// race IBA 12.9.6 itself names: a REJ "timeout" or "stale connection" that
// names both communication IDs tells an established side that its peer
// gave up, and takes the connection to time-wait.
//
// Not here yet: LAP/APR path migration (a LAP gets APR "not supported";
// RoCE has no alternate paths), SIDR for UD services, RD, XRC.
package cm
