package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/uroce/uroce/internal/netns"
	"github.com/uroce/uroce/internal/rawbench"
	"github.com/uroce/uroce/pkg/link"
	"github.com/uroce/uroce/verbs"
	"github.com/vishvananda/netlink"
)

// The side-by-side benchmark (`uroce-perf bench`): uroce-perf's tests over
// each link backend between two namespaces joined by a veth pair, beside
// the raw floors of package rawbench measured on the same pair in the same
// run, printed as one table of ratios. The targets: write_lat over afxdp
// within 1.2× of the RC-shaped AF_XDP floor (rawbench.XDPRC: the same
// packets per round trip, each stamped and verified; issue 19); write_bw
// over afxdp at least 80 % of the raw AF_XDP blast of frames of the same
// size (issue 5); write_bw and send_bw of 64 B over afxdp at least half
// the packet rate of a raw blast of their frames (issue 19); no
// allocation per operation in steady state.

// sbsLatTests, sbsBWTests and sbsRateTests are what the table holds: the
// latency tests at sbsLatSizes, the bandwidth tests at sbsBWSize and the
// message-rate tests (perftest's MsgRate) at sbsRateSize.
var (
	sbsLatTests  = []string{"write_lat", "read_lat", "send_lat"}
	sbsLatSizes  = []int{2, 64, 4096}
	sbsBWTests   = []string{"write_bw", "read_bw"}
	sbsBWSize    = 65536
	sbsRateTests = []string{"write_bw", "send_bw"}
	sbsRateSize  = 64
)

// sbsWarm is how many untimed iterations each latency test runs first,
// in the same loop as its timed ones: on a virtual machine the first
// tens of ms after the processors idled run slow (2 vCPUs under KVM:
// write_lat at -n 1000 came out at 17 µs one-way, at -n 10000 at 8 µs).
const sbsWarm = 4096

// bwSizes returns the sizes a bandwidth test runs at in the table.
func bwSizes(test string) []int {
	var s []int
	if slices.Contains(sbsBWTests, test) {
		s = append(s, sbsBWSize)
	}
	if slices.Contains(sbsRateTests, test) {
		s = append(s, sbsRateSize)
	}
	return s
}

// allBWTests is every bandwidth test of the table, in order.
func allBWTests() []string {
	t := slices.Clone(sbsBWTests)
	for _, r := range sbsRateTests {
		if !slices.Contains(t, r) {
			t = append(t, r)
		}
	}
	return t
}

// sbsKey names one cell of the table.
type sbsKey struct {
	mtu  int
	test string // a uroce-perf test, or floor-rtt / floor-blast / floor-rate / floor-rate-loss
	size int
	link string // a backend, or raw-rc / raw-xdp / raw-udp (floor-rate: write / send)
}

// sbsCell gathers a cell's samples over the rounds.
type sbsCell struct {
	vals   []float64 // µs (latency, floors' whole round trip), Gbit/s or Mpps
	allocs float64   // per operation, -1 when not measured
}

type sideBySide struct {
	rounds, latIters, bwIters int
	rateIters                 int // messages of a 64-B rate cell
	blast                     time.Duration
	mtus                      []int
	links                     []string
	lat, bw                   []string // the tests to run
	verbose                   io.Writer
	log                       io.Writer
	cells                     map[sbsKey]*sbsCell
	order                     []sbsKey
	errs                      []string
}

// cleanup holds what must go when the process is interrupted: the
// namespaces (the veth pair goes with them, and the XDP programs' BPF
// links with the process).
var cleanup struct {
	sync.Mutex
	ns []*netns.NS
}

func removeNamespaces() {
	cleanup.Lock()
	defer cleanup.Unlock()
	for _, n := range cleanup.ns {
		n.Close()
	}
	cleanup.ns = nil
}

