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
// Each direction carries its packets through a netem.Path with that
// direction's faults (Config.AtoB, Config.BtoA): loss, a bottleneck queue
// with RED marking, delay and jitter, corruption, duplication and
// reordering, in the order netem.Path gives, every random choice drawn from
// a math/rand/v2 PCG seeded from Config.Seed, so a run is reproducible
// given the same calls and the same clock readings. The pipe applies what
// the path draws to the packet's bytes: CE in the IP header (masked by the
// ICRC, so it stays valid, as a switch marks); one flipped bit that the
// ICRC covers (never BTH resv8a), so the receiver's check drops it; a copy
// in a second buffer from the pool. A direction with no faults at all is a
// perfect wire: its packets go through a ring, in the order sent, due when
// sent, and skip the path's stages.
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
