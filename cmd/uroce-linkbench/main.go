// Command uroce-linkbench measures the link backends against plain kernel
// UDP on a veth pair between two namespaces it makes (and removes): for
// each backend and payload size, the round-trip latency of a busy-polled
// ping-pong (min, median, p99) and the one-way throughput of a blast
// (received packets/s and Gbit/s of RoCE bytes), with each result's ratio
// to its raw floor measured in the same run: plain kernel UDP sockets
// (sendto/recvfrom, one datagram a call) for the udp and afpacket links, and
// a bare AF_XDP socket (afxdp.Raw: frames written once, moved as
// descriptors only) for the afxdp link. It needs root.
//
// Backends and floors are tables (backends and floors below); a new one is
// one entry.
//
// The machine's load decides much of a blast's result: the sender and the
// receiver spin on two threads, the kernel's softirq work for veth runs
// on whichever CPU is free, and when the receiver is starved the sender,
// batching, outruns it and the receive socket buffer overflows (the
// "loss" column; -v shows where the kernel dropped). So each backend runs
// in -r short rounds, each right after one of its floor's, and a ratio is
// the median of the rounds' ratios to the floor round before them; the
// same load, and the same placement of the virtual CPUs on the host, then
// weighs on both sides of a ratio.
package main

import (
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uroce/uroce/internal/netns"
	"github.com/uroce/uroce/internal/rawbench"
	"github.com/uroce/uroce/pkg/link"
	_ "github.com/uroce/uroce/pkg/link/afpacket"
	_ "github.com/uroce/uroce/pkg/link/afxdp"
	"github.com/uroce/uroce/pkg/link/linktest"
	_ "github.com/uroce/uroce/pkg/link/udp"
)

// backend opens a link on a veth end; it is called inside the end's
// namespace. floor names the raw baseline its ratios are taken against.
type backend struct {
	name  string
	floor string
	open  func(v netns.Veth, a netip.Addr) (link.Link, error)
}

// backends is the table of what is measured.
var backends = []backend{
	{"udp", "raw-udp", opener("udp", link.WaitSleep)},
	{"afpacket", "raw-udp", opener("afpacket", link.WaitSleep)},
	// The raw floor busy-polls; so does the afxdp link measured against
	// it. afxdp-poll is the default mode (Wait sleeps in poll), whose
	// Recv leaves the device's NAPI to softirq work.
	{"afxdp", "raw-xdp", opener("afxdp", link.WaitSpin)},
	{"afxdp-poll", "raw-xdp", opener("afxdp", link.WaitSleep)},
}

// opener opens the named backend (see link.Register) on a veth end.
func opener(name string, wait link.WaitMode) func(netns.Veth, netip.Addr) (link.Link, error) {
	return func(v netns.Veth, a netip.Addr) (link.Link, error) {
		return link.Open(name, link.Config{Interface: v.Name, Addr: a, Wait: wait})
	}
}

// floor measures a raw baseline for one size (package rawbench).
type floor struct {
	name  string
	bench func(cfg rawbench.Config, va, vb netns.Veth, a, b netip.Addr, size int) (rawbench.Result, error)
}

var floors = []floor{
	{"raw-udp", rawbench.UDP},
	{"raw-xdp", rawbench.XDP},
}

var (
	flagIters   = flag.Int("n", 3000, "ping-pong round trips per round")
	flagDur     = flag.Duration("d", 300*time.Millisecond, "blast duration per round")
	flagMTU     = flag.Int("mtu", 9000, "veth MTU")
	flagVerbose = flag.Bool("v", false, "print link counters after each blast")
	flagOnly    = flag.String("only", "", "measure only this backend (and its floor)")
	flagRounds  = flag.Int("r", 9, "rounds per backend and size, each after one of the floor's; medians are reported")
	flagSizes   = flag.String("sizes", "64,1024,4096", "payload sizes")
	flagCPUProf = flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
)

type result = rawbench.Result

// errNotRoot says why the tool stops at once without root, before it
// makes anything.
var errNotRoot = errors.New("needs root: it makes two network namespaces joined by a veth pair and opens AF_PACKET and AF_XDP sockets in them; run it with sudo")

// needRoot returns errNotRoot unless euid is root's.
func needRoot(euid int) error {
	if euid != 0 {
		return errNotRoot
	}
	return nil
}

// usage is -h's text: what the tool measures, that it needs root, and
// the flags.
func usage() {
	w := flag.CommandLine.Output()
	fmt.Fprint(w, `usage: sudo uroce-linkbench [flags]

Measures each link backend (udp, afpacket, afxdp) against its raw floor on
a veth pair between two network namespaces it makes and removes: ping-pong
latency and blast throughput per payload size. It needs root. About two
minutes with the defaults.

`)
	flag.PrintDefaults()
}