// benchSideBySide runs `uroce-perf bench`.
func benchSideBySide(args []string, stdout, stderr io.Writer) error {
	sb, cpuprofile, err := parseBench(args, stdout, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	} else if err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return errors.New("bench: needs root (namespaces, veth, AF_PACKET, AF_XDP)")
	}

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	go func() {
		if _, ok := <-sig; ok {
			removeNamespaces()
			fmt.Fprintln(stderr, "uroce-perf bench: interrupted; namespaces removed")
			os.Exit(130)
		}
	}()
	defer removeNamespaces()

	if cpuprofile != "" {
		f, err := os.Create(cpuprofile)
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	begin := time.Now()
	env := machine(begin)
	for i, mtu := range sb.mtus {
		if err := sb.runMTU(i, mtu, stderr); err != nil {
			return err
		}
	}
	sb.print(stdout, env, time.Since(begin))
	return nil
}

// parseBench parses bench's flags; it returns the run and the CPU profile
// path. On -h it prints the usage and flags to stdout and returns
// flag.ErrHelp; other errors wrap ErrUsage, for main to say once.
func parseBench(args []string, stdout, stderr io.Writer) (*sideBySide, string, error) {
	fs := flag.NewFlagSet("uroce-perf bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	sb := &sideBySide{cells: map[sbsKey]*sbsCell{}}
	fs.IntVar(&sb.rounds, "r", 3, "rounds; each cell's median is reported")
	fs.IntVar(&sb.latIters, "n", 1000, "iterations of each latency test and floor ping-pong")
	fs.IntVar(&sb.bwIters, "bw-n", 5000, "iterations of each bandwidth test of 65536 B")
	fs.IntVar(&sb.rateIters, "rate-n", 300000, "messages of each message-rate test (64 B)")
	fs.DurationVar(&sb.blast, "blast", 500*time.Millisecond, "duration of the raw AF_XDP blast")
	mtus := fs.String("mtu", "1500,9000", "veth MTUs")
	links := fs.String("links", "udp,afpacket,afxdp", "link backends")
	tests := fs.String("tests", "", fmt.Sprintf("only these tests (default: %s; %s at %d B, %s at %d B messages/s)",
		strings.Join(append(slices.Clone(sbsLatTests), allBWTests()...), ","),
		strings.Join(sbsBWTests, ","), sbsBWSize, strings.Join(sbsRateTests, ","), sbsRateSize))
	verbose := fs.Bool("v", false, "print each uroce-perf report on standard error")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the whole run (floors included) to this file")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(stdout, "usage: uroce-perf bench [flags]   (root: every backend beside raw floors on a veth pair)")
		fmt.Fprintln(stdout)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return nil, "", err
	} else if err != nil {
		return nil, "", fmt.Errorf("%w: %v (uroce-perf bench -h lists the flags)", ErrUsage, err)
	}
	for _, m := range strings.Split(*mtus, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(m))
		if err != nil || n < 1280 {
			return nil, "", fmt.Errorf("%w: -mtu %q", ErrUsage, m)
		}
		sb.mtus = append(sb.mtus, n)
	}
	for _, l := range strings.Split(*links, ",") {
		l = strings.TrimSpace(l)
		if !slices.Contains(link.Backends(), l) {
			return nil, "", fmt.Errorf("%w: -links: %q (%s)", ErrUsage, l, strings.Join(link.Backends(), ", "))
		}
		sb.links = append(sb.links, l)
	}
	sb.lat, sb.bw = sbsLatTests, allBWTests()
	if *tests != "" {
		sb.lat, sb.bw = nil, nil
		for _, t := range strings.Split(*tests, ",") {
			switch t = strings.TrimSpace(t); {
			case slices.Contains(sb.lat, t) || slices.Contains(sb.bw, t):
			case slices.Contains(sbsLatTests, t):
				sb.lat = append(sb.lat, t)
			case slices.Contains(allBWTests(), t):
				sb.bw = append(sb.bw, t)
			default:
				return nil, "", fmt.Errorf("%w: -tests: %q", ErrUsage, t)
			}
		}
	}
	if sb.rounds < 1 || sb.latIters < 200 || sb.bwIters < 200 || sb.rateIters < 200 {
		return nil, "", fmt.Errorf("%w: -r must be positive, -n, -bw-n and -rate-n at least 200", ErrUsage)
	}
	sb.verbose, sb.log = io.Discard, stderr
	if *verbose {
		sb.verbose = stderr
	}
	return sb, *cpuprofile, nil
}

