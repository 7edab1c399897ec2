// Udpingpong is the smallest complete unreliable-datagram (UD) program on
// uroce, and it speaks with rdma-core's ibv_ud_pingpong: either side may be
// the other program, on an rxe or RNIC host.
//
// It opens a device on a local address, registers one buffer of -s bytes
// plus the 40-byte GRH area that every UD receive starts with, creates a
// completion queue and a UD queue pair with ibv_ud_pingpong's Q_Key
// (0x11111111), posts receives ahead, swaps the QP's number, first PSN and
// GID with its peer over TCP in the pingpong examples' format, makes an
// address handle for the peer's GID, and then bounces -n datagrams of -s
// bytes: the client sends first, each side sends again once its previous
// send has completed and the peer's datagram has arrived. UD has no
// acknowledgements and no retransmission: a datagram lost on the way stops
// the loop, as it stops ibv_ud_pingpong (-timeout bounds the wait).
//
// Usage:
//
//	udpingpong [flags]          start a server and wait for a connection
//	udpingpong [flags] <host>   connect to the server at <host>
//
// Flags, as ibv_ud_pingpong's:
//
//	-p port       TCP port of the exchange (default 18515)
//	-d device     interface name or local IP address (default: the address
//	              that routes to <host>; a server takes the first interface
//	              that is up and has one)
//	-g index      GID index (uroce has one GID per device, 0; default -1
//	              sends a zero GID, as ibv_ud_pingpong does)
//	-s size       datagram size in bytes, at most the port MTU (default 2048,
//	              or the port MTU when smaller; ibv_ud_pingpong refuses
//	              its own default there)
//	-r depth      receives posted ahead (default 500)
//	-n iters      number of exchanges (default 1000)
//	-stats        print the QP's counters at the end (uroce only)
//	-timeout d    give up when no completion arrives for d (default 10s;
//	              uroce only)
//
// The receive buffers are -s + 40 bytes and each receive completes with 40
// + -s bytes: the GRH area first (for RoCEv2 over IPv4, the sender's IPv4
// header in its last 20 bytes), then the datagram.
//
// Facing ibv_ud_pingpong on rxe, give both sides -g (on rxe, 1 is the
// IPv4-mapped GID; here 0): a side without it sends a zero GID, and its
// peer cannot build the GRH that RoCEv2 needs. On a 1500-byte Ethernet the
// port MTU is 1024: give ibv_ud_pingpong -s 1024 (uroce lowers its default
// there by itself), as the datagram sizes must match.
//
// Once the TCP connection is up, a peer that does not send its address
// within 10 s (a program other than ibv_*_pingpong on the port, say) ends
// the run with "address exchange timed out" and the peer's address.
//
// README.md beside this file walks through the code.
package main
