package bth_test

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/uroce/uroce/bth"
)

func TestPutParseDatagram(t *testing.T) {
	tests := []struct {
		src, dst string
		csum     bool
	}{
		{"10.0.0.1", "10.0.0.2", false},
		{"10.0.0.1", "10.0.0.2", true},
		{"::ffff:10.0.0.1", "::ffff:10.0.0.2", false},
		{"fd00::1", "fd00::2", true},
		{"fd00::1", "fd00::2", false},
	}
	for _, tc := range tests {
		buf := make([]byte, 256)
		const off = 128
		pf := bth.PacketFields{BTH: bth.BTHFields{Opcode: bth.RCSendOnly, PKey: 0xffff, DestQP: 0x11, PSN: 1}}
		n, err := pf.Encode(buf[off:], []byte("seven b"))
		if err != nil {
			t.Fatal(err)
		}
		h := bth.DatagramFields{Src: netip.MustParseAddr(tc.src), Dst: netip.MustParseAddr(tc.dst), SrcPort: 0xc001,
			DstPort: bth.RoCEPort, TOS: 2, TTL: 64, ID: 7, DF: true}
		start := bth.PutDatagramHeaders(buf, off, n, &h)
		if start != off-h.HeaderLen() {
			t.Fatalf("%s: start %d", tc.dst, start)
		}
		d := buf[start : off+n]
		if err := bth.PutICRC(d); err != nil {
			t.Fatal(err)
		}
		if tc.csum {
			bth.PutUDPChecksum(d)
		}
		if err := bth.VerifyICRC(d); err != nil {
			t.Fatal(err)
		}
		var g bth.Datagram
		if err := bth.ParseDatagram(d, &g); err != nil {
			t.Fatal(err)
		}
		if g.Src != h.Src.Unmap() || g.Dst != h.Dst.Unmap() || g.SrcPort != 0xc001 || g.DstPort != bth.RoCEPort ||
			g.TOS != 2 || start+g.Off != off || start+g.End != off+n {
			t.Fatalf("%s: %+v", tc.dst, g)
		}
		if tc.csum && !bth.UDPChecksumValid(d) {
			t.Fatalf("%s: udp checksum does not verify", tc.dst)
		}
		// The thorough decoder agrees with what was written.
		var f bth.Frame
		if err := f.DecodeIP(d); err != nil {
			t.Fatalf("%s: %v", tc.dst, err)
		}
		if err := f.Verify(); err != nil {
			t.Fatalf("%s: %v", tc.dst, err)
		}
		if h4 := f.IPv4(); h4 != nil && (h4.ID() != 7 || h4.Flags() != bth.IPv4DontFragment || h4.TTL() != 64) {
			t.Fatalf("%s: %+v", tc.dst, h4.Fields())
		}
		for i := range d {
			if bth.ParseDatagram(d[:i], &g) == nil {
				t.Fatalf("%s: %d-byte prefix of %d accepted", tc.dst, i, len(d))
			}
		}
		// Ethernet padding after the datagram is not part of it.
		padded := append(bytes.Clone(d), 0, 0, 0, 0)
		if err := bth.ParseDatagram(padded, &g); err != nil || g.End != len(d) {
			t.Fatalf("%s: padded: %v, end %d", tc.dst, err, g.End)
		}
	}
}