// machine describes where and when the run is: what the README's table
// carries beside the numbers.
func machine(t time.Time) string {
	var u syscall.Utsname
	syscall.Uname(&u)
	rel := make([]byte, 0, len(u.Release))
	for _, c := range u.Release {
		if c == 0 {
			break
		}
		rel = append(rel, byte(c))
	}
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	load := "?"
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		load = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	return fmt.Sprintf("%s, %d CPUs (%s), kernel %s, load average %s at start",
		t.UTC().Format("2006-01-02 15:04 UTC"), runtime.NumCPU(), model, rel, load)
}

// ibMTU is the IB MTU a device picks over an IPv4 link of linkMTU bytes.
func ibMTU(linkMTU int) int {
	return verbs.PathMTU(link.Info{MTU: linkMTU, Addr: netip.IPv4Unspecified()})
}

// add records a sample of a cell.
func (sb *sideBySide) add(k sbsKey, v float64) *sbsCell {
	c := sb.cells[k]
	if c == nil {
		c = &sbsCell{allocs: -1}
		sb.cells[k] = c
		sb.order = append(sb.order, k)
	}
	c.vals = append(c.vals, v)
	return c
}

// runMTU builds the namespaces and the veth pair with one MTU and runs
// every round on them.
func (sb *sideBySide) runMTU(idx, mtu int, log io.Writer) error {
	tag := fmt.Sprintf("ubs%d%d", os.Getpid()%100000, idx)
	var ns [2]*netns.NS
	for i, s := range []string{"a", "b"} {
		n, err := netns.Create(tag + s)
		if err != nil {
			return err
		}
		cleanup.Lock()
		cleanup.ns = append(cleanup.ns, n)
		cleanup.Unlock()
		ns[i] = n
	}
	defer removeNamespaces()
	va, vb, err := netns.AddVeth(ns[0], ns[1], tag+"va", tag+"vb", mtu)
	if err != nil {
		return err
	}
	a, b := netip.MustParseAddr("10.78.0.1"), netip.MustParseAddr("10.78.0.2")
	for _, e := range []struct {
		v, peer netns.Veth
		addr    netip.Addr
		to      netip.Addr
	}{{va, vb, a, b}, {vb, va, b, a}} {
		if err := e.v.Assign(netip.PrefixFrom(e.addr, 24)); err != nil {
			return err
		}
		// A permanent neighbour entry: the first packets of a run are
		// then not dropped while the raw backends resolve the peer.
		if err := e.v.NS.Netlink().NeighSet(&netlink.Neigh{LinkIndex: e.v.Index, Family: netlink.FAMILY_V4,
			State: netlink.NUD_PERMANENT, IP: e.to.AsSlice(), HardwareAddr: e.peer.MAC}); err != nil {
			return fmt.Errorf("neighbour %v: %w", e.to, err)
		}
	}
	fmt.Fprintf(log, "bench: MTU %d on %s <-> %s (%s, %s)\n", mtu, va.Name, vb.Name, ns[0].Name, ns[1].Name)
	pm := ibMTU(mtu)
	for r := range sb.rounds {
		t0 := time.Now()
		if err := sb.floors(mtu, pm, va, vb, a, b); err != nil {
			return err
		}
		for _, l := range sb.links {
			for _, test := range sb.lat {
				for _, size := range sbsLatSizes {
					sb.uroce(r == 0, mtu, l, test, size, sb.latIters, va, vb, b)
				}
			}
			for _, test := range sb.bw {
				for _, size := range bwSizes(test) {
					n := sb.bwIters
					if isRate(test, size) {
						n = sb.rateIters
					}
					sb.uroce(r == 0, mtu, l, test, size, n, va, vb, b)
				}
			}
		}
		fmt.Fprintf(log, "bench: MTU %d round %d done in %.1f s\n", mtu, r+1, time.Since(t0).Seconds())
	}
	return nil
}

