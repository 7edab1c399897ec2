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
	"strings"
	"syscall"
	"time"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/pkg/link"
	"github.com/uroce/uroce/pkg/netinfo"
	"github.com/uroce/uroce/pkg/perftest"
	"github.com/uroce/uroce/verbs"
)

func main() {
	os.Exit(mainCode(os.Args[1:], os.Stdout, os.Stderr))
}

// mainCode runs the command and returns its exit status: 0, 2 for a
// command line that describes no test, 1 for a failed run. It prints the
// error, once, on stderr.
func mainCode(args []string, stdout, stderr io.Writer) int {
	return exitCode(run(args, stdout, stderr), stderr)
}

// exitCode prints err, a failed completion first in perftest's words, and
// returns the exit status for it.
func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	var we *wcError
	if errors.As(err, &we) {
		fmt.Fprint(stderr, we.perftest())
	}
	fmt.Fprintln(stderr, "uroce-perf:", err)
	if errors.Is(err, ErrUsage) {
		return 2
	}
	return 1
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: uroce-perf TEST [flags] [peer]   (TEST: write_lat read_lat send_lat atomic_lat write_bw read_bw send_bw atomic_bw)")
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
	if args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		return nil
	}
	k, ok := kindByName(args[0])
	if !ok {
		usage(stderr)
		return fmt.Errorf("%w: unknown test %q", ErrUsage, args[0])
	}
	cfg, err := parseArgs(k, args[1:], stdout)
	if errors.Is(err, errHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	cfg.notice = stderr
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
		addr := net.JoinHostPort(cfg.peer, strconv.Itoa(cfg.port))
		stop := sayIfSlow(cfg.notice, fmt.Sprintf("no answer yet from %s: waiting up to %v (--timeout)", addr, cfg.timeout))
		conn, err = dial(ctx, addr, cfg.timeout)
		stop()
		if err != nil {
			return err
		}
	}
	defer conn.Close()
	_, err = runOn(conn, cfg, dev, name, stdout)
	return err
}

// waitingBanner is what perftest's server prints while it waits.
const waitingBanner = "\n************************************\n* Waiting for client to connect... *\n************************************\n"

// openLocal opens the device on the address the flags pick (localAddr)
// and checks -x against its GID table before any connection is made, as
// perftest queries the GID before its exchange.
func openLocal(cfg *config) (*verbs.Device, string, error) {
	local, err := localAddr(cfg)
	if err != nil {
		return nil, "", err
	}
	dev, name, err := openDevice(cfg, local)
	if err != nil {
		if cfg.link == "afxdp" {
			err = afxdpError(err)
		}
		return nil, "", err
	}
	if err := checkGIDIndex(cfg.deviceGID(), dev, name); err != nil {
		dev.Close()
		return nil, "", err
	}
	return dev, name, nil
}

// checkGIDIndex fails a GID index the device's table does not hold. A
// uroce device has one GID, its address, at index 0, where rxe's IPv4 GID
// is usually at 1 or 3: a -x copied from an rxe command line says so.
func checkGIDIndex(idx int, dev *verbs.Device, name string) error {
	if _, err := dev.GID(idx); err == nil {
		return nil
	}
	if name == "" {
		name = dev.Addr().String()
	}
	gids := dev.GIDs()
	return fmt.Errorf("%w: -x %d: GID index out of range: device %s has %d GID(s), index 0 to %d: %v (a uroce device's GID is its address)",
		ErrUsage, idx, name, len(gids), len(gids)-1, gids)
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

// dial connects to the server once, as perftest's client does: nobody
// listening there is an error at once ("Couldn't connect to HOST:PORT"),
// not a wait. timeout bounds a connect that gets no answer at all.
func dial(ctx context.Context, addr string, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		// The dialer's own "dial tcp ADDR: connect:" repeats what the
		// message says; keep its cause.
		var op *net.OpError
		if errors.As(err, &op) {
			err = op.Err
		}
		var se *os.SyscallError
		if errors.As(err, &se) {
			err = se.Err
		}
		if errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("couldn't connect to %s: %w (start the server first: the same test without a peer address)", addr, err)
		}
		return nil, fmt.Errorf("couldn't connect to %s: %w", addr, err)
	}
	return c, nil
}

// slowAnswer is how long a client waits for its server's first answer
// before it says that it is waiting: a host that drops the connection
// attempt, or has no RoCE device to answer an rdma_cm REQ, answers
// nothing, and the attempt lasts until --timeout.
const slowAnswer = 2 * time.Second

