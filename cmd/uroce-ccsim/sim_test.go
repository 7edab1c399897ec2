package main

import (
	"bytes"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/uroce/uroce/cc"
)

func algo(t *testing.T, p Params, name string) Algo {
	t.Helper()
	for _, a := range Algos(p) {
		if a.Name == name {
			return a
		}
	}
	t.Fatalf("no algorithm %q", name)
	return Algo{}
}

// The DCQCN paper's claims at 40 Gb/s with Kmin 5 KB, Kmax 200 KB, Pmax 1 %
// (§5): ECN, not PFC, holds the queue, and flows converge to fair shares.
// The paper's flows start at line rate, so 8 or 16 starting at once
// overrun the port until their first cuts (five CNPs 50 µs apart take a
// flow from 40 to about 1.2 Gb/s) and PFC catches that burst; after it the
// queue must stay near Kmax. joinleave runs at scale 2: a flow joining at
// line rate is cut to about 1 Gb/s while the two it joins keep about 11,
// all three then climb by the same R_AI per timer, and only rate-
// proportional marking closes the gap, which takes some 50 ms (the note
// under the table); its default 30 ms three-flow phase is too short for
// that. incast is not held to the 1 ms convergence criterion: each flow's
// 1 ms throughput swings by up to 35–40 % around its share under the
// paper's parameters at any run length (Jain over the second half stays
// 0.99).
func TestDCQCNPaperProperties(t *testing.T) {
	p := DefaultParams()
	for _, tt := range []struct {
		scenario string
		scale    float64
		converge bool // by the 1 ms, 20 % criterion
		burst    bool // all flows start at once: PFC may pause the start
	}{
		{"fair2", 1, true, false},
		{"incast8", 1, false, true},
		{"incast16", 1, false, true},
		{"joinleave", 2, true, false},
	} {
		t.Run(tt.scenario, func(t *testing.T) {
			sc := scenario(t, tt.scenario, tt.scale)
			r := NewSim(p, algo(t, p, "dcqcn-paper").Cfg, sc.Flows).Run(sc.Duration)
			res := Analyse(sc, "dcqcn-paper", r, p.LinkRate)
			t.Logf("%+v", res)
			if res.Jain < 0.95 {
				t.Errorf("Jain %.3f < 0.95", res.Jain)
			}
			if tt.converge && res.Converge < 0 {
				t.Errorf("never converged to fair shares")
			}
			if res.Drops != 0 || (!tt.burst && res.Pauses != 0) {
				t.Errorf("%d PFC pauses, %d drops: the queue was not held by ECN", res.Pauses, res.Drops)
			}
			// After the start burst (the first ms) the queue is ECN's.
			q := slices.Clone(r.Queue[int(time.Millisecond/r.Sample):])
			slices.Sort(q)
			p99, qmax := q[len(q)*99/100], q[len(q)-1]
			if lim := 2 * p.RED.Kmax; p99 > lim || qmax >= p.XOff {
				t.Errorf("queue after 1 ms: p99 %d B, max %d B; want p99 <= %d, max < XOFF %d", p99, qmax, lim, p.XOff)
			}
			if res.Util < 0.8 {
				t.Errorf("utilisation %.2f", res.Util)
			}
		})
	}
}

func scenario(t *testing.T, name string, scale float64) Scenario {
	t.Helper()
	for _, sc := range Scenarios(scale) {
		if sc.Name == name {
			return sc
		}
	}
	t.Fatalf("no scenario %q", name)
	return Scenario{}
}

// The firmware preset's queue rides PFC because of its 32 KiB byte counter
// (the note under the table, package cc's documentation): two flows at
// 40 Gb/s pause the senders with it and never without it.
func TestFirmwareByteCounter(t *testing.T) {
	p := DefaultParams()
	sc := Scenarios(0.5)[0] // fair2: a second flow joins at 5 ms
	fw := NewSim(p, algo(t, p, "dcqcn").Cfg, sc.Flows).Run(sc.Duration)
	nobc := NewSim(p, algo(t, p, "dcqcn-nobc").Cfg, sc.Flows).Run(sc.Duration)
	rf, rn := Analyse(sc, "dcqcn", fw, p.LinkRate), Analyse(sc, "dcqcn-nobc", nobc, p.LinkRate)
	t.Logf("firmware %+v", rf)
	t.Logf("no byte counter %+v", rn)
	if rf.Pauses == 0 || rn.Pauses != 0 {
		t.Errorf("PFC pauses: %d with the byte counter, %d without; want some and none", rf.Pauses, rn.Pauses)
	}
	if rn.QP99 > p.XOff/2 || rf.QP99 < p.XOff*9/10 {
		t.Errorf("queue p99 %d B with the byte counter, %d B without; want near XOFF (%d B) and far below it", rf.QP99, rn.QP99, p.XOff)
	}
}

