package bth

import (
	"encoding/binary"
	"math/bits"
	"net/netip"
)

// DatagramFields holds the IP and UDP headers a sender writes in front of
// a RoCE packet.
type DatagramFields struct {
	Src, Dst         netip.Addr // same family; IPv4 may be IPv4-mapped
	SrcPort, DstPort uint16
	TOS              uint8  // IPv4 TOS or IPv6 traffic class
	TTL              uint8  // IPv4 TTL or IPv6 hop limit
	ID               uint16 // IPv4 only
	DF               bool   // IPv4 only
}

// HeaderLen returns the length of the IP and UDP headers for the address
// family of f.Dst.
func (f *DatagramFields) HeaderLen() int { return DatagramHeaderLen(f.Dst) }

// DatagramHeaderLen returns the length of the IP and UDP headers in front
// of a RoCE packet to dst: IPv4 without options, or IPv6 without extension
// headers.
func DatagramHeaderLen(dst netip.Addr) int {
	if dst.Is4() || dst.Is4In6() {
		return IPv4MinLen + UDPLen
	}
	return IPv6Len + UDPLen
}

// PutDatagramHeaders writes the IP and UDP headers of a datagram whose
// UDP payload (the RoCE packet, BTH through ICRC) is buf[off:off+n], in
// place in front of it, and returns where the IP header starts; buf[:off]
// must hold f.HeaderLen() bytes. The UDP checksum is left 0, as rxe sends
// over IPv4; PutUDPChecksum fills it in after PutICRC.
func PutDatagramHeaders(buf []byte, off, n int, f *DatagramFields) int {
	ulen := uint16(UDPLen + n)
	u := UDP(buf[off-UDPLen : off])
	var start int
	if f.Dst.Is4() || f.Dst.Is4In6() {
		start = off - UDPLen - IPv4MinLen
		var flags uint8
		if f.DF {
			flags = IPv4DontFragment
		}
		IPv4(buf[start:off]).Encode(&IPv4Fields{
			TOS: f.TOS, TotalLength: IPv4MinLen + ulen, ID: f.ID, Flags: flags, TTL: f.TTL,
			Protocol: ProtocolUDP, Src: f.Src, Dst: f.Dst,
		})
	} else {
		start = off - UDPLen - IPv6Len
		IPv6(buf[start:off]).Encode(&IPv6Fields{
			TrafficClass: f.TOS, PayloadLength: ulen, NextHeader: ProtocolUDP, HopLimit: f.TTL,
			Src: f.Src, Dst: f.Dst,
		})
	}
	u.Encode(&UDPFields{SrcPort: f.SrcPort, DstPort: f.DstPort, Length: ulen})
	return start
}

// Datagram is what ParseDatagram learns about a received datagram.
type Datagram struct {
	Src, Dst         netip.Addr
	SrcPort, DstPort uint16
	TOS              uint8
	// Off is the offset of the UDP payload (the BTH) from the start of
	// the IP header, End the offset of its end (Ethernet padding cut).
	Off, End int
}

// ParseDatagram reads the IP and UDP headers at the start of d, an IP
// datagram, into g. It is the packet path's check, allocation-free: it
// accepts only unfragmented UDP to port 4791 (IPv6 without extension
// headers) whose payload can hold a BTH and an ICRC, and returns
// ErrNotRoCE, unwrapped, for anything else. It reads lengths from the
// headers, not from len(d), which may include Ethernet padding. The IPv4
// header checksum is not checked: the ICRC does not cover it, and a
// kernel on the way has checked it for most links (IPv4.ChecksumValid
// does). Frame.DecodeIP is the thorough, wordy decoder.
func ParseDatagram(d []byte, g *Datagram) error {
	if len(d) < 1 {
		return ErrNotRoCE
	}
	var hl, end int
	switch d[ipv4VerIHL] >> 4 {
	case 4:
		if len(d) < IPv4MinLen+UDPLen {
			return ErrNotRoCE
		}
		ip := IPv4(d)
		hl = ip.HeaderLen()
		end = int(ip.TotalLength())
		if hl < IPv4MinLen || end > len(d) || ip.Protocol() != ProtocolUDP ||
			ip.FragOff() != 0 || ip.Flags()&IPv4MoreFragments != 0 {
			return ErrNotRoCE
		}
		g.Src, g.Dst, g.TOS = ip.Src(), ip.Dst(), ip.TOS()
	case 6:
		if len(d) < IPv6Len+UDPLen {
			return ErrNotRoCE
		}
		ip := IPv6(d)
		hl = IPv6Len
		end = hl + int(ip.PayloadLength())
		if end > len(d) || ip.NextHeader() != ProtocolUDP {
			return ErrNotRoCE
		}
		g.Src, g.Dst, g.TOS = ip.Src(), ip.Dst(), ip.TrafficClass()
	default:
		return ErrNotRoCE
	}
	// end >= hl follows: a header longer than the datagram fails here.
	if end < hl+UDPLen+BTHLen+ICRCLen {
		return ErrNotRoCE
	}
	u := UDP(d[hl:])
	if int(u.Length()) != end-hl {
		return ErrNotRoCE
	}
	g.SrcPort, g.DstPort = u.SrcPort(), u.DstPort()
	if g.DstPort != RoCEPort {
		return ErrNotRoCE
	}
	g.Off, g.End = hl+UDPLen, end
	return nil
}

