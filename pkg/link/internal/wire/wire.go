package wire

import (
	"errors"
	"net/netip"

	"github.com/uroce/uroce/bth"
)

// ErrNotRoCE is returned by Parse for a datagram that is not an unfragmented
// UDP datagram to port 4791 with room for a BTH and an ICRC.
var ErrNotRoCE = errors.New("not a RoCEv2 datagram")

// Header holds what a backend writes in front of a RoCE packet.
type Header struct {
	Src, Dst         netip.Addr // same family; IPv4 may be IPv4-mapped
	SrcPort, DstPort uint16
	TOS              uint8
	TTL              uint8 // IPv4 TTL or IPv6 hop limit
	ID               uint16
	DF               bool
}

// Len returns the length of the IP and UDP headers for the address family
// of h.Dst.
func (h *Header) Len() int { return Len(h.Dst) }

// Len returns the IP plus UDP header length used to reach dst.
func Len(dst netip.Addr) int {
	if dst.Is4() || dst.Is4In6() {
		return bth.IPv4MinLen + bth.UDPLen
	}
	return bth.IPv6Len + bth.UDPLen
}

// Put writes the IP and UDP headers, with a zero UDP checksum (as rxe
// sends over IPv4; see PutUDPChecksum), of a datagram whose UDP payload (the
// RoCE packet, BTH through ICRC) is buf[off:off+n], ending at off, and
// returns where the IP header starts. buf[:off] must hold h.Len() bytes.
func Put(buf []byte, off, n int, h *Header) int {
	if h.Dst.Is4() || h.Dst.Is4In6() {
		start := off - bth.IPv4MinLen - bth.UDPLen
		ip := buf[start:off]
		var flags uint8
		if h.DF {
			flags = bth.IPv4DontFragment
		}
		bth.IPv4(ip).Encode(&bth.IPv4Fields{
			TOS: h.TOS, TotalLength: uint16(bth.IPv4MinLen + bth.UDPLen + n), ID: h.ID,
			Flags: flags, TTL: h.TTL, Protocol: bth.ProtocolUDP, Src: h.Src, Dst: h.Dst,
		})
		bth.UDP(ip[bth.IPv4MinLen:]).Encode(&bth.UDPFields{
			SrcPort: h.SrcPort, DstPort: h.DstPort, Length: uint16(bth.UDPLen + n),
		})
		return start
	}
	start := off - bth.IPv6Len - bth.UDPLen
	ip := buf[start:off]
	bth.IPv6(ip).Encode(&bth.IPv6Fields{
		TrafficClass: h.TOS, PayloadLength: uint16(bth.UDPLen + n), NextHeader: bth.ProtocolUDP,
		HopLimit: h.TTL, Src: h.Src, Dst: h.Dst,
	})
	bth.UDP(ip[bth.IPv6Len:]).Encode(&bth.UDPFields{
		SrcPort: h.SrcPort, DstPort: h.DstPort, Length: uint16(bth.UDPLen + n),
	})
	return start
}

// PutUDPChecksum computes and writes the UDP checksum of the datagram d
// (bth.PutUDPChecksum).
func PutUDPChecksum(d []byte) { bth.PutUDPChecksum(d) }

// Datagram is what Parse learns about a received datagram.
type Datagram struct {
	Src, Dst         netip.Addr
	SrcPort, DstPort uint16
	TOS              uint8
	// Off is the offset of the UDP payload (the BTH) from the start of
	// the IP header, End the offset of its end (Ethernet padding cut).
	Off, End int
}

// Parse reads the IP and UDP headers at the start of d. It accepts only
// unfragmented UDP to port 4791 whose payload can hold a BTH and an ICRC;
// the IPv4 header checksum is not checked (the ICRC does not cover it and
// the kernel checks it for the backends that get packets from the kernel).
func Parse(d []byte, g *Datagram) error {
	if len(d) < 1 {
		return ErrNotRoCE
	}
	var hl, end int
	switch d[0] >> 4 {
	case 4:
		if len(d) < bth.IPv4MinLen+bth.UDPLen {
			return ErrNotRoCE
		}
		ip := bth.IPv4(d)
		hl = ip.HeaderLen()
		end = int(ip.TotalLength())
		if hl < bth.IPv4MinLen || end > len(d) || ip.Protocol() != bth.ProtocolUDP ||
			ip.FragOff() != 0 || ip.Flags()&bth.IPv4MoreFragments != 0 {
			return ErrNotRoCE
		}
		g.Src, g.Dst, g.TOS = ip.Src(), ip.Dst(), ip.TOS()
	case 6:
		if len(d) < bth.IPv6Len+bth.UDPLen {
			return ErrNotRoCE
		}
		ip := bth.IPv6(d)
		hl = bth.IPv6Len
		end = hl + int(ip.PayloadLength())
		if end > len(d) || ip.NextHeader() != bth.ProtocolUDP {
			return ErrNotRoCE
		}
		g.Src, g.Dst, g.TOS = ip.Src(), ip.Dst(), ip.TrafficClass()
	default:
		return ErrNotRoCE
	}
	if end < hl+bth.UDPLen+bth.BTHLen+bth.ICRCLen {
		return ErrNotRoCE
	}
	u := bth.UDP(d[hl:])
	if int(u.Length()) != end-hl {
		return ErrNotRoCE
	}
	g.SrcPort, g.DstPort = u.SrcPort(), u.DstPort()
	if g.DstPort != bth.RoCEPort {
		return ErrNotRoCE
	}
	g.Off, g.End = hl+bth.UDPLen, end
	return nil
}