func TestParseDatagramRefuses(t *testing.T) {
	buf := make([]byte, 128)
	const off, n = 64, bth.BTHLen + bth.ICRCLen
	h := bth.DatagramFields{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"),
		SrcPort: 1, DstPort: bth.RoCEPort, TTL: 64, DF: true}
	start := bth.PutDatagramHeaders(buf, off, n, &h)
	good := buf[start : off+n]
	tests := []struct {
		name string
		mod  func(d []byte)
	}{
		{"version 5", func(d []byte) { d[0] = 0x55 }},
		{"IHL 4", func(d []byte) { d[0] = 0x44 }},
		{"TCP", func(d []byte) { d[9] = 6 }},
		{"more fragments", func(d []byte) { d[6] |= 0x20 }},
		{"fragment offset", func(d []byte) { d[7] = 1 }},
		{"total length over the bytes", func(d []byte) { d[3]++ }},
		{"UDP length", func(d []byte) { d[20+5]-- }},
		{"port 4792", func(d []byte) { d[20+3]++ }},
		{"no room for the ICRC", func(d []byte) { d[3] -= 4; d[20+5] -= 4 }},
	}
	for _, tc := range tests {
		d := bytes.Clone(good)
		tc.mod(d)
		var g bth.Datagram
		if err := bth.ParseDatagram(d, &g); err != bth.ErrNotRoCE {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

func FuzzParseDatagram(f *testing.F) {
	for _, frames := range captures(f) {
		for _, b := range frames {
			var fr bth.Frame
			if fr.Decode(b) == nil {
				f.Add(fr.Datagram())
			}
		}
	}
	for _, dst := range []string{"10.0.0.2", "fd00::2"} {
		buf := make([]byte, 128)
		h := bth.DatagramFields{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr(dst),
			SrcPort: 1, DstPort: bth.RoCEPort, TTL: 64}
		if dst != "10.0.0.2" {
			h.Src = netip.MustParseAddr("fd00::1")
		}
		start := bth.PutDatagramHeaders(buf, 64, 20, &h)
		f.Add(buf[start : 64+20])
	}
	f.Fuzz(func(t *testing.T, d []byte) {
		var g bth.Datagram
		err := bth.ParseDatagram(d, &g)
		var fr bth.Frame
		if fr.DecodeIP(d) == nil && err != nil {
			t.Fatalf("Frame.DecodeIP took what ParseDatagram refused: %v", err)
		}
		if err != nil {
			return
		}
		if g.Off < bth.IPv4MinLen+bth.UDPLen || g.End > len(d) || g.End-g.Off < bth.BTHLen+bth.ICRCLen ||
			g.DstPort != bth.RoCEPort {
			t.Fatalf("%d bytes: %+v", len(d), g)
		}
		_ = bth.UDPChecksumValid(d[:g.End])
		_, _ = bth.ICRC(d[:g.End])
	})
}

// A template writes the bytes PutDatagramHeaders writes, for both
// families and any TOS, ID and source port.
func TestDatagramTemplate(t *testing.T) {
	for _, a := range [][2]string{{"10.0.0.1", "10.0.0.2"}, {"::ffff:10.0.0.1", "::ffff:192.168.7.9"}, {"fd00::1", "fd00::2"}} {
		for _, df := range []bool{false, true} {
			h := bth.DatagramFields{Src: netip.MustParseAddr(a[0]), Dst: netip.MustParseAddr(a[1]),
				DstPort: bth.RoCEPort, TTL: 64, DF: df}
			tp := bth.NewDatagramTemplate(&h)
			if tp.HeaderLen() != h.HeaderLen() {
				t.Fatalf("%v: header length %d, want %d", a, tp.HeaderLen(), h.HeaderLen())
			}
			for i, v := range []struct {
				tos    uint8
				id, sp uint16
				n      int
			}{{0, 0, 0, 16}, {2, 7, 0xc001, 77}, {0xff, 0xffff, 0xffff, 1400}, {0x60, 0x1234, 0xd00d, 4096}} {
				const off = 128
				want, got := make([]byte, off+v.n), make([]byte, off+v.n)
				for j := range want {
					want[j], got[j] = byte(j), byte(j)
				}
				h.TOS, h.ID, h.SrcPort = v.tos, v.id, v.sp
				ws := bth.PutDatagramHeaders(want, off, v.n, &h)
				gs := tp.Put(got, off, v.n, v.tos, v.id, v.sp)
				if ws != gs || !bytes.Equal(want, got) {
					t.Fatalf("%v df %v case %d: start %d want %d\n% x\nwant\n% x", a, df, i, gs, ws, got[gs:off], want[ws:off])
				}
			}
		}
	}
}

// FuzzDatagramTemplate: for any addresses of one family (IPv4, IPv4 in
// IPv6, or IPv6), TTL, DF, TOS, ID, ports and length, the template writes
// the same bytes, at the same place, as PutDatagramHeaders.
func FuzzDatagramTemplate(f *testing.F) {
	f.Add([]byte("\x0a\x00\x00\x01\x0a\x00\x00\x02"), uint8(0), uint8(64), true, uint8(2), uint16(7), uint16(0xc001), uint16(bth.RoCEPort), uint16(77))
	f.Add([]byte("\xfd\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\xfd\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02"), uint8(2), uint8(1), false, uint8(0xff), uint16(0xffff), uint16(0xffff), uint16(1), uint16(4096))
	f.Fuzz(func(t *testing.T, addrs []byte, form, ttl uint8, df bool, tos uint8, id, sp, dp, n uint16) {
		var h bth.DatagramFields
		switch form % 3 {
		case 0, 1:
			if len(addrs) < 8 {
				return
			}
			src, dst := netip.AddrFrom4([4]byte(addrs[:4])), netip.AddrFrom4([4]byte(addrs[4:8]))
			if form%3 == 1 {
				src, dst = netip.AddrFrom16(src.As16()), netip.AddrFrom16(dst.As16())
			}
			h.Src, h.Dst = src, dst
		case 2:
			if len(addrs) < 32 {
				return
			}
			h.Src, h.Dst = netip.AddrFrom16([16]byte(addrs[:16])), netip.AddrFrom16([16]byte(addrs[16:32]))
			if h.Dst.Is4In6() != h.Src.Is4In6() {
				return // one family on both sides, as a link has
			}
		}
		h.TTL, h.DF, h.DstPort = ttl, df, dp
		tp := bth.NewDatagramTemplate(&h)
		if tp.HeaderLen() != h.HeaderLen() {
			t.Fatalf("header length %d, want %d", tp.HeaderLen(), h.HeaderLen())
		}
		size := int(n % 9000)
		const off = 64
		want, got := make([]byte, off+size), make([]byte, off+size)
		for j := range want {
			want[j], got[j] = byte(j), byte(j)
		}
		h.TOS, h.ID, h.SrcPort = tos, id, sp
		ws := bth.PutDatagramHeaders(want, off, size, &h)
		gs := tp.Put(got, off, size, tos, id, sp)
		if ws != gs || !bytes.Equal(want, got) {
			t.Fatalf("%+v: start %d want %d\n% x\nwant\n% x", h, gs, ws, got[gs:off], want[ws:off])
		}
	})
}
