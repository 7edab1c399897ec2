// Package cm is the InfiniBand communication manager (IBA chapter 12) as
// RoCEv2 peers speak it on QP1: the state machines that set an RC
// connection up with REQ, REP and RTU, turn it down with DREQ and DREP,
// and refuse it with REJ, for both the active and the passive side; and
// service ID resolution (SIDR_REQ and SIDR_REP, IBA 12.11), which finds
// the UD QP and Q_Key behind a service ID for rdma_cm's UDP port space. It
// is what the kernel's ib_cm does underneath rdma_cm, so a uroce process
// can rdma_connect to rping or perftest -R on an rxe or ConnectX host, and
// they to it. The messages themselves are package mad, beneath this one;
// package rdmacm runs a Manager for a verbs device and is the API an
// application uses.
//
// Like package qp, cm is pure logic: no goroutines, sockets or clock. The
// owner feeds it:
//
//   - Manager.HandleMAD with every datagram QP1 receives (the UD payload,
//     which is the 256-byte MAD, and the source GID);
//   - Manager.Tick at Manager.NextDeadline, for retransmissions, the waits
//     an MRA asks for, and the end of time-wait;
//   - the application's decisions: Manager.Connect, Conn.Accept,
//     Conn.Reject, Conn.MRA, Conn.Disconnect; Manager.Resolve,
//     SIDR.Accept, SIDR.Reject for UD services;
//   - Conn.DataReceived when a passive connection's QP gets its first
//     packet, which counts as the RTU if that was lost (IBA 12.9.6).
//
// and drains what happened with Manager.PollEvents (rdma_cm's event
// types: ConnectRequest, Established, Rejected, Unreachable,
// ConnectError, Disconnected, TimewaitExit).
//
// It reaches the verbs layer through two small interfaces, called
// synchronously and never re-entered: MADSender sends a MAD as a UD SEND
// from QP1 to the peer's QP1 (a failed send is a lost datagram; the
// retries cover it), and QPModifier moves the connection's QP, which the
// verbs layer created and put in INIT, to RTR, RTS or error.
//
// Between two uroce peers the REQ and REP also agree on selective repeat
// (ConnectParams.SelectiveRepeat, AcceptParams.SelectiveRepeat,
// QPAttr.SelectiveRepeat), in reserved bits that ib_cm ignores and sends
// zeroed (mad.Caps), so with rxe or ConnectX it is never on.
//
// Malformed MADs, messages for unknown connections or from the wrong peer,
// and messages a state does not expect are dropped and counted; they never
// change an established connection. What each state does with each message
// (IBA 12.9.6) is in docs/connection-manager.md.
//
// Not here yet: LAP/APR path migration (a LAP gets APR "not supported";
// RoCE has no alternate paths), SIDR redirection, RD, XRC.
package cm
