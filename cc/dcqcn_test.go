package cc_test

import (
	"errors"
	"testing"
	"time"

	"github.com/uroce/uroce/cc"
)

func TestDCQCNFirstCNP(t *testing.T) {
	withFirst := cc.FirmwareDCQCN()
	withFirst.RateToSetOnFirstCNP = 10 * cc.Gbps
	decFac := cc.FirmwareDCQCN()
	decFac.MinDecFac = 75
	tests := []struct {
		name   string
		p      cc.DCQCNParams
		line   cc.Rate
		rc, rt cc.Rate
		alpha  uint32
	}{
		// α stays 1023: 1023·1019>>10 + 5. Rc = 40G − 40G·1023/2048.
		{"firmware", cc.FirmwareDCQCN(), 40 * cc.Gbps, 20_019_531_250, 40 * cc.Gbps, 1023},
		{"paper", cc.PaperDCQCN(), 40 * cc.Gbps, 20_019_531_250, 40 * cc.Gbps, 1023},
		{"rate to set on first cnp", withFirst, 40 * cc.Gbps, 10 * cc.Gbps, 10 * cc.Gbps, 1023},
		{"min dec fac 75%", decFac, 40 * cc.Gbps, 30 * cc.Gbps, 40 * cc.Gbps, 1023},
		{"min rate", cc.FirmwareDCQCN(), 1500 * cc.Kbps, 1 * cc.Mbps, 1500 * cc.Kbps, 1023},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDCQCN(t, tt.p, tt.line)
			if !d.NextTimer().IsZero() || d.Rate() != tt.line {
				t.Fatalf("before any CNP: rate %v timer %v", d.Rate(), d.NextTimer())
			}
			d.OnCNP(t0)
			s := d.Stats(t0)
			if s.Rate != tt.rc || s.TargetRate != tt.rt || s.Alpha != tt.alpha {
				t.Fatalf("after first CNP: Rc %d Rt %d α %d; want %d %d %d", s.Rate, s.TargetRate, s.Alpha, tt.rc, tt.rt, tt.alpha)
			}
			if s.RPCNPHandled != 1 || s.RPCNPIgnored != 0 {
				t.Fatalf("counters %+v", s.Counters)
			}
			if got, want := d.NextTimer(), t0.Add(tt.p.TimeReset); !got.Equal(want) {
				t.Fatalf("NextTimer %v, want %v", got.Sub(t0), want.Sub(t0))
			}
		})
	}
}

func TestDCQCNAlphaFixedPoint(t *testing.T) {
	tests := []struct {
		name string
		p    cc.DCQCNParams
		// α read at each time after a single CNP at t0.
		reads []time.Duration
		want  []uint32
	}{
		// Firmware: G = 1019, one update per µs; the CNP's own
		// period [0, 1 µs) ends with α up, the next ones down:
		// 1023 → 1023 → 1018 → 1013 → 1008.
		{"firmware decay", cc.FirmwareDCQCN(),
			[]time.Duration{0, 999 * time.Nanosecond, 1 * us, 2 * us, 3 * us, 4 * us},
			[]uint32{1023, 1023, 1023, 1018, 1013, 1008}},
		// Paper: g = 1/256 (G = 1020), one decay per 55 µs.
		{"paper decay", cc.PaperDCQCN(),
			[]time.Duration{54 * us, 55 * us, 109 * us, 110 * us},
			[]uint32{1023, 1019, 1019, 1015}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDCQCN(t, tt.p, 40*cc.Gbps)
			d.OnCNP(t0)
			for i, r := range tt.reads {
				if got := d.Alpha(at(r)); got != tt.want[i] {
					t.Errorf("α at %v = %d, want %d", r, got, tt.want[i])
				}
			}
		})
	}

	// A second CNP at 4 µs: the periods [1, 2), [2, 3) and [3, 4) µs
	// had none, so α decays three times to 1008, then the period of
	// the CNP raises it: 1008·1019>>10 + 5 = 1003 + 5 = 1008; the cut
	// uses the new α.
	d := newDCQCN(t, cc.FirmwareDCQCN(), 40*cc.Gbps)
	d.OnCNP(t0)
	rc1 := d.Rate()
	d.OnCNP(at(4 * us))
	if a := d.Alpha(at(4 * us)); a != 1008 {
		t.Fatalf("α after second CNP = %d, want 1008", a)
	}
	if got, want := d.Rate(), cutOf(rc1, 1008); got != want {
		t.Fatalf("Rc after second CNP = %d, want %d", got, want)
	}
}

