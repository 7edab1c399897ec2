package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"slices"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/uroce/uroce/examples/internal/cli"
	"github.com/uroce/uroce/pkg/rsocket"
	"github.com/uroce/uroce/verbs"
)

type options = cli.Echo

// program is the whole program; run is its body once the device is open.
var program = cli.EchoProgram{Name: "grpc", Port: 7472, Size: 64, What: "calls", Serve: serve, Call: call}

func main() { program.Main() }

func run(ctx context.Context, d *verbs.Device, o options, out io.Writer) error {
	return program.Run(ctx, d, o, out)
}

// serve runs the gRPC server on the rsocket listener until ctx ends.
func serve(ctx context.Context, d *verbs.Device, o options, out io.Writer) error {
	l, err := rsocket.Listen(ctx, d, fmt.Sprintf(":%d", o.Port))
	if err != nil {
		return err
	}
	s := newServer()
	fmt.Fprintf(out, "serving gRPC on rsocket %v\n", l.Addr())
	o.Listen()
	stop := context.AfterFunc(ctx, s.GracefulStop)
	defer stop()
	// Serve closes l; after GracefulStop it returns nil.
	return s.Serve(l)
}

// dialer is the grpc.WithContextDialer function that puts a client on
// rsocket streams from d.
func dialer(d *verbs.Device) func(ctx context.Context, addr string) (net.Conn, error) {
	return func(ctx context.Context, addr string) (net.Conn, error) {
		return rsocket.Dial(ctx, d, addr)
	}
}

// dial makes a client for target through the dialer. The passthrough
// scheme hands the address to the dialer as it is, with no name
// resolution.
func dial(target string, dialer func(context.Context, string) (net.Conn, error)) (*grpc.ClientConn, error) {
	return grpc.NewClient("passthrough:///"+target,
		grpc.WithContextDialer(dialer),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
}

// call makes the calls, checking and timing each.
func call(ctx context.Context, d *verbs.Device, o options, out io.Writer) error {
	cc, err := dial(net.JoinHostPort(o.Server, fmt.Sprint(o.Port)), dialer(d))
	if err != nil {
		return err
	}
	defer cc.Close()
	req := make([]byte, o.Size)
	for i := range req {
		req[i] = byte(i * 31)
	}
	var resp []byte
	rtts := make([]time.Duration, 0, o.Count)
	for i := range o.Count {
		start := time.Now()
		if err := echo(ctx, cc, req, &resp); err != nil {
			return fmt.Errorf("call %d: %w", i, err)
		}
		rtts = append(rtts, time.Since(start))
		if !bytes.Equal(resp, req) {
			return fmt.Errorf("call %d: %d bytes back of %d, not the same", i, len(resp), len(req))
		}
	}
	slices.Sort(rtts)
	fmt.Fprintf(out, "%d calls of %d bytes echoed: round trip median %v, max %v\n",
		len(rtts), o.Size, rtts[len(rtts)/2], rtts[len(rtts)-1])
	return nil
}
