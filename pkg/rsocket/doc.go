// Package rsocket gives Go programs librdmacm's rsockets: byte streams
// over RC queue pairs, as a net.Listener and a net.Conn, speaking
// rsocket.c's protocol so that a C program using rsocket(7) on rxe or a
// ConnectX host can be the other end (the lab runs rdma-core's rstream
// and riostream against it).
//
// Listen and Dial set the connection up through the device's rdma_cm
// (package rdmacm), with rsocket's connect message in the private data:
// each side's receive ring and the target SGL where the peer writes
// buffer grants. Data then moves by RDMA WRITE WITH IMMEDIATE straight
// into the peer's ring, the immediate saying how many bytes; the
// receiver hands freed halves of its ring back by writing their address
// into the sender's target SGL, and credits for messages in the same
// immediate. Shutdown and disconnect are immediates too.
//
//	l, _ := rsocket.Listen(ctx, dev, ":7471")
//	c, _ := l.Accept()          // a net.Conn
//
//	c, _ := rsocket.Dial(ctx, dev, "10.0.0.2:7471")
//	io.Copy(c, src)
//	c.CloseWrite()               // the peer reads io.EOF
//
// Waiting costs no goroutine of its own: a blocked Read or Write sleeps
// on the connection's completion channel, woken by the device's engine
// goroutine, which Listen and Dial start. docs/rsocket.md says what of
// the protocol is implemented.
package rsocket