// The firmware updates α once per DCE_TCP_RTT, up if the period had a CNP
// and down if not, never both: under CNPs every 5 µs (one period up, four
// down) α settles where four 10-bit decays balance one increase, near
// 1024·5/(1024·(1−(1019/1024)^4)) ≈ 250. Counting a decay in the CNP's own
// period too (the paper's wording, AlphaPeriodic off) would leave one
// increase of 5 against five decays of at least 1: α sinks to a few
// units and the cuts to a fraction of a percent.
func TestDCQCNAlphaUnderSteadyCNPs(t *testing.T) {
	paperAlpha := cc.FirmwareDCQCN()
	paperAlpha.AlphaPeriodic = false
	tests := []struct {
		name   string
		p      cc.DCQCNParams
		lo, hi uint32
	}{
		{"firmware", cc.FirmwareDCQCN(), 200, 300},
		{"decay in the CNP's period", paperAlpha, 0, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDCQCN(t, tt.p, 40*cc.Gbps)
			var now time.Time
			for k := range 2000 { // 10 ms
				now = at(time.Duration(k) * 5 * us)
				d.OnCNP(now)
			}
			if a := d.Alpha(now); a < tt.lo || a > tt.hi {
				t.Errorf("α after 10 ms of CNPs every 5 µs = %d, want %d..%d", a, tt.lo, tt.hi)
			}
		})
	}
}

// The firmware defaults under steady congestion: cuts every 4 µs keep the
// 300 µs timer from ever firing, so CLAMP_TGT_RATE_AFTER_TIME_INC never
// lowers Rt, which stays at line rate; once the CNPs stop, the first
// 32 KiB byte counter event (RPG_THRESHOLD 1: fast recovery) takes Rc
// halfway back to it, and the next one adds R_AI first. This is the
// behaviour behind the firmware preset's queue in cmd/uroce-ccsim.
func TestDCQCNFirmwareTargetUnderSteadyCNPs(t *testing.T) {
	p := cc.FirmwareDCQCN()
	line := 40 * cc.Gbps
	d := newDCQCN(t, p, line)
	var now time.Time
	for k := range 250 { // 1 ms
		now = at(time.Duration(k) * 4 * us)
		d.OnCNP(now)
		if d.TargetRate() != line {
			t.Fatalf("CNP %d: Rt %v, want line rate", k, d.TargetRate())
		}
	}
	rc := d.Rate()
	if rc > line/4 {
		t.Fatalf("Rc %v after 1 ms of CNPs", rc)
	}
	now = now.Add(us)
	d.OnSent(now, int(p.ByteReset))
	if want := (line + rc) / 2; d.Rate() != want {
		t.Fatalf("first byte counter event: Rc %v, want %v", d.Rate(), want)
	}
}

// Paper preset, timer only (the 10 MB byte counter never fills): five
// periods of fast recovery towards Rt, then additive increase.
func TestDCQCNFastRecoveryThenAI(t *testing.T) {
	p := cc.PaperDCQCN()
	d := newDCQCN(t, p, 40*cc.Gbps)
	d.OnCNP(t0)
	d.OnCNP(t0) // a second cut brings Rt (← Rc) below line rate
	rc, rt := d.Rate(), d.TargetRate()
	for k := 1; k <= 8; k++ {
		now := at(time.Duration(k) * p.TimeReset)
		if got := d.NextTimer(); !got.Equal(now) {
			t.Fatalf("step %d: NextTimer %v, want %v", k, got.Sub(t0), now.Sub(t0))
		}
		d.OnTimer(now.Add(-1)) // early: nothing happens
		if d.Rate() != rc {
			t.Fatalf("step %d: rate changed before the timer", k)
		}
		d.OnTimer(now)
		if k > p.Threshold {
			rt += p.AIRate // additive increase
		}
		rc = (rt + rc) / 2
		if d.Rate() != rc || d.TargetRate() != rt {
			t.Fatalf("step %d: Rc %d Rt %d; want %d %d", k, d.Rate(), d.TargetRate(), rc, rt)
		}
	}
}