// floors measures the raw floors for one round: the RC-shaped AF_XDP
// ping-pong at each latency size (its messages in IB-MTU packets, as
// uroce sends them), kernel UDP and bare AF_XDP ping-pongs at each
// latency size (capped at the IB MTU, the largest packet uroce sends),
// the AF_XDP blast of IB-MTU packets, the frames write_bw and read_bw
// move, and, when a message-rate test runs, AF_XDP blasts of the frames
// of a 64-B WRITE and SEND.
func (sb *sideBySide) floors(mtu, pm int, va, vb netns.Veth, a, b netip.Addr) error {
	cfg := rawbench.Config{Iters: sb.latIters}
	for _, size := range sbsLatSizes {
		r, err := rawbench.XDPRC(cfg, va, vb, a, b, size, pm)
		if err != nil {
			return fmt.Errorf("raw-rc floor, %d bytes: %w", size, err)
		}
		sb.add(sbsKey{mtu, "floor-rtt", size, "raw-rc"}, us(r.P50))
		s := min(size, pm)
		for _, f := range []struct {
			name string
			run  func(rawbench.Config, netns.Veth, netns.Veth, netip.Addr, netip.Addr, int) (rawbench.Result, error)
		}{{"raw-xdp", rawbench.XDP}, {"raw-udp", rawbench.UDP}} {
			r, err := f.run(cfg, va, vb, a, b, s)
			if err != nil {
				return fmt.Errorf("%s floor, %d bytes: %w", f.name, s, err)
			}
			sb.add(sbsKey{mtu, "floor-rtt", size, f.name}, us(r.P50))
		}
	}
	r, err := rawbench.XDP(rawbench.Config{Blast: sb.blast}, va, vb, a, b, pm)
	if err != nil {
		return fmt.Errorf("raw-xdp blast, %d bytes: %w", pm, err)
	}
	// Payload bits, as uroce-perf's bandwidth counts message bytes.
	sb.add(sbsKey{mtu, "floor-blast", pm, "raw-xdp"}, r.PPS*float64(pm)*8/1e9)
	for _, verb := range []string{"write", "send"} {
		if !slices.Contains(sb.bw, verb+"_bw") || !slices.Contains(sbsRateTests, verb+"_bw") {
			continue
		}
		frame, err := sbsRateFrame(va, vb, a, b, verb == "write", pm)
		if err != nil {
			return err
		}
		r, err := rawbench.XDPFrame(rawbench.Config{Blast: sb.blast}, va, vb, frame)
		if err != nil {
			return fmt.Errorf("raw-xdp blast of %d-B %s frames: %w", sbsRateSize, verb, err)
		}
		sb.add(sbsKey{mtu, "floor-rate", sbsRateSize, verb}, r.PPS/1e6)
		// A blast has no flow control: a sink that loses the processor
		// drops what its ring cannot hold, and the table says how much.
		sb.add(sbsKey{mtu, "floor-rate-loss", sbsRateSize, verb}, 100*r.Loss)
	}
	return nil
}

// sbsRateFrame is the frame of a sbsRateSize-byte RDMA WRITE (or SEND)
// from va to vb, as uroce puts it on the wire.
func sbsRateFrame(va, vb netns.Veth, a, b netip.Addr, write bool, pm int) ([]byte, error) {
	p := rawbench.Path{SrcMAC: [6]byte(va.MAC), DstMAC: [6]byte(vb.MAC), Src: a, Dst: b}
	m, err := rawbench.RCMessage(p, write, sbsRateSize, pm, 0)
	if err != nil {
		return nil, err
	}
	return m[0], nil
}

