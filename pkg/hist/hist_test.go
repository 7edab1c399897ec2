package hist

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestBuckets: every value lands in a bucket whose bounds hold it, buckets
// tile the range without gaps, and no bucket above 64 is wider than 1/32
// of its lower bound.
func TestBuckets(t *testing.T) {
	var next uint64
	for i := range NumBuckets {
		lo, w := bounds(i)
		if lo != next {
			t.Fatalf("bucket %d starts at %d, want %d", i, lo, next)
		}
		if lo >= 2*sub && w*sub > lo {
			t.Fatalf("bucket %d [%d, +%d) wider than 1/%d", i, lo, w, sub)
		}
		for _, v := range []uint64{lo, lo + w/2, lo + w - 1} {
			if got := bucket(v); got != i {
				t.Fatalf("bucket(%d) = %d, want %d", v, got, i)
			}
		}
		next = lo + w
	}
	if next-1 != MaxValue {
		t.Fatalf("last bucket ends at %d, want %d", next-1, uint64(MaxValue))
	}
	for _, v := range []uint64{MaxValue + 1, 1 << 50, math.MaxUint64} {
		if got := bucket(v); got != NumBuckets-1 {
			t.Errorf("bucket(%d) = %d, want the last", v, got)
		}
	}
}

// exact returns the ⌈q·n⌉-th smallest of sorted values.
func exact(sorted []uint64, q float64) uint64 {
	r := int(math.Ceil(q * float64(len(sorted))))
	return sorted[max(r, 1)-1]
}

// TestQuantiles: against known distributions, every quantile is within
// 1/64 of the exact sample quantile (exact below 64), Count, Sum and Max
// are exact.
func TestQuantiles(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	tests := []struct {
		name string
		gen  func() uint64
	}{
		{"constant", func() uint64 { return 12345 }},
		{"small", func() uint64 { return r.Uint64N(64) }},
		{"uniform 1µs-1ms", func() uint64 { return 1000 + r.Uint64N(999_000) }},
		{"exponential mean 20µs", func() uint64 { return uint64(r.ExpFloat64() * 20_000) }},
		{"lognormal", func() uint64 { return uint64(math.Exp(r.NormFloat64()*2 + 12)) }},
		{"bimodal with a tail", func() uint64 {
			if r.IntN(1000) == 0 {
				return 50_000_000 + r.Uint64N(1_000_000)
			}
			return 3000 + r.Uint64N(200)
		}},
		{"full range", func() uint64 { return r.Uint64N(MaxValue + 1) }},
	}
	qs := []float64{0, 0.001, 0.1, 0.5, 0.9, 0.99, 0.999, 0.9999, 1}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h Histogram
			vals := make([]uint64, 100_000)
			var sum uint64
			for i := range vals {
				vals[i] = tt.gen()
				sum += vals[i]
				h.Record(vals[i])
			}
			slices.Sort(vals)
			var s Snapshot
			h.Snapshot(&s)
			if s.Count != uint64(len(vals)) || s.Sum != sum || s.Max != vals[len(vals)-1] {
				t.Fatalf("count %d sum %d max %d, want %d %d %d", s.Count, s.Sum, s.Max, len(vals), sum, vals[len(vals)-1])
			}
			for _, q := range qs {
				got, want := s.Quantile(q), exact(vals, q)
				if err := math.Abs(float64(got)-float64(want)) / float64(max(want, 1)); err > 1.0/64 || (want < 64 && got != want) {
					t.Errorf("Quantile(%v) = %d, want %d (error %.4f)", q, got, want, err)
				}
			}
			if m, want := s.Mean(), float64(sum)/float64(len(vals)); math.Abs(m-want) > 1e-9*want {
				t.Errorf("Mean = %v, want %v", m, want)
			}
		})
	}
}

func TestEmptyAndEdges(t *testing.T) {
	var s Snapshot
	if s.Quantile(0.5) != 0 || s.Mean() != 0 || s.CountAtMost(100) != 0 {
		t.Fatal("empty snapshot not zero")
	}
	var h Histogram
	h.RecordDuration(-time.Second) // counts as 0
	h.RecordDuration(3 * time.Microsecond)
	h.Record(math.MaxUint64 / 2) // past MaxValue: the last bucket, Max exact
	h.Snapshot(&s)
	for _, c := range []struct {
		q    float64
		want uint64
	}{{-1, 0}, {0, 0}, {0.34, 3000 - 3000%64 + 32}, {0.5, 3000 - 3000%64 + 32}, {1, math.MaxUint64 / 2}, {2, math.MaxUint64 / 2}, {math.NaN(), math.MaxUint64 / 2}} {
		if got := s.Quantile(c.q); got != c.want {
			t.Errorf("Quantile(%v) = %d, want %d", c.q, got, c.want)
		}
	}
	if got := s.CountAtMost(0); got != 1 {
		t.Errorf("CountAtMost(0) = %d, want 1", got)
	}
	if got := s.CountAtMost(4095); got != 2 {
		t.Errorf("CountAtMost(4095) = %d, want 2", got)
	}
	if got := s.CountAtMost(math.MaxUint64); got != 3 {
		t.Errorf("CountAtMost(max) = %d, want 3", got)
	}
}

// TestMerge: merging snapshots, or adding one to a histogram, equals
// recording every value in one histogram.
func TestMerge(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var a, b, all Histogram
	for range 10_000 {
		v := r.Uint64N(1 << 30)
		all.Record(v)
		if r.IntN(3) == 0 {
			a.Record(v)
		} else {
			b.Record(v)
		}
	}
	var sa, sb, sall Snapshot
	a.Snapshot(&sa)
	b.Snapshot(&sb)
	all.Snapshot(&sall)
	merged := sa
	merged.Merge(&sb)
	if merged != sall {
		t.Error("merged snapshots differ from one histogram of every value")
	}
	var h Histogram
	h.Add(&sa)
	h.Add(&sb)
	var sh Snapshot
	h.Snapshot(&sh)
	if sh != sall {
		t.Error("a histogram fed two snapshots differs from one of every value")
	}
}

// TestConcurrent: a reader snapshots while writers record; each snapshot's
// counts only grow, and the last one holds every value. Run under -race.
func TestConcurrent(t *testing.T) {
	const writers, per = 2, 20_000
	var h Histogram
	var wg sync.WaitGroup
	var done atomic.Bool
	for w := range writers {
		wg.Go(func() {
			for i := range per {
				h.Record(uint64(i*7+w) % 100_000)
			}
		})
	}
	reader := make(chan error, 1)
	go func() {
		var prev, s Snapshot
		for !done.Load() {
			h.Snapshot(&s)
			for i := range s.Counts {
				if s.Counts[i] < prev.Counts[i] {
					reader <- fmt.Errorf("bucket %d went from %d to %d", i, prev.Counts[i], s.Counts[i])
					return
				}
			}
			if s.Count > writers*per || s.Quantile(0.5) > 100_000 {
				reader <- fmt.Errorf("snapshot count %d median %d", s.Count, s.Quantile(0.5))
				return
			}
			prev = s
		}
		reader <- nil
	}()
	wg.Wait()
	done.Store(true)
	if err := <-reader; err != nil {
		t.Fatal(err)
	}
	var s Snapshot
	h.Snapshot(&s)
	var want uint64
	for w := range writers {
		for i := range per {
			want = max(want, uint64(i*7+w)%100_000)
		}
	}
	if s.Count != writers*per || s.Max != want {
		t.Fatalf("count %d max %d", s.Count, s.Max)
	}
}
