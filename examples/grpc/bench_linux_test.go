package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/uroce/uroce/internal/netns"
	"github.com/uroce/uroce/internal/rawbench"
	"github.com/uroce/uroce/pkg/link"
	"github.com/uroce/uroce/pkg/link/afxdp"
	"github.com/uroce/uroce/pkg/link/udp"
	"github.com/uroce/uroce/pkg/rsocket"
	"github.com/uroce/uroce/verbs"
)

var (
	benchWait = flag.String("afxdp.wait", "busy", "AF_XDP wait mode of BenchmarkVeth: busy, hybrid or poll")
	benchOnly = flag.String("transport", "", "BenchmarkVeth: run only this transport (tcp, udp or afxdp)")
	// RoCE fabrics usually run jumbo frames: at 9000 the IB MTU is 4096
	// and a 64 KiB message is 16 packets, not 64 of 1024 bytes.
	benchMTU = flag.Int("veth.mtu", 1500, "BenchmarkVeth: the veth pair's MTU")
)

// Sizes of BenchmarkVeth's messages: gRPC's unary echo and the raw
// stream's ping-pong both run at each.
var benchSizes = []int{64, 4 << 10, 64 << 10}

// BenchmarkVeth compares gRPC, and a bare stream, over rsocket with the
// same over TCP, across a veth pair between two network namespaces (made
// by the benchmark, removed after). Transports:
//
//	tcp    the kernel's TCP
//	udp    rsocket on uroce's kernel UDP backend
//	afxdp  rsocket on uroce's AF_XDP backend (-afxdp.wait picks its wait)
//
// and for each, at 64 B, 4 KiB and 64 KiB:
//
//	grpc    a unary echo call (the example's service and codec)
//	stream  a Write and a full Read of the echo on the net.Conn
//
// The afxdp rows come after their floors on the same veth pair: bare
// AF_XDP frames, and an RC ping-pong's packets, with no stack around them
// (benchFloors). What the afxdp rows take above those is uroce's.
//
// Each row reports the round trip's p50, p99 and p99.9 and the process's
// CPU time (user and system, from getrusage) per 1 000 round trips; both
// ends run in this process, so that is the client's and the server's CPU
// together, engine goroutines and spinning waiters included. A
// transport's devices exist only while its rows run, so an idle device
// (or an attached XDP program) never weighs on another's. Root only;
// without it, it skips.
//
//	go test -run XXX -bench Veth -benchtime 5000x -count 3 .
//
// -veth.mtu sets the pair's MTU (1500 by default, so IB MTU 1024).
func BenchmarkVeth(b *testing.B) {
	netns.RequireRoot(b)
	wait, ok := map[string]afxdp.WaitMode{"busy": afxdp.WaitBusyPoll, "hybrid": afxdp.WaitHybrid, "poll": afxdp.WaitPoll}[*benchWait]
	if !ok {
		b.Fatalf("-afxdp.wait %q: want busy, hybrid or poll", *benchWait)
	}
	cliAddr, srvAddr := netip.MustParseAddr("10.204.0.1"), netip.MustParseAddr("10.204.0.2")
	p := netns.NewPair(b, netns.PairConfig{
		A:               []netip.Prefix{netip.PrefixFrom(cliAddr, 24)},
		B:               []netip.Prefix{netip.PrefixFrom(srvAddr, 24)},
		StaticNeighbors: true,
	})
	p.A.SetMTU(b, *benchMTU)
	p.B.SetMTU(b, *benchMTU)
	nc, ns := p.A.NS, p.B.NS
	xsk := func(v netns.Veth, addr netip.Addr) func() (*verbs.Device, error) {
		return func() (*verbs.Device, error) {
			l, err := afxdp.Open(afxdp.Config{Interface: v.Name, Addr: addr, Wait: wait})
			if err != nil {
				return nil, err
			}
			return verbs.Open(l), nil
		}
	}
	kernel := func(addr netip.Addr) func() (*verbs.Device, error) {
		return func() (*verbs.Device, error) {
			l, err := udp.Open(udp.Config{Addr: addr})
			if err != nil {
				return nil, err
			}
			return verbs.Open(l), nil
		}
	}
	for _, tr := range []struct {
		name     string
		cli, srv func() (*verbs.Device, error) // nil: TCP
	}{
		{"tcp", nil, nil},
		{"udp", kernel(cliAddr), kernel(srvAddr)},
		{"afxdp", xsk(p.A, cliAddr), xsk(p.B, srvAddr)},
	} {
		if *benchOnly != "" && *benchOnly != tr.name {
			continue
		}
		b.Run(tr.name, func(b *testing.B) {
			if tr.name == "afxdp" {
				benchFloors(b, p, cliAddr, srvAddr)
			}
			var e ends
			if tr.cli == nil {
				e = tcpEnds(nc, ns, srvAddr)
			} else {
				open := func(n *netns.NS, open func() (*verbs.Device, error)) *verbs.Device {
					var d *verbs.Device
					if err := n.Do(func() (err error) { d, err = open(); return err }); err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() { d.Close() })
					return d
				}
				e = rsocketEnds(open(nc, tr.cli), open(ns, tr.srv), srvAddr)
			}
			benchEnds(b, e)
		})
	}
}

