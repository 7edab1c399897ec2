package bth

import (
	"math/rand/v2"
	"net/netip"
	"testing"
)

// refChecksum is RFC 1071's sum written out, 16 bits at a time.
func refChecksum(b []byte, initial uint16) uint16 {
	s := uint32(initial)
	for ; len(b) >= 2; b = b[2:] {
		s += uint32(b[0])<<8 | uint32(b[1])
	}
	if len(b) == 1 {
		s += uint32(b[0]) << 8
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return uint16(s)
}

func TestChecksum(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, 300)
	for _, fill := range []func(i int) byte{
		func(int) byte { return 0 },
		func(int) byte { return 0xff },
		func(int) byte { return byte(r.Uint32()) },
	} {
		for i := range b {
			b[i] = fill(i)
		}
		for n := range len(b) {
			for _, init := range []uint16{0, 1, 0x8000, 0xfffe, 0xffff} {
				if got, want := checksum(b[:n], init), refChecksum(b[:n], init); got != want {
					t.Fatalf("%d bytes % x..., initial %#x: got %#04x, want %#04x", n, b[:min(n, 8)], init, got, want)
				}
			}
		}
	}
}

func FuzzChecksum(f *testing.F) {
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1}, uint16(0xffff))
	f.Add(make([]byte, 41), uint16(0))
	f.Fuzz(func(t *testing.T, b []byte, init uint16) {
		if got, want := checksum(b, init), refChecksum(b, init); got != want {
			t.Fatalf("got %#04x, want %#04x", got, want)
		}
	})
}

func TestPutUDPChecksum(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		hl := IPv4MinLen
		if v6 {
			hl = IPv6Len
		}
		d := make([]byte, hl+UDPLen+BTHLen+7+ICRCLen)
		for i := range d {
			d[i] = byte(i*7 + 3)
		}
		ulen := len(d) - hl
		if v6 {
			IPv6(d).Encode(&IPv6Fields{PayloadLength: uint16(ulen), NextHeader: ProtocolUDP, HopLimit: 64,
				Src: netip.MustParseAddr("fd00::1"), Dst: netip.MustParseAddr("fd00::2")})
		} else {
			IPv4(d).Encode(&IPv4Fields{TotalLength: uint16(len(d)), TTL: 64, Protocol: ProtocolUDP,
				Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2")})
		}
		UDP(d[hl:]).Encode(&UDPFields{SrcPort: 0xc001, DstPort: RoCEPort, Length: uint16(ulen)})
		if !UDPChecksumValid(d) {
			t.Fatalf("v6=%v: a zero checksum means none and is valid", v6)
		}
		PutUDPChecksum(d)
		// The pseudo-header written out (RFC 768, RFC 8200 section 8.1):
		// with the checksum in place everything sums to all ones.
		var ph []byte
		if v6 {
			ph = append(ph, d[8:40]...)
		} else {
			ph = append(ph, d[12:20]...)
		}
		ph = append(ph, 0, ProtocolUDP, byte(ulen>>8), byte(ulen))
		if s := refChecksum(d[hl:], refChecksum(ph, 0)); s != 0xffff {
			t.Fatalf("v6=%v: checksum %#04x does not verify (sum %#04x)", v6, UDP(d[hl:]).Checksum(), s)
		}
		if !UDPChecksumValid(d) {
			t.Fatalf("v6=%v: UDPChecksumValid refuses the checksum PutUDPChecksum wrote", v6)
		}
		d[len(d)-1] ^= 1
		if UDPChecksumValid(d) {
			t.Fatalf("v6=%v: a changed payload still verifies", v6)
		}
	}
}

// TestIPv4EncodeChecksum: the header Encode builds in registers, checksum
// included, is the one written field by field and summed as RFC 1071 says.
func TestIPv4EncodeChecksum(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	got := make(IPv4, IPv4MinLen)
	for i := range 100_000 {
		var a, d [4]byte
		for k := range 4 {
			a[k], d[k] = byte(r.Uint32()), byte(r.Uint32())
		}
		if i%7 == 0 {
			a, d = [4]byte{0xff, 0xff, 0xff, 0xff}, [4]byte{0xff, 0xff, 0xff, 0xff}
		}
		f := IPv4Fields{TOS: uint8(r.Uint32()), TotalLength: uint16(r.Uint32()), ID: uint16(r.Uint32()),
			Flags: uint8(r.Uint32()), FragOff: uint16(r.Uint32()), TTL: uint8(r.Uint32()), Protocol: uint8(r.Uint32()),
			Src: netip.AddrFrom4(a), Dst: netip.AddrFrom4(d)}
		got.Encode(&f)
		want := IPv4{0x45, f.TOS, byte(f.TotalLength >> 8), byte(f.TotalLength), byte(f.ID >> 8), byte(f.ID),
			byte(f.Flags&7)<<5 | byte(f.FragOff>>8&0x1f), byte(f.FragOff), f.TTL, f.Protocol, 0, 0,
			a[0], a[1], a[2], a[3], d[0], d[1], d[2], d[3]}
		c := ^refChecksum(want, 0)
		want[10], want[11] = byte(c>>8), byte(c)
		if string(got) != string(want) {
			t.Fatalf("%+v: got % x, want % x", f, got, want)
		}
	}
}