func main() {
	flag.Usage = usage
	flag.Parse()
	if err := needRoot(os.Geteuid()); err != nil {
		fmt.Fprintln(os.Stderr, "uroce-linkbench:", err)
		os.Exit(2)
	}
	if *flagCPUProf != "" {
		f, err := os.Create(*flagCPUProf)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "uroce-linkbench:", err)
			os.Exit(2)
		}
		defer pprof.StopCPUProfile()
	}
	if err := run(); err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "uroce-linkbench:", err)
		os.Exit(1)
	}
}

func run() error {
	var sizes []int
	for _, f := range strings.Split(*flagSizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			return fmt.Errorf("-sizes: %q", f)
		}
		sizes = append(sizes, n)
	}
	tag := fmt.Sprintf("ulb%d", os.Getpid()%100000)
	na, err := netns.Create(tag + "a")
	if err != nil {
		return err
	}
	defer na.Close()
	nb, err := netns.Create(tag + "b")
	if err != nil {
		return err
	}
	defer nb.Close()
	va, vb, err := netns.AddVeth(na, nb, tag+"va", tag+"vb", *flagMTU)
	if err != nil {
		return err
	}
	a, b := netip.MustParseAddr("10.77.0.1"), netip.MustParseAddr("10.77.0.2")
	if err := va.Assign(netip.PrefixFrom(a, 24)); err != nil {
		return err
	}
	if err := vb.Assign(netip.PrefixFrom(b, 24)); err != nil {
		return err
	}
	fmt.Printf("veth MTU %d; %d rounds per backend and size, each of %d round trips and a %v blast; GOMAXPROCS from %d CPUs\n\n", *flagMTU, *flagRounds, *flagIters, *flagDur, numCPU())

	fmt.Printf("%-9s %6s %9s %9s %9s %7s %11s %8s %6s %7s\n", "backend", "size", "rtt min", "rtt p50", "rtt p99", "p50/raw", "pkt/s", "Gbit/s", "loss", "tp/raw")
	print := func(name string, size int, r result, rtt, tp float64) {
		fmt.Printf("%-9s %6d %9s %9s %9s %7.2f %11.0f %8.3f %5.1f%% %7.2f\n", name, size, us(r.Min), us(r.P50), us(r.P99),
			rtt, r.PPS, r.Gbps, 100*r.Loss, tp)
	}
	rcfg := rawbench.Config{Iters: *flagIters, Blast: *flagDur}
	if *flagVerbose {
		rcfg.Log = os.Stdout
	}
	flo := map[string]floor{}
	for _, f := range floors {
		flo[f.name] = f
	}
	// Each backend is measured in rounds alternating with its floor, so
	// that the machine's load, which comes and goes, weighs on both
	// alike; the medians are compared.
	for _, be := range backends {
		if !wanted(be.name) {
			continue
		}
		f := flo[be.floor]
		for _, size := range sizes {
			var rb, rf []result
			var err error
			for range *flagRounds {
				var x result
				if x, err = f.bench(rcfg, va, vb, a, b, size); err != nil {
					err = fmt.Errorf("%s: %w", f.name, err)
					break
				}
				rf = append(rf, x)
				if x, err = linkBench(be, va, vb, a, b, size); err != nil {
					break
				}
				rb = append(rb, x)
			}
			if err != nil {
				fmt.Printf("%-9s %6d error: %v\n", be.name, size, err)
				continue
			}
			// Absolute figures are medians over the rounds; the
			// ratios are medians of each round's ratio to the floor's
			// round just before it (rawbench.Ratios says why).
			rtt, tp := rawbench.Ratios(rf, rb)
			print(f.name, size, rawbench.Median(rf), 1, 1)
			print(be.name, size, rawbench.Median(rb), rtt, tp)
		}
	}
	return nil
}

// wanted reports whether -only selects a backend.
func wanted(name string) bool { return *flagOnly == "" || *flagOnly == name }

func us(d time.Duration) string { return fmt.Sprintf("%.1fus", float64(d)/1e3) }

func openBoth(be backend, va, vb netns.Veth, a, b netip.Addr) (link.Link, link.Link, error) {
	var la, lb link.Link
	if err := va.NS.Do(func() (err error) { la, err = be.open(va, a); return }); err != nil {
		return nil, nil, err
	}
	if err := vb.NS.Do(func() (err error) { lb, err = be.open(vb, b); return }); err != nil {
		la.Close()
		return nil, nil, err
	}
	return la, lb, nil
}

