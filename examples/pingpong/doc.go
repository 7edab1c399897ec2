// Pingpong is the smallest complete reliable-connected (RC) program on
// uroce, and it speaks with rdma-core's ibv_rc_pingpong: either side may be
// the other program, on an rxe or RNIC host.
//
// It opens a device on a local address, registers one memory region,
// creates a completion queue and an RC queue pair, posts receives ahead,
// swaps the QP's number, first PSN and GID with its peer over TCP in
// ibv_rc_pingpong's format, connects, and then bounces -n SENDs of -s
// bytes: the client sends first and the server answers each message with
// the same bytes. The client checks that every answer equals what it sent.
//
// Usage:
//
//	pingpong [flags]          start a server and wait for a connection
//	pingpong [flags] <host>   connect to the server at <host>
//
// Flags, as ibv_rc_pingpong's:
//
//	-p port       TCP port of the exchange (default 18515)
//	-d device     interface name or local IP address (default: the address
//	              that routes to <host>; a server takes the first interface
//	              that is up and has one)
//	-g index      GID index (uroce has one GID per device: 0)
//	-s size       message size in bytes (default 4096)
//	-n iters      number of exchanges (default 1000)
//	-m mtu        path MTU: 256, 512, 1024, 2048 or 4096 (default 1024)
//	-r depth      receives posted ahead (default 500)
//	-linger d     keep answering the peer's retransmissions for d after the
//	              last exchange (default 1s; uroce only)
//	-stats        print the QP's transport counters at the end (uroce only)
//	-uc           use a UC queue pair, to speak with ibv_uc_pingpong (rdma-core's
//	              ibv_rc_pingpong over UC: the same exchange and loop, no
//	              ACKs; a lost message stops both programs)
//
// Facing ibv_rc_pingpong (or ibv_uc_pingpong) on rxe, give that side -g with its RoCEv2 GID
// index (usually 1, the IPv4-mapped GID): without -g it sends a zero GID
// and builds no GRH, which RoCE cannot route.
//
// Once the TCP connection is up, a peer that does not send its address
// within 10 s (a program other than ibv_*_pingpong on the port, say) ends
// the run with "address exchange timed out" and the peer's address.
//
// README.md beside this file walks through the code.
package main
