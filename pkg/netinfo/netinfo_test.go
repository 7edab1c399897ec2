package netinfo_test

import (
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/uroce/uroce/internal/netns"
	"github.com/uroce/uroce/pkg/link"
	"github.com/uroce/uroce/pkg/netinfo"
	"github.com/vishvananda/netlink"
)

func TestLinkLocal(t *testing.T) {
	got := netinfo.LinkLocal([6]byte{0x52, 0x54, 0x00, 0x12, 0x34, 0x56})
	want := netip.MustParseAddr("fe80::5054:ff:fe12:3456")
	if got != want {
		t.Fatalf("LinkLocal = %v, want %v", got, want)
	}
	if g := netinfo.GIDOf(netip.MustParseAddr("10.0.0.1")); g.String() != "::ffff:10.0.0.1" {
		t.Fatalf("GIDOf = %v", g)
	}
}

func newResolver(t *testing.T, ns *netns.NS, opt netinfo.Options) *netinfo.Resolver {
	t.Helper()
	h := ns.Handle()
	opt.NetNS = &h
	r, err := netinfo.New(opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func TestLookup(t *testing.T) {
	p := netns.NewPair(t, netns.PairConfig{})
	// A network behind B, to test the gateway path.
	for _, s := range []string{"10.98.0.0/24 via 10.99.0.2", "fd00:98::/64 via fd00:99::2"} {
		var dst, gw string
		for i, f := range splitVia(s) {
			if i == 0 {
				dst = f
			} else {
				gw = f
			}
		}
		pfx := netip.MustParsePrefix(dst)
		if err := p.A.NS.Netlink().RouteAdd(&netlink.Route{
			Dst: &net.IPNet{IP: pfx.Addr().AsSlice(), Mask: net.CIDRMask(pfx.Bits(), pfx.Addr().BitLen())},
			Gw:  netip.MustParseAddr(gw).AsSlice(),
		}); err != nil {
			t.Fatal(err)
		}
	}
	r := newResolver(t, p.A.NS, netinfo.Options{Timeout: 2 * time.Second})
	tests := []struct {
		dst, src, gw string
	}{
		{"10.99.0.2", "10.99.0.1", ""},
		{"fd00:99::2", "fd00:99::1", ""},
		{"10.98.0.7", "10.99.0.1", "10.99.0.2"},
		{"fd00:98::7", "fd00:99::1", "fd00:99::2"},
	}
	for _, tc := range tests {
		t.Run(tc.dst, func(t *testing.T) {
			rt, err := r.Lookup(netip.MustParseAddr(tc.dst))
			if err != nil {
				t.Fatal(err)
			}
			if rt.Ifindex != p.A.Index || rt.Ifname != p.A.Name {
				t.Errorf("interface %d %s, want %d %s", rt.Ifindex, rt.Ifname, p.A.Index, p.A.Name)
			}
			if rt.Src.String() != tc.src {
				t.Errorf("src %v, want %s", rt.Src, tc.src)
			}
			if tc.gw != "" && rt.Gateway.String() != tc.gw {
				t.Errorf("gateway %v, want %s", rt.Gateway, tc.gw)
			}
			if rt.DstMAC != [6]byte(p.B.MAC) || rt.SrcMAC != [6]byte(p.A.MAC) {
				t.Errorf("MACs %x -> %x, want %x -> %x", rt.SrcMAC, rt.DstMAC, p.A.MAC, p.B.MAC)
			}
			if rt.MTU != 1500 {
				t.Errorf("MTU %d", rt.MTU)
			}
			if _, ok := r.Cached(netip.MustParseAddr(tc.dst), time.Now()); !ok {
				t.Errorf("not cached")
			}
		})
	}
}

func splitVia(s string) []string {
	var out []string
	for _, f := range []rune(s) {
		_ = f
	}
	var cur []byte
	for i := 0; i < len(s); i++ {
		if s[i] == ' ' {
			if string(cur) != "via" && len(cur) > 0 {
				out = append(out, string(cur))
			}
			cur = cur[:0]
			continue
		}
		cur = append(cur, s[i])
	}
	return append(out, string(cur))
}

func TestUnresolved(t *testing.T) {
	p := netns.NewPair(t, netns.PairConfig{})
	r := newResolver(t, p.A.NS, netinfo.Options{Timeout: 300 * time.Millisecond})
	_, err := r.Lookup(netip.MustParseAddr("10.99.0.77")) // on-link, nobody home
	if !errors.Is(err, netinfo.ErrUnresolved) || !errors.Is(err, link.ErrNoRoute) {
		t.Fatalf("err = %v, want ErrUnresolved", err)
	}
	_, err = r.Lookup(netip.MustParseAddr("192.0.2.1")) // no default route in the namespace
	if !errors.Is(err, netinfo.ErrNoRoute) {
		t.Fatalf("err = %v, want ErrNoRoute", err)
	}
}

func TestRefreshOnChange(t *testing.T) {
	p := netns.NewPair(t, netns.PairConfig{})
	r := newResolver(t, p.A.NS, netinfo.Options{TTL: time.Hour})
	dst := netip.MustParseAddr("10.99.0.2")
	rt, err := r.Lookup(dst)
	if err != nil {
		t.Fatal(err)
	}
	newMAC := net.HardwareAddr{0x02, 0, 0, 0xaa, 0xbb, 0xcc}
	l, _ := p.A.NS.Netlink().LinkByIndex(p.A.Index)
	// Replacing the neighbour entry is what a peer changing its MAC looks
	// like from here: the netlink notification must empty the cache.
	if err := p.A.NS.Netlink().NeighSet(&netlink.Neigh{LinkIndex: l.Attrs().Index, Family: netlink.FAMILY_V4,
		State: netlink.NUD_PERMANENT, IP: dst.AsSlice(), HardwareAddr: newMAC}); err != nil {
		t.Fatal(err)
	}
	for start := time.Now(); ; time.Sleep(time.Millisecond) {
		got, err := r.Lookup(dst)
		if err != nil {
			t.Fatal(err)
		}
		if got.DstMAC == [6]byte(newMAC) {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("MAC still %x (was %x)", got.DstMAC, rt.DstMAC)
		}
	}
}

func TestGIDTable(t *testing.T) {
	p := netns.NewPair(t, netns.PairConfig{})
	r := newResolver(t, p.A.NS, netinfo.Options{NoSubscribe: true})
	gids, err := r.GIDTable(p.A.Index)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		netinfo.LinkLocal([6]byte(p.A.MAC)).String(),
		"::ffff:10.99.0.1",
		"fd00:99::1",
	}
	if len(gids) != len(want) {
		t.Fatalf("got %d GIDs %v, want %v", len(gids), gids, want)
	}
	for i, g := range gids {
		if g.Index != i || g.GID.String() != want[i] || g.Type != "RoCE v2" || g.Netdev != p.A.Name {
			t.Errorf("GID %d = %+v, want %s", i, g, want[i])
		}
	}
	all, err := r.GIDs()
	if err != nil || len(all) < len(gids) {
		t.Fatalf("GIDs = %v, %v", all, err)
	}
}

// TestResolve: Resolve never waits. A new destination answers ErrPending
// while the lookup runs in the background, then the route; an answer past
// its TTL keeps being served while it is refreshed; a neighbour that never
// answers turns into ErrUnresolved.
func TestResolve(t *testing.T) {
	p := netns.NewPair(t, netns.PairConfig{})
	_, b := p.Addr(4)
	// A TTL so short that every answer is stale by the next call, and
	// all the patience a loaded machine may need to answer ARP.
	r := newResolver(t, p.A.NS, netinfo.Options{TTL: time.Nanosecond, Timeout: time.Minute})
	rt, err := r.Resolve(b, time.Now())
	if !errors.Is(err, netinfo.ErrPending) || !errors.Is(err, link.ErrResolving) {
		t.Fatalf("first Resolve: %v, want ErrPending", err)
	}
	for errors.Is(err, netinfo.ErrPending) {
		time.Sleep(time.Millisecond)
		rt, err = r.Resolve(b, time.Now())
	}
	if err != nil || rt.DstMAC != [6]byte(p.B.MAC) {
		t.Fatalf("Resolve: %+v, %v; want B's MAC %v", rt, err, p.B.MAC)
	}
	for range 100 {
		if rt, err := r.Resolve(b, time.Now()); err != nil || rt.DstMAC != [6]byte(p.B.MAC) {
			t.Fatalf("stale answer not served while refreshing: %+v, %v", rt, err)
		}
	}
	// Nobody holds this address: however long the wait, it fails.
	r = newResolver(t, p.A.NS, netinfo.Options{FailTTL: time.Hour, Timeout: 300 * time.Millisecond})
	ghost := b.Next()
	for err = netinfo.ErrPending; errors.Is(err, netinfo.ErrPending); _, err = r.Resolve(ghost, time.Now()) {
		time.Sleep(time.Millisecond)
	}
	if !errors.Is(err, netinfo.ErrUnresolved) {
		t.Fatalf("silent neighbour: %v, want ErrUnresolved", err)
	}
	if _, err := r.Resolve(ghost, time.Now()); !errors.Is(err, netinfo.ErrUnresolved) {
		t.Fatalf("failure not remembered: %v", err)
	}
}

// TestNext checks the per-sender cache in front of Resolve: it answers
// what Resolve does, and gives up its answer when the kernel announces a
// change, or, with notifications off, once the TTL has gone by.
func TestNext(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  netinfo.Options
	}{
		{"notified", netinfo.Options{TTL: time.Hour}},
		{"ttl", netinfo.Options{TTL: 20 * time.Millisecond, NoSubscribe: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := netns.NewPair(t, netns.PairConfig{})
			_, b := p.Addr(4)
			r := newResolver(t, p.A.NS, tc.opt)
			var h netinfo.Hop
			next := func(want [6]byte) {
				t.Helper()
				for start := time.Now(); ; time.Sleep(time.Millisecond) {
					rt, err := r.Next(&h, b)
					if err != nil && !errors.Is(err, link.ErrResolving) {
						t.Fatal(err)
					}
					if err == nil && rt.DstMAC == want {
						return
					}
					if time.Since(start) > 10*time.Second {
						t.Fatalf("Next: %+v, %v; want MAC %x", rt, err, want)
					}
				}
			}
			next([6]byte(p.B.MAC))
			// The IPv4-mapped form is the same destination.
			if rt, err := r.Next(&h, netip.AddrFrom16(b.As16())); err != nil || rt.DstMAC != [6]byte(p.B.MAC) {
				t.Fatalf("mapped destination: %+v, %v", rt, err)
			}
			if n := testing.AllocsPerRun(100, func() { r.Next(&h, b) }); n != 0 {
				t.Fatalf("Next allocates %v times per call", n)
			}
			newMAC := net.HardwareAddr{0x02, 0, 0, 0xaa, 0xbb, 0xcc}
			if err := p.A.NS.Netlink().NeighSet(&netlink.Neigh{LinkIndex: p.A.Index, Family: netlink.FAMILY_V4,
				State: netlink.NUD_PERMANENT, IP: b.AsSlice(), HardwareAddr: newMAC}); err != nil {
				t.Fatal(err)
			}
			next([6]byte(newMAC))
		})
	}
}

// BenchmarkNext compares a link's per-packet next-hop question answered by
// Resolve (a clock read, a lock and a map lookup) and by Next in front of
// it (one atomic load on a hit).
func BenchmarkNext(b *testing.B) {
	p := netns.NewPair(b, netns.PairConfig{})
	_, dst := p.Addr(4)
	h := p.A.NS.Handle()
	r, err := netinfo.New(netinfo.Options{NetNS: &h})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Lookup(dst); err != nil {
		b.Fatal(err)
	}
	b.Run("Resolve", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := r.Resolve(dst, time.Now()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Next", func(b *testing.B) {
		b.ReportAllocs()
		var hop netinfo.Hop
		for b.Loop() {
			if _, err := r.Next(&hop, dst); err != nil {
				b.Fatal(err)
			}
		}
	})
}
