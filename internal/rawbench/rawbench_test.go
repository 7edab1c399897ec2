package rawbench

import (
	"errors"
	"math"
	"testing"
	"time"
)

func TestRatios(t *testing.T) {
	us := func(f float64) time.Duration { return time.Duration(f * 1e3) }
	r := func(p50 float64, pps float64) Result { return Result{P50: us(p50), PPS: pps} }
	tests := []struct {
		name         string
		floor, meas  []Result
		wantRTT, wTP float64
	}{
		{
			name:    "one pair",
			floor:   []Result{r(4, 100)},
			meas:    []Result{r(5, 90)},
			wantRTT: 1.25, wTP: 0.9,
		},
		{
			// The floor ran fast in two of three rounds and the link in
			// one: medians taken apart give 5/3 = 1.67; each pair says
			// 1.25.
			name:    "bimodal rounds",
			floor:   []Result{r(3, 200), r(3, 200), r(4, 100)},
			meas:    []Result{r(3.75, 180), r(5, 90), r(5, 90)},
			wantRTT: 1.25, wTP: 0.9,
		},
		{
			name:    "even count takes the middle two",
			floor:   []Result{r(4, 100), r(4, 100), r(4, 100), r(4, 100)},
			meas:    []Result{r(4, 80), r(4.4, 90), r(4.8, 100), r(6, 110)},
			wantRTT: 1.15, wTP: 0.95,
		},
		{
			name:    "floor without a blast",
			floor:   []Result{r(4, 0)},
			meas:    []Result{r(4.4, 0)},
			wantRTT: 1.1, wTP: math.NaN(),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rtt, tp := Ratios(tc.floor, tc.meas)
			if !near(rtt, tc.wantRTT) || !near(tp, tc.wTP) {
				t.Fatalf("Ratios = %v, %v; want %v, %v", rtt, tp, tc.wantRTT, tc.wTP)
			}
		})
	}
}

func near(a, b float64) bool {
	if math.IsNaN(b) {
		return math.IsNaN(a)
	}
	return math.Abs(a-b) < 1e-9
}

// TestWarmUp checks the untimed round trips: whole batches of the
// configured count, for at least WarmFor, and the first error stops them.
func TestWarmUp(t *testing.T) {
	var calls, size int
	start := time.Now()
	err := Config{Warm: 7}.warmUp(func(rtt []time.Duration) error {
		calls++
		size = len(rtt)
		time.Sleep(WarmFor / 4)
		return nil
	})
	if d := time.Since(start); err != nil || d < WarmFor || calls < 4 || size != 7 {
		t.Errorf("warm-up: %v after %v, %d batches of %d", err, d, calls, size)
	}
	boom := errors.New("boom")
	calls = 0
	if err := (Config{}).warmUp(func([]time.Duration) error { calls++; return boom }); err != boom || calls != 1 {
		t.Errorf("warm-up after an error: %v, %d batches", err, calls)
	}
}
