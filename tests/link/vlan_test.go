package link

import (
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/uroce/uroce/internal/netns"
	"github.com/uroce/uroce/pkg/link"
	"github.com/uroce/uroce/pkg/link/afpacket"
	"github.com/uroce/uroce/pkg/link/afxdp"
	"github.com/uroce/uroce/pkg/link/linktest"
)

const testVLAN = 100

// openVLAN opens a link that tags its frames with testVLAN itself. This
// kernel has no 802.1Q devices (CONFIG_VLAN_8021Q is off), which suits the
// test: the links write and check the tag on the plain veth, the kernel
// still lifts a received tag into the packet's metadata (which the afpacket
// filter reads), and its own IP stack drops the tagged frames it has no
// VLAN device for, so only a link that handles the tag sees them.
func openVLAN(t *testing.T, kind string, v netns.Veth, a netip.Addr, vid uint16, noResv bool) link.Link {
	t.Helper()
	var l link.Link
	err := v.NS.Do(func() (err error) {
		switch kind {
		case "afpacket":
			l, err = afpacket.Open(afpacket.Config{Ifname: v.Name, Addr: a, VLAN: vid, Priority: 3, NoPortReservation: noResv})
		case "afxdp":
			l, err = afxdp.Open(afxdp.Config{Interface: v.Name, Addr: a, VLAN: vid, Priority: 3})
		}
		return err
	})
	if err != nil {
		t.Fatalf("%s: %v", kind, err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// TestVLAN exchanges tagged traffic between links that tag on send: an
// afpacket receiver with VLAN set passes only frames that came with its
// VLAN ID, so every packet it gets shows the sender tagged it; an afxdp
// receiver's XDP program and parser step over the tag.
func TestVLAN(t *testing.T) {
	netns.RequireRoot(t)
	kinds := []string{"afpacket", "afxdp"}
	for _, x := range kinds {
		for _, y := range kinds {
			for _, fam := range []int{4, 6} {
				t.Run(fmt.Sprintf("%s-%s/v%d", x, y, fam), func(t *testing.T) {
					p := netns.NewPair(t, netns.PairConfig{})
					a, b := p.Addr(fam)
					la := openVLAN(t, x, p.A, a, testVLAN, false)
					lb := openVLAN(t, y, p.B, b, testVLAN, false)
					if err := linktest.Exchange(t, la, lb, b, a, 200, 512, 16, 3*time.Second); err != nil {
						t.Fatalf("%s->%s: %v", x, y, err)
					}
					if err := linktest.Exchange(t, lb, la, a, b, 200, 512, 16, 3*time.Second); err != nil {
						t.Fatalf("%s->%s: %v", y, x, err)
					}
				})
			}
		}
	}
}

// TestVLANFilter puts a VLAN afpacket link and a plain one on the same
// interface and address and sends them tagged, then untagged traffic: each
// gets only its own. Both sockets are taps on one interface, served in the
// same pass, so once one has received everything the other has been
// offered all of it too.
func TestVLANFilter(t *testing.T) {
	netns.RequireRoot(t)
	p := netns.NewPair(t, netns.PairConfig{})
	a, b := p.Addr(4)
	tagged := openVLAN(t, "afpacket", p.A, a, testVLAN, false)
	plain := openVLAN(t, "afpacket", p.A, a, 0, true) // the port is reserved once
	other := openVLAN(t, "afpacket", p.A, a, testVLAN+1, true)
	fromTagged := openVLAN(t, "afpacket", p.B, b, testVLAN, false)
	fromPlain := openVLAN(t, "afpacket", p.B, b, 0, true)

	rx := make([]*link.Packet, 8)
	none := func(name string, l link.Link) {
		t.Helper()
		if n, _ := l.Recv(rx); n != 0 {
			l.Release(rx[:n])
			t.Fatalf("%s link received another VLAN's frame", name)
		}
		// RxDropped would count frames the filter let through and the
		// link refused afterwards.
		if s := l.Stats(); s.RxPackets != 0 || s.RxDropped != 0 {
			t.Fatalf("%s link: another VLAN's frames passed its filter: %+v", name, s)
		}
	}
	if err := linktest.Exchange(t, fromTagged, tagged, a, b, 100, 64, 10, 3*time.Second); err != nil {
		t.Fatal(err)
	}
	none("untagged", plain)
	none("VLAN 101", other)
	before := tagged.Stats()
	if err := linktest.Exchange(t, fromPlain, plain, a, b, 100, 64, 10, 3*time.Second); err != nil {
		t.Fatal(err)
	}
	none("VLAN 101", other)
	if s := tagged.Stats(); s.RxPackets != before.RxPackets || s.RxDropped != before.RxDropped {
		t.Fatalf("VLAN link took untagged frames: %+v, before %+v", s, before)
	}
	if err := p.A.NS.Do(func() error {
		_, err := afpacket.Open(afpacket.Config{Ifname: p.A.Name, Addr: a, VLAN: 4095})
		return err
	}); !errors.Is(err, afpacket.ErrVLAN) {
		t.Fatalf("VLAN 4095: %v", err)
	}
}
