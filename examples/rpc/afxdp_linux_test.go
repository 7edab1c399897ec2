package main

import (
	"flag"
	"net"
	"net/netip"
	"testing"

	"github.com/uroce/uroce/internal/netns"
	"github.com/uroce/uroce/pkg/link/afxdp"
	"github.com/uroce/uroce/pkg/link/udp"
	"github.com/uroce/uroce/verbs"
)

var (
	afxdpWait = flag.String("afxdp.wait", "busy", "AF_XDP wait mode of BenchmarkRoundTripAFXDP: busy, hybrid or poll")
	afxdpSpin = flag.Duration("afxdp.spin", 0, "WaitHybrid's spin (0: the link's default)")
	afxdpBusy = flag.Duration("afxdp.busypoll", 0, "SO_BUSY_POLL time (0: the link's default, negative: off)")
)

// BenchmarkRoundTripAFXDP is BenchmarkRoundTrip over a veth pair between
// two network namespaces (made by the benchmark, removed after): uroce on
// AF_XDP sockets, uroce on the kernel UDP backend and the TCP echo, all
// over the same veth in the same run (the verbs floor's devices on a
// second veth and port). -afxdp.wait picks the AF_XDP sockets' wait mode:
// busy (the default, as for latency: every waiter spins) or poll (every
// waiter sleeps in poll(2)), which keeps its tail on a machine with fewer
// free cores than spinners; README.md has both measured. Root only; without it, it skips.
//
//	go test -run XXX -bench RoundTripAFXDP -benchtime 5000x ./examples/rpc
func BenchmarkRoundTripAFXDP(b *testing.B) {
	netns.RequireRoot(b)
	wait, ok := map[string]afxdp.WaitMode{"busy": afxdp.WaitBusyPoll, "hybrid": afxdp.WaitHybrid, "poll": afxdp.WaitPoll}[*afxdpWait]
	if !ok {
		b.Fatalf("-afxdp.wait %q: want busy, hybrid or poll", *afxdpWait)
	}
	nc, ns := netns.New(b), netns.New(b)
	vc, vs := netns.NewVeth(b, nc, ns)
	cliAddr, srvAddr := netip.MustParseAddr("10.203.0.1"), netip.MustParseAddr("10.203.0.2")
	vc.AddAddr(b, netip.PrefixFrom(cliAddr, 24))
	vs.AddAddr(b, netip.PrefixFrom(srvAddr, 24))
	// A second veth for the verbs floor's AF_XDP devices (one XDP
	// program and socket set per interface).
	fvc, fvs := netns.NewVeth(b, nc, ns)
	fcAddr, fsAddr := netip.MustParseAddr("10.203.1.1"), netip.MustParseAddr("10.203.1.2")
	fvc.AddAddr(b, netip.PrefixFrom(fcAddr, 24))
	fvs.AddAddr(b, netip.PrefixFrom(fsAddr, 24))
	open := func(n *netns.NS, name string, open func() (*verbs.Device, error)) *verbs.Device {
		var d *verbs.Device
		if err := n.Do(func() (err error) { d, err = open(); return err }); err != nil {
			b.Fatalf("%s: %v", name, err)
		}
		b.Cleanup(func() { d.Close() })
		return d
	}
	xsk := func(ifname string, addr netip.Addr) func() (*verbs.Device, error) {
		return func() (*verbs.Device, error) {
			l, err := afxdp.Open(afxdp.Config{Interface: ifname, Addr: addr, Wait: wait, Spin: *afxdpSpin, BusyPoll: *afxdpBusy})
			if err != nil {
				return nil, err
			}
			return verbs.Open(l, verbs.Inline()), nil
		}
	}
	// The UDP backend on another port than RoCEv2's, which the XDP
	// program steers to the AF_XDP sockets.
	kernel := func(addr netip.Addr, port uint16) func() (*verbs.Device, error) {
		return func() (*verbs.Device, error) {
			l, err := udp.Open(udp.Config{Addr: addr, Port: port})
			if err != nil {
				return nil, err
			}
			return verbs.Open(l, verbs.Inline()), nil
		}
	}
	pairs := []devices{
		{"uroce-udp", open(nc, "udp client", kernel(cliAddr, 4792)), open(ns, "udp server", kernel(srvAddr, 4792)),
			open(nc, "udp floor client", kernel(cliAddr, 4793)), open(ns, "udp floor server", kernel(srvAddr, 4793))},
		{"uroce-afxdp", open(nc, "afxdp client", xsk(vc.Name, cliAddr)), open(ns, "afxdp server", xsk(vs.Name, srvAddr)),
			open(nc, "afxdp floor client", xsk(fvc.Name, fcAddr)), open(ns, "afxdp floor server", xsk(fvs.Name, fsAddr))},
	}
	var ln net.Listener
	if err := ns.Do(func() (err error) {
		ln, err = net.Listen("tcp", netip.AddrPortFrom(srvAddr, 0).String())
		return err
	}); err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	roundTrips(b, pairs, ln, func(addr string) (tc *tcpClient, err error) {
		// The connection belongs to the client's namespace.
		err = nc.Do(func() error { tc, err = dialTCP(addr); return err })
		return tc, err
	})
}