// DatagramTemplate writes the IP and UDP headers of one source and
// destination, as PutDatagramHeaders does with the same fields, for a
// sender that writes them on every packet: the addresses, TTL, DF and
// destination port are taken apart and summed once, so an IPv4 header is
// three stores and a checksum of two additions. Make one with
// NewDatagramTemplate.
type DatagramTemplate struct {
	f  DatagramFields // as given; IPv6 goes through PutDatagramHeaders
	v4 bool
	w0 uint64 // IPv4 bytes 0-7 without TOS, total length and ID
	w1 uint64 // bytes 8-15 without the checksum
	w2 uint32 // bytes 16-19, the destination
	dp uint16 // UDP destination port
}

// NewDatagramTemplate makes a template of f's addresses, TTL, DF and
// destination port (the other fields are given to Put).
func NewDatagramTemplate(f *DatagramFields) DatagramTemplate {
	t := DatagramTemplate{f: *f, dp: f.DstPort}
	if !(f.Dst.Is4() || f.Dst.Is4In6()) {
		return t
	}
	t.v4 = true
	src, dst := f.Src.Unmap().As4(), f.Dst.Unmap().As4()
	var flags uint16
	if f.DF {
		flags = IPv4DontFragment
	}
	t.w0 = uint64(4<<4|IPv4MinLen/4)<<56 | uint64(flags<<13)
	t.w1 = uint64(f.TTL)<<56 | uint64(ProtocolUDP)<<48 | uint64(binary.BigEndian.Uint32(src[:]))
	t.w2 = binary.BigEndian.Uint32(dst[:])
	return t
}

// HeaderLen returns the length of the headers Put writes.
func (t *DatagramTemplate) HeaderLen() int {
	if t.v4 {
		return IPv4MinLen + UDPLen
	}
	return IPv6Len + UDPLen
}

// Put writes the headers in front of the UDP payload buf[off:off+n] with
// the given TOS (traffic class), IPv4 ID and UDP source port, as
// PutDatagramHeaders does, and returns where the IP header starts.
func (t *DatagramTemplate) Put(buf []byte, off, n int, tos uint8, id, srcPort uint16) int {
	if !t.v4 {
		f := t.f
		f.TOS, f.ID, f.SrcPort = tos, id, srcPort
		return PutDatagramHeaders(buf, off, n, &f)
	}
	start := off - UDPLen - IPv4MinLen
	b := buf[start:off]
	_ = b[IPv4MinLen+UDPLen-1]
	ulen := uint16(UDPLen + n)
	w0 := t.w0 | uint64(tos)<<48 | uint64(IPv4MinLen+ulen)<<32 | uint64(id)<<16
	s, c := bits.Add64(w0, t.w1, 0)
	s, c = bits.Add64(s, uint64(t.w2), c)
	binary.BigEndian.PutUint64(b[0:], w0)
	binary.BigEndian.PutUint64(b[8:], t.w1|uint64(^fold(s, c))<<32)
	binary.BigEndian.PutUint32(b[16:], t.w2)
	// UDP: ports, length and a zero checksum, as UDP.Encode writes them.
	binary.BigEndian.PutUint64(b[IPv4MinLen:], uint64(srcPort)<<48|uint64(t.dp)<<32|uint64(ulen)<<16)
	return start
}
