package afxdp

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/uroce/uroce/bth"
)

func testFrame(v6, vlan bool) []byte {
	var b []byte
	b = append(b, make([]byte, 12)...)
	if vlan {
		b = append(b, 0x81, 0, 0, 7)
	}
	roce := make([]byte, 28)
	if v6 {
		b = append(b, 0x86, 0xdd)
		ip := make([]byte, 40)
		ip[0], ip[1] = 0x60|0x0, 0x30 // traffic class 3 (CE)
		binary.BigEndian.PutUint16(ip[4:], uint16(8+len(roce)))
		ip[6], ip[7] = 17, 64
		ip[8], ip[23], ip[24], ip[39] = 0xfd, 1, 0xfd, 2
		b = append(b, ip...)
	} else {
		b = append(b, 0x08, 0x00)
		ip := make([]byte, 20)
		ip[0], ip[1] = 0x45, 3
		binary.BigEndian.PutUint16(ip[2:], uint16(20+8+len(roce)))
		ip[6] = 0x40
		ip[8], ip[9] = 64, 17
		copy(ip[12:], []byte{10, 0, 0, 1, 10, 0, 0, 2})
		b = append(b, ip...)
	}
	u := make([]byte, 8)
	binary.BigEndian.PutUint16(u[0:], 0xc001)
	binary.BigEndian.PutUint16(u[2:], 4791)
	binary.BigEndian.PutUint16(u[4:], uint16(8+len(roce)))
	b = append(b, u...)
	b = append(b, roce...)
	return append(b, 0, 0, 0, 0) // Ethernet padding beyond the datagram
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		v6, vlan bool
		src      string
	}{{false, false, "10.0.0.1"}, {false, true, "10.0.0.1"}, {true, false, "fd00::1"}, {true, true, "fd00::1"}} {
		b := testFrame(tc.v6, tc.vlan)
		var f rxFrame
		if !parse(b, &f) {
			t.Fatalf("v6=%v vlan=%v: valid frame rejected", tc.v6, tc.vlan)
		}
		if f.g.Src != netip.MustParseAddr(tc.src) || f.g.TOS&3 != 3 || f.g.SrcPort != 0xc001 || f.g.End-f.g.Off != 28 {
			t.Errorf("v6=%v vlan=%v: parsed %+v", tc.v6, tc.vlan, f)
		}
		// Every truncation that cuts into the datagram must be refused,
		// never panic.
		for n := range len(b) - 4 {
			if parse(b[:n], &f) {
				t.Errorf("v6=%v vlan=%v: %d-byte prefix accepted", tc.v6, tc.vlan, n)
			}
		}
	}
}

// TestParseEtherType checks that the IP version must be the one the
// EtherType names.
func TestParseEtherType(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		b := testFrame(v6, false)
		b[12], b[13] = 0x86, 0xdd
		if v6 {
			b[12], b[13] = 0x08, 0x00
		}
		var f rxFrame
		if parse(b, &f) {
			t.Errorf("v6=%v: IP version and EtherType disagree, frame accepted", v6)
		}
		b[12], b[13] = 0x08, 0x06 // ARP
		if parse(b, &f) {
			t.Errorf("v6=%v: ARP accepted", v6)
		}
	}
}

// FuzzParse holds parse to accepting whatever bth.Frame.Decode, the
// thorough decoder, accepts, and to offsets inside the frame.
func FuzzParse(f *testing.F) {
	for _, v6 := range []bool{false, true} {
		for _, vlan := range []bool{false, true} {
			f.Add(testFrame(v6, vlan))
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var fr rxFrame
		ok := parse(b, &fr)
		var d bth.Frame
		if d.Decode(b) == nil && !ok {
			t.Fatal("bth.Frame.Decode took a frame parse refused")
		}
		if ok && (fr.ip+fr.g.End > len(b) || fr.g.End-fr.g.Off < minRoCE) {
			t.Fatalf("%d bytes: ip %d %+v", len(b), fr.ip, fr.g)
		}
	})
}
