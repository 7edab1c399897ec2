package cc

import (
	"testing"
	"time"
)

// TestNPBurst: marks given one at a time are answered at most once per
// interval; marks given together at one time (a burst read late) are
// answered once per interval that passed since the CNP before the burst,
// and never more than once per mark.
func TestNPBurst(t *testing.T) {
	const iv = 50 * time.Microsecond
	t0 := time.Unix(0, 0)
	for _, tc := range []struct {
		name  string
		marks []time.Duration // each mark's time after t0
		want  int             // CNPs
	}{
		{"one at a time, 10 µs apart", []time.Duration{0, 10e3, 20e3, 30e3, 40e3, 50e3, 60e3}, 2},
		{"first mark, then a burst after 3 intervals", []time.Duration{0, 3 * iv, 3 * iv, 3 * iv, 3 * iv, 3 * iv}, 4},
		{"burst of 2 after 5 intervals", []time.Duration{0, 5 * iv, 5 * iv}, 3},
		{"burst within the interval", []time.Duration{0, iv / 2, iv / 2, iv / 2}, 1},
		{"a lone burst", []time.Duration{0, 0, 0}, 1},
	} {
		n := NewNP(PaperNP())
		var c Counters
		got := 0
		for _, d := range tc.marks {
			if n.OnCE(t0.Add(d), &c) {
				got++
			}
		}
		if got != tc.want || c.NPCNPSent != uint64(got) || c.NPECNMarkedRoCEPackets != uint64(len(tc.marks)) {
			t.Errorf("%s: %d CNPs (counted %d of %d marks), want %d", tc.name, got, c.NPCNPSent, c.NPECNMarkedRoCEPackets, tc.want)
		}
	}
}
