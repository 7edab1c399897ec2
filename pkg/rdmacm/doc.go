// Package rdmacm connects RC queue pairs the way librdmacm does: with the
// InfiniBand communication manager's REQ, REP and RTU sent as MADs to QP1,
// so a uroce program can connect to, and accept connections from,
// unmodified rdma_cm programs (rping, ucmatose, perftest -R) on rxe or
// ConnectX hosts. It also resolves UD services of rdma_cm's UDP port
// space with SIDR_REQ and SIDR_REP (udaddy).
//
// One CM per device drives a cm.Manager (the state machines) from one
// goroutine: it feeds it the MADs the device's GSI QP receives, runs its
// timers, sends what it sends as UD SENDs from QP1 to the peer's QP1
// (Q_Key 0x80010000, P_Key 0xffff) and moves the connections' QPs through
// RTR and RTS with the negotiated attributes.
//
//	m, _ := rdmacm.Open(dev, rdmacm.Config{})
//	defer m.Close()
//
//	// Active side (rdma_resolve_addr, rdma_connect):
//	c, err := m.Dial(ctx, netip.MustParseAddrPort("10.0.0.1:7174"), qp, &rdmacm.Params{PrivateData: hello})
//	// c.QP() is in RTS; post RC work requests on it.
//
//	// Passive side (rdma_listen, rdma_get_request, rdma_accept):
//	l, _ := m.Listen(7174)
//	req, _ := l.Accept(ctx)
//	c, err := req.Accept(ctx, qp, &rdmacm.Params{PrivateData: welcome})
//	// or req.Reject(reason)
//
//	c.Disconnect()   // rdma_disconnect: DREQ, QP to error
//	<-c.Done()       // disconnected (either side)
//
// The QP passed to Dial or Accept is one the caller created on the same
// device (rdma_create_qp), in RESET or INIT; rdmacm takes it to INIT with
// the access rights of Params, then the CM takes it to RTR and RTS. After
// that it is an ordinary verbs QP: post SENDs, WRITEs and READs on it.
//
// Between two uroce ends the connection uses selective repeat, which
// resends only lost packets: Dial offers it and Accept takes it in bits of
// the REQ and REP that ib_cm ignores and sends zeroed, so it is on exactly
// when both ends are uroce (Conn.Attr().SelectiveRepeat) and an rxe or
// ConnectX peer sees standard RC. Params.GoBackN on either side keeps
// go-back-N.
//
// Errors: a REJ is a *RejectError (errors.Is ErrRejected, and ErrRefused
// when nobody listens on the port); a peer that never answers the CM's
// retries is ErrUnreachable; a cancelled or expired context returns the
// context's error wrapped with ErrCanceled or ErrTimeout.
//
// Private data follows rdma_cm's limits on IB and RoCE: 56 bytes in the
// REQ (the rest of its 92 is rdma_cm's IP header, mad.CMAHeader), 196 in
// the REP, 148 in a REJ.
//
// A passive connection whose RTU is lost is established by the first
// packet its QP receives (IBA 12.9.6), which the CM loop polls for while
// the REP is out.
//
// UD services (RDMA_PS_UDP: service ID 0x0000000001110000 | port) have no
// connection: the SIDR_REQ asks which QP serves the port, and the
// SIDR_REP names it and its Q_Key (UDPQKey, librdmacm's 0x01234567,
// unless the server chose another):
//
//	peer, err := m.DialUD(ctx, netip.MustParseAddrPort("10.0.0.1:7174"), udqp, nil)
//	// send datagrams to peer.QPN and peer.QKey through an AH of peer.AHAttr()
//
//	l, _ := m.ListenUD(7174)
//	req, _ := l.Accept(ctx)
//	err := req.Accept(udqp, nil) // or req.Reject(data)
//
// The SIDR_REQ does not carry the requester's QPN: the server learns it
// from the datagrams (each receive completion has the source QP and GID).
// A refusal is a *SIDRError (ErrRefused when nobody listens).
//
// Not here: SIDR redirection, the IPoIB and IB port spaces, address
// resolution beyond "the GID is the IP address", an RNR retry count of 0
// (Params takes 0 as 7).
package rdmacm
