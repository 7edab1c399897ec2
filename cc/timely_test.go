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

func TestNS3TIMELY(t *testing.T) {
	for _, tt := range []struct {
		line, step, min cc.Rate
	}{
		{10 * cc.Gbps, 10 * cc.Mbps, 1 * cc.Gbps},
		{40 * cc.Gbps, 40 * cc.Mbps, 1 * cc.Gbps},
		{100 * cc.Gbps, 100 * cc.Mbps, 1 * cc.Gbps},
		{500 * cc.Mbps, 1 * cc.Mbps, 500 * cc.Mbps},
	} {
		p := cc.NS3TIMELY(tt.line)
		if p.AddStep != tt.step || p.MinRate != tt.min || p.MinRTT != 20*us || p.Patched {
			t.Errorf("NS3TIMELY(%v): δ %v, min rate %v, min RTT %v, patched %v", tt.line, p.AddStep, p.MinRate, p.MinRTT, p.Patched)
		}
		if _, err := cc.NewTIMELY(p, cc.FirmwareNP(), tt.line); err != nil {
			t.Errorf("NS3TIMELY(%v): %v", tt.line, err)
		}
	}
	if got := cc.DefaultConfig(cc.KindTIMELY, 40*cc.Gbps).TIMELY; got != cc.NS3TIMELY(40*cc.Gbps) {
		t.Errorf("DefaultConfig TIMELY = %+v, want NS3TIMELY", got)
	}
}

// Patched TIMELY between T_low and T_high: R ← R·(1 − β·w·e) + δ·(1 − w),
// w = clamp(2g + ½, 0, 1), e = (RTT − T_low)/T_low; outside that band the
// original rules hold. Values by hand with α = 0.875, min RTT 20 µs,
// β = 0.008, δ = 40 Mb/s, T_low = 50 µs.
func TestPatchedTIMELY(t *testing.T) {
	p := cc.PatchedTIMELY(40 * cc.Gbps)
	p.SegmentBytes = 0
	tm, err := cc.NewTIMELY(p, cc.FirmwareNP(), 40*cc.Gbps)
	if err != nil {
		t.Fatal(err)
	}
	const G = 1e9
	tests := []struct {
		rtt  float64 // µs
		want float64
	}{
		{60, 40 * G}, // first sample: no difference yet
		// diff 0: g 0, w ½, e 0.2: R·(1 − 0.008·0.5·0.2) + δ/2.
		{60, 40*G*(1-0.0008) + 20e6},
		// diff 0.875·40 = 35 µs: g 1.75, w 1, e 1: R·(1 − 0.008).
		{100, (40*G*(1-0.0008) + 20e6) * 0.992},
		// diff 0.125·35 + 0.875·(−20) = −13.125 µs: g −0.656, w 0, e 0.6: R + δ.
		{80, (40*G*(1-0.0008)+20e6)*0.992 + 40e6},
		// diff 0.125·(−13.125) + 0.875·(−5) = −6.015625: g −0.30078, w 0: + δ.
		{75, (40*G*(1-0.0008)+20e6)*0.992 + 80e6},
		// diff 0.125·(−6.015625) + 0.875·(2) = 0.998046875: g 0.0499,
		// w 0.59980, e 0.54: R·(1 − 0.008·w·0.54) + δ·(1 − w).
		{77, 0},
		// Below T_low: +δ.
		{40, 0},
	}
	rate := 0.0
	for i, tt := range tests {
		tm.OnAck(at(time.Duration(i)*us), 1024, time.Duration(tt.rtt*1000))
		want := tt.want
		switch i {
		case 5:
			w := 2*(0.998046875/20) + 0.5
			want = rate*(1-0.008*w*0.54) + 40e6*(1-w)
		case 6:
			want = rate + 40e6
		}
		if got := float64(tm.Rate()); math.Abs(got-want) > 2 {
			t.Fatalf("step %d (rtt %v µs): rate %.0f, want %.0f", i, tt.rtt, got, want)
		}
		rate = float64(tm.Rate())
	}
}
