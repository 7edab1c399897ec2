package bth

import (
	"math/rand/v2"
	"testing"
)

func TestPSNArithmetic(t *testing.T) {
	tests := []struct {
		p    PSN
		n    int
		want PSN
	}{
		{0, 1, 1}, {MaxPSN, 1, 0}, {MaxPSN, 2, 1}, {0, -1, MaxPSN}, {5, -10, MaxPSN - 4},
		{0x800000, 0x800000, 0}, {1, PSNSpace, 1}, {1, -PSNSpace, 1},
	}
	for _, tt := range tests {
		if got := tt.p.Add(tt.n); got != tt.want {
			t.Errorf("%#x.Add(%d) = %#x, want %#x", uint32(tt.p), tt.n, uint32(got), uint32(tt.want))
		}
	}
	if MaxPSN.Next() != 0 || PSN(7).Next() != 8 {
		t.Error("Next does not wrap")
	}
}

// TestPSNProperties checks order and distance across the 2^24 wrap with
// random points and offsets, plus the edges of the half-space.
func TestPSNProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	check := func(p PSN, d int) {
		t.Helper()
		q := p.Add(d)
		if !q.Valid() {
			t.Fatalf("%#x.Add(%d) out of range: %#x", uint32(p), d, uint32(q))
		}
		if got := q.Diff(p); got != d {
			t.Fatalf("(%#x+%d).Diff(%#x) = %d", uint32(p), d, uint32(p), got)
		}
		want := 0
		if d > 0 {
			want = 1
		} else if d < 0 {
			want = -1
		}
		if got := q.Compare(p); got != want {
			t.Fatalf("Compare(%#x+%d, %#x) = %d, want %d", uint32(p), d, uint32(p), got, want)
		}
		if q.After(p) != (want > 0) || q.Before(p) != (want < 0) {
			t.Fatalf("Before/After disagree with Compare at %#x, %d", uint32(p), d)
		}
		// Exactly half the space away, both read as "before": psn_compare
		// has no antisymmetry there, and the transport never lets a window
		// grow that wide.
		if d != -(1<<23) && p.Compare(q) != -want {
			t.Fatalf("Before/After disagree with Compare at %#x, %d", uint32(p), d)
		}
		if d >= 0 && !q.InWindow(p, d+1) || d >= 0 && q.InWindow(p, d) {
			t.Fatalf("%#x+%d: InWindow wrong at the window's end", uint32(p), d)
		}
	}
	edges := []PSN{0, 1, MaxPSN, MaxPSN - 1, 0x7fffff, 0x800000}
	for _, p := range edges {
		for _, d := range []int{0, 1, -1, 1<<23 - 1, -(1 << 23), 1000, -1000} {
			check(p, d)
		}
	}
	for range 200000 {
		check(PSN(r.Uint32N(PSNSpace)), r.IntN(1<<24)-(1<<23))
	}
}

func TestPSNInWindow(t *testing.T) {
	tests := []struct {
		p, start PSN
		size     int
		want     bool
	}{
		{5, 5, 1, true}, {6, 5, 1, false}, {4, 5, 10, false}, {14, 5, 10, true}, {15, 5, 10, false},
		{0, MaxPSN, 2, true}, {1, MaxPSN, 2, false}, {MaxPSN, MaxPSN, 0, false},
		{3, MaxPSN - 2, 8, true}, {MaxPSN - 3, MaxPSN - 2, 8, false},
	}
	for _, tt := range tests {
		if got := tt.p.InWindow(tt.start, tt.size); got != tt.want {
			t.Errorf("%#x in [%#x, +%d) = %v", uint32(tt.p), uint32(tt.start), tt.size, got)
		}
	}
}
