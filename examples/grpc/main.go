package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/uroce/uroce/examples/internal/cli"
	"github.com/uroce/uroce/examples/internal/netdev"
	"github.com/uroce/uroce/pkg/rsocket"
	"github.com/uroce/uroce/verbs"
)

type options struct {
	cli.Endpoint
	port  int
	calls int
	size  int
}

func parseFlags(args []string, errOut io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("grpc", flag.ContinueOnError)
	fs.SetOutput(errOut)
	o.Endpoint.Flags(fs)
	fs.IntVar(&o.port, "p", 7472, "rdma_cm `port`")
	fs.IntVar(&o.calls, "n", 100, "`calls`")
	fs.IntVar(&o.size, "S", 64, "message `size`")
	if err := cli.Parse(fs, args); err != nil {
		return o, err
	}
	switch {
	case o.calls < 1 || o.size < 0:
		return o, fmt.Errorf("bad calls %d or size %d", o.calls, o.size)
	case o.port < 1 || o.port > 65535:
		return o, fmt.Errorf("bad port %d", o.port)
	}
	return o, nil
}

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		cli.BadUsage("grpc", err)
	}
	ctx, cancel := cli.Context(o.Timeout)
	defer cancel()
	d, err := netdev.OpenCM(o.Bind, o.Server)
	if err == nil {
		err = run(ctx, d, o, os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "grpc:", err)
		os.Exit(1)
	}
}

// run is the whole program once the device is open. It closes d.
func run(ctx context.Context, d *verbs.Device, o options, out io.Writer) (err error) {
	defer func() { err = errors.Join(err, d.Close()) }()
	if o.Server == "" {
		return serve(ctx, d, o, out)
	}
	return call(ctx, d, o, out)
}

// serve runs the gRPC server on the rsocket listener until ctx ends.
func serve(ctx context.Context, d *verbs.Device, o options, out io.Writer) error {
	l, err := rsocket.Listen(ctx, d, fmt.Sprintf(":%d", o.port))
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
	cc, err := dial(net.JoinHostPort(o.Server, fmt.Sprint(o.port)), dialer(d))
	if err != nil {
		return err
	}
	defer cc.Close()
	req := make([]byte, o.size)
	for i := range req {
		req[i] = byte(i * 31)
	}
	var resp []byte
	rtts := make([]time.Duration, 0, o.calls)
	for i := range o.calls {
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
		len(rtts), o.size, rtts[len(rtts)/2], rtts[len(rtts)-1])
	return nil
}