// Timer and byte counter together: additive once one count passes F, hyper
// (Rt += i·R_HAI, i = min(T, BC) − F) once both do.
func TestDCQCNHyperIncrease(t *testing.T) {
	p := cc.PaperDCQCN()
	p.ByteReset = 1000
	d := newDCQCN(t, p, 40*cc.Gbps)
	d.OnCNP(t0)
	d.OnCNP(t0) // Rt ← Rc, well below line rate
	type step struct {
		timer bool
		dRt   cc.Rate
	}
	var steps []step
	for range 5 { // BC 1..5: fast recovery
		steps = append(steps, step{false, 0})
	}
	steps = append(steps, step{false, p.AIRate}) // BC 6 > F: additive
	for range 5 {                                // T 1..5: BC > F only: additive
		steps = append(steps, step{true, p.AIRate})
	}
	steps = append(steps,
		step{true, 1 * p.HAIRate},  // T 6, BC 6: i = 1
		step{false, 1 * p.HAIRate}, // T 6, BC 7: i = 1
		step{true, 2 * p.HAIRate},  // T 7, BC 7: i = 2
	)
	rc, rt := d.Rate(), d.TargetRate()
	tick := 0
	for i, s := range steps {
		if s.timer {
			tick++
			d.OnTimer(at(time.Duration(tick) * p.TimeReset))
		} else {
			d.OnSent(at(time.Duration(tick)*p.TimeReset+us), 999)
			if d.Rate() != rc {
				t.Fatalf("step %d: increase before the byte counter filled", i)
			}
			d.OnSent(at(time.Duration(tick)*p.TimeReset+us), 1)
		}
		rt += s.dRt
		rc = (rt + rc) / 2
		if d.Rate() != rc || d.TargetRate() != rt {
			t.Fatalf("step %d (timer %v): Rc %d Rt %d; want %d %d", i, s.timer, d.Rate(), d.TargetRate(), rc, rt)
		}
	}
}

// Firmware preset: the byte counter fires every 32767 bytes; with
// RPG_THRESHOLD 1 the second byte event is already additive.
func TestDCQCNByteCounter(t *testing.T) {
	p := cc.FirmwareDCQCN()
	d := newDCQCN(t, p, 40*cc.Gbps)
	d.OnSent(t0, 1<<20) // before any CNP nothing counts
	d.OnCNP(t0)
	rc, rt := d.Rate(), d.TargetRate()
	d.OnSent(at(1*us), 32766)
	if d.Rate() != rc {
		t.Fatalf("increase before 32767 bytes")
	}
	d.OnSent(at(1*us), 1)
	rc = (rt + rc) / 2
	if d.Rate() != rc || d.TargetRate() != rt {
		t.Fatalf("first byte event: Rc %d Rt %d; want %d %d", d.Rate(), d.TargetRate(), rc, rt)
	}
	// Two events in one call, second one additive.
	d.OnSent(at(2*us), 2*32767)
	rc = (rt + rc) / 2
	rt = min(rt+p.AIRate, 40*cc.Gbps)
	rc = (rt + rc) / 2
	if d.Rate() != rc || d.TargetRate() != rt {
		t.Fatalf("byte events 2-3: Rc %d Rt %d; want %d %d", d.Rate(), d.TargetRate(), rc, rt)
	}
}

// The clamp flags decide whether a CNP resets Rt to Rc.
func TestDCQCNClampFlags(t *testing.T) {
	tests := []struct {
		name          string
		clamp, afterT bool
		timerInc      bool // the increase before the second CNP came from the timer
		wantClamped   bool
	}{
		{"defaults, byte increase", false, true, false, false},
		{"defaults, timer increase", false, true, true, true},
		{"clamp, byte increase", true, false, false, true},
		{"no clamp, timer increase", false, false, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := cc.FirmwareDCQCN()
			p.ClampTgtRate, p.ClampTgtRateAfterTimeInc = tt.clamp, tt.afterT
			d := newDCQCN(t, p, 40*cc.Gbps)
			d.OnCNP(t0)
			now := at(10 * us)
			if tt.timerInc {
				now = at(p.TimeReset)
				d.OnTimer(now)
			} else {
				d.OnSent(now, int(p.ByteReset))
			}
			rtBefore, rcBefore := d.TargetRate(), d.Rate()
			d.OnCNP(now)
			want := rtBefore
			if tt.wantClamped {
				want = rcBefore
			}
			if d.TargetRate() != want {
				t.Fatalf("Rt after CNP = %d, want %d (Rc was %d, Rt was %d)", d.TargetRate(), want, rcBefore, rtBefore)
			}
		})
	}
}

