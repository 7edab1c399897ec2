package bth

// PSN is a 24-bit packet sequence number (IBA 9.7.1). Arithmetic wraps at
// 2^24; order is defined within half the space, as rxe's psn_compare does.
type PSN uint32

const (
	psnMask = 0x00ffffff
	// MaxPSN is the largest PSN.
	MaxPSN PSN = psnMask
	// PSNSpace is the number of distinct PSNs.
	PSNSpace = 1 << 24
)

// Add returns p+n modulo 2^24.
func (p PSN) Add(n int) PSN { return PSN(int64(p)+int64(n)) & psnMask }

// Next returns p+1 modulo 2^24.
func (p PSN) Next() PSN { return (p + 1) & psnMask }

// Diff returns the signed distance p-q, in [-2^23, 2^23).
func (p PSN) Diff(q PSN) int { return int(int32(uint32(p-q)<<8) >> 8) }

// Compare returns -1, 0 or +1 as p is before, equal to or after q, taking
// the shorter way round the circle (rxe: (s32)((a - b) << 8)).
func (p PSN) Compare(q PSN) int {
	d := int32(uint32(p-q) << 8)
	switch {
	case d < 0:
		return -1
	case d > 0:
		return 1
	}
	return 0
}

// Before reports whether p comes before q.
func (p PSN) Before(q PSN) bool { return p.Compare(q) < 0 }

// After reports whether p comes after q.
func (p PSN) After(q PSN) bool { return p.Compare(q) > 0 }

// InWindow reports whether p lies in [start, start+size), modulo 2^24.
func (p PSN) InWindow(start PSN, size int) bool {
	return size > 0 && int(uint32(p-start)&psnMask) < size
}

// Valid reports whether p fits in 24 bits.
func (p PSN) Valid() bool { return p <= MaxPSN }
