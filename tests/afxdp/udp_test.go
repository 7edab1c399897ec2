package afxdp_test

import (
	"fmt"
	"testing"

	"github.com/uroce/uroce/internal/netns"
	"github.com/uroce/uroce/pkg/link/afxdp"
	"github.com/uroce/uroce/pkg/link/udp"
)

// TestAFXDPToUDP exchanges RoCE between the afxdp link and the kernel UDP
// link across a veth pair: the kernel must accept what afxdp writes (IP
// header checksum, IPv6 UDP checksum) and each side must verify the
// other's ICRC.
func TestAFXDPToUDP(t *testing.T) {
	netns.RequireRoot(t)
	for _, mtu := range []int{1500, 9000} {
		for _, fam := range []int{4, 6} {
			t.Run(fmt.Sprintf("mtu%d/ipv%d", mtu, fam), func(t *testing.T) {
				p := netns.NewPair(t, pairConfig(mtu, fam))
				a := open(t, p.A, afxdp.Config{})
				var b *udp.Link
				if err := p.B.NS.Do(func() (err error) {
					b, err = udp.Open(udp.Config{Addr: p.AddrB})
					return err
				}); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { b.Close() })
				exchange(t, a, b, p.AddrB, payloads(a))
				exchange(t, b, a, p.AddrA, payloads(b))
			})
		}
	}
}