// The HPCC authors' ns-3 reading of the firmware (no byte counter, timer
// stages, g = 1/256, a CNP per marked packet) does not oscillate in fair2:
// measured at 40 Gb/s over the full run, no pause and a queue p99 of
// 192 KB against the firmware preset's 43 pauses and 1018 KB.
func TestNS3DCQCNFair2(t *testing.T) {
	p := DefaultParams()
	sc := Scenarios(0.5)[0]
	r := Analyse(sc, "dcqcn-ns3", NewSim(p, algo(t, p, "dcqcn-ns3").Cfg, sc.Flows).Run(sc.Duration), p.LinkRate)
	t.Logf("%+v", r)
	if r.Pauses != 0 || r.QP99 > p.XOff/3 || r.Util < 0.9 || r.Jain < 0.9 {
		t.Errorf("dcqcn-ns3 fair2: %d pauses, q p99 %d B, util %.3f, Jain %.3f; want 0, ≤ %d B, ≥ 0.9, ≥ 0.9",
			r.Pauses, r.QP99, r.Util, r.Jain, p.XOff/3)
	}
}

// TIMELY as ns-3 configures it uses the link in fair2; the paper's literal
// 10 Gb/s parameters do not (δ = 10 Mb/s per 16 KB segment regrows a cut
// flow with a time constant of 8·16 KB/δ ≈ 13 ms). When a third flow
// joins two, TIMELY's gradient leaves the flows wherever the join put
// them (the many fixed points "ECN or Delay" finds in TIMELY) and Patched
// TIMELY evens them out.
func TestTIMELYPapers(t *testing.T) {
	p := DefaultParams()
	sc := Scenarios(1)[0] // fair2 in full: the join's 6 ms recovery weighs less
	run := func(p Params, sc Scenario, name string) Result {
		r := Analyse(sc, name, NewSim(p, algo(t, p, name).Cfg, sc.Flows).Run(sc.Duration), p.LinkRate)
		t.Logf("%s %s: %+v", sc.Name, name, r)
		return r
	}
	if r := run(p, sc, "timely"); r.Util < 0.9 || r.Jain < 0.95 { // measured 0.916, 1.000
		t.Errorf("timely fair2: util %.3f Jain %.3f; want ≥ 0.9, ≥ 0.95", r.Util, r.Jain)
	}
	if r := run(p, sc, "timely-paper"); r.Util > 0.5 {
		t.Errorf("timely-paper fair2: util %.3f; want the paper's slow regrowth (≤ 0.5)", r.Util)
	}
	sc = Scenarios(0.5)[3] // joinleave, 40 ms
	tm, pt := run(p, sc, "timely"), run(p, sc, "timely-patched")
	if tm.Jain > 0.92 || pt.Jain < 0.99 { // measured 0.883 and 1.000
		t.Errorf("joinleave: Jain %.3f TIMELY, %.3f Patched; want ≤ 0.92 and ≥ 0.99", tm.Jain, pt.Jain)
	}
}

// Runs are deterministic for a seed, and the seed matters.
func TestDeterministic(t *testing.T) {
	p := DefaultParams()
	sc := Scenarios(0.1)[1] // incast8, 4 ms
	a := algo(t, p, "dcqcn")
	r1 := NewSim(p, a.Cfg, sc.Flows).Run(sc.Duration)
	r2 := NewSim(p, a.Cfg, sc.Flows).Run(sc.Duration)
	if !reflect.DeepEqual(r1, r2) {
		t.Fatal("two runs with one seed differ")
	}
	p.Seed = 2
	r3 := NewSim(p, a.Cfg, sc.Flows).Run(sc.Duration)
	if reflect.DeepEqual(r1.Queue, r3.Queue) {
		t.Fatal("the seed changes nothing")
	}
}

func TestJain(t *testing.T) {
	for _, tt := range []struct {
		xs   []float64
		want float64
	}{{[]float64{1, 1}, 1}, {[]float64{1, 0}, 0.5}, {[]float64{2, 2, 2, 2}, 1}, {[]float64{1, 0, 0, 0}, 0.25}} {
		if got := jain(tt.xs); got != tt.want {
			t.Errorf("jain(%v) = %v, want %v", tt.xs, got, tt.want)
		}
	}
}