// sayIfSlow prints msg on w (nothing if w is nil) once slowAnswer has
// passed, unless stop, which waits for the printing, comes first.
func sayIfSlow(w io.Writer, msg string) (stop func()) {
	if w == nil {
		return func() {}
	}
	done, printed := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(printed)
		t := time.NewTimer(slowAnswer)
		defer t.Stop()
		select {
		case <-t.C:
			fmt.Fprintf(w, "uroce-perf: %s\n", msg)
		case <-done:
		}
	}()
	return func() {
		close(done)
		<-printed
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
		if cfg.gidSet {
			a, err := gidAddr(cfg.dev, cfg.gidIdx)
			cfg.gidMapped = err == nil
			return a, err
		}
		return ifaceAddr(cfg.dev)
	}
	if cfg.peer != "" {
		c, err := net.Dial("udp", net.JoinHostPort(cfg.peer, strconv.Itoa(bth.RoCEPort)))
		if err != nil {
			return netip.Addr{}, fmt.Errorf("route to %s: %w", cfg.peer, err)
		}
		defer c.Close()
		src := c.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap()
		peer := c.RemoteAddr().(*net.UDPAddr).AddrPort().Addr().Unmap()
		if local, held := roceHolder(peer); local && held {
			// The server is on this host: sit beside it (samehost.go).
			return besidePeer(peer, src), nil
		}
		return src, nil
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

// gidAddr returns the address of GID index idx in rxe's GID table of the
// interface (netinfo.GIDTable: the link-local default GID from the MAC,
// then the IPv4 addresses, then the IPv6 ones), so that -x N names on a
// uroce device what it names on rxe over the same interface. A link-local
// address carries the interface as its zone.
func gidAddr(name string, idx int) (netip.Addr, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("device %s: %w", name, err)
	}
	r, err := netinfo.New(netinfo.Options{NoSubscribe: true})
	if err != nil {
		return netip.Addr{}, fmt.Errorf("device %s: %w", name, err)
	}
	defer r.Close()
	tbl, err := r.GIDTable(ifi.Index)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("device %s: %w", name, err)
	}
	if idx < 0 || idx >= len(tbl) {
		gids := make([]string, len(tbl))
		for i, g := range tbl {
			gids[i] = fmt.Sprintf("%d %v", i, g.GID)
		}
		return netip.Addr{}, fmt.Errorf("%w: -x %d: GID index out of range: %s's GID table (as rxe's) is %s",
			ErrUsage, idx, name, strings.Join(gids, ", "))
	}
	a := tbl[idx].GID.Unmap()
	if a.IsLinkLocalUnicast() {
		a = a.WithZone(name)
	}
	return a, nil
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
// busy-poll the link (AF_XDP's SO_BUSY_POLL), as perftest busy-polls its
// CQ; bandwidth tests spin a moment before they sleep.
func openDevice(cfg *config, addr netip.Addr) (*verbs.Device, string, error) {
	wait := link.WaitSpinThenSleep
	if !cfg.kind.bw {
		wait = link.WaitSpin
	}
	bind, err := cfg.bindMode()
	if err != nil {
		return nil, "", err
	}
	l, err := link.Open(cfg.link, link.Config{Interface: cfg.dev, Addr: addr, Wait: wait, Bind: bind})
	if zc, ok := l.(interface{ ZeroCopy() bool }); ok && err == nil {
		// Say which mode auto found: zero-copy and copy differ several
		// fold in cost, and a driver that lacks one is found only here.
		cfg.bindUsed = "copy"
		if zc.ZeroCopy() {
			cfg.bindUsed = "zero-copy"
		}
	}
	name := cfg.dev
	if name == "" {
		name = cfg.link + ":" + addr.String()
	}
	switch {
	case errors.Is(err, link.ErrNoInterface):
		return nil, "", fmt.Errorf("%w: --link %s needs -d", ErrUsage, cfg.link)
	case err != nil:
		return nil, "", fmt.Errorf("open %s: %w", name, err)
	}
	opts := []verbs.Option{verbs.Inline()}
	if cfg.kind.bw {
		// perftest's bandwidth loops post up to the send queue's depth
		// and then poll: the posts' packets leave in the poll's turn,
		// one link send for the burst.
		opts = append(opts, verbs.DeferSends())
	}
	return verbs.Open(l, opts...), name, nil
}
