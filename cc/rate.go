package cc

import (
	"strconv"
	"time"
)

// Rate is a sending rate in bits per second.
type Rate uint64

// Rate units.
const (
	BitPerSecond Rate = 1
	Kbps              = 1000 * BitPerSecond
	Mbps              = 1000 * Kbps
	Gbps              = 1000 * Mbps
)

// String formats the rate with the largest unit that keeps it readable,
// e.g. "40Gb/s", "12.5Mb/s".
func (r Rate) String() string {
	switch {
	case r >= Gbps:
		return strconv.FormatFloat(float64(r)/float64(Gbps), 'f', -1, 64) + "Gb/s"
	case r >= Mbps:
		return strconv.FormatFloat(float64(r)/float64(Mbps), 'f', -1, 64) + "Mb/s"
	case r >= Kbps:
		return strconv.FormatFloat(float64(r)/float64(Kbps), 'f', -1, 64) + "Kb/s"
	}
	return strconv.FormatUint(uint64(r), 10) + "b/s"
}

// TxTime returns how long n bytes take on the wire at rate r, rounded up to
// the nanosecond; 0 for a zero rate.
func (r Rate) TxTime(n int) time.Duration {
	if r == 0 {
		return 0
	}
	bits := uint64(n) * 8 * uint64(time.Second)
	return time.Duration((bits + uint64(r) - 1) / uint64(r))
}

func clampRate(r, lo, hi Rate) Rate {
	if r < lo {
		return lo
	}
	if r > hi {
		return hi
	}
	return r
}
