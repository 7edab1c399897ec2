package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"time"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/pkg/link/afpacket"
	"github.com/uroce/uroce/pkg/link/afxdp"
	"github.com/uroce/uroce/pkg/perftest"
	"github.com/uroce/uroce/verbs"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "uroce-perf:", err)
		if errors.Is(err, ErrUsage) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: uroce-perf TEST [flags] [peer]   (TEST: write_lat read_lat send_lat atomic_lat write_bw read_bw send_bw)")
	fmt.Fprintln(w, "       uroce-perf demo                  (every test, both ends in this process over loopback)")
	fmt.Fprintln(w, "       uroce-perf bench [-r 3]          (root: every backend beside raw floors on a veth pair)")
	fmt.Fprintln(w, "       uroce-perf TEST -h               (the test's flags, as perftest's)")
}

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		usage(stderr)
		return ErrUsage
	}
	if args[0] == "demo" {
		return demo(stdout)
	}
	if args[0] == "bench" {
		return benchSideBySide(args[1:], stdout, stderr)
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		return nil
	}
	k, ok := kindByName(args[0])
	if !ok {
		usage(stderr)
		return fmt.Errorf("%w: unknown test %q", ErrUsage, args[0])
	}
	cfg, err := parseArgs(k, args[1:], stderr)
	if err != nil {
		return err
	}
	return runTest(context.Background(), cfg, stdout)
}

// runTest runs one side of a test: it opens the device, makes or takes
// the TCP connection, and runs the exchange.
func runTest(ctx context.Context, cfg *config, stdout io.Writer) error {
	if cfg.rdmaCM {
		return runCMTest(ctx, cfg, stdout)
	}
	var ln net.Listener
	if cfg.peer == "" {
		var err error
		if ln, err = net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(cfg.port))); err != nil {
			return fmt.Errorf("listen: %w", err)
		}
		defer ln.Close()
	}
	return runWith(ctx, cfg, ln, stdout)
}

// runWith runs one side of a test; a server takes its client from ln.
func runWith(ctx context.Context, cfg *config, ln net.Listener, stdout io.Writer) error {
	dev, name, err := openLocal(cfg)
	if err != nil {
		return err
	}
	defer dev.Close()
	var conn net.Conn
	if cfg.peer == "" {
		fmt.Fprint(stdout, waitingBanner)
		conn, err = accept(ctx, ln)
		ln.Close()
		if err != nil {
			return err
		}
	} else {
		if conn, err = dial(ctx, net.JoinHostPort(cfg.peer, strconv.Itoa(cfg.port)), cfg.timeout); err != nil {
			return err
		}
	}
	defer conn.Close()
	_, err = runOn(conn, cfg, dev, name, stdout)
	return err
}

// waitingBanner is what perftest's server prints while it waits.
const waitingBanner = "\n************************************\n* Waiting for client to connect... *\n************************************\n"

// openLocal opens the device on the address the flags pick (localAddr).
func openLocal(cfg *config) (*verbs.Device, string, error) {
	local, err := localAddr(cfg)
	if err != nil {
		return nil, "", err
	}
	return openDevice(cfg, local)
}

// runOn runs a test on an established exchange connection and device,
// and returns what it printed.
func runOn(conn net.Conn, cfg *config, dev *verbs.Device, name string, stdout io.Writer) (*printer, error) {
	server := cfg.peer == ""
	out, stop, mtu, err := begin(cfg, dev, name, stdout)
	if err != nil {
		return out, err
	}
	defer stop()
	dc, err := newDrivingConn(conn)
	if err != nil {
		return out, err
	}
	b := newBench(cfg, dev, server)
	b.conn = dc
	s := &session{cfg: cfg, conn: perftest.NewConn(dc, !server), r: b, out: out, server: server, sys: sysData(mtu)}
	return out, s.runReport(out)
}

// begin is what a side does first with either exchange (TCP or -R): its
// report's printer, the metrics server (stop ends it) and the IB MTU it
// offers: -m, else the device's largest up to 4096 (perftest's is the
// port's active MTU).
func begin(cfg *config, dev *verbs.Device, name string, stdout io.Writer) (out *printer, stop func(), mtu perftest.MTU, err error) {
	out = &printer{w: stdout, cfg: cfg, device: name}
	if stop, err = serveMetrics(cfg, dev, name); err != nil {
		return out, nil, 0, err
	}
	mtu = perftest.MTUFromBytes(cfg.mtu)
	if mtu == 0 {
		mtu = perftest.MTUFromBytes(min(dev.MaxPathMTU(), 4096))
	}
	if mtu == 0 {
		stop()
		return out, nil, 0, fmt.Errorf("device %s: path MTU %d is no IB MTU: %w", name, dev.MaxPathMTU(), verbs.ErrMTU)
	}
	return out, stop, mtu, nil
}

