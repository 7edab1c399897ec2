// Rsockethttp serves and fetches HTTP over uroce's rsocket streams: an
// unmodified net/http server on an rsocket.Listener, and an http.Client
// whose Transport dials with rsocket.Dial. Nothing in net/http changes;
// the stream under it is RC RDMA instead of TCP.
//
// The server answers /echo with the request's body. The client posts -n
// requests of -S bytes each to /echo, checks every answer and prints the
// round trips' median and worst.
//
// Usage:
//
//	rsockethttp -b bind_address [-p port]                       server
//	rsockethttp -s server_address [-p port] [-n requests] [-S size]
package main
