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
// rxe copies the headers to a scratch buffer and masks them there. Here
// nothing is copied or written: the header part (at most 80 bytes) is
// hashed eight bytes at a time with the variant fields ORed in as ones in a
// register (slicing-by-8), and the rest goes to hash/crc32's hardware path
// in place. Writing masks into memory and then hashing it, or hashing a
// stack copy, costs more than the hashing itself on small packets: the
// writes stall the vector loads that read them back, and a stack buffer
// escapes through crc32's indirect call.

// lrhSeed is the CRC after the 8 bytes of ones standing for the LRH.
var lrhSeed = crc32.ChecksumIEEE([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})

// slicing8 holds the tables of the slicing-by-8 CRC-32 (reflected IEEE
// polynomial, as hash/crc32 uses).
var slicing8 = func() (t [8][256]uint32) {
	for i := range 256 {
		c := uint32(i)
		for range 8 {
			if c&1 != 0 {
				c = c>>1 ^ 0xedb88320
			} else {
				c >>= 1
			}
		}
		t[0][i] = c
	}
	for i := range 256 {
		for k := 1; k < 8; k++ {
			t[k][i] = t[k-1][i]>>8 ^ t[0][t[k-1][i]&0xff]
		}
	}
	return t
}()

// icrcLayout says where the variant fields of one header layout are: the
// header part (IP, UDP, BTH) is words 8-byte words and tail (0 or 4) bytes,
// and mask has ones over every variant bit.
type icrcLayout struct {
	words, tail int
	mask        [10]uint64
}

// layouts is indexed by the IPv4 header length in words (5 to 15); index
// 0 is IPv6.
var layouts = func() (l [16]icrcLayout) {
	set := func(m *icrcLayout, off int, v byte) { m.mask[off/8] |= uint64(v) << (8 * (off % 8)) }
	build := func(ipLen int, v6 bool) (m icrcLayout) {
		n := ipLen + UDPLen + BTHLen
		m.words, m.tail = n/8, n%8
		if v6 {
			set(&m, 0, 0x0f) // traffic class, high nibble
			set(&m, 1, 0xff) // traffic class low nibble, flow label
			set(&m, 2, 0xff)
			set(&m, 3, 0xff)
			set(&m, 7, 0xff) // hop limit
		} else {
			set(&m, 1, 0xff)  // TOS
			set(&m, 8, 0xff)  // TTL
			set(&m, 10, 0xff) // header checksum
			set(&m, 11, 0xff)
		}
		set(&m, ipLen+6, 0xff) // UDP checksum
		set(&m, ipLen+7, 0xff)
		set(&m, ipLen+UDPLen+bthResv8a, 0xff)
		return m
	}
	l[0] = build(IPv6Len, true)
	for ihl := 5; ihl < 16; ihl++ {
		l[ihl] = build(ihl*4, false)
	}
	return l
}()

// step8 feeds eight bytes (little-endian in v) to the slicing-by-8 CRC
// state s.
func step8(s uint32, v uint64) uint32 {
	t := &slicing8
	lo, hi := uint32(v)^s, uint32(v>>32)
	return t[7][lo&0xff] ^ t[6][lo>>8&0xff] ^ t[5][lo>>16&0xff] ^ t[4][lo>>24] ^
		t[3][hi&0xff] ^ t[2][hi>>8&0xff] ^ t[1][hi>>16&0xff] ^ t[0][hi>>24]
}