// linkBench measures one backend: both ends use it.
func linkBench(be backend, va, vb netns.Veth, a, b netip.Addr, size int) (result, error) {
	la, lb, err := openBoth(be, va, vb, a, b)
	if err != nil {
		return result{}, err
	}
	defer la.Close()
	defer lb.Close()
	var r result
	if err := resolve(la, lb, b); err != nil {
		return r, err
	}
	if err := resolve(lb, la, a); err != nil {
		return r, err
	}

	// Ping-pong: B echoes every packet back; A busy-polls. Both loops
	// are as tight as the floor's (rawbench): a flag, not a channel, for
	// stopping, no Send of an empty batch, the clock read every 64th
	// empty poll; their period is the granularity with which an arrival
	// is noticed.
	var stopEcho atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		rx := make([]*link.Packet, 32)
		for !stopEcho.Load() {
			n, err := lb.Recv(rx)
			if err != nil {
				return
			}
			if n == 0 {
				continue
			}
			for _, p := range rx[:n] {
				p.Local = netip.Addr{} // Remote is the sender: echo to it
			}
			lb.Send(rx[:n])
		}
	})
	pk := make([]*link.Packet, 1)
	rx := make([]*link.Packet, 32)
	rtt := make([]time.Duration, 0, *flagIters)
	warm := 200
	for i := 0; i < *flagIters+warm; i++ {
		if la.Alloc(pk) != 1 {
			return r, fmt.Errorf("no buffers")
		}
		linktest.Fill(pk[0], uint32(i), size, b)
		start := time.Now()
		if _, err := la.Send(pk); err != nil {
			return r, err
		}
		got := false
		for k := 0; !got; k++ {
			n, err := la.Recv(rx)
			if err != nil {
				return r, err
			}
			got = n > 0
			la.Release(rx[:n])
			if !got && k&63 == 63 && time.Since(start) > time.Second {
				break // lost; count it as a timeout and go on
			}
		}
		if i >= warm && got {
			rtt = append(rtt, time.Since(start))
		}
	}
	stopEcho.Store(true)
	wg.Wait()
	if len(rtt) == 0 {
		return r, fmt.Errorf("no round trip completed")
	}
	r.Min, r.P50, r.P99 = rawbench.Percentiles(rtt)
	// Drain echoes still in flight.
	for n, _ := la.Recv(rx); n > 0; n, _ = la.Recv(rx) {
		la.Release(rx[:n])
	}

	// Blast A to B.
	var pkts, bytes atomic.Uint64
	var measuring atomic.Bool
	stop := make(chan struct{})
	wg.Go(func() {
		rx := make([]*link.Packet, 64)
		for {
			select {
			case <-stop:
				return
			default:
			}
			n, err := lb.Recv(rx)
			if err != nil {
				return
			}
			if measuring.Load() {
				var by uint64
				for _, p := range rx[:n] {
					by += uint64(p.Len)
				}
				pkts.Add(uint64(n))
				bytes.Add(by)
			}
			lb.Release(rx[:n])
		}
	})
	// Each packet is a copy of one made up front, as a transport copies
	// a payload from registered memory: linktest.Fill writes its payload
	// a byte at a time, which at 4 KiB costs more than the link.
	// Batches of 64, as the raw floor's blast queues them.
	tx := make([]*link.Packet, 64)
	if la.Alloc(tx[:1]) != 1 {
		return r, fmt.Errorf("no buffers")
	}
	linktest.Fill(tx[0], 0, size, b)
	proto := slices.Clone(tx[0].RoCE())
	la.Release(tx[:1])
	blast := func(d time.Duration) {
		for end := time.Now().Add(d); time.Now().Before(end); {
			n := la.Alloc(tx)
			for _, p := range tx[:n] {
				p.Len = copy(p.Buf[p.Off:], proto)
				p.Remote = b
			}
			la.Send(tx[:n])
		}
	}
	blast(*flagDur / 5)
	k0 := rawbench.ReadKStats(vb)
	tx0 := la.Stats().TxPackets
	measuring.Store(true)
	start := time.Now()
	blast(*flagDur)
	el := time.Since(start)
	measuring.Store(false)
	sent := la.Stats().TxPackets - tx0
	close(stop)
	wg.Wait()
	kd := rawbench.ReadKStats(vb).Sub(k0)
	r.PPS = float64(pkts.Load()) / el.Seconds()
	r.Gbps = float64(bytes.Load()) * 8 / el.Seconds() / 1e9
	r.Loss = rawbench.Loss(sent, pkts.Load())
	if *flagVerbose {
		fmt.Printf("    %s %d: sender %+v\n    receiver %+v\n    %v\n", be.name, size, la.Stats(), lb.Stats(), kd)
	}
	return r, nil
}

// resolve sends from x to y until a packet arrives, so the next hop is
// learnt (x drops with link.ErrResolving meanwhile) before anything is
// timed.
func resolve(x, y link.Link, dst netip.Addr) error {
	pk := make([]*link.Packet, 1)
	for start := time.Now(); time.Since(start) < 5*time.Second; {
		if x.Alloc(pk) != 1 {
			return fmt.Errorf("no buffers")
		}
		linktest.Fill(pk[0], 0, 0, dst)
		if _, err := x.Send(pk); err != nil && !errors.Is(err, link.ErrResolving) {
			return err
		}
		y.Wait(10 * time.Millisecond)
		if n, _ := y.Recv(pk); n > 0 {
			y.Release(pk[:n])
			return nil
		}
	}
	return fmt.Errorf("%v: next hop never resolved", dst)
}

func numCPU() int { return runtime.NumCPU() }
