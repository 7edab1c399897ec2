package main

import (
	"net"
	"net/netip"
	"testing"

	"github.com/uroce/uroce/internal/netns"
	"github.com/uroce/uroce/pkg/link/afxdp"
	"github.com/uroce/uroce/verbs"
)

// BenchmarkRoundTripAFXDP is BenchmarkRoundTrip with the AF_XDP backend:
// client and server each in a network namespace of its own, joined by a
// veth pair, uroce on AF_XDP sockets (busy-polling, as for latency) and
// the TCP echo over the same veth, so both cross the same link. Root only;
// without it, it skips.
//
//	go test -run XXX -bench RoundTripAFXDP -benchtime 5000x ./examples/rpc
func BenchmarkRoundTripAFXDP(b *testing.B) {
	netns.RequireRoot(b)
	nc, ns := netns.New(b), netns.New(b)
	vc, vs := netns.NewVeth(b, nc, ns)
	cliAddr, srvAddr := netip.MustParseAddr("10.203.0.1"), netip.MustParseAddr("10.203.0.2")
	vc.AddAddr(b, netip.PrefixFrom(cliAddr, 24))
	vs.AddAddr(b, netip.PrefixFrom(srvAddr, 24))
	open := func(n *netns.NS, ifname string, addr netip.Addr) *verbs.Device {
		var d *verbs.Device
		if err := n.Do(func() error {
			l, err := afxdp.Open(afxdp.Config{Interface: ifname, Addr: addr, Wait: afxdp.WaitBusyPoll})
			if err != nil {
				return err
			}
			d = verbs.Open(l)
			return nil
		}); err != nil {
			b.Fatalf("afxdp on %s: %v", ifname, err)
		}
		b.Cleanup(func() { d.Close() })
		return d
	}
	dc, ds := open(nc, vc.Name, cliAddr), open(ns, vs.Name, srvAddr)
	var ln net.Listener
	if err := ns.Do(func() (err error) {
		ln, err = net.Listen("tcp", netip.AddrPortFrom(srvAddr, 0).String())
		return err
	}); err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	roundTrips(b, dc, ds, ln, func(addr string) (tc *tcpClient, err error) {
		// The connection belongs to the client's namespace.
		err = nc.Do(func() error { tc, err = dialTCP(addr); return err })
		return tc, err
	})
}