// CNPs inside RATE_REDUCE_MONITOR_PERIOD fold into one cut at its end.
func TestDCQCNRateReduceMonitorPeriod(t *testing.T) {
	d := newDCQCN(t, cc.FirmwareDCQCN(), 40*cc.Gbps)
	d.OnCNP(t0)
	rc1 := d.Rate()
	d.OnCNP(at(1 * us))
	d.OnCNP(at(2 * us))
	if d.Rate() != rc1 {
		t.Fatalf("cut inside the monitor period")
	}
	if got := d.NextTimer(); !got.Equal(at(4 * us)) {
		t.Fatalf("NextTimer = %v, want 4µs", got.Sub(t0))
	}
	// α: up in [0, 1), [1, 2) and [2, 3) µs, which had CNPs, down once
	// in [3, 4): 1018. The deferred cut is no CNP of its own.
	d.OnTimer(at(4 * us))
	if got, want := d.Rate(), cutOf(rc1, 1018); got != want {
		t.Fatalf("deferred cut: Rc %d, want %d", got, want)
	}
	if got := d.NextTimer(); !got.Equal(at(4*us + 300*us)) {
		t.Fatalf("NextTimer after cut = %v", got.Sub(t0))
	}
	if s := d.Stats(at(4 * us)); s.RPCNPHandled != 3 {
		t.Fatalf("rp_cnp_handled = %d, want 3", s.RPCNPHandled)
	}
}

// With no more CNPs the rate climbs back to line rate, the limiter is
// released and the timers stop; the next CNP is a first CNP again.
func TestDCQCNRecoversToLineRate(t *testing.T) {
	for _, p := range []cc.DCQCNParams{cc.FirmwareDCQCN(), cc.PaperDCQCN()} {
		d := newDCQCN(t, p, 40*cc.Gbps)
		d.OnCNP(t0)
		steps := 0
		for !d.NextTimer().IsZero() {
			d.OnTimer(d.NextTimer())
			steps++
		}
		if d.Rate() != 40*cc.Gbps || d.TargetRate() != 40*cc.Gbps {
			t.Fatalf("after %d steps Rc %v Rt %v", steps, d.Rate(), d.TargetRate())
		}
		// One late OnTimer covering all the periods does the same.
		e := newDCQCN(t, p, 40*cc.Gbps)
		e.OnCNP(t0)
		e.OnTimer(at(time.Hour))
		if e.Rate() != 40*cc.Gbps || !e.NextTimer().IsZero() {
			t.Fatalf("late timer: Rc %v next %v", e.Rate(), e.NextTimer())
		}
		e.OnCNP(at(time.Hour))
		if e.Rate() != 20_019_531_250 {
			t.Fatalf("CNP after release: Rc %d", e.Rate())
		}
	}
}

func TestNP(t *testing.T) {
	a, err := cc.New(&cc.Config{Kind: cc.KindDCQCN, LineRate: 40 * cc.Gbps, NP: cc.FirmwareNP(), DCQCN: cc.FirmwareDCQCN()})
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		t    time.Duration
		want bool
	}{{0, true}, {1 * us, false}, {4*us - 1, false}, {4 * us, true}, {5 * us, false}, {100 * us, true}}
	for _, s := range steps {
		if got := a.OnCE(at(s.t)); got != s.want {
			t.Errorf("OnCE at %v = %v, want %v", s.t, got, s.want)
		}
	}
	c := a.Stats(t0).Counters
	if c.NPECNMarkedRoCEPackets != 6 || c.NPCNPSent != 3 {
		t.Fatalf("counters %+v", c)
	}
	off := cc.NewNP(cc.NPParams{})
	var oc cc.Counters
	if off.OnCE(t0, &oc) || oc.NPECNMarkedRoCEPackets != 1 || oc.NPCNPSent != 0 {
		t.Fatalf("disabled NP: %+v", oc)
	}
}

