package wire

import (
	"net/netip"
	"testing"

	"github.com/uroce/uroce/bth"
)

func TestPutParse(t *testing.T) {
	tests := []struct {
		src, dst string
		csum     bool
	}{
		{"10.0.0.1", "10.0.0.2", false},
		{"10.0.0.1", "10.0.0.2", true},
		{"fd00::1", "fd00::2", true},
		{"fd00::1", "fd00::2", false},
	}
	for _, tc := range tests {
		buf := make([]byte, 256)
		const off, n = 128, 12 + 7 + 4
		for i := off; i < off+n; i++ {
			buf[i] = byte(i)
		}
		h := Header{Src: netip.MustParseAddr(tc.src), Dst: netip.MustParseAddr(tc.dst), SrcPort: 0xc001,
			DstPort: 4791, TOS: 2, TTL: 64, ID: 7, DF: true}
		start := Put(buf, off, n, &h)
		if start != off-h.Len() {
			t.Fatalf("start %d", start)
		}
		if err := bth.PutICRC(buf[start : off+n]); err != nil {
			t.Fatal(err)
		}
		if tc.csum {
			PutUDPChecksum(buf[start : off+n])
		}
		if err := bth.VerifyICRC(buf[start : off+n]); err != nil {
			t.Fatal(err)
		}
		var g Datagram
		if err := Parse(buf[start:off+n], &g); err != nil {
			t.Fatal(err)
		}
		if g.Src != h.Src || g.Dst != h.Dst || g.SrcPort != 0xc001 || g.TOS != 2 || start+g.Off != off || start+g.End != off+n {
			t.Fatalf("%+v", g)
		}
		if tc.csum && (bth.UDP(buf[start+g.Off-bth.UDPLen:]).Checksum() == 0 || !bth.UDPChecksumValid(buf[start:off+n])) {
			t.Fatal("udp checksum does not verify")
		}
		for i := range buf[start : off+n] {
			var g Datagram
			Parse(buf[start:start+i], &g) // must not panic
		}
	}
}
