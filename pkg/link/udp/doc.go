// Package udp is the unprivileged link: a kernel UDP socket bound to port
// 4791 on one local address, batched with recvmmsg(2) and sendmmsg(2).
//
// The kernel writes the IP and UDP headers, so the ICRC, which covers them,
// is computed over headers this package reconstructs in the buffer's
// headroom, in front of the BTH, as the kernel will write them (send) or
// has written them (receive).
//
// Send. The socket is unconnected and has IP_MTU_DISCOVER=IP_PMTUDISC_DO,
// so Linux sets DF and, for an unconnected socket with DF, an IP ID of 0
// (ip_select_ident). The reconstructed IPv4 header is therefore: version
// and IHL 0x45, the total length, ID 0, flags DF, fragment offset 0,
// protocol 17, the bound source and the destination; UDP from the bound
// port to the destination's port 4791 with its length. TOS, TTL, the header
// checksum and the UDP checksum are masked by the ICRC. Each packet leaves
// with its own TOS (ECT(0) for data): the socket's IP_TOS (IPv6:
// IPV6_TCLASS) follows the TOS of a long run of packets, set between
// batches, and a packet with another TOS carries it in a control message.
//
// Receive. IP_RECVTOS (IPV6_RECVTCLASS) gives the TOS; the source comes
// with the datagram, and the destination is the bound address. What a socket cannot see is the peer's IPv4 ID, and Linux rxe
// sends nonzero ones. This package assumes DF set, no IP options and
// fragment offset 0 (the kernel reassembles fragments, but rxe never
// fragments) and solves for the ID: CRC-32 is affine in its input, so for
// a fixed length ICRC(ID) = ICRC(0) XOR L(ID) with L linear over GF(2).
// The 16 columns of L for one length are computed on first use and cached
// (eliminated to echelon form, so solving costs 16 steps); the packet is
// accepted if some ID maps ICRC(0) onto the received ICRC. That leaves 16
// of the 32 bits checking the packet: a corruption passes only if its
// effect on the CRC happens to equal that of some ID, about one in 2^16
// (the 16 columns are independent, since the CRC catches every burst of up
// to 32 bits, so each ID gives a different ICRC). When no ID fits, the packet is counted in RxICRCErrors and
// dropped. An ID of 0 (our own peers, anyone with an unconnected DF socket)
// verifies with all 32 bits. IPv6 has no ID and its flow label is masked,
// so IPv6 packets verify fully.
//
// Two links may bind the same port on different addresses (127.0.0.1 and
// 127.0.0.2 on loopback), which is how two stacks run in one process.
//
// Wait sleeps in ppoll(2) on the socket and an eventfd that Close signals.
package udp