// sysData is the side's system data offered in Hello.
func sysData(mtu perftest.MTU) perftest.SysData {
	return perftest.SysData{PageSize: os.Getpagesize(), CacheLine: 64, MTU: mtu}
}

// runReport runs the session and ends the report, also after a failure.
func (s *session) runReport(out *printer) error {
	if err := s.run(); err != nil {
		out.finish()
		return err
	}
	return out.finish()
}

func accept(ctx context.Context, ln net.Listener) (net.Conn, error) {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	c, err := ln.Accept()
	if err != nil {
		return nil, fmt.Errorf("accept: %w", err)
	}
	return c, nil
}

// dial connects to the server, retrying while it is not yet listening
// (perftest's client fails at once; waiting is kinder to scripts that
// start both ends together).
func dial(ctx context.Context, addr string, timeout time.Duration) (net.Conn, error) {
	deadline := time.Now().Add(timeout)
	for {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			return c, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("connect to %s: %w", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// localAddr picks the address to run on: --ip, else -d's first address,
// else the address the kernel would send to the peer from, else (a server
// with neither) the first address of an interface that is up.
func localAddr(cfg *config) (netip.Addr, error) {
	if cfg.ip != "" {
		a, err := netip.ParseAddr(cfg.ip)
		if err != nil {
			return netip.Addr{}, fmt.Errorf("%w: --ip: %v", ErrUsage, err)
		}
		return a, nil
	}
	if cfg.dev != "" {
		return ifaceAddr(cfg.dev)
	}
	if cfg.peer != "" {
		c, err := net.Dial("udp", net.JoinHostPort(cfg.peer, strconv.Itoa(bth.RoCEPort)))
		if err != nil {
			return netip.Addr{}, fmt.Errorf("route to %s: %w", cfg.peer, err)
		}
		defer c.Close()
		return c.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap(), nil
	}
	ifs, err := net.Interfaces()
	if err != nil {
		return netip.Addr{}, err
	}
	for _, ifi := range ifs {
		if ifi.Flags&net.FlagUp == 0 || ifi.Flags&net.FlagLoopback != 0 {
			continue
		}
		if a, err := ifaceAddr(ifi.Name); err == nil {
			return a, nil
		}
	}
	return netip.MustParseAddr("127.0.0.1"), nil
}

// ifaceAddr returns an interface's first IPv4 address, else its first
// global IPv6 one.
func ifaceAddr(name string) (netip.Addr, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("device %s: %w", name, err)
	}
	addrs, err := ifi.Addrs()
	if err != nil {
		return netip.Addr{}, fmt.Errorf("device %s: %w", name, err)
	}
	var pick netip.Addr
	for _, a := range addrs {
		p, err := netip.ParsePrefix(a.String())
		if err != nil {
			continue
		}
		if ip := p.Addr(); ip.Is4() {
			return ip, nil
		} else if !pick.IsValid() && ip.IsGlobalUnicast() {
			pick = ip
		}
	}
	if !pick.IsValid() {
		return netip.Addr{}, fmt.Errorf("device %s: %w", name, verbs.ErrNoAddr)
	}
	return pick, nil
}

// openDevice opens the device on the chosen link backend. Latency tests
// busy-poll the AF_XDP socket (SO_BUSY_POLL), as perftest busy-polls its CQ.
func openDevice(cfg *config, addr netip.Addr) (*verbs.Device, string, error) {
	switch cfg.link {
	case "afpacket":
		if cfg.dev == "" {
			return nil, "", fmt.Errorf("%w: --link afpacket needs -d", ErrUsage)
		}
		l, err := afpacket.Open(afpacket.Config{Ifname: cfg.dev, Addr: addr})
		if err != nil {
			return nil, "", fmt.Errorf("open %s: %w", cfg.dev, err)
		}
		return verbs.Open(l), cfg.dev, nil
	case "afxdp":
		if cfg.dev == "" {
			return nil, "", fmt.Errorf("%w: --link afxdp needs -d", ErrUsage)
		}
		wait := afxdp.WaitHybrid
		if !cfg.kind.bw {
			wait = afxdp.WaitBusyPoll
		}
		l, err := afxdp.Open(afxdp.Config{Interface: cfg.dev, Addr: addr, Wait: wait})
		if err != nil {
			return nil, "", fmt.Errorf("open %s: %w", cfg.dev, err)
		}
		return verbs.Open(l), cfg.dev, nil
	}
	d, err := verbs.OpenAddr(addr)
	if err != nil {
		return nil, "", err
	}
	name := cfg.dev
	if name == "" {
		name = "udp:" + addr.String()
	}
	return d, name, nil
}
