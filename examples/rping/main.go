package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/uroce/uroce/examples/internal/cli"
	"github.com/uroce/uroce/examples/internal/metricsflag"
	"github.com/uroce/uroce/examples/internal/netdev"
	"github.com/uroce/uroce/pkg/rdmacm"
	"github.com/uroce/uroce/verbs"
)

// Sizes rping accepts: RPING_MIN_BUFSIZE (room for "rdma-ping-2147483647: ")
// to RPING_BUFSIZE-1.
const (
	minSize = 26
	maxSize = 64*1024 - 1
)

// options are rping's command line.
type options struct {
	server, client bool
	addr           string // -a: the server's address (both sides)
	source         string // -I: the client's source address
	port           int
	count          int
	size           int
	verbose        bool
	validate       bool
	debug          bool
	timeout        time.Duration
	metrics        string // serve /metrics here while running

	// For tests: called once the server listens.
	listening func()
}

func parseFlags(args []string, errOut io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("rping", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.BoolVar(&o.server, "s", false, "server side")
	fs.BoolVar(&o.client, "c", false, "client side")
	fs.StringVar(&o.addr, "a", "", "`address`: the server's (client), the one to bind (server)")
	fs.StringVar(&o.source, "I", "", "source `address` to bind to for client")
	fs.IntVar(&o.port, "p", 7174, "`port`")
	fs.IntVar(&o.count, "C", 0, "ping `count` times (0: until interrupted)")
	fs.IntVar(&o.size, "S", 64, "ping data `size`")
	fs.BoolVar(&o.verbose, "v", false, "display ping data to stdout")
	fs.BoolVar(&o.validate, "V", false, "validate ping data")
	fs.BoolVar(&o.debug, "d", false, "debug printfs")
	fs.DurationVar(&o.timeout, "timeout", 0, "give up after this long (uroce only; 0: never)")
	fs.StringVar(&o.metrics, "metrics", "", metricsflag.Usage+" (uroce only)")
	fs.BoolFunc("q", "use self-created, self-modified QP (uroce always does)", func(string) error { return nil })
	if err := cli.Parse(fs, args); err != nil {
		return o, err
	}
	switch {
	case o.server == o.client:
		return o, errors.New("give one of -s and -c")
	case o.client && o.addr == "":
		return o, errors.New("the client needs -a")
	case o.size < minSize || o.size > maxSize:
		return o, fmt.Errorf("invalid size %d (valid range is %d to %d)", o.size, minSize, maxSize)
	case o.count < 0:
		return o, fmt.Errorf("invalid count %d", o.count)
	case o.port < 1 || o.port > 65535:
		return o, fmt.Errorf("bad port %d", o.port)
	}
	return o, nil
}

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		cli.BadUsage("rping", err)
	}
	cli.Run("rping", o.timeout, func(ctx context.Context) error {
		d, err := openDevice(o)
		if err != nil {
			return err
		}
		return run(ctx, d, o, os.Stdout, os.Stderr)
	})
}

// run is the whole program once the device is open: CM, session, pings,
// teardown. It closes d.
func run(ctx context.Context, d *verbs.Device, o options, out, errOut io.Writer) (err error) {
	defer func() { err = errors.Join(err, d.Close()) }()
	debug := func(format string, args ...any) {
		if o.debug {
			fmt.Fprintf(out, format, args...)
		}
	}
	// The page's address goes to errOut: standard output stays rping's.
	ms, err := metricsflag.Serve(o.metrics, errOut, map[string]*verbs.Device{"uroce0": d})
	if err != nil {
		return err
	}
	defer ms.Close()
	m, err := rdmacm.Open(d, rdmacm.Config{})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, m.Close()) }()
	debug("local address %v\n", m.Addr())

	s, err := newSession(d, o.size, o.client)
	if err != nil {
		return err
	}
	defer s.close()
	// rping's rdma_conn_param: one READ each way, retries forever.
	params := &rdmacm.Params{ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7}

	if o.client {
		dst, err := netdev.Resolve(o.addr, o.port)
		if err != nil {
			return err
		}
		if s.conn, err = m.Dial(ctx, dst, s.qp, params); err != nil {
			return fmt.Errorf("connect error: %w", err)
		}
		debug("rdma_connect successful: %v -> %v, QP %#x -> %#x\n", s.conn.LocalAddr(), s.conn.RemoteAddr(), s.qp.QPN(), s.conn.Attr().DestQPN)
		err = s.client(ctx, o.count, o.verbose, o.validate, out)
		// rping_disconnect, also after a failure (rping's err4).
		derr := s.conn.Disconnect()
		if err != nil {
			return fmt.Errorf("rping client failed: %w", err)
		}
		return derr
	}

	l, err := m.Listen(uint16(o.port))
	if err != nil {
		return err
	}
	defer l.Close()
	debug("listening on port %d\n", o.port)
	if o.listening != nil {
		o.listening()
	}
	req, err := l.Accept(ctx)
	if err != nil {
		return err
	}
	debug("connect request from %v\n", req.Remote)
	if s.conn, err = req.Accept(ctx, s.qp, params); err != nil {
		return fmt.Errorf("connect error: %w", err)
	}
	// The CQ wait ends when the client disconnects.
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.conn.Done():
			cancel()
		case <-sctx.Done():
		}
	}()
	err = s.server(sctx, o.verbose, out)
	if errors.Is(err, errDisconnected) {
		fmt.Fprintln(errOut, "server DISCONNECT EVENT...")
		return nil
	}
	s.conn.Disconnect()
	if err != nil {
		return fmt.Errorf("rping server failed: %w", err)
	}
	return nil
}

// openDevice opens a device with the kernel UDP backend: a server on -a
// (or the first interface that is up and has an address), a client on -I
// or the address that routes to the server.
func openDevice(o options) (*verbs.Device, error) {
	local := o.source
	if o.server {
		local = o.addr
	}
	if local != "" {
		return netdev.OpenAddr(local)
	}
	if o.client {
		dst, err := netdev.Resolve(o.addr, o.port)
		if err != nil {
			return nil, err
		}
		return netdev.OpenToward(dst.Addr().String())
	}
	return netdev.OpenFirstUp("-a")
}
