package udp

import (
	"hash/crc32"
	"math/bits"
)

// idSolver finds the IPv4 ID that explains an ICRC mismatch. The unknown
// ID is 16 bits at IP header offset 4; m is the number of ICRC-covered
// bytes after it (the rest of the datagram, ICRC excluded).
type idSolver struct {
	cache [16]idBasis // direct-mapped by m
	zeros []byte
}

// idBasis is L, for one m, in echelon form: solving clears pivot bits in
// order, vec[i] having none of the earlier pivots.
type idBasis struct {
	m     int
	pivot [16]uint32 // one-bit masks
	vec   [16]uint32
	comb  [16]uint16 // which ID bits make vec[i]
}

func newIDSolver(maxLen int) *idSolver {
	s := &idSolver{zeros: make([]byte, maxLen+2)}
	for i := range s.cache {
		s.cache[i].m = -1
	}
	return s
}

var ieee = crc32.MakeTable(crc32.IEEE)

// solve returns the ID that turns the ICRC computed with ID 0 into the one
// received, given diff = their XOR.
func (s *idSolver) solve(m int, diff uint32) (uint16, bool) {
	if m+2 > len(s.zeros) {
		return 0, false
	}
	b := &s.cache[m&15]
	if b.m != m {
		b.build(m, s.zeros)
	}
	var id uint16
	for i := range b.vec {
		if diff&b.pivot[i] != 0 {
			diff ^= b.vec[i]
			id ^= b.comb[i]
		}
	}
	return id, diff == 0
}

// build computes the columns: the ICRC change from flipping one ID bit is
// independent of everything else in the datagram (CRC linearity), so it is
// the CRC of that bit followed by m zero bytes, minus (XOR) the CRC of
// m+2 zero bytes.
func (b *idBasis) build(m int, zeros []byte) {
	z := crc32.Update(0, ieee, zeros[:m+2])
	var pat [2]byte
	for i := range 16 {
		v := uint16(1) << i
		pat[0], pat[1] = byte(v>>8), byte(v)
		c := crc32.Update(crc32.Update(0, ieee, pat[:]), ieee, zeros[:m])
		b.vec[i] = c ^ z
		b.comb[i] = 1 << i
	}
	for i := range 16 {
		for j := range i {
			if b.vec[i]&b.pivot[j] != 0 {
				b.vec[i] ^= b.vec[j]
				b.comb[i] ^= b.comb[j]
			}
		}
		// Nonzero: the CRC catches every burst of up to 32 bits, so no
		// combination of the 16 ID bits leaves the ICRC unchanged.
		b.pivot[i] = 1 << (31 - bits.LeadingZeros32(b.vec[i]))
	}
	b.m = m
}
