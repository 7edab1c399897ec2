// Package udp is the unprivileged link: a kernel UDP socket bound to port
// 4791 on one local address, batched with recvmmsg(2) and sendmmsg(2).
//
// The kernel writes the IP and UDP headers, so the ICRC, which covers them,
// is computed over headers this package reconstructs in the buffer's
// headroom, in front of the BTH, as the kernel will write them (send) or
// has written them (receive). Each packet leaves with its own TOS (ECT(0)
// for data).
//
// A socket cannot see the peer's IPv4 ID, and Linux rxe sends nonzero
// ones, so on receive the link solves for the ID that makes the ICRC
// match (CRC-32 is affine in its input). Such a packet is checked by 16
// of the ICRC's 32 bits; one with ID 0, as our own peers send, and every
// IPv6 packet, by all 32. A packet no ID fits is counted in RxICRCErrors
// and dropped. docs/links.md sets out the headers and the algebra.
//
// Two links may bind the same port on different addresses (127.0.0.1 and
// 127.0.0.2 on loopback), which is how two stacks run in one process.
//
// Wait sleeps in ppoll(2) on the socket and an eventfd that Close signals.
package udp
