package bth

import (
	"encoding/binary"
	"math/bits"
)

// checksum returns the ones'-complement sum of RFC 1071 over b, added to
// initial, not yet complemented. It is the one checksum of the IPv4 header
// and of UDP. It adds eight bytes at a time with an end-around carry (RFC
// 1071 section 2: the sum is the same whatever the word size) and folds to
// 16 bits at the end. A sum of anything but zeros is never 0.
func checksum(b []byte, initial uint16) uint16 {
	s, c := uint64(initial), uint64(0)
	for len(b) >= 32 {
		s, c = bits.Add64(s, binary.BigEndian.Uint64(b), c)
		s, c = bits.Add64(s, binary.BigEndian.Uint64(b[8:]), c)
		s, c = bits.Add64(s, binary.BigEndian.Uint64(b[16:]), c)
		s, c = bits.Add64(s, binary.BigEndian.Uint64(b[24:]), c)
		b = b[32:]
	}
	for len(b) >= 8 {
		s, c = bits.Add64(s, binary.BigEndian.Uint64(b), c)
		b = b[8:]
	}
	if len(b) >= 4 {
		s, c = bits.Add64(s, uint64(binary.BigEndian.Uint32(b)), c)
		b = b[4:]
	}
	if len(b) >= 2 {
		s, c = bits.Add64(s, uint64(binary.BigEndian.Uint16(b)), c)
		b = b[2:]
	}
	if len(b) == 1 {
		s, c = bits.Add64(s, uint64(b[0])<<8, c)
	}
	return fold(s, c)
}

// fold reduces a 64-bit ones'-complement sum s with its pending carry c
// to 16 bits, not yet complemented.
func fold(s, c uint64) uint16 {
	// The carry out of the top is worth 1 (2^64 = 1 in ones'
	// complement); adding it back cannot carry again.
	s, c = bits.Add64(s, c, 0)
	s += c
	s = s>>32 + s&0xffffffff
	s = s>>32 + s&0xffffffff
	s = s>>16 + s&0xffff
	s = s>>16 + s&0xffff
	return uint16(s)
}

// pseudoHeaderChecksum returns the sum of the pseudo-header that the UDP
// checksum covers (RFC 768; RFC 8200 section 8.1 for IPv6): the addresses
// of the IP header ip, the protocol and the UDP length.
func pseudoHeaderChecksum(ip []byte, udpLen int) uint16 {
	var addrs []byte
	if ip[0]>>4 == 4 {
		addrs = ip[ipv4Src : ipv4Dst+4]
	} else {
		addrs = ip[ipv6Src : ipv6Dst+16]
	}
	var w [4]byte
	binary.BigEndian.PutUint16(w[0:], ProtocolUDP)
	binary.BigEndian.PutUint16(w[2:], uint16(udpLen))
	return checksum(w[:], checksum(addrs, 0))
}

// udpOf returns the UDP datagram (header and payload) of the IP datagram d.
func udpOf(d []byte) UDP {
	if d[0]>>4 == 4 {
		return UDP(d[IPv4(d).HeaderLen():])
	}
	return UDP(d[IPv6Len:])
}

// PutUDPChecksum computes and writes the UDP checksum of the IP datagram
// d, which runs from the IP header to the end of the UDP payload. RFC
// 8200 section 8.1 makes the checksum mandatory over IPv6 (Linux drops
// zero-checksum UDP/IPv6); over IPv4 RoCEv2 senders such as rxe leave it 0.
// Call it after PutICRC: the checksum covers the ICRC, and the ICRC masks
// the checksum.
func PutUDPChecksum(d []byte) {
	u := udpOf(d)
	binary.BigEndian.PutUint16(u[udpChecksum:], 0)
	c := ^checksum(u, pseudoHeaderChecksum(d, len(u)))
	if c == 0 {
		c = 0xffff // 0 means no checksum (RFC 768)
	}
	binary.BigEndian.PutUint16(u[udpChecksum:], c)
}

// UDPChecksumValid reports whether the UDP checksum of the IP datagram d
// is right, or absent (0, which RoCEv2 senders use over IPv4: the ICRC
// protects the packet).
func UDPChecksumValid(d []byte) bool {
	u := udpOf(d)
	if u.Checksum() == 0 {
		return true
	}
	return checksum(u, pseudoHeaderChecksum(d, len(u))) == 0xffff
}
