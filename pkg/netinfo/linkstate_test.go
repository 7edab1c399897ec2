package netinfo_test

import (
	"errors"
	"net/netip"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/uroce/uroce/internal/netns"
	"github.com/uroce/uroce/pkg/netinfo"
	"github.com/vishvananda/netlink"
)

// watchGoroutines counts the goroutines a LinkWatch runs: its own and the
// netlink subscription's.
func watchGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "netinfo.(*LinkWatch).run") || strings.Contains(g, "netlink.linkSubscribeAt") {
			count++
		}
	}
	return count
}

// waitGoroutines waits until watchGoroutines is n; a goroutine that has
// closed its channel may still be on its way out.
func waitGoroutines(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for watchGoroutines() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d watch goroutines, want %d", watchGoroutines(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// setLink sets one end of the pair up or down from its own namespace.
func setLink(t *testing.T, v netns.Veth, up bool) {
	t.Helper()
	nl := v.NS.Netlink()
	l, err := nl.LinkByIndex(v.Index)
	if err != nil {
		t.Fatal(err)
	}
	if up {
		err = nl.LinkSetUp(l)
	} else {
		err = nl.LinkSetDown(l)
	}
	if err != nil {
		t.Fatalf("set %s up=%v: %v", v.Name, up, err)
	}
}

// TestWatchLink: a watch on one veth end sees it go down when its peer
// goes down (carrier lost) and when it is set down itself, up again each
// time, and down for good when deleted: one OnChange per change of state,
// in order, whatever else the kernel announces. Close ends its goroutines.
func TestWatchLink(t *testing.T) {
	p := netns.NewPair(t, netns.PairConfig{})
	base := watchGoroutines()
	changes := make(chan bool, 64)
	h := p.A.NS.Handle()
	w, err := netinfo.WatchLink(netinfo.WatchOptions{NetNS: &h, Name: p.A.Name, OnChange: func(up bool) { changes <- up }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	if !w.Up() {
		t.Fatal("a veth end with its peer up is not up")
	}
	if got := w.Interface(); got.Index != p.A.Index || got.Name != p.A.Name || got.Loopback {
		t.Fatalf("interface %+v, want %d %s", got, p.A.Index, p.A.Name)
	}
	if n := watchGoroutines(); n <= base {
		t.Fatalf("%d watch goroutines with a watch open, %d before", n, base)
	}
	// change says whether the step changes the state; up is the state
	// after it.
	steps := []struct {
		name       string
		end        netns.Veth
		setUp      bool
		change, up bool
	}{
		{"peer down", p.B, false, true, false},
		{"peer up", p.B, true, true, true},
		{"own down", p.A, false, true, false},
		{"own up", p.A, true, true, true},
		// Down twice over, the carrier with the peer and then the
		// interface itself, and up in two steps: one change each way.
		{"peer down again", p.B, false, true, false},
		{"own down too", p.A, false, false, false},
		{"peer up, own still down", p.B, true, false, false},
		{"own up again", p.A, true, true, true},
	}
	for _, s := range steps {
		setLink(t, s.end, s.setUp)
		if !s.change {
			// A change here would come out before the next step's.
			continue
		}
		select {
		case got := <-changes:
			if got != s.up {
				t.Fatalf("%s: OnChange(%v), want %v", s.name, got, s.up)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no OnChange", s.name)
		}
		if w.Up() != s.up {
			t.Fatalf("%s: Up() = %v", s.name, w.Up())
		}
	}
	// Deleting the interface is going down.
	l, err := p.A.NS.Netlink().LinkByIndex(p.A.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.A.NS.Netlink().LinkDel(l); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-changes:
		if got {
			t.Fatal("deleted: OnChange(true)")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("deleted: no OnChange")
	}
	w.Close()
	if len(changes) != 0 {
		t.Fatalf("%d changes more than the state changes made", len(changes))
	}
	waitGoroutines(t, base)
	w.Close() // again: no-op
}

// TestWatchLinkErrors: a missing interface is ErrNoInterface and leaves no
// goroutine behind.
func TestWatchLinkErrors(t *testing.T) {
	ns := netns.New(t)
	base := watchGoroutines()
	h := ns.Handle()
	for _, o := range []netinfo.WatchOptions{{NetNS: &h, Name: "nosuchif0"}, {NetNS: &h, Index: 9999}} {
		if _, err := netinfo.WatchLink(o); !errors.Is(err, netinfo.ErrNoInterface) {
			t.Errorf("WatchLink(%q, %d) = %v, want ErrNoInterface", o.Name, o.Index, err)
		}
	}
	waitGoroutines(t, base)
}

func TestInterfaceByAddr(t *testing.T) {
	p := netns.NewPair(t, netns.PairConfig{})
	h := p.A.NS.Handle()
	a4, _ := p.Addr(4)
	a6, _ := p.Addr(6)
	tests := []struct {
		addr     netip.Addr
		name     string
		loopback bool
		err      error
	}{
		{a4, p.A.Name, false, nil},
		{netip.AddrFrom16(a4.As16()), p.A.Name, false, nil}, // IPv4-mapped
		{a6, p.A.Name, false, nil},
		{netip.MustParseAddr("127.0.0.1"), "lo", true, nil},
		{netip.MustParseAddr("::1"), "lo", true, nil},
		{netip.MustParseAddr("10.99.0.2"), "", false, netinfo.ErrNoInterface}, // B's, in the other namespace
	}
	for _, tc := range tests {
		got, err := netinfo.InterfaceByAddr(&h, tc.addr)
		if tc.err != nil {
			if !errors.Is(err, tc.err) {
				t.Errorf("%v: %+v, %v; want %v", tc.addr, got, err, tc.err)
			}
			continue
		}
		if err != nil || got.Name != tc.name || got.Loopback != tc.loopback || got.Index == 0 {
			t.Errorf("%v: %+v, %v; want %s loopback=%v", tc.addr, got, err, tc.name, tc.loopback)
		}
	}
}

func TestLinkUp(t *testing.T) {
	const up, lower = 0x1, 0x10000 // IFF_UP, IFF_LOWER_UP
	for _, tc := range []struct {
		flags uint32
		want  bool
	}{{0, false}, {up, false}, {lower, false}, {up | lower, true}} {
		if got := netinfo.LinkUp(&netlink.LinkAttrs{RawFlags: tc.flags}); got != tc.want {
			t.Errorf("flags %#x: %v", tc.flags, got)
		}
	}
}