// headerCRC continues crc over the header part of a datagram with its
// variant fields read as ones. The two common layouts (IPv4 without
// options: 40 bytes; IPv6: 60) are unrolled.
func headerCRC(crc uint32, h []byte, l *icrcLayout) uint32 {
	s := ^crc
	m := &l.mask
	le := binary.LittleEndian
	t := &slicing8
	var lo, hi uint32
	// The unrolled cases repeat step8's body by hand: the compiler will
	// not inline step8 (too costly) and a call per word costs more than
	// the step.
	switch {
	case l.words == 5 && l.tail == 0:
		_ = h[39]
		lo, hi = uint32(le.Uint64(h[0:])|m[0])^s, uint32((le.Uint64(h[0:])|m[0])>>32)
		s = t[7][lo&0xff] ^ t[6][lo>>8&0xff] ^ t[5][lo>>16&0xff] ^ t[4][lo>>24] ^
			t[3][hi&0xff] ^ t[2][hi>>8&0xff] ^ t[1][hi>>16&0xff] ^ t[0][hi>>24]
		lo, hi = uint32(le.Uint64(h[8:])|m[1])^s, uint32((le.Uint64(h[8:])|m[1])>>32)
		s = t[7][lo&0xff] ^ t[6][lo>>8&0xff] ^ t[5][lo>>16&0xff] ^ t[4][lo>>24] ^
			t[3][hi&0xff] ^ t[2][hi>>8&0xff] ^ t[1][hi>>16&0xff] ^ t[0][hi>>24]
		lo, hi = uint32(le.Uint64(h[16:])|m[2])^s, uint32((le.Uint64(h[16:])|m[2])>>32)
		s = t[7][lo&0xff] ^ t[6][lo>>8&0xff] ^ t[5][lo>>16&0xff] ^ t[4][lo>>24] ^
			t[3][hi&0xff] ^ t[2][hi>>8&0xff] ^ t[1][hi>>16&0xff] ^ t[0][hi>>24]
		lo, hi = uint32(le.Uint64(h[24:])|m[3])^s, uint32((le.Uint64(h[24:])|m[3])>>32)
		s = t[7][lo&0xff] ^ t[6][lo>>8&0xff] ^ t[5][lo>>16&0xff] ^ t[4][lo>>24] ^
			t[3][hi&0xff] ^ t[2][hi>>8&0xff] ^ t[1][hi>>16&0xff] ^ t[0][hi>>24]
		lo, hi = uint32(le.Uint64(h[32:])|m[4])^s, uint32((le.Uint64(h[32:])|m[4])>>32)
		s = t[7][lo&0xff] ^ t[6][lo>>8&0xff] ^ t[5][lo>>16&0xff] ^ t[4][lo>>24] ^
			t[3][hi&0xff] ^ t[2][hi>>8&0xff] ^ t[1][hi>>16&0xff] ^ t[0][hi>>24]
		return ^s
	case l.words == 7 && l.tail == 4:
		_ = h[59]
		lo, hi = uint32(le.Uint64(h[0:])|m[0])^s, uint32((le.Uint64(h[0:])|m[0])>>32)
		s = t[7][lo&0xff] ^ t[6][lo>>8&0xff] ^ t[5][lo>>16&0xff] ^ t[4][lo>>24] ^
			t[3][hi&0xff] ^ t[2][hi>>8&0xff] ^ t[1][hi>>16&0xff] ^ t[0][hi>>24]
		lo, hi = uint32(le.Uint64(h[8:])|m[1])^s, uint32((le.Uint64(h[8:])|m[1])>>32)
		s = t[7][lo&0xff] ^ t[6][lo>>8&0xff] ^ t[5][lo>>16&0xff] ^ t[4][lo>>24] ^
			t[3][hi&0xff] ^ t[2][hi>>8&0xff] ^ t[1][hi>>16&0xff] ^ t[0][hi>>24]
		lo, hi = uint32(le.Uint64(h[16:])|m[2])^s, uint32((le.Uint64(h[16:])|m[2])>>32)
		s = t[7][lo&0xff] ^ t[6][lo>>8&0xff] ^ t[5][lo>>16&0xff] ^ t[4][lo>>24] ^
			t[3][hi&0xff] ^ t[2][hi>>8&0xff] ^ t[1][hi>>16&0xff] ^ t[0][hi>>24]
		lo, hi = uint32(le.Uint64(h[24:])|m[3])^s, uint32((le.Uint64(h[24:])|m[3])>>32)
		s = t[7][lo&0xff] ^ t[6][lo>>8&0xff] ^ t[5][lo>>16&0xff] ^ t[4][lo>>24] ^
			t[3][hi&0xff] ^ t[2][hi>>8&0xff] ^ t[1][hi>>16&0xff] ^ t[0][hi>>24]
		lo, hi = uint32(le.Uint64(h[32:])|m[4])^s, uint32((le.Uint64(h[32:])|m[4])>>32)
		s = t[7][lo&0xff] ^ t[6][lo>>8&0xff] ^ t[5][lo>>16&0xff] ^ t[4][lo>>24] ^
			t[3][hi&0xff] ^ t[2][hi>>8&0xff] ^ t[1][hi>>16&0xff] ^ t[0][hi>>24]
		lo, hi = uint32(le.Uint64(h[40:])|m[5])^s, uint32((le.Uint64(h[40:])|m[5])>>32)
		s = t[7][lo&0xff] ^ t[6][lo>>8&0xff] ^ t[5][lo>>16&0xff] ^ t[4][lo>>24] ^
			t[3][hi&0xff] ^ t[2][hi>>8&0xff] ^ t[1][hi>>16&0xff] ^ t[0][hi>>24]
		lo, hi = uint32(le.Uint64(h[48:])|m[6])^s, uint32((le.Uint64(h[48:])|m[6])>>32)
		s = t[7][lo&0xff] ^ t[6][lo>>8&0xff] ^ t[5][lo>>16&0xff] ^ t[4][lo>>24] ^
			t[3][hi&0xff] ^ t[2][hi>>8&0xff] ^ t[1][hi>>16&0xff] ^ t[0][hi>>24]
	default:
		_ = h[l.words*8+l.tail-1]
		for i := range l.words {
			s = step8(s, le.Uint64(h[i*8:])|m[i])
		}
	}
	if l.tail == 4 {
		s ^= le.Uint32(h[l.words*8:]) | uint32(m[l.words])
		s = t[3][s&0xff] ^ t[2][s>>8&0xff] ^ t[1][s>>16&0xff] ^ t[0][s>>24]
	}
	return ^s
}

