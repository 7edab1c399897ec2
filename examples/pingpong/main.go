package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"time"

	"github.com/uroce/uroce/examples/internal/cli"
	"github.com/uroce/uroce/examples/internal/metricsflag"
	"github.com/uroce/uroce/examples/internal/netdev"
	"github.com/uroce/uroce/examples/internal/pingdest"
	"github.com/uroce/uroce/verbs"
	"github.com/uroce/uroce/verbs/metrics"
)

// options are the command line (ibv_rc_pingpong's flags and defaults).
type options struct {
	port    int
	device  string
	gid     int
	size    int
	iters   int
	mtu     int
	rxDepth int
	stats   bool
	linger  time.Duration
	retry   int
	uc      bool   // a UC QP, as ibv_uc_pingpong
	metrics string // serve /metrics here while running
	peer    string // the server's host; empty on the server

	// For tests: a listener to accept on instead of the port.
	listener net.Listener
	// scraped, if set, is called with the metrics server and the device
	// at the end of a run, while the QP still exists.
	scraped func(*metrics.Server, *verbs.Device)
}

func parseFlags(args []string, errOut io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("pingpong", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.IntVar(&o.port, "p", 18515, "listen on/connect to TCP `port`")
	fs.StringVar(&o.device, "d", "", "`interface` name or local IP address")
	fs.IntVar(&o.gid, "g", 0, "GID `index`")
	fs.IntVar(&o.size, "s", 4096, "message `size`")
	fs.IntVar(&o.iters, "n", 1000, "number of `iters`")
	fs.IntVar(&o.mtu, "m", 1024, "path `mtu`")
	fs.IntVar(&o.rxDepth, "r", 500, "receives posted ahead (rx `depth`)")
	fs.DurationVar(&o.linger, "linger", time.Second, "keep answering the peer's retransmissions this long after the last exchange (uroce only)")
	fs.IntVar(&o.retry, "retry", 7, "transport retry `count`: 7 retries forever, as rxe reads it (uroce only; ibv_rc_pingpong always sets 7)")
	fs.BoolVar(&o.uc, "uc", false, "use a UC QP and speak with ibv_uc_pingpong (no ACKs: a lost message stops the run, as it stops ibv_uc_pingpong)")
	fs.BoolVar(&o.stats, "stats", false, "print the QP's transport counters at the end (uroce only)")
	fs.StringVar(&o.metrics, "metrics", "", metricsflag.Usage+" (uroce only)")
	var err error
	if o.peer, err = pingdest.ParseArgs(fs, args); err != nil {
		return o, err
	}
	switch {
	case o.size < 1:
		return o, fmt.Errorf("bad size %d", o.size)
	case o.iters < 1:
		return o, fmt.Errorf("bad iters %d", o.iters)
	case o.rxDepth < 1:
		return o, fmt.Errorf("bad rx depth %d", o.rxDepth)
	case o.port < 1 || o.port > 65535:
		return o, fmt.Errorf("bad port %d", o.port)
	case o.retry < 1 || o.retry > 7:
		return o, fmt.Errorf("bad retry count %d (1 to 7)", o.retry)
	}
	switch o.mtu {
	case 256, 512, 1024, 2048, 4096:
	default:
		return o, fmt.Errorf("bad mtu %d", o.mtu)
	}
	return o, nil
}

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		cli.BadUsage("pingpong", err)
	}
	cli.Run("pingpong", 0, func(ctx context.Context) error {
		// The kernel UDP backend on -d's address or interface, else on
		// the address that routes to the peer.
		d, err := netdev.Open(o.device, o.peer)
		if err != nil {
			return err
		}
		return run(ctx, d, o, os.Stdout)
	})
}

// run is the whole program once the device is open: objects, exchange,
// traffic, report, teardown. It closes d.
func run(ctx context.Context, d *verbs.Device, o options, out io.Writer) (err error) {
	defer func() { err = errors.Join(err, d.Close()) }()

	typ := verbs.QPTypeRC
	if o.uc {
		typ = verbs.QPTypeUC
	}
	p, err := newPingPongType(d, o.size, o.rxDepth, typ)
	if err == nil {
		p.retryCnt = uint8(o.retry)
	}
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, p.close()) }()
	// The page's address goes in line with the address lines below.
	ms, err := metricsflag.Serve(o.metrics, io.Discard, map[string]*verbs.Device{"uroce0": d})
	if err != nil {
		return err
	}
	defer ms.Close()
	if ms != nil {
		fmt.Fprintf(out, "  metrics:        %s\n", ms.URL())
		if o.scraped != nil {
			defer o.scraped(ms.Server, d)
		}
	}
	if o.stats {
		// Deferred after close's defer, so it runs first: the QP is
		// still there, and a failed run prints its counters too.
		defer func() { fmt.Fprintf(out, "counters: %+v\n", p.qp.Counters()) }()
	}

	gids := d.GIDs()
	if o.gid < 0 || o.gid >= len(gids) {
		return fmt.Errorf("no GID at index %d (the device has %d)", o.gid, len(gids))
	}
	local := pingdest.Dest{QPN: p.qp.QPN(), PSN: rand.Uint32() & 0xffffff, GID: gids[o.gid]}
	fmt.Fprintf(out, "  local address:  %v\n", local)

	// ibv_rc_pingpong's TCP exchange (examples/internal/pingdest); the server
	// connects between reading the client's address and sending its own.
	xc := pingdest.Config{Peer: o.peer, Port: o.port, Listener: o.listener}
	remote, err := pingdest.Exchange(ctx, xc, local, func(r pingdest.Dest) error { return p.connect(r, local.PSN, o.mtu) })
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  remote address: %v\n", remote)
	if o.peer != "" {
		// The client connects after the exchange: the server did so
		// before it answered.
		if err := p.connect(remote, local.PSN, o.mtu); err != nil {
			return err
		}
	}

	start := time.Now()
	if err := p.run(ctx, o.iters, o.peer != ""); err != nil {
		return err
	}
	elapsed := time.Since(start)
	if !o.uc {
		// UC retransmits nothing: there is nothing to linger for.
		if err := p.linger(ctx, o.linger); err != nil {
			return err
		}
	}
	pingdest.Summary(out, o.size, o.iters, elapsed)
	return nil
}
