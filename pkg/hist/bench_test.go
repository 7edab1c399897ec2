package hist

import (
	"sync/atomic"
	"testing"
)

// BenchmarkRecord measures Record against the cheapest thing a data path
// could do instead, an atomic counter increment, in the same run: the
// ratio is reported as x-counter. Both must allocate nothing.
func BenchmarkRecord(b *testing.B) {
	vals := make([]uint64, 1024)
	for i := range vals {
		vals[i] = uint64(i*i*37+1000) % (1 << 24) // ~1 µs to 16 ms in ns
	}
	var baseline float64
	b.Run("counter", func(b *testing.B) {
		var c atomic.Uint64
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			c.Add(vals[i&1023])
			i++
		}
		baseline = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	})
	b.Run("record", func(b *testing.B) {
		var h Histogram
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			h.Record(vals[i&1023])
			i++
		}
		if baseline > 0 {
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/baseline, "x-counter")
		}
	})
}

// BenchmarkSnapshot is the reader's cost: one scrape of one QP.
func BenchmarkSnapshot(b *testing.B) {
	var h Histogram
	for i := range 100_000 {
		h.Record(uint64(i * 13))
	}
	var s Snapshot
	b.ReportAllocs()
	for b.Loop() {
		h.Snapshot(&s)
		_ = s.Quantile(0.999)
	}
}

// TestRecordAllocs: Record allocates nothing.
func TestRecordAllocs(t *testing.T) {
	var h Histogram
	if n := testing.AllocsPerRun(1000, func() { h.Record(12345) }); n != 0 {
		t.Fatalf("Record allocates %v times", n)
	}
}

// BenchmarkTable records one value per slot in turn over 10 000 slots,
// as a QP engine does over 10 000 QPs, into a Histogram per slot
// (the baseline) and into a Table, in the same run: the ratio is
// reported as x-histograms. Neither may allocate.
func BenchmarkTable(b *testing.B) {
	const slots = 10_000
	var baseline float64
	b.Run("histograms", func(b *testing.B) {
		hs := make([]Histogram, slots)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			hs[i].Record(uint64(8000 + i&255))
			if i++; i == slots {
				i = 0
			}
		}
		baseline = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	})
	b.Run("table", func(b *testing.B) {
		var t Table
		t.Grow(slots)
		for i := range slots {
			t.Record(i, 8000)
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			t.Record(i, uint64(8000+i&255))
			if i++; i == slots {
				i = 0
			}
		}
		if baseline > 0 {
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/baseline, "x-histograms")
		}
	})
}