// ends is one transport's way to listen (in the server's namespace) and
// dial (from the client's), on the server's address and a given port.
type ends struct {
	srv    netip.Addr
	listen func(port uint16) (net.Listener, error)
	dial   func(ctx context.Context, addr string) (net.Conn, error)
}

func tcpEnds(nc, ns *netns.NS, srv netip.Addr) ends {
	return ends{srv, func(port uint16) (ln net.Listener, err error) {
		err = ns.Do(func() error {
			ln, err = net.Listen("tcp", netip.AddrPortFrom(srv, port).String())
			return err
		})
		return ln, err
	}, func(ctx context.Context, addr string) (c net.Conn, err error) {
		// The socket belongs to the namespace it is made in.
		err = nc.Do(func() error {
			c, err = (&net.Dialer{}).DialContext(ctx, "tcp", addr)
			return err
		})
		return c, err
	}}
}

func rsocketEnds(cli, srv *verbs.Device, addr netip.Addr) ends {
	return ends{addr, func(port uint16) (net.Listener, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return rsocket.Listen(ctx, srv, fmt.Sprintf(":%d", port))
	}, dialer(cli)}
}

// benchEnds runs the gRPC rows and then the stream rows over one
// transport, each on a listener of its own.
func benchEnds(b *testing.B, e ends) {
	ctx := context.Background()
	gln, err := e.listen(7472)
	if err != nil {
		b.Fatal(err)
	}
	s := newServer()
	served := make(chan struct{})
	go func() { s.Serve(gln); close(served) }()
	cc, err := dial(netip.AddrPortFrom(e.srv, 7472).String(), e.dial)
	if err != nil {
		b.Fatal(err)
	}
	for _, size := range benchSizes {
		req := make([]byte, size)
		var resp []byte
		b.Run("grpc/"+byteSize(size), func(b *testing.B) {
			measure(b, func() error { return echo(ctx, cc, req, &resp) })
		})
	}
	cc.Close()
	s.Stop() // closes gln and the server's connections
	<-served

	sln, err := e.listen(7473)
	if err != nil {
		b.Fatal(err)
	}
	defer sln.Close()
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := sln.Accept()
		if err != nil {
			b.Error(err)
		}
		accepted <- c
	}()
	client, err := e.dial(dctx, netip.AddrPortFrom(e.srv, 7473).String())
	if err != nil {
		b.Fatal(err)
	}
	defer client.Close()
	server := <-accepted
	if server == nil {
		b.FailNow()
	}
	defer server.Close()
	go func() {
		buf := make([]byte, benchSizes[len(benchSizes)-1])
		for {
			n, err := server.Read(buf)
			if err != nil {
				return
			}
			if _, err := server.Write(buf[:n]); err != nil {
				return
			}
		}
	}()
	for _, size := range benchSizes {
		buf := make([]byte, size)
		b.Run("stream/"+byteSize(size), func(b *testing.B) {
			measure(b, func() error {
				if _, err := client.Write(buf); err != nil {
					return err
				}
				_, err := io.ReadFull(client, buf)
				return err
			})
		})
	}
}

