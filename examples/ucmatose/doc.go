// Ucmatose is rdma-core's ucmatose (cmatose.c) on uroce: a server and a
// client that connect through the RDMA connection manager and swap SENDs.
// Either side may be the C program on an rxe or RNIC host.
//
// The client connects (-c connections of them); once every connection is
// up, the server sends -C messages of -S bytes on each, waits for their
// completions and for as many replies, and disconnects. The client
// receives the messages, sends its replies and ends when the server's
// disconnect arrives. Both print cmatose's progress lines and "return
// status 0" when all went well.
//
// Usage:
//
//	ucmatose [-b bind_address] [-p port] [-c connections] [-C count] [-S size]   server
//	ucmatose -s server_address [-b bind_address] [-p port] [-c connections] [-C count] [-S size]
//
// Defaults are cmatose's: port 7471, one connection, 10 messages of 100
// bytes. The client's RNR retry count is 7 where cmatose asks 0: its
// receives are posted before it connects either way.
package main
