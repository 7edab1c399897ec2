package bth

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// The invariant CRC (IBA Annex A17.4.1.2, rxe_icrc.c) is CRC-32 as
// Ethernet computes it, over
//
//	8 bytes of ones standing for the LRH that RoCEv2 does not carry,
//	the IP header with its variant fields set to ones
//	  (IPv4: TOS, TTL, header checksum; IPv6: traffic class, flow label,
//	  hop limit),
//	the UDP header with its checksum set to ones,
//	the BTH with byte 4 (FECN, BECN, reserved) set to ones,
//	everything after the BTH up to the ICRC: extension headers, payload, pad.
//
// It is appended in little-endian byte order, as rxe stores the CPU-order
// result of crc32_le.
//
// The header part is copied to a small stack buffer, masked there and
// hashed; the rest is hashed in place, so the cost is that of crc32 over
// the packet plus a copy of at most 88 bytes.

var crcTable = crc32.MakeTable(crc32.IEEE)

// maxICRCHeader is the most header bytes the ICRC masks: the LRH stand-in,
// an IPv4 header with full options, UDP and BTH.
const maxICRCHeader = 8 + 60 + UDPLen + BTHLen

// ICRC computes the invariant CRC of a RoCEv2 datagram that starts at its
// IP header (IPv4 or IPv6, told by the version nibble) and ends with the
// four ICRC bytes, which are not read.
func ICRC(ip []byte) (uint32, error) {
	if len(ip) < 1 {
		return 0, fmt.Errorf("icrc: %w: empty datagram", ErrTruncated)
	}
	var hdr [maxICRCHeader]byte
	for i := range 8 {
		hdr[i] = 0xff
	}
	var ipLen int
	switch ip[0] >> 4 {
	case 4:
		ipLen = int(ip[0]&0x0f) * 4
		if ipLen < IPv4MinLen {
			return 0, fmt.Errorf("icrc: %w: IHL %d", ErrBadIPHeader, ipLen/4)
		}
	case 6:
		ipLen = IPv6Len
	default:
		return 0, fmt.Errorf("icrc: %w: version %d", ErrBadIPHeader, ip[0]>>4)
	}
	n := ipLen + UDPLen + BTHLen
	if len(ip) < n+ICRCLen {
		return 0, fmt.Errorf("icrc: %w: %d bytes, need %d", ErrTruncated, len(ip), n+ICRCLen)
	}
	h := hdr[8 : 8+n]
	copy(h, ip[:n])
	if ipLen == IPv6Len {
		h[0] |= 0x0f // traffic class (high nibble)
		h[1], h[2], h[3] = 0xff, 0xff, 0xff
		h[7] = 0xff // hop limit
	} else {
		h[1] = 0xff               // TOS
		h[8] = 0xff               // TTL
		h[10], h[11] = 0xff, 0xff // header checksum
	}
	u := h[ipLen:]
	u[6], u[7] = 0xff, 0xff // UDP checksum
	u[UDPLen+bthResv8a] = 0xff
	crc := crc32.Update(0, crcTable, hdr[:8+n])
	crc = crc32.Update(crc, crcTable, ip[n:len(ip)-ICRCLen])
	return crc, nil
}

// PutICRC computes the ICRC of a datagram (as ICRC does) and writes it into
// its last four bytes.
func PutICRC(ip []byte) error {
	crc, err := ICRC(ip)
	if err != nil {
		return err
	}
	binary.LittleEndian.PutUint32(ip[len(ip)-ICRCLen:], crc)
	return nil
}

// VerifyICRC checks the ICRC in the last four bytes of a datagram; a
// mismatch is an error wrapping ErrBadICRC.
func VerifyICRC(ip []byte) error {
	crc, err := ICRC(ip)
	if err != nil {
		return err
	}
	if got := binary.LittleEndian.Uint32(ip[len(ip)-ICRCLen:]); got != crc {
		return errBadICRC
	}
	return nil
}

// errBadICRC is built once: verification runs on every received packet.
var errBadICRC = fmt.Errorf("icrc: %w", ErrBadICRC)
