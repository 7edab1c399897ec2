package hist

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

const (
	// subBits is log2 of the sub-buckets per octave: 32 keeps a bucket's
	// width within 1/32 of its values.
	subBits = 5
	sub     = 1 << subBits
	// maxShift is the largest octave's shift: values of up to
	// subBits+1+maxShift bits are kept.
	maxShift = 31

	// NumBuckets is the number of buckets.
	NumBuckets = maxShift<<subBits + 2*sub
	// MaxValue is the largest value counted in a bucket of its own; larger
	// values count in the last bucket.
	MaxValue = 1<<(subBits+1+maxShift) - 1
)

// Histogram counts values (nanoseconds, bytes, ...) in log-linear buckets.
// Record, RecordDuration and Snapshot are safe for concurrent use; the
// zero value is empty and ready.
type Histogram struct {
	// sum and max come first: a record touches them and one bucket,
	// and values up to about a millisecond have their bucket within
	// 4 KiB of them, mostly on the same page. A QP's histogram among
	// thousands is cold, and a second page is a second TLB miss.
	sum    atomic.Uint64
	max    atomic.Uint64
	counts [NumBuckets]atomic.Uint64
}

// bucket returns the index of v's bucket.
func bucket(v uint64) int {
	if v > MaxValue {
		v = MaxValue
	}
	shift := bits.Len64(v) - (subBits + 1)
	if shift < 0 {
		shift = 0
	}
	return shift<<subBits + int(v>>uint(shift))
}

// bounds returns the smallest value of bucket i and the bucket's width.
func bounds(i int) (lo, width uint64) {
	shift := i>>subBits - 1
	if shift < 0 {
		shift = 0
	}
	m := uint64(i - shift<<subBits)
	return m << uint(shift), 1 << uint(shift)
}

// Record counts v. It does not allocate or take a lock.
func (h *Histogram) Record(v uint64) {
	h.counts[bucket(v)].Add(1)
	h.sum.Add(v)
	// A CAS loop only while v is a new maximum, which is rare once the
	// histogram has seen its tail.
	for m := h.max.Load(); v > m; m = h.max.Load() {
		if h.max.CompareAndSwap(m, v) {
			break
		}
	}
}

// RecordDuration counts d in nanoseconds; a negative d (a clock that
// stepped back) counts as 0.
func (h *Histogram) RecordDuration(d time.Duration) {
	if d < 0 {
		d = 0
	}
	h.Record(uint64(d))
}

// Snapshot copies the histogram into s, replacing what s held. Taken while
// others record, it may miss the values in flight, but its buckets and
// Count agree with each other.
func (h *Histogram) Snapshot(s *Snapshot) {
	s.Count = 0
	for i := range h.counts {
		c := h.counts[i].Load()
		s.Counts[i] = c
		s.Count += c
	}
	s.Sum = h.sum.Load()
	s.Max = h.max.Load()
}

// Add adds a snapshot's values to the histogram.
func (h *Histogram) Add(s *Snapshot) {
	for i, c := range s.Counts {
		if c != 0 {
			h.counts[i].Add(c)
		}
	}
	h.sum.Add(s.Sum)
	for m := h.max.Load(); s.Max > m; m = h.max.Load() {
		if h.max.CompareAndSwap(m, s.Max) {
			break
		}
	}
}

// Snapshot is a histogram's counts at one moment: a plain value to merge
// and query.
type Snapshot struct {
	// Counts holds each bucket's count.
	Counts [NumBuckets]uint64
	// Count is the number of values, the sum of Counts.
	Count uint64
	// Sum is the sum of the values (modulo 2^64).
	Sum uint64
	// Max is the largest value.
	Max uint64
}

// Merge adds o's values to s.
func (s *Snapshot) Merge(o *Snapshot) {
	for i, c := range o.Counts {
		s.Counts[i] += c
	}
	s.Count += o.Count
	s.Sum += o.Sum
	s.Max = max(s.Max, o.Max)
}

// Quantile returns the value at quantile q (0.5 for the median, 0.999 for
// P99.9): the midpoint of the bucket holding the ⌈q·Count⌉-th smallest
// value, never above Max. It returns 0 for an empty snapshot; q outside
// [0, 1] is clamped.
func (s *Snapshot) Quantile(q float64) uint64 {
	if s.Count == 0 {
		return 0
	}
	if q >= 1 || math.IsNaN(q) {
		return s.Max
	}
	rank := uint64(math.Ceil(max(q, 0) * float64(s.Count)))
	rank = max(rank, 1)
	var seen uint64
	for i, c := range s.Counts {
		seen += c
		if seen >= rank {
			lo, w := bounds(i)
			return min(lo+w/2, s.Max)
		}
	}
	return s.Max // Counts and Count disagree: a hand-made snapshot
}

// Mean returns the mean value, 0 for an empty snapshot.
func (s *Snapshot) Mean() float64 {
	if s.Count == 0 {
		return 0
	}
	return float64(s.Sum) / float64(s.Count)
}

// CountAtMost returns how many values are at most v, counting whole
// buckets: exact when v+1 is a bucket's lower bound (a power of two, or
// any value below 64), else it includes v's whole bucket.
func (s *Snapshot) CountAtMost(v uint64) uint64 {
	last := bucket(v)
	var n uint64
	for _, c := range s.Counts[:last+1] {
		n += c
	}
	return n
}