// ICRC computes the invariant CRC of a RoCEv2 datagram that starts at its
// IP header (IPv4 or IPv6, told by the version nibble) and ends with the
// four ICRC bytes, which are not read. It neither writes nor keeps ip.
func ICRC(ip []byte) (uint32, error) {
	if len(ip) < 1 {
		return 0, fmt.Errorf("icrc: %w: empty datagram", ErrTruncated)
	}
	var l *icrcLayout
	switch ip[0] >> 4 {
	case 4:
		ihl := ip[0] & 0x0f
		if ihl < 5 {
			return 0, fmt.Errorf("icrc: %w: IHL %d", ErrBadIPHeader, ihl)
		}
		l = &layouts[ihl]
	case 6:
		l = &layouts[0]
	default:
		return 0, fmt.Errorf("icrc: %w: version %d", ErrBadIPHeader, ip[0]>>4)
	}
	n := l.words*8 + l.tail
	if len(ip) < n+ICRCLen {
		return 0, fmt.Errorf("icrc: %w: %d bytes, need %d", ErrTruncated, len(ip), n+ICRCLen)
	}
	crc := headerCRC(lrhSeed, ip[:n], l)
	rest := ip[n : len(ip)-ICRCLen]
	if len(rest) < 64 {
		return shortCRC(crc, rest), nil
	}
	// hash/crc32's hardware path takes a multiple of 16 bytes and leaves
	// the rest to its table loop, which takes the last 1 to 8 bytes one
	// at a time: the bytes past a multiple of 16 (the 4 of an AETH, the 4
	// of an ImmDt) go first, here, eight or four at a time.
	if h := len(rest) & 15; h != 0 {
		crc, rest = shortCRC(crc, rest[:h]), rest[h:]
	}
	return crc32.Update(crc, crc32.IEEETable, rest), nil
}

// shortCRC continues crc over p, eight bytes at a time while it can, then
// four, then one: what follows the BTH of an ACK (4 bytes), a READ
// request (16) or any packet with less than 64 bytes there. hash/crc32
// hashes such bytes eight at a time only while more than eight remain,
// and the rest (all of them under 16) one at a time.
func shortCRC(crc uint32, p []byte) uint32 {
	s := ^crc
	le := binary.LittleEndian
	t := &slicing8
	for len(p) >= 8 {
		v := le.Uint64(p)
		lo, hi := uint32(v)^s, uint32(v>>32)
		s = t[7][lo&0xff] ^ t[6][lo>>8&0xff] ^ t[5][lo>>16&0xff] ^ t[4][lo>>24] ^
			t[3][hi&0xff] ^ t[2][hi>>8&0xff] ^ t[1][hi>>16&0xff] ^ t[0][hi>>24]
		p = p[8:]
	}
	if len(p) >= 4 {
		s ^= le.Uint32(p)
		s = t[3][s&0xff] ^ t[2][s>>8&0xff] ^ t[1][s>>16&0xff] ^ t[0][s>>24]
		p = p[4:]
	}
	for _, v := range p {
		s = t[0][byte(s)^v] ^ s>>8
	}
	return ^s
}

// PutICRC computes the ICRC of a datagram (as ICRC does) and writes it into
// its last four bytes.
func PutICRC(ip []byte) error {
	crc, err := ICRC(ip)
	if err != nil {
		return err
	}
	SetICRC(ip, crc)
	return nil
}

// VerifyICRC checks the ICRC in the last four bytes of a datagram; a
// mismatch is an error wrapping ErrBadICRC.
func VerifyICRC(ip []byte) error {
	crc, err := ICRC(ip)
	if err != nil {
		return err
	}
	if CarriedICRC(ip) != crc {
		return errBadICRC
	}
	return nil
}

// SetICRC writes crc into the ICRC field, a datagram's last four bytes.
// With ICRC it is PutICRC for a link's per-packet loop, which saves a
// call a packet: PutICRC is too large to inline.
func SetICRC(ip []byte, crc uint32) {
	binary.LittleEndian.PutUint32(ip[len(ip)-ICRCLen:], crc)
}

// CarriedICRC returns the ICRC a datagram carries in its last four bytes.
// With ICRC it is VerifyICRC for a link's per-packet loop.
func CarriedICRC(ip []byte) uint32 {
	return binary.LittleEndian.Uint32(ip[len(ip)-ICRCLen:])
}

// errBadICRC is built once: verification runs on every received packet.
var errBadICRC = fmt.Errorf("icrc: %w", ErrBadICRC)
