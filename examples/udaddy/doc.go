// Udaddy is rdma-core's udaddy on uroce: a server and a client that find
// each other's UD queue pairs through the RDMA connection manager
// (rdma_cm's UDP port space, resolved with SIDR_REQ and SIDR_REP on QP1)
// and swap datagrams. Either side may be the C program on an rxe or RNIC
// host.
//
// The client resolves -c UD services at the server's port 7174 (udaddy's
// fixed port); each answer names the server's QP and Q_Key. It then sends
// -C datagrams of -S bytes on each, as SENDs with immediate data carrying
// its own QPN, and waits for as many replies. The server accepts each
// request with a fresh UD QP (Q_Key 0x01234567, librdmacm's), waits for
// the -C datagrams, and answers each to the address and QPN of the first
// completion: the GRH's source GID and the immediate data. Both print
// udaddy's progress lines and "return status 0" when all went well. UD
// has no retransmission: a lost datagram stops both, as it stops udaddy
// (-timeout bounds the wait).
//
// Usage:
//
//	udaddy [-b bind_address] [-c connections] [-C count] [-S size]   server
//	udaddy -s server_address [-b bind_address] [-c connections] [-C count] [-S size]
//
// Defaults are udaddy's: one connection, 10 messages of 100 bytes. -P udp,
// -p 0x111, -f ip or name and -t tos are taken as udaddy takes them; the
// IPoIB port space and GID addresses are refused.
package main