func us(d time.Duration) float64 { return float64(d) / 1e3 }

// uroce runs one test between the namespaces and records the client's
// t_typical (µs), average bandwidth (Gbit/s) or, for a message-rate
// cell, MsgRate (Mpps). With allocs it first runs a short pass of the
// same test, and takes the steady state's allocations per operation as
// the difference of the two passes' (both ends, this process) over the
// difference of their iterations: what setup allocates cancels out. A
// failed run is noted in the table, not fatal.
func (sb *sideBySide) uroce(allocs bool, mtu int, l, test string, size, iters int, va, vb netns.Veth, srv netip.Addr) {
	key := sbsKey{mtu, test, size, l}
	run := func(n int) (float64, uint64, error) {
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		v, err := sb.pass(l, test, size, n, va, vb, srv)
		runtime.ReadMemStats(&m1)
		return v, m1.Mallocs - m0.Mallocs, err
	}
	var short uint64
	const shortIters = 100
	var err error
	if allocs {
		_, short, err = run(shortIters)
	}
	var v float64
	var long uint64
	if err == nil {
		t0 := time.Now()
		v, long, err = run(iters)
		if d := time.Since(t0); d > 5*time.Second {
			fmt.Fprintf(sb.log, "bench: MTU %d %s %d B over %s took %.1f s\n", mtu, test, size, l, d.Seconds())
		}
	}
	if err != nil {
		sb.errs = append(sb.errs, fmt.Sprintf("MTU %d %s %d B over %s: %v", mtu, test, size, l, err))
		return
	}
	c := sb.add(key, v)
	if allocs {
		c.allocs = max(0, (float64(long)-float64(short))/float64(iters-shortIters))
	}
}

// pass runs one uroce-perf test: the server on vb, the client on va, the
// devices and the exchange's TCP connection opened in their namespaces.
func (sb *sideBySide) pass(l, test string, size, iters int, va, vb netns.Veth, srv netip.Addr) (float64, error) {
	k, _ := kindByName(test)
	flags := []string{"--link", l, "-s", strconv.Itoa(size), "-n", strconv.Itoa(iters), "--timeout", "20s"}
	srvCfg, err := parseArgs(k, append(flags, "-d", vb.Name), io.Discard)
	if err != nil {
		return 0, err
	}
	cliCfg, err := parseArgs(k, append(flags, "-d", va.Name, srv.String()), io.Discard)
	if err != nil {
		return 0, err
	}
	if k.bw {
		// The table has no peak, and its search is quadratic in the
		// iterations (a rate cell's 300 000 messages: a minute and a
		// half on the receiving side of send_bw).
		srvCfg.noPeak, cliCfg.noPeak = true, true
	} else {
		srvCfg.warm, cliCfg.warm = sbsWarm, sbsWarm
	}
	var e pairEnds
	defer func() {
		if e.ln != nil {
			e.ln.Close()
		}
		if e.srvDev != nil {
			e.srvDev.Close()
		}
		if e.cliDev != nil {
			e.cliDev.Close()
		}
	}()
	open := func(cfg *config) (err error) {
		addr, err := localAddr(cfg)
		if err != nil {
			return err
		}
		if cfg.peer == "" {
			e.srvDev, e.srvName, err = openDevice(cfg, addr)
		} else {
			e.cliDev, e.cliName, err = openDevice(cfg, addr)
		}
		return err
	}
	if err := vb.NS.Do(func() (err error) {
		if err = open(srvCfg); err != nil {
			return err
		}
		e.ln, err = net.Listen("tcp", net.JoinHostPort(srv.String(), "0"))
		return err
	}); err != nil {
		return 0, fmt.Errorf("server side: %w", err)
	}
	if err := va.NS.Do(func() error { return open(cliCfg) }); err != nil {
		return 0, fmt.Errorf("client side: %w", err)
	}
	e.dial = func() (c net.Conn, err error) {
		err = va.NS.Do(func() error {
			c, err = dial(context.Background(), e.ln.Addr().String(), 10*time.Second)
			return err
		})
		return c, err
	}
	fmt.Fprintf(sb.verbose, "\n=== %s %d B over %s\n", test, size, l)
	pc, err := e.run(context.Background(), srvCfg, cliCfg, io.Discard, sb.verbose)
	if err != nil {
		return 0, err
	}
	if k.bw {
		if len(pc.ClientBW) != 1 {
			return 0, fmt.Errorf("%d bandwidth reports", len(pc.ClientBW))
		}
		if isRate(test, size) {
			return pc.ClientBW[0].MsgRate, nil // Mpps
		}
		return pc.ClientBW[0].Avg * (1 << 20) * 8 / 1e9, nil // MiB/s to Gbit/s
	}
	if len(pc.ClientLat) != 1 {
		return 0, fmt.Errorf("%d latency reports", len(pc.ClientLat))
	}
	return pc.ClientLat[0].Typical, nil
}

