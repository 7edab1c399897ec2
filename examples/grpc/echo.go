package main

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
)

// echoMethod is the full name of the one method, as a client invokes it.
const echoMethod = "/uroce.example.Echo/Echo"

// rawCodec carries a message as its bytes: the service's messages are
// *[]byte, so no protobuf is needed on either side. Forced on both ends
// (grpc.ForceServerCodec, grpc.ForceCodec), it is also what the content
// subtype says ("application/grpc+raw").
type rawCodec struct{}

var _ encoding.Codec = rawCodec{}

func (rawCodec) Name() string { return "raw" }

func (rawCodec) Marshal(v any) ([]byte, error) {
	b, ok := v.(*[]byte)
	if !ok {
		return nil, fmt.Errorf("raw codec: marshal %T, want *[]byte", v)
	}
	return *b, nil
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	b, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("raw codec: unmarshal into %T, want *[]byte", v)
	}
	// grpc-go may reuse data's buffer once Unmarshal returns.
	*b = append((*b)[:0], data...)
	return nil
}

// echoService is the server's implementation; HandlerType in echoDesc
// makes grpc.Server.RegisterService check that it is one.
type echoService interface {
	Echo(ctx context.Context, req []byte) ([]byte, error)
}

type echoServer struct{}

func (echoServer) Echo(_ context.Context, req []byte) ([]byte, error) { return req, nil }

// echoDesc is what protoc-gen-go-grpc would generate for
//
//	service Echo { rpc Echo(bytes) returns (bytes); }
//
// in package uroce.example, with the message as raw bytes.
var echoDesc = grpc.ServiceDesc{
	ServiceName: "uroce.example.Echo",
	HandlerType: (*echoService)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Echo",
		Handler:    echoHandler,
	}},
	Streams: []grpc.StreamDesc{},
}

func echoHandler(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	var req []byte
	if err := dec(&req); err != nil {
		return nil, err
	}
	call := func(ctx context.Context, req any) (any, error) {
		resp, err := srv.(echoService).Echo(ctx, *req.(*[]byte))
		return &resp, err
	}
	if interceptor == nil {
		return call(ctx, &req)
	}
	return interceptor(ctx, &req, &grpc.UnaryServerInfo{Server: srv, FullMethod: echoMethod}, call)
}

// newServer is a gRPC server with the echo service and the raw codec.
func newServer() *grpc.Server {
	s := grpc.NewServer(grpc.ForceServerCodec(rawCodec{}))
	s.RegisterService(&echoDesc, echoServer{})
	return s
}

// echo makes one call; resp's buffer is reused.
func echo(ctx context.Context, cc *grpc.ClientConn, req []byte, resp *[]byte) error {
	return cc.Invoke(ctx, echoMethod, &req, resp, grpc.ForceCodec(rawCodec{}))
}
