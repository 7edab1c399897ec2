package bth

import (
	"fmt"
)

// Frame is a decoded view of a whole RoCEv2 frame: Ethernet (optionally
// with one 802.1Q tag), IPv4 or IPv6, UDP to port 4791, and the RoCE
// packet. Like Packet it holds only offsets into the caller's bytes.
type Frame struct {
	Packet
	buf  []byte
	eth  int // offset of the Ethernet header, -1 when decoding began at IP
	vlan int // offset of the 802.1Q tag's TCI, -1 when untagged
	ip   int
	udp  int
	end  int // end of the IP datagram (Ethernet padding excluded)
}

// Decode parses an Ethernet frame.
func (f *Frame) Decode(b []byte) error {
	*f = Frame{eth: -1, vlan: -1}
	if len(b) < EthernetLen {
		return fmt.Errorf("ethernet: %w: %d bytes", ErrTruncated, len(b))
	}
	off := EthernetLen
	et := Ethernet(b).EtherType()
	if et == EtherTypeVLAN {
		if len(b) < off+VLANLen {
			return fmt.Errorf("802.1Q: %w: %d bytes", ErrTruncated, len(b))
		}
		f.vlan = off
		et = VLAN(b[off:]).EtherType()
		off += VLANLen
	}
	if et != EtherTypeIPv4 && et != EtherTypeIPv6 {
		return fmt.Errorf("ethernet: %w: EtherType 0x%04x", ErrNotRoCE, et)
	}
	if err := f.decodeIP(b, off); err != nil {
		return err
	}
	f.eth = 0
	return nil
}

// DecodeIP parses an IP datagram (IPv4 or IPv6, by the version nibble).
func (f *Frame) DecodeIP(b []byte) error {
	*f = Frame{eth: -1, vlan: -1}
	return f.decodeIP(b, 0)
}

func (f *Frame) decodeIP(b []byte, off int) error {
	ip := b[off:]
	if len(ip) < 1 {
		return fmt.Errorf("ip: %w: no header", ErrTruncated)
	}
	var hlen, end int
	switch ip[0] >> 4 {
	case 4:
		if len(ip) < IPv4MinLen {
			return fmt.Errorf("ipv4: %w: %d bytes", ErrTruncated, len(ip))
		}
		h := IPv4(ip)
		hlen = h.HeaderLen()
		if hlen < IPv4MinLen {
			return fmt.Errorf("ipv4: %w: IHL %d", ErrBadIPHeader, hlen/4)
		}
		if len(ip) < hlen {
			return fmt.Errorf("ipv4: %w: %d bytes, header needs %d", ErrTruncated, len(ip), hlen)
		}
		end = int(h.TotalLength())
		if end < hlen {
			return fmt.Errorf("ipv4: %w: total length %d under header length %d", ErrBadIPHeader, end, hlen)
		}
		if end > len(ip) {
			return fmt.Errorf("ipv4: %w: total length %d, %d bytes present", ErrTruncated, end, len(ip))
		}
		if !h.ChecksumValid() {
			return fmt.Errorf("ipv4: %w: header checksum 0x%04x", ErrBadIPHeader, h.Checksum())
		}
		if h.Flags()&IPv4MoreFragments != 0 || h.FragOff() != 0 {
			return fmt.Errorf("ipv4: %w: fragment", ErrNotRoCE)
		}
		if p := h.Protocol(); p != ProtocolUDP {
			return fmt.Errorf("ipv4: %w: protocol %d", ErrNotRoCE, p)
		}
	case 6:
		if len(ip) < IPv6Len {
			return fmt.Errorf("ipv6: %w: %d bytes", ErrTruncated, len(ip))
		}
		h := IPv6(ip)
		hlen = IPv6Len
		end = IPv6Len + int(h.PayloadLength())
		if end > len(ip) {
			return fmt.Errorf("ipv6: %w: payload length %d, %d bytes present", ErrTruncated, h.PayloadLength(), len(ip)-IPv6Len)
		}
		if nh := h.NextHeader(); nh != ProtocolUDP {
			return fmt.Errorf("ipv6: %w: next header %d", ErrNotRoCE, nh)
		}
	default:
		return fmt.Errorf("ip: %w: version %d", ErrBadIPHeader, ip[0]>>4)
	}
	if end-hlen < UDPLen {
		return fmt.Errorf("udp: %w: %d bytes", ErrTruncated, end-hlen)
	}
	u := UDP(ip[hlen:])
	if port := u.DstPort(); port != RoCEPort {
		return fmt.Errorf("udp: %w: destination port %d", ErrNotRoCE, port)
	}
	if l := int(u.Length()); l != end-hlen {
		return fmt.Errorf("udp: %w: UDP length %d, IP carries %d", ErrBadLength, l, end-hlen)
	}
	if err := f.Packet.Decode(ip[hlen+UDPLen : end]); err != nil {
		return err
	}
	f.buf, f.ip, f.udp, f.end = b, off, off+hlen, off+end
	return nil
}

// Bytes returns the frame as decoded, including any Ethernet padding.
func (f *Frame) Bytes() []byte { return f.buf }

// Ethernet returns the Ethernet header, or nil when decoding began at IP.
func (f *Frame) Ethernet() Ethernet {
	if f.eth < 0 {
		return nil
	}
	return Ethernet(f.buf[f.eth : f.eth+EthernetLen])
}

// VLAN returns the 802.1Q tag, or nil when the frame is untagged.
func (f *Frame) VLAN() VLAN {
	if f.vlan < 0 {
		return nil
	}
	return VLAN(f.buf[f.vlan : f.vlan+VLANLen])
}

// IPVersion returns 4 or 6.
func (f *Frame) IPVersion() int { return int(f.buf[f.ip] >> 4) }

// IPv4 returns the IPv4 header (with options), or nil for IPv6.
func (f *Frame) IPv4() IPv4 {
	if f.IPVersion() != 4 {
		return nil
	}
	return IPv4(f.buf[f.ip:f.udp])
}

// IPv6 returns the IPv6 header, or nil for IPv4.
func (f *Frame) IPv6() IPv6 {
	if f.IPVersion() != 6 {
		return nil
	}
	return IPv6(f.buf[f.ip:f.udp])
}

// UDP returns the UDP header.
func (f *Frame) UDP() UDP { return UDP(f.buf[f.udp : f.udp+UDPLen]) }

// Datagram returns the IP datagram: IP header through ICRC.
func (f *Frame) Datagram() []byte { return f.buf[f.ip:f.end] }

// VerifyICRC checks the packet's ICRC against its IP and UDP headers.
func (f *Frame) VerifyICRC() error { return VerifyICRC(f.Datagram()) }

// Verify checks everything that protects the datagram: the UDP checksum
// when the sender set one (rxe leaves it 0) and the ICRC. The IPv4 header
// checksum was checked by Decode. Together they cover every bit of the
// datagram except the BTH's FECN, BECN and reserved bits, which switches
// may change on the way (IBA A17.4.1.2).
func (f *Frame) Verify() error {
	if !f.UDPChecksumValid() {
		return fmt.Errorf("udp: %w: checksum 0x%04x", ErrBadChecksum, f.UDP().Checksum())
	}
	return f.VerifyICRC()
}

// UDPChecksumValid reports whether the UDP checksum is right, or absent
// (0, which RoCEv2 senders use: the ICRC protects the packet).
func (f *Frame) UDPChecksumValid() bool {
	return UDPChecksumValid(f.Datagram())
}
