package afxdp

import (
	"encoding/binary"
	"net/netip"

	"github.com/uroce/uroce/bth"
)

// minRoCE is a BTH and an ICRC: anything shorter is not RoCE.
const minRoCE = bth.BTHLen + bth.ICRCLen

// rxFrame is what parse finds in a received frame.
type rxFrame struct {
	ip, udp, end int // offsets: IP header, UDP header, end of the datagram
	src, dst     netip.Addr
	srcPort      uint16
	tos          uint8
}

// parse checks that b is Ethernet (optionally one 802.1Q tag), IPv4 without
// fragmentation or IPv6 without extension headers, and UDP to port 4791
// carrying at least a BTH and an ICRC, as the XDP program selected it. It
// reads lengths from the headers, not from len(b): Ethernet pads short
// frames.
func parse(b []byte, f *rxFrame) bool {
	if len(b) < bth.EthernetLen {
		return false
	}
	et := binary.BigEndian.Uint16(b[12:])
	l3 := bth.EthernetLen
	if et == 0x8100 {
		if len(b) < bth.EthernetLen+bth.VLANLen {
			return false
		}
		et = binary.BigEndian.Uint16(b[16:])
		l3 += bth.VLANLen
	}
	var l4, end int
	switch et {
	case 0x0800:
		if len(b) < l3+bth.IPv4MinLen || b[l3]>>4 != 4 {
			return false
		}
		ihl := int(b[l3]&0xf) * 4
		total := int(binary.BigEndian.Uint16(b[l3+2:]))
		if ihl < bth.IPv4MinLen || b[l3+9] != 17 || binary.BigEndian.Uint16(b[l3+6:])&0x3fff != 0 {
			return false
		}
		l4, end = l3+ihl, l3+total
		if total < ihl || end > len(b) {
			return false
		}
		f.tos = b[l3+1]
		f.src = netip.AddrFrom4([4]byte(b[l3+12 : l3+16]))
		f.dst = netip.AddrFrom4([4]byte(b[l3+16 : l3+20]))
	case 0x86dd:
		if len(b) < l3+bth.IPv6Len || b[l3]>>4 != 6 || b[l3+6] != 17 {
			return false
		}
		l4 = l3 + bth.IPv6Len
		end = l4 + int(binary.BigEndian.Uint16(b[l3+4:]))
		if end > len(b) {
			return false
		}
		f.tos = uint8(binary.BigEndian.Uint16(b[l3:]) >> 4)
		f.src = netip.AddrFrom16([16]byte(b[l3+8 : l3+24]))
		f.dst = netip.AddrFrom16([16]byte(b[l3+24 : l3+40]))
	default:
		return false
	}
	if end-l4 < bth.UDPLen+minRoCE || binary.BigEndian.Uint16(b[l4+2:]) != bth.RoCEPort {
		return false
	}
	if ul := int(binary.BigEndian.Uint16(b[l4+4:])); ul != end-l4 {
		return false
	}
	f.ip, f.udp, f.end = l3, l4, end
	f.srcPort = binary.BigEndian.Uint16(b[l4:])
	return true
}

// hdrLen returns the length of the headers Send writes in front of the BTH.
func hdrLen(v6 bool) int {
	if v6 {
		return bth.EthernetLen + bth.IPv6Len + bth.UDPLen
	}
	return bth.EthernetLen + bth.IPv4MinLen + bth.UDPLen
}