func TestBadParams(t *testing.T) {
	p := cc.FirmwareDCQCN()
	p.Threshold = 0
	cfg := cc.DefaultConfig(cc.KindDCQCN, 40*cc.Gbps)
	cfg.DCQCN = p
	if _, err := cc.New(&cfg); !errors.Is(err, cc.ErrBadParams) {
		t.Fatalf("err = %v", err)
	}
	cfg = cc.DefaultConfig(cc.Kind(9), 40*cc.Gbps)
	if _, err := cc.New(&cfg); !errors.Is(err, cc.ErrUnknownKind) {
		t.Fatalf("err = %v", err)
	}
	if _, err := cc.ParseKind("cubic"); !errors.Is(err, cc.ErrUnknownKind) {
		t.Fatalf("err = %v", err)
	}
	for k := cc.KindNone; k <= cc.KindSwift; k++ {
		got, err := cc.ParseKind(k.String())
		if err != nil || got != k {
			t.Fatalf("ParseKind(%v) = %v, %v", k, got, err)
		}
		cfg := cc.DefaultConfig(k, 40*cc.Gbps)
		if _, err := cc.New(&cfg); err != nil {
			t.Fatalf("New(%v): %v", k, err)
		}
	}
}

// NS3DCQCN: R_AI and R_HAI scale with the line rate (run.py: 5 and 50 Mb/s
// per 25 Gb/s), and the timer alone runs the stages (RateIncEventMlx):
// with F = 1 the first event is fast recovery, the second additive, every
// later one adds one R_HAI.
func TestNS3DCQCN(t *testing.T) {
	for _, tt := range []struct {
		line        cc.Rate
		ai, hai, mn cc.Rate
	}{
		{25 * cc.Gbps, 5 * cc.Mbps, 50 * cc.Mbps, 1 * cc.Gbps},
		{40 * cc.Gbps, 8 * cc.Mbps, 80 * cc.Mbps, 1 * cc.Gbps},
		{100 * cc.Gbps, 20 * cc.Mbps, 200 * cc.Mbps, 1 * cc.Gbps},
		{500 * cc.Mbps, 1 * cc.Mbps, 1 * cc.Mbps, 500 * cc.Mbps},
	} {
		p := cc.NS3DCQCN(tt.line)
		if p.AIRate != tt.ai || p.HAIRate != tt.hai || p.MinRate != tt.mn || p.ByteReset != 0 || p.G != 1020 || !p.TimerStages {
			t.Errorf("NS3DCQCN(%v) = AI %v HAI %v min %v BC %d G %d stages %v", tt.line, p.AIRate, p.HAIRate, p.MinRate, p.ByteReset, p.G, p.TimerStages)
		}
	}
	p := cc.NS3DCQCN(40 * cc.Gbps)
	d := newDCQCN(t, p, 40*cc.Gbps)
	d.OnCNP(t0)
	// The first cut: α 1023 (1023·1020>>10 + 4 = 1023), Rt stays at line.
	rc, rt := cutOf(40*cc.Gbps, 1023), 40*cc.Gbps
	if d.Rate() != rc || d.TargetRate() != rt {
		t.Fatalf("after first CNP: Rc %d Rt %d; want %d %d", d.Rate(), d.TargetRate(), rc, rt)
	}
	// A second cut after a timer increase clamps Rt (CLAMP_TGT_RATE_AFTER_TIME_INC).
	d.OnTimer(at(p.TimeReset))
	rc = (rt + rc) / 2
	alpha := d.Alpha(at(p.TimeReset + 4*us))
	d.OnCNP(at(p.TimeReset + 4*us))
	rt = rc
	rc = cutOf(rc, uint64(min(1023, alpha*1020>>10+4)))
	if d.Rate() != rc || d.TargetRate() != rt {
		t.Fatalf("after second CNP: Rc %d Rt %d; want %d %d", d.Rate(), d.TargetRate(), rc, rt)
	}
	base := p.TimeReset + 4*us
	for k, dRt := range []cc.Rate{0, p.AIRate, p.HAIRate, p.HAIRate, p.HAIRate} {
		d.OnTimer(at(base + time.Duration(k+1)*p.TimeReset))
		rt += dRt
		rc = (rt + rc) / 2
		if d.Rate() != rc || d.TargetRate() != rt {
			t.Fatalf("timer event %d: Rc %d Rt %d; want %d %d", k+1, d.Rate(), d.TargetRate(), rc, rt)
		}
	}
}
