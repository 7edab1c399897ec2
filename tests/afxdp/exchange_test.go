package afxdp_test

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/internal/netns"
	"github.com/uroce/uroce/pkg/link"
	"github.com/uroce/uroce/pkg/link/afxdp"
)

// pairConfig returns a namespace pair with one address family only, so the
// links pick the family under test as their own address.
func pairConfig(mtu, family int) netns.PairConfig {
	if family == 6 {
		return netns.PairConfig{MTU: mtu,
			A: []netip.Prefix{netip.MustParsePrefix("fd00:98::1/64")},
			B: []netip.Prefix{netip.MustParsePrefix("fd00:98::2/64")}}
	}
	return netns.PairConfig{MTU: mtu,
		A: []netip.Prefix{netip.MustParsePrefix("10.98.0.1/24")},
		B: []netip.Prefix{netip.MustParsePrefix("10.98.0.2/24")}}
}

func payloads(l link.Link) []int {
	max := l.Info().MaxRoCE() - bth.PacketLen(bth.RCSendOnly, 0)
	s := []int{0, 1, 100, 1000, max}
	if max > 4096 {
		s = append(s, 3000, 4096, 5000)
	}
	return s
}

func TestAFXDPToAFXDP(t *testing.T) {
	netns.RequireRoot(t)
	for _, mtu := range []int{1500, 9000} {
		for _, fam := range []int{4, 6} {
			t.Run(fmt.Sprintf("mtu%d/ipv%d", mtu, fam), func(t *testing.T) {
				p := netns.NewPair(t, pairConfig(mtu, fam))
				a := open(t, p.A, afxdp.Config{})
				b := open(t, p.B, afxdp.Config{})
				t.Logf("attach %v, zero-copy %v, multi-buffer %v, busy-poll %v",
					a.AttachMode(), a.ZeroCopy(), a.MultiBuffer(), a.BusyPoll())
				if mtu > 4000 && !a.MultiBuffer() {
					t.Errorf("MTU %d without multi-buffer", mtu)
				}
				exchange(t, a, b, p.AddrB, payloads(a))
				exchange(t, b, a, p.AddrA, payloads(b))
				c, err := b.Program().Counters()
				if err != nil {
					t.Fatal(err)
				}
				if c.Redirected == 0 {
					t.Errorf("XDP program redirected nothing: %+v", c)
				}
			})
		}
	}
}
