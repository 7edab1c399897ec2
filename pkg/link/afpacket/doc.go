// Package afpacket is the raw link: an AF_PACKET socket on one interface
// (root, or CAP_NET_RAW), batched with recvmmsg(2) and sendmmsg(2), that
// writes and reads whole Ethernet frames itself.
//
// Send. For each packet the link looks up the route and the next hop's MAC
// address through pkg/netinfo (a cached map lookup; for a new destination
// the resolver learns it in the background while Send drops the packet
// with link.ErrResolving, so the engine loop never waits for ARP or
// neighbour discovery and the transport's retransmission resends), then writes
// Ethernet, IPv4 (DF set, TTL 64, an ID that increments per link) or IPv6
// (hop limit 64) and UDP into the headroom, computes the ICRC over the real
// headers and, for IPv6, the UDP checksum that Linux receivers demand. Each
// frame goes out with a sockaddr_ll naming the interface, EtherType and
// next hop.
//
// Receive. A classic BPF filter attached to the socket before it is bound
// passes only IPv4 or IPv6 UDP datagrams to port 4791 (IPv4: not
// fragmented), and PACKET_IGNORE_OUTGOING keeps our own frames out. The
// frame lands so that its Ethernet header ends up inside the headroom; the
// link checks that it was addressed to this host (PACKET_HOST) and to the
// link's address, and verifies the ICRC over the real headers.
//
// The kernel. AF_PACKET is a tap: the kernel's IP stack sees every frame
// too, and with no socket on UDP 4791 it would answer each RoCE packet with
// an ICMP port unreachable. The link therefore holds an ordinary UDP socket
// bound to its address and port 4791 with a socket filter that drops
// everything: the kernel finds a socket, so it sends no ICMP, and the
// filter discards the datagram before it is queued, so no memory is held
// and nothing needs reading. The reservation also keeps other programs off
// the port, needs no firewall (nftables or iptables may be absent), and
// goes away with the link. Packets so dropped are counted by the kernel in
// UDP InErrors, which is the price.
package afpacket
