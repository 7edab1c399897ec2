package cc_test

import (
	"math"
	"testing"
	"time"

	"github.com/uroce/uroce/cc"
)

// Each step feeds one RTT sample; want is the rate after it, computed from
// Algorithm 1 of the TIMELY paper by hand.
func TestTIMELYRegions(t *testing.T) {
	p := cc.DefaultTIMELY()
	p.MinRTT = 10 * us
	p.SegmentBytes = 0 // one update per sample
	tm, err := cc.NewTIMELY(p, cc.FirmwareNP(), 40*cc.Gbps)
	if err != nil {
		t.Fatal(err)
	}
	const G = 1e9
	rate := 40 * G
	diff := 0.0 // smoothed RTT difference, µs
	prev := 20.0
	step := func(rtt float64) float64 { // returns the normalised gradient
		diff = 0.125*diff + 0.875*(rtt-prev)
		prev = rtt
		return diff / 10
	}
	type sample struct {
		name string
		rtt  float64 // µs
		next func(g float64) float64
	}
	hai := 0
	samples := []sample{
		{"first sample sets prev", 20, nil},
		{"above T_high", 600, func(float64) float64 { return rate * (1 - 0.8*(1-500.0/600)) }},
		{"below T_low", 30, func(float64) float64 { return rate + 10e6 }},
		{"positive gradient", 100, func(g float64) float64 { return rate * (1 - 0.8*g) }},
	}
	// Five falling RTTs in [T_low, T_high]: +δ four times, then +5δ.
	for _, r := range []float64{90, 80, 70, 60, 55, 52} {
		hai++
		n := 1.0
		if hai >= 5 {
			n = 5
		}
		samples = append(samples, sample{"negative gradient", r, func(float64) float64 { return rate + n*10e6 }})
	}
	for i, s := range samples {
		var g float64
		if i > 0 {
			g = step(s.rtt)
		}
		tm.OnAck(at(time.Duration(i)*us), 4096, time.Duration(s.rtt*1000))
		if s.next != nil {
			rate = s.next(g)
		}
		if got := float64(tm.Rate()); math.Abs(got-rate) > 1 {
			t.Fatalf("step %d (%s, rtt %vµs): rate %.0f, want %.0f (gradient %v)", i, s.name, s.rtt, got, rate, g)
		}
	}
}

func TestTIMELYSegment(t *testing.T) {
	p := cc.DefaultTIMELY() // 16 KiB segments
	tm, _ := cc.NewTIMELY(p, cc.FirmwareNP(), 40*cc.Gbps)
	tm.OnAck(t0, 16<<10, 20*us)
	for i := range 3 { // 12 KiB: not a segment yet
		tm.OnAck(at(us), 4<<10, time.Duration(600+i)*us)
	}
	if tm.Rate() != 40*cc.Gbps {
		t.Fatalf("rate changed within a segment: %v", tm.Rate())
	}
	tm.OnAck(at(us), 4<<10, 600*us)
	if tm.Rate() >= 40*cc.Gbps {
		t.Fatalf("no decrease after a segment above T_high")
	}
	tm.OnCNP(t0)
	if s := tm.Stats(t0); s.RPCNPIgnored != 1 || s.RPCNPHandled != 0 {
		t.Fatalf("counters %+v", s.Counters)
	}
}
