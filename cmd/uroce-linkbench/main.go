// Command uroce-linkbench measures the link backends against plain kernel
// UDP on a veth pair between two namespaces it makes (and removes): for
// each backend and payload size, the round-trip latency of a busy-polled
// ping-pong (min, median, p99) and the one-way throughput of a blast
// (received packets/s and Gbit/s of RoCE bytes), with each result's ratio
// to the raw baseline measured in the same run. It needs root.
//
// Backends are a table (backends below); a new one is one entry.
package main

import (
	"flag"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uroce/uroce/internal/netns"
	"github.com/uroce/uroce/pkg/link"
	"github.com/uroce/uroce/pkg/link/afpacket"
	"github.com/uroce/uroce/pkg/link/linktest"
	"github.com/uroce/uroce/pkg/link/udp"
)

// backend opens a link on a veth end; it is called inside the end's
// namespace.
type backend struct {
	name string
	open func(v netns.Veth, a netip.Addr) (link.Link, error)
}

// backends is the table of what is measured. The afxdp backend adds itself
// here with one entry.
var backends = []backend{
	{"udp", func(v netns.Veth, a netip.Addr) (link.Link, error) { return udp.Open(udp.Config{Addr: a}) }},
	{"afpacket", func(v netns.Veth, a netip.Addr) (link.Link, error) {
		return afpacket.Open(afpacket.Config{Ifname: v.Name, Addr: a})
	}},
}

var (
	flagIters   = flag.Int("n", 5000, "ping-pong round trips per size")
	flagDur     = flag.Duration("d", time.Second, "blast duration per size")
	flagMTU     = flag.Int("mtu", 9000, "veth MTU")
	flagVerbose = flag.Bool("v", false, "print link counters after each blast")
	flagOnly    = flag.String("only", "", "measure only this backend (and the baseline)")
)

var sizes = []int{64, 1024, 4096}

type result struct {
	min, p50, p99 time.Duration
	pps, gbps     float64
}

func main() {
	flag.Parse()
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "uroce-linkbench: needs root (namespaces, veth, AF_PACKET)")
		os.Exit(2)
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "uroce-linkbench:", err)
		os.Exit(1)
	}
}

func run() error {
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
	fmt.Printf("veth MTU %d, %d round trips, %v blast per size, GOMAXPROCS from %d CPUs\n\n", *flagMTU, *flagIters, *flagDur, numCPU())

	base := map[int]result{}
	for _, size := range sizes {
		r, err := rawBench(va, vb, a, b, size)
		if err != nil {
			return fmt.Errorf("baseline: %w", err)
		}
		base[size] = r
	}
	fmt.Printf("%-9s %6s %9s %9s %9s %7s %11s %8s %7s\n", "backend", "size", "rtt min", "rtt p50", "rtt p99", "p50/raw", "pkt/s", "Gbit/s", "tp/raw")
	print := func(name string, size int, r result) {
		bs := base[size]
		fmt.Printf("%-9s %6d %9s %9s %9s %7.2f %11.0f %8.3f %7.2f\n", name, size, us(r.min), us(r.p50), us(r.p99),
			float64(r.p50)/float64(bs.p50), r.pps, r.gbps, r.pps/bs.pps)
	}
	for _, size := range sizes {
		print("raw-udp", size, base[size])
	}
	for _, be := range backends {
		if *flagOnly != "" && be.name != *flagOnly {
			continue
		}
		for _, size := range sizes {
			r, err := linkBench(be, va, vb, a, b, size)
			if err != nil {
				fmt.Printf("%-9s %6d error: %v\n", be.name, size, err)
				continue
			}
			print(be.name, size, r)
		}
	}
	return nil
}

func us(d time.Duration) string { return fmt.Sprintf("%.1fus", float64(d)/1e3) }

func percentiles(rtt []time.Duration) (time.Duration, time.Duration, time.Duration) {
	slices.Sort(rtt)
	return rtt[0], rtt[len(rtt)/2], rtt[len(rtt)*99/100]
}

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

	// Ping-pong: B echoes every packet back; A busy-polls.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		rx := make([]*link.Packet, 32)
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
		for !got {
			n, err := la.Recv(rx)
			if err != nil {
				return r, err
			}
			got = n > 0
			la.Release(rx[:n])
			if !got && time.Since(start) > time.Second {
				break // lost; count it as a timeout and go on
			}
		}
		if i >= warm && got {
			rtt = append(rtt, time.Since(start))
		}
	}
	close(stop)
	wg.Wait()
	if len(rtt) == 0 {
		return r, fmt.Errorf("no round trip completed")
	}
	r.min, r.p50, r.p99 = percentiles(rtt)
	// Drain echoes still in flight.
	for n, _ := la.Recv(rx); n > 0; n, _ = la.Recv(rx) {
		la.Release(rx[:n])
	}

	// Blast A to B.
	var pkts, bytes atomic.Uint64
	var measuring atomic.Bool
	stop = make(chan struct{})
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
	tx := make([]*link.Packet, 32)
	blast := func(d time.Duration) {
		for end := time.Now().Add(d); time.Now().Before(end); {
			n := la.Alloc(tx)
			for i, p := range tx[:n] {
				linktest.Fill(p, uint32(i), size, b)
			}
			la.Send(tx[:n])
		}
	}
	blast(*flagDur / 5)
	measuring.Store(true)
	start := time.Now()
	blast(*flagDur)
	el := time.Since(start)
	measuring.Store(false)
	close(stop)
	wg.Wait()
	r.pps = float64(pkts.Load()) / el.Seconds()
	r.gbps = float64(bytes.Load()) * 8 / el.Seconds() / 1e9
	if *flagVerbose {
		fmt.Printf("    %s %d: sender %+v\n    receiver %+v\n", be.name, size, la.Stats(), lb.Stats())
	}
	return r, nil
}

func numCPU() int { return runtimeNumCPU() }