// benchFloors runs the afxdp rows' floors, both ends asleep in the
// runtime's poller between frames as started afxdp devices are with
// -afxdp.wait poll (busy-polled otherwise: rawbench.Config.Poller):
//
//	floor     a bare AF_XDP frame with a 64-byte payload each way, moved
//	          as a descriptor: what the wire alone costs
//	rc-floor  an RC ping-pong's packets (a WRITE of the size in IB-MTU
//	          packets and an ACK each way, the ACK held for the next
//	          WRITE's transmit as a stream's QP holds it), each
//	          ICRC-computed when sent and verified when received
//	          (rawbench.XDPRC): what an RC stream cannot avoid on these
//	          sockets
func benchFloors(b *testing.B, p *netns.Pair, a, z netip.Addr) {
	poll := *benchWait == "poll"
	b.Run("floor/64B", func(b *testing.B) {
		frame, err := rawbench.Frame(p.A, p.B, a, z, 64)
		if err != nil {
			b.Fatal(err)
		}
		ra, rb, err := rawbench.OpenXDPPair(rawbench.Config{Poller: poll}, p.A, p.B)
		if err != nil {
			b.Fatal(err)
		}
		defer ra.Close()
		defer rb.Close()
		if err := ra.SetFrame(frame); err != nil {
			b.Fatal(err)
		}
		var stop atomic.Bool
		echoed := make(chan error, 1)
		go func() {
			_, err := rb.Echo(&stop)
			echoed <- err
		}()
		one := make([]time.Duration, 1)
		measure(b, func() error { return ra.PingPong(one) })
		stop.Store(true)
		if err := <-echoed; err != nil {
			b.Fatal(err)
		}
	})
	pmtu := verbs.PathMTU(link.Info{MTU: *benchMTU, Addr: a}) // the devices' (MaxPathMTU)
	for _, size := range benchSizes {
		b.Run("rc-floor/"+byteSize(size), func(b *testing.B) {
			r, err := rawbench.XDPRC(rawbench.Config{Iters: b.N, Poller: poll, HoldACK: true}, p.A, p.B, a, z, size, pmtu)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(r.P50)/float64(time.Microsecond), "p50-µs")
			b.ReportMetric(float64(r.P99)/float64(time.Microsecond), "p99-µs")
		})
	}
}

// measure times b.N round trips after a warm-up and reports the
// latency's percentiles and the process's CPU time per 1 000.
func measure(b *testing.B, roundTrip func() error) {
	for range 200 {
		if err := roundTrip(); err != nil {
			b.Fatal(err)
		}
	}
	rtts := make([]time.Duration, b.N)
	b.ReportAllocs()
	cpu0 := cpuTime(b)
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		if err := roundTrip(); err != nil {
			b.Fatal(err)
		}
		rtts[i] = time.Since(start)
	}
	b.StopTimer()
	cpu := cpuTime(b) - cpu0
	slices.Sort(rtts)
	at := func(q float64) float64 {
		return float64(rtts[min(len(rtts)-1, int(q*float64(len(rtts))))]) / float64(time.Microsecond)
	}
	b.ReportMetric(at(0.50), "p50-µs")
	b.ReportMetric(at(0.99), "p99-µs")
	b.ReportMetric(at(0.999), "p99.9-µs")
	b.ReportMetric(cpu.Seconds()*1000/float64(b.N), "cpu-s/1k")
}

// cpuTime is the process's user and system time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func byteSize(n int) string {
	switch {
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	default:
		return fmt.Sprintf("%dB", n)
	}
}
