// Grpc serves and calls a unary gRPC echo over uroce's rsocket streams:
// an unmodified grpc-go server on an rsocket.Listener, and a client whose
// grpc.WithContextDialer dials with rsocket.Dial. Nothing in grpc-go
// changes; the stream under its HTTP/2 transport is RC RDMA instead of
// TCP.
//
// The service is written by hand (echo.go): a grpc.ServiceDesc and a codec
// that passes the message bytes through, so neither protoc nor generated
// code is needed. This directory is its own Go module, so that grpc-go
// stays out of uroce's.
//
// The client makes -n calls of -S bytes each, checks every answer and
// prints the round trips' median and worst.
//
// Usage:
//
//	grpc -b bind_address [-p port]                       server
//	grpc -s server_address [-p port] [-n calls] [-S size]
package main
