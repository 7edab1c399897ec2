// Rping is rdma-core's rping on uroce: a client and a server that connect
// through the RDMA connection manager (no TCP at all) and then ping with
// SEND, RDMA READ and RDMA WRITE. Either side may be the C program on an
// rxe or RNIC host.
//
// Each ping: the client advertises its source buffer (address, rkey,
// length: rping's 16-byte struct rping_rdma_info) in a SEND; the server
// READs the buffer and answers "go ahead"; the client advertises its sink
// buffer; the server WRITEs the ping back into it and says "go ahead"
// again; the client checks that the sink equals the source.
//
// Usage:
//
//	rping -s [-vV] [-S size] [-C count] [-a addr] [-p port]
//	rping -c [-vV] [-S size] [-C count] [-I addr] -a addr [-p port]
//
// Flags, as rping's:
//
//	-s, -c      server or client
//	-a addr     the server's address (client); the address to serve on
//	            (server; default the first interface that is up and has one)
//	-I addr     the client's source address (default: the one that routes
//	            to the server)
//	-p port     rdma_cm port (default 7174)
//	-C count    pings (default 0: until interrupted)
//	-S size     ping size, 26 to 65535 bytes (default 64)
//	-v          print each ping's data
//	-V          validate each ping's data (client)
//	-d          debug output
//	-timeout d  give up after d (uroce only)
//
// Unlike rping, the flags do not combine: write -v -V, not -vV.
//
// README.md beside this file walks through the code.
package main