func TestTable(t *testing.T) {
	var b bytes.Buffer
	printTable(&b, []Result{{Scenario: "fair2", Algo: "dcqcn", Jain: 0.99, Converge: 2e6, QP50: 2048}})
	if !strings.Contains(b.String(), "fair2") || !strings.Contains(b.String(), "2.00") {
		t.Fatalf("table:\n%s", b.String())
	}
}

// HPCC's claim (Li et al., SIGCOMM 2019, abstract and §3.3): near-zero
// queues with the link at its target utilisation η (95 %), here with the
// switch stamping INT on every packet. Pinned from the runs of
// 2026-12-01 (docs/congestion.md), with margin: utilisation 94.2-95.5 %,
// queue p99 2-3 KB (under RED's Kmin: HPCC needs no ECN), Jain
// 0.990-0.994, no pause, no drop. A flow starts at line rate, W_init =
// B·T (§3.3), so flows starting together may queue up to their number
// times B·T for the first RTT (22, 263 and 589 KB measured); from 1 ms
// after a start on, the queue stays within a few packets (at most 4 KB
// measured).
func TestHPCCPaperProperties(t *testing.T) {
	p := DefaultParams()
	for _, name := range []string{"fair2", "incast8", "incast16"} {
		t.Run(name, func(t *testing.T) {
			sc := scenario(t, name, 1)
			a := algo(t, p, "hpcc")
			r := NewSim(p, a.Cfg, sc.Flows).Run(sc.Duration)
			res := Analyse(sc, "hpcc", r, p.LinkRate)
			starts := map[time.Duration]int{}
			for _, f := range sc.Flows {
				starts[f.Start]++
			}
			settled, burst := 0, 0
			for n, at := range r.Times {
				near := false
				for s, k := range starts {
					if at >= s && at < s+time.Millisecond {
						near = true
						burst = max(burst, k)
					}
				}
				if !near {
					settled = max(settled, r.Queue[n])
				}
			}
			bdp := int(float64(p.LinkRate) / 8 * a.Cfg.HPCC.BaseRTT.Seconds())
			t.Logf("%+v; queue max %d B after the first ms of every start", res, settled)
			if res.Util < 0.92 || res.Util > 0.97 {
				t.Errorf("utilisation %.3f, want 0.92-0.97 (η = 0.95)", res.Util)
			}
			if res.QP99 > p.RED.Kmin {
				t.Errorf("queue p99 %d B over RED Kmin %d B", res.QP99, p.RED.Kmin)
			}
			if settled > 8*p.MTU {
				t.Errorf("queue max after the first ms of a start %d B, want at most 8 packets", settled)
			}
			if res.QMax > burst*bdp {
				t.Errorf("queue max %d B over %d flows' B·T (%d B)", res.QMax, burst, burst*bdp)
			}
			if res.Jain < 0.97 {
				t.Errorf("Jain %.3f < 0.97", res.Jain)
			}
			if res.Pauses != 0 || res.Drops != 0 {
				t.Errorf("%d PFC pauses, %d drops", res.Pauses, res.Drops)
			}
		})
	}
}

// The default preset meets issue 17's goal 3 in every scenario at 40 and
// 100 Gb/s: Jain ≥ 0.95, utilisation ≥ 90 %, no PFC pause in fair2 and
// joinleave, queue p99 under RED's Kmax. Runs are a quarter length to keep
// the test short; the full runs (docs/congestion.md) meet the same.
func TestDefaultPresetStable(t *testing.T) {
	for _, gbps := range []cc.Rate{40, 100} {
		p := DefaultParams()
		p.LinkRate = gbps * cc.Gbps
		a := algo(t, p, cc.DefaultPresetName)
		for _, sc := range Scenarios(0.25) {
			r := Analyse(sc, a.Name, NewSim(p, a.Cfg, sc.Flows).Run(sc.Duration), p.LinkRate)
			t.Logf("%v %s: Jain %.3f util %.3f q p99 %d B pauses %d", p.LinkRate, sc.Name, r.Jain, r.Util, r.QP99, r.Pauses)
			pfcOK := r.Pauses == 0 || sc.Name == "incast8" || sc.Name == "incast16"
			if r.Jain < 0.95 || r.Util < 0.9 || !pfcOK || r.QP99 >= p.RED.Kmax {
				t.Errorf("%v %s: Jain %.3f util %.3f pauses %d q p99 %d B; want ≥ 0.95, ≥ 0.9, none, < %d B",
					p.LinkRate, sc.Name, r.Jain, r.Util, r.Pauses, r.QP99, p.RED.Kmax)
			}
		}
	}
}