// isRate reports whether a bandwidth test's cell is a message rate.
func isRate(test string, size int) bool {
	return size == sbsRateSize && slices.Contains(sbsRateTests, test)
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// print writes the one table: per MTU, the floors, then each test and
// backend with its ratios to the floors and its allocations per operation,
// and a verdict where issue 5 or 19 sets a target.
func (sb *sideBySide) print(w io.Writer, env string, took time.Duration) {
	fmt.Fprintf(w, "uroce-perf bench: %s\n", env)
	fmt.Fprintf(w, "medians of %d rounds; latency %d iterations after %d untimed, bandwidth %d iterations of %d B, message rate %d of %d B; took %.0f s\n",
		sb.rounds, sb.latIters, sbsWarm, sb.bwIters, sbsBWSize, sb.rateIters, sbsRateSize, took.Seconds())
	fmt.Fprintf(w, "rc floor: raw AF_XDP busy-poll with an RC write_lat's packets (WRITE, ACK, WRITE, ACK; IB-MTU segments), each stamped and ICRC-computed, each received one ICRC-verified\n")
	fmt.Fprintf(w, "xdp floor: raw AF_XDP busy-poll, one frame each way untouched; udp floor: kernel UDP busy-poll\n")
	fmt.Fprintf(w, "one-way = half the round trip (read_lat is set against the whole round trip; it has no rc floor); rate: raw AF_XDP blast of a 64-B WRITE's or SEND's frames\n\n")
	fmt.Fprintf(w, "%-5s %-10s %6s %-9s %12s %6s %6s %6s %9s  %s\n", "MTU", "test", "size", "link", "result", "/rc", "/xdp", "/udp", "allocs/op", "target")
	row := func(mtu int, test string, size int, l, result, rc, x, u, al, note string) {
		fmt.Fprintf(w, "%-5d %-10s %6d %-9s %12s %6s %6s %6s %9s  %s\n", mtu, test, size, l, result, rc, x, u, al, note)
	}
	usec := func(v float64) string { return fmt.Sprintf("%.2f us", v) }
	for _, mtu := range sb.mtus {
		pm := ibMTU(mtu)
		cell := func(test string, size int, name string) float64 {
			if c := sb.cells[sbsKey{mtu, test, size, name}]; c != nil {
				return median(c.vals)
			}
			return 0
		}
		floor := func(size int, name string) float64 { return cell("floor-rtt", size, name) }
		for _, size := range sbsLatSizes {
			rc, x, u := floor(size, "raw-rc"), floor(size, "raw-xdp"), floor(size, "raw-udp")
			n := (size + pm - 1) / pm
			row(mtu, "floor rtt/2", size, "raw-rc", usec(rc/2), "1.00", ratio(rc, x), ratio(rc, u), "",
				fmt.Sprintf("(%d+1 packets each way)", n))
			note := ""
			if size > pm {
				note = fmt.Sprintf("(one %d B packet)", pm)
			}
			row(mtu, "floor rtt/2", size, "raw-xdp", usec(x/2), ratio(x, rc), "1.00", ratio(x, u), "", note)
			row(mtu, "floor rtt/2", size, "raw-udp", usec(u/2), ratio(u, rc), ratio(u, x), "1.00", "", note)
		}
		blast := cell("floor-blast", pm, "raw-xdp")
		if blast > 0 {
			row(mtu, "blast", pm, "raw-xdp", fmt.Sprintf("%.2f Gb/s", blast), "", "1.00", "", "", "payload Gbit/s")
		}
		for _, verb := range []string{"write", "send"} {
			if r := cell("floor-rate", sbsRateSize, verb); r > 0 {
				row(mtu, "rate", sbsRateSize, "raw-xdp", fmt.Sprintf("%.2f Mpps", r), "", "1.00", "", "",
					fmt.Sprintf("%s Only frames, packets/s received (%.0f %% of those sent lost)",
						strings.ToUpper(verb), cell("floor-rate-loss", sbsRateSize, verb)))
			}
		}
		for _, test := range append(slices.Clone(sb.lat), sb.bw...) {
			k, _ := kindByName(test)
			sizes := sbsLatSizes
			if k.bw {
				sizes = bwSizes(test)
			}
			for _, size := range sizes {
				for _, l := range sb.links {
					c := sb.cells[sbsKey{mtu, test, size, l}]
					if c == nil {
						row(mtu, test, size, l, "failed", "", "", "", "", "")
						continue
					}
					v := median(c.vals)
					al := "-"
					if c.allocs >= 0 {
						al = fmt.Sprintf("%.2f", c.allocs)
					}
					if k.bw && isRate(test, size) {
						floor := cell("floor-rate", size, strings.TrimSuffix(test, "_bw"))
						verdict := ""
						if l == "afxdp" {
							verdict = target(v >= 0.5*floor, "≥ 0.5 of rate")
						}
						row(mtu, test, size, l, fmt.Sprintf("%.2f Mpps", v), "", ratio(v, floor), "", al, verdict+allocVerdict(c.allocs))
						continue
					}
					if k.bw {
						verdict := ""
						if test == "write_bw" && l == "afxdp" {
							verdict = target(v >= 0.80*blast, "≥ 0.80 of blast")
						}
						row(mtu, test, size, l, fmt.Sprintf("%.2f Gb/s", v), "", ratio(v, blast), "", al, verdict+allocVerdict(c.allocs))
						continue
					}
					// A write or send latency is half a round trip; a
					// read's is a whole one, and a read's packets are
					// not the rc floor's.
					rc, x, u := floor(size, "raw-rc")/2, floor(size, "raw-xdp")/2, floor(size, "raw-udp")/2
					if !k.roundTrip() {
						rc, x, u = 0, 2*x, 2*u
					}
					verdict := ""
					if test == "write_lat" && l == "afxdp" {
						verdict = target(v <= 1.2*rc, "≤ 1.2× rc")
					}
					row(mtu, test, size, l, usec(v), ratio(v, rc), ratio(v, x), ratio(v, u), al, verdict+allocVerdict(c.allocs))
				}
			}
		}
	}
	for _, e := range sb.errs {
		fmt.Fprintf(w, "failed: %s\n", e)
	}
}

func ratio(v, base float64) string {
	if base == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", v/base)
}

func target(ok bool, what string) string {
	if ok {
		return "ok (" + what + ") "
	}
	return "MISSED (" + what + ") "
}

// allocVerdict flags a cell that allocates in steady state. The two
// passes' setups differ by a few dozen allocations (runtime, resolver and
// exchange goroutines), a few hundredths per operation: below 0.1 is
// noise.
func allocVerdict(a float64) string {
	if a >= 0.1 {
		return "ALLOCATES"
	}
	return ""
}
