package hist

import (
	"math/rand/v2"
	"testing"
)

// TestTable: values scattered over slots that span several rows, in runs
// of one bucket and spread over the whole range, give each slot the
// histogram a Histogram of its own counts, and Total their sum; a cleared
// slot is empty and records afresh; slots grown later start empty.
func TestTable(t *testing.T) {
	tests := []struct {
		name  string
		slots int
		vals  func(r *rand.Rand, i int) uint64
	}{
		{"one slot", 1, func(r *rand.Rand, i int) uint64 { return r.Uint64N(1 << 20) }},
		{"a row", rowLen, func(r *rand.Rand, i int) uint64 { return 1000 + uint64(i%7) }},
		{"rows, whole range", 3*rowLen + 5, func(r *rand.Rand, i int) uint64 { return r.Uint64() >> r.UintN(64) }},
		{"above MaxValue", 2, func(r *rand.Rand, i int) uint64 { return MaxValue + r.Uint64N(1<<40) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, uint64(tt.slots)))
			var tab Table
			tab.Grow(tt.slots)
			ref := make([]Histogram, tt.slots)
			for i := range 20_000 {
				k := r.IntN(tt.slots)
				v := tt.vals(r, i)
				tab.Record(k, v)
				ref[k].Record(v)
			}
			check := func(when string) {
				t.Helper()
				var all, got, want Snapshot
				for k := range ref {
					tab.Snapshot(k, &got)
					ref[k].Snapshot(&want)
					if got != want {
						t.Fatalf("%s: slot %d: count %d sum %d max %d, want %d %d %d", when, k, got.Count, got.Sum, got.Max, want.Count, want.Sum, want.Max)
					}
					all.Merge(&want)
				}
				tab.Total(&got)
				if got != all {
					t.Fatalf("%s: total count %d sum %d max %d, want %d %d %d", when, got.Count, got.Sum, got.Max, all.Count, all.Sum, all.Max)
				}
			}
			check("recorded")
			last := tt.slots - 1
			tab.Clear(last)
			ref[last] = Histogram{}
			check("cleared")
			tab.Record(last, 77)
			ref[last].Record(77)
			tab.Grow(tt.slots + rowLen + 1)
			ref = append(ref, make([]Histogram, rowLen+1)...)
			check("grown")
			tab.Record(len(ref)-1, 12345)
			ref[len(ref)-1].Record(12345)
			check("recorded after growing")
		})
	}
}

// TestTableAllocs: once a row of slots has recorded in a bucket, Record
// allocates nothing; Snapshot and Clear never do.
func TestTableAllocs(t *testing.T) {
	var tab Table
	tab.Grow(1000)
	for k := range 1000 {
		tab.Record(k, 12345)
	}
	var s Snapshot
	k := 0
	if n := testing.AllocsPerRun(1000, func() {
		tab.Record(k, 12345+uint64(k%3))
		k = (k + 7) % 1000
	}); n != 0 {
		t.Errorf("Record allocates %v times", n)
	}
	if n := testing.AllocsPerRun(10, func() { tab.Snapshot(999, &s); tab.Clear(3) }); n != 0 {
		t.Errorf("Snapshot and Clear allocate %v times", n)
	}
}

// FuzzTable: any slot count and values, recorded into a Table and into a
// Histogram per slot, give equal snapshots.
func FuzzTable(f *testing.F) {
	f.Add(uint8(3), []byte{1, 2, 3, 200, 0, 0, 0, 0, 9})
	f.Add(uint8(130), []byte{255, 255, 255, 255, 255, 255, 255, 255, 129})
	f.Fuzz(func(t *testing.T, n uint8, data []byte) {
		slots := int(n) + 1
		var tab Table
		tab.Grow(slots)
		ref := make([]Histogram, slots)
		for len(data) >= 9 {
			k := int(data[0]) % slots
			var v uint64
			for _, c := range data[1:9] {
				v = v<<8 | uint64(c)
			}
			v >>= data[0] % 64
			tab.Record(k, v)
			ref[k].Record(v)
			data = data[9:]
		}
		var got, want Snapshot
		for k := range ref {
			tab.Snapshot(k, &got)
			ref[k].Snapshot(&want)
			if got != want {
				t.Fatalf("slot %d: count %d sum %d max %d, want %d %d %d", k, got.Count, got.Sum, got.Max, want.Count, want.Sum, want.Max)
			}
		}
	})
}
