// Rstream is rdma-core's rstream (librdmacm/examples/rstream.c) on
// uroce's rsocket streams, in its custom mode: a client and a server that
// connect through the RDMA connection manager with rsocket's protocol and
// swap fixed-size transfers. Either side may be the C rstream on an rxe
// or RNIC host.
//
// After a 16-byte exchange each way (client first), each of -I
// iterations has the client send -C transfers of -S bytes and the server
// receive them, then the server send as many back. Both print rstream's
// result line and close the stream (rshutdown SHUT_RDWR, rclose).
//
// Usage:
//
//	rstream [-b bind_address] [-p port] [-S size] [-C count] [-I iterations] [-T v]   server
//	rstream -s server_address [-b bind_address] [-p port] [-S size] [-C count] [-I iterations] [-T v]
//
// Defaults are rstream's custom ones: port 7471, 1000 transfers of 1000
// bytes, one iteration. -T v checks the data with rstream's pattern (a
// byte counter running across every transfer); -T b and -T n, blocking
// and non-blocking calls in C, are accepted and change nothing here (a Go
// stream blocks its goroutine only). rstream's default mode, without -S,
// -C or -I (every size from 64 B to 4 MiB, twice), is not here.
package main
