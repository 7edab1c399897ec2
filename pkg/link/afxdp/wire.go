package afxdp

import "github.com/uroce/uroce/bth"

// minRoCE is a BTH and an ICRC: anything shorter is not RoCE.
const minRoCE = bth.BTHLen + bth.ICRCLen

// rxFrame is what parse finds in a received frame.
type rxFrame struct {
	ip int          // offset of the IP header
	g  bth.Datagram // its offsets are from the IP header
}

// parse checks that b is Ethernet (optionally one 802.1Q tag) carrying a
// RoCE datagram as bth.ParseDatagram accepts it, in the IP version its
// EtherType names, as the XDP program selected it. Lengths come from the
// headers, not from len(b): Ethernet pads short frames.
func parse(b []byte, f *rxFrame) bool {
	if len(b) < bth.EthernetLen {
		return false
	}
	ip, et := bth.EthernetLen, bth.Ethernet(b).EtherType()
	if et == bth.EtherTypeVLAN {
		if len(b) < ip+bth.VLANLen {
			return false
		}
		et = bth.VLAN(b[ip:]).EtherType()
		ip += bth.VLANLen
	}
	if et != bth.EtherTypeIPv4 && et != bth.EtherTypeIPv6 {
		return false
	}
	if bth.ParseDatagram(b[ip:], &f.g) != nil || f.g.Dst.Is6() != (et == bth.EtherTypeIPv6) {
		return false
	}
	f.ip = ip
	return true
}

// hdrLen returns the length of the headers Send writes in front of the BTH
// (without a VLAN tag).
func hdrLen(v6 bool) int {
	if v6 {
		return bth.EthernetLen + bth.IPv6Len + bth.UDPLen
	}
	return bth.EthernetLen + bth.IPv4MinLen + bth.UDPLen
}
