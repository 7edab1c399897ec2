// Riostream is rdma-core's riostream (librdmacm/examples/riostream.c) on
// uroce's rsocket streams, in its custom mode: like rstream, but the
// transfers go by riowrite, straight into a buffer the peer registered
// with riomap, and the receiver learns that a batch is in by polling the
// buffer's last byte for a marker. Either side may be the C riostream on
// an rxe or RNIC host.
//
// Each side maps its -S byte buffer (Conn.IOMap), then 16 bytes go each
// way on the stream (client first). Each of -I iterations has the client
// write its buffer -C times into the server's (Conn.IOWrite), the last
// time with the marker in the last byte, and the server, once it sees the
// marker, do the same back. Both print riostream's result line.
//
// Usage:
//
//	riostream [-b bind_address] [-p port] [-S size] [-C count] [-I iterations] [-T v]   server
//	riostream -s server_address [-b bind_address] [-p port] [-S size] [-C count] [-I iterations] [-T v]
//
// Defaults are riostream's custom ones: port 7471, 1000 transfers of 1000
// bytes, one iteration. -T v checks the data with riostream's pattern;
// -T b and -T n are accepted and change nothing here. riostream's default
// mode (every size, twice) is not here.
package main
