package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"time"

	"github.com/uroce/uroce/examples/internal/cli"
	"github.com/uroce/uroce/examples/internal/metricsflag"
	"github.com/uroce/uroce/examples/internal/netdev"
	"github.com/uroce/uroce/examples/internal/pingdest"
	"github.com/uroce/uroce/verbs"
)

// options are the command line (ibv_ud_pingpong's flags and defaults).
type options struct {
	port    int
	device  string
	ibPort  int
	gid     int
	size    int
	iters   int
	rxDepth int
	sl      int
	events  bool
	stats   bool
	timeout time.Duration
	metrics string // serve /metrics here while running
	peer    string // the server's host; empty on the server

	// For tests: a listener to accept on instead of the port.
	listener net.Listener
}

func parseFlags(args []string, errOut io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("udpingpong", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.IntVar(&o.port, "p", 18515, "listen on/connect to TCP `port`")
	fs.StringVar(&o.device, "d", "", "`interface` name or local IP address")
	fs.IntVar(&o.ibPort, "i", 1, "device `port` (uroce devices have one: 1)")
	fs.IntVar(&o.gid, "g", -1, "local GID `index` (-1: send a zero GID)")
	fs.IntVar(&o.size, "s", 0, "datagram `size` (default 2048, or the port MTU if smaller)")
	fs.IntVar(&o.rxDepth, "r", 500, "receives posted ahead (rx `depth`)")
	fs.IntVar(&o.iters, "n", 1000, "number of `iters`")
	fs.IntVar(&o.sl, "l", 0, "service `level` (accepted; RoCEv2 has none)")
	fs.BoolVar(&o.events, "e", false, "sleep on CQ events (accepted: uroce's CQ.Wait drives the device and sleeps in the link)")
	fs.BoolVar(&o.stats, "stats", false, "print the QP's counters at the end (uroce only)")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Second, "give up when no completion comes for this long (uroce only)")
	fs.StringVar(&o.metrics, "metrics", "", metricsflag.Usage+" (uroce only)")
	var err error
	if o.peer, err = pingdest.ParseArgs(fs, args); err != nil {
		return o, err
	}
	switch {
	case o.size < 0 || o.size == 0 && sizeSet(fs):
		return o, fmt.Errorf("bad size %d", o.size)
	case o.iters < 1:
		return o, fmt.Errorf("bad iters %d", o.iters)
	case o.rxDepth < 2:
		return o, fmt.Errorf("bad rx depth %d (at least 2)", o.rxDepth)
	case o.port < 1 || o.port > 65535:
		return o, fmt.Errorf("bad port %d", o.port)
	case o.ibPort != 1:
		return o, fmt.Errorf("bad device port %d (uroce devices have port 1 only)", o.ibPort)
	case o.timeout <= 0:
		return o, fmt.Errorf("bad timeout %v", o.timeout)
	}
	return o, nil
}

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		cli.BadUsage("udpingpong", err)
	}
	cli.Run("udpingpong", 0, func(ctx context.Context) error {
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

	p, err := newPingPong(d, o.size, o.rxDepth)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, p.close()) }()
	ms, err := metricsflag.Serve(o.metrics, out, map[string]*verbs.Device{"uroce0": d})
	if err != nil {
		return err
	}
	defer ms.Close()
	if o.stats {
		// Runs before close's defer: the QP is still there, and a
		// failed run prints its counters too.
		defer func() { fmt.Fprintf(out, "counters: %+v\n", p.qp.Counters()) }()
	}

	local := pingdest.Dest{QPN: p.qp.QPN(), PSN: rand.Uint32() & 0xffffff, GID: netip.IPv6Unspecified()}
	if o.gid >= 0 {
		if local.GID, err = d.GID(o.gid); err != nil {
			return fmt.Errorf("could not get local gid for gid index %d: %w", o.gid, err)
		}
		if local.GID.Is4() {
			local.GID = netip.AddrFrom16(local.GID.As16())
		}
	}
	// ud_pingpong.c prints a colon before the local GID, a comma before
	// the remote one.
	fmt.Fprintf(out, "  local address:  LID 0x%04x, QPN 0x%06x, PSN 0x%06x: GID %v\n", local.LID, local.QPN, local.PSN, local.GID)

	// ibv_ud_pingpong's TCP exchange (examples/internal/pingdest); the server
	// connects between reading the client's address and sending its own.
	xc := pingdest.Config{Peer: o.peer, Port: o.port, Listener: o.listener}
	remote, err := pingdest.Exchange(ctx, xc, local, func(r pingdest.Dest) error { return p.connect(r, local.PSN) })
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  remote address: %v\n", remote)
	if o.peer != "" {
		if err := p.connect(remote, local.PSN); err != nil {
			return err
		}
	}

	start := time.Now()
	if err := p.run(ctx, o.iters, o.peer != "", o.timeout); err != nil {
		return err
	}
	pingdest.Summary(out, p.size, o.iters, time.Since(start))
	return nil
}

// defaultSize is ibv_ud_pingpong's datagram size.
const defaultSize = 2048

// sizeSet reports whether -s was given: -s 0 is an error, its absence the
// default.
func sizeSet(fs *flag.FlagSet) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == "s" })
	return set
}
