package afxdp_test

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/internal/netns"
	"github.com/uroce/uroce/pkg/link"
	"github.com/uroce/uroce/pkg/link/afxdp"
)

// TestHeadersPerDestination sends to two addresses of the peer in turn
// (the link keeps a header template of the last destination) and checks
// that every packet arrives addressed as sent, its IPv4 and UDP headers
// byte for byte what bth.PutDatagramHeaders writes for its fields.
func TestHeadersPerDestination(t *testing.T) {
	netns.RequireRoot(t)
	p := netns.NewPair(t, netns.PairConfig{
		A: []netip.Prefix{netip.MustParsePrefix("10.97.0.1/24")},
		B: []netip.Prefix{netip.MustParsePrefix("10.97.0.2/24"), netip.MustParsePrefix("10.97.0.3/24")}})
	a := open(t, p.A, afxdp.Config{})
	b := open(t, p.B, afxdp.Config{})
	dsts := []netip.Addr{netip.MustParseAddr("10.97.0.2"), netip.MustParseAddr("10.97.0.3")}
	pk := make([]*link.Packet, 1)
	for i := range 8 {
		dst := dsts[i%2]
		tos := uint8(i << 2)
		for {
			if a.Alloc(pk) != 1 {
				t.Fatal("alloc failed")
			}
			fill(t, pk[0], uint32(i), 100+i, dst)
			pk[0].SrcPort, pk[0].TOS = 0xc100+uint16(i), tos
			if _, err := a.Send(pk); err == nil {
				break
			}
			time.Sleep(time.Millisecond) // the next hop being learnt
		}
		await(t, b, uint32(i), func(r *link.Packet, psn uint32, err error) {
			if err != nil {
				t.Fatal(err)
			}
			if psn != uint32(i) {
				return
			}
			if r.Local != dst || r.Remote != p.AddrA || r.TOS != tos || r.SrcPort != 0xc100+uint16(i) {
				t.Errorf("packet %d: %v:%d -> %v TOS %#x, sent %v:%d -> %v TOS %#x",
					i, r.Remote, r.SrcPort, r.Local, r.TOS, p.AddrA, 0xc100+i, dst, tos)
			}
			hl := bth.IPv4MinLen + bth.UDPLen
			hdr := r.Buf[r.Off-hl : r.Off]
			want := make([]byte, hl+r.Len)
			f := bth.DatagramFields{Src: p.AddrA, Dst: dst, SrcPort: 0xc100 + uint16(i), DstPort: bth.RoCEPort,
				TOS: tos, TTL: bth.IPv4(hdr).TTL(), DF: true}
			bth.PutDatagramHeaders(want, hl, r.Len, &f)
			if !bytes.Equal(hdr, want[:hl]) {
				t.Errorf("packet %d: headers\n% x\nwant\n% x", i, hdr, want[:hl])
			}
		})
	}
}
