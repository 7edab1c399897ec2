// Package pipe is an in-memory pair of links with a seeded fault injector,
// for the transport engine's tests and the simulator.
//
// New returns two links, A and B. A packet sent on one comes out of the
// other: Send lays a real IPv4 (or IPv6) and UDP header in the headroom,
// computes the ICRC over them exactly as on the wire, and passes the buffer
// itself (no copy) through the direction's fault stages into the peer's
// arrival queue; Recv takes the packets whose delivery time has come,
// parses their headers and verifies their ICRC, dropping and counting
// (RxICRCErrors) those that fail. Buffers come from one pool per pipe, so
// after warm-up nothing is allocated per packet.
//
// Each direction's faults (netem.Faults) are applied in this order, every random
// choice drawn from a math/rand/v2 PCG seeded from Config.Seed, so a run is
// reproducible given the same calls and the same clock readings:
//
//  1. drop with probability Drop;
//  2. the bottleneck: with Rate set the packet leaves after those already
//     queued (serialisation at Rate bytes/s); the queue is the backlog of
//     bytes not yet serialised, or, without Rate, the bytes sent but not yet
//     received by the peer. Over QueueLimit it is tail-dropped. An
//     ECN-capable packet (ECT(0) or ECT(1)) is marked CE with the RED ramp
//     p = Pmax·(q−Kmin)/(Kmax−Kmin) between Kmin and Kmax and always above
//     Kmax; a not-ECT packet is never marked nor dropped by this stage;
//  3. delay: Delay plus a uniform Jitter (jitter may reorder);
//  4. corrupt with probability Corrupt: one random bit of the RoCE packet
//     is flipped after the ICRC was computed (never a bit the ICRC masks),
//     so the receiver's ICRC check drops it;
//  5. duplicate with probability Duplicate (a copy in a second buffer);
//  6. reorder with probability Reorder: the packet is held back and released
//     after ReorderAfter later packets of the same direction have been
//     enqueued, or after ReorderMaxHold of pipe time, whichever is first.
//
// Time. A pipe's clock is, in order of preference, Config.Clock (a function
// the caller controls, e.g. the engine test's fake clock), the time last
// given to Advance when Config.Manual is set, or the real time. With a
// caller clock nothing happens behind the caller's back: delivery times are
// computed from the clock at Send, and Recv delivers what is due at the
// clock's current reading; Advance (on either link) wakes waiters after the
// clock moved, and Next tells a simulator when the next packet falls due so
// it can jump the clock there. In real-time mode Wait sleeps until the next
// packet is due.
package pipe
