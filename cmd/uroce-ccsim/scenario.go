package main

import (
	"math"
	"slices"
	"time"

	"github.com/uroce/uroce/cc"
)

// Scenario is a set of flows over a run of some length.
type Scenario struct {
	Name     string
	Flows    []FlowSpec
	Duration time.Duration
}

const ms = time.Millisecond

// Scenarios returns the shipped scenarios; scale stretches their times
// (the test runs them shorter).
func Scenarios(scale float64) []Scenario {
	d := func(x time.Duration) time.Duration { return time.Duration(float64(x) * scale) }
	incast := func(n int) []FlowSpec { return make([]FlowSpec, n) } // all at 0, never stop
	return []Scenario{
		{"fair2", []FlowSpec{{0, 0}, {d(10 * ms), 0}}, d(60 * ms)},
		{"incast8", incast(8), d(40 * ms)},
		{"incast16", incast(16), d(40 * ms)},
		{"joinleave", []FlowSpec{{0, 0}, {0, 0}, {d(20 * ms), d(50 * ms)}}, d(80 * ms)},
	}
}

// Algo is one column of the comparison: a name and a configuration.
type Algo struct {
	Name string
	Cfg  cc.Config
}

// Algos returns the algorithms compared, configured for p.
func Algos(p Params) []Algo {
	fw := cc.DefaultConfig(cc.KindDCQCN, p.LinkRate)
	paper := fw
	paper.DCQCN, paper.NP = cc.PaperDCQCN(), cc.PaperNP()
	tm := cc.DefaultConfig(cc.KindTIMELY, p.LinkRate)
	tmPaper := tm
	tmPaper.TIMELY = cc.DefaultTIMELY()
	tmPatched := tm
	tmPatched.TIMELY = cc.PatchedTIMELY(p.LinkRate)
	// The firmware preset with CLAMP_TGT_RATE set: Rt ← Rc on every CNP,
	// as the paper's algorithm does.
	clamp := fw
	clamp.DCQCN.ClampTgtRate = true
	// The firmware preset without its byte counter (RPG_BYTE_RESET 0):
	// the timer alone raises the rate, which shows what the 32 KiB byte
	// counter does to the queue (see the note under the table).
	nobc := fw
	nobc.DCQCN.ByteReset = 0
	// The HPCC authors' ns-3 DCQCN (run.py "dcqcn"): the firmware model
	// without the byte counter, and a CNP for every marked packet (its
	// receiver sets the CNP bit on the ACK of each CE packet).
	ns3 := fw
	ns3.DCQCN = cc.NS3DCQCN(p.LinkRate)
	ns3.NP.MinTimeBetweenCNPs = 0
	sw := cc.DefaultConfig(cc.KindSwift, p.LinkRate)
	sw.Swift.MSS = p.MTU
	// Swift's target is the fabric's base RTT plus the queueing it allows
	// (§3.1); give it 10 µs of queue.
	sw.Swift.BaseTarget = p.BaseRTT + 10*time.Microsecond
	// HPCC's T is the fabric's base RTT with a packet's serialisation at
	// the NIC and at the port: this network's unloaded RTT (§3.3 sizes
	// W_init = B·T from it).
	hp := cc.DefaultConfig(cc.KindHPCC, p.LinkRate)
	hp.HPCC.BaseRTT = p.BaseRTT + 2*p.LinkRate.TxTime(p.MTU)
	hp.HPCC.MSS = p.MTU
	hpNS3 := hp
	hpNS3.HPCC = cc.NS3HPCC()
	hpNS3.HPCC.BaseRTT, hpNS3.HPCC.MSS = hp.HPCC.BaseRTT, hp.HPCC.MSS
	none := cc.DefaultConfig(cc.KindNone, p.LinkRate)
	// The default preset, as a QP gets it; only the window's unit follows
	// the simulated MTU.
	def := cc.DefaultPreset(p.LinkRate)
	def.Swift.InitCwnd *= float64(def.Swift.MSS) / float64(p.MTU)
	def.Swift.MSS = p.MTU
	return []Algo{
		{cc.DefaultPresetName, def},
		{"dcqcn", fw},
		{"dcqcn-clamp", clamp},
		{"dcqcn-nobc", nobc},
		{"dcqcn-paper", paper},
		{"dcqcn-ns3", ns3},
		{"timely", tm},
		{"timely-paper", tmPaper},
		{"timely-patched", tmPatched},
		{"swift", sw},
		{"hpcc", hp},
		{"hpcc-ns3", hpNS3},
		{"none", none},
	}
}

// Result summarises one run.
type Result struct {
	Scenario, Algo   string
	Jain             float64       // least over phases with two or more flows; NaN if none
	Converge         time.Duration // worst over those phases; -1 if some phase never converged
	QP50, QP99, QMax int           // queue, bytes, while any flow is active
	Util             float64
	Pauses, Drops    int
	CNPs             uint64
}

// convergeTol is how far from its fair share (link rate / active flows) a
// flow's 1 ms throughput may be, from some time to the end of a phase, for
// the phase to count as converged.
const convergeTol = 0.2

// jain is Jain's fairness index of xs: (Σx)² / (n·Σx²).
func jain(xs []float64) float64 {
	var s, s2 float64
	for _, x := range xs {
		s += x
		s2 += x * x
	}
	if s2 == 0 {
		return 1
	}
	return s * s / (float64(len(xs)) * s2)
}

// Analyse computes the metrics of a run.
func Analyse(sc Scenario, algo string, r *Record, line cc.Rate) Result {
	res := Result{Scenario: sc.Name, Algo: algo, Jain: math.NaN(), Pauses: r.Pauses, Drops: r.Drops, CNPs: r.CNPs}
	// Phase boundaries: every start and stop.
	cuts := []time.Duration{0, sc.Duration}
	for _, f := range sc.Flows {
		cuts = append(cuts, f.Start)
		if f.Stop > 0 {
			cuts = append(cuts, f.Stop)
		}
	}
	slices.Sort(cuts)
	cuts = slices.Compact(cuts)
	idx := func(t time.Duration) int { return min(int(t/r.Sample), len(r.Times)) }
	win := max(1, int(time.Millisecond/r.Sample)) // 1 ms smoothing
	for k := 0; k+1 < len(cuts); k++ {
		a, b := cuts[k], cuts[k+1]
		var act []int
		for i, f := range sc.Flows {
			if f.Start <= a && (f.Stop == 0 || f.Stop >= b) {
				act = append(act, i)
			}
		}
		if len(act) < 2 {
			continue
		}
		// Steady state: the second half of the phase.
		lo, hi := idx(a+(b-a)/2), idx(b)
		means := make([]float64, len(act))
		for j, i := range act {
			for n := lo; n < hi; n++ {
				means[j] += r.Thru[i][n]
			}
		}
		if jv := jain(means); math.IsNaN(res.Jain) || jv < res.Jain {
			res.Jain = jv
		}
		// Convergence: after the last 1 ms window in which some flow's
		// throughput is off its fair share by more than convergeTol.
		start, end := idx(a), idx(b)
		fair := float64(line) / 1e9 / float64(len(act))
		conv := a
		for n := start + win; n <= end; n++ {
			for _, i := range act {
				var x float64
				for m := n - win; m < n; m++ {
					x += r.Thru[i][m]
				}
				if math.Abs(x/float64(win)-fair) > convergeTol*fair {
					conv = time.Duration(n) * r.Sample
					break
				}
			}
		}
		c := conv - a
		if conv >= b-time.Millisecond {
			c = -1
		}
		if res.Converge >= 0 && (c < 0 || c > res.Converge) {
			res.Converge = c
		}
	}
	// Queue and utilisation while any flow is active.
	var qs []int
	var busy int
	var bytes float64
	for n := range r.Times {
		any := false
		for i := range r.Active {
			if r.Active[i][n] {
				any = true
			}
			bytes += r.Thru[i][n]
		}
		if any {
			qs = append(qs, r.Queue[n])
			busy++
		}
	}
	if len(qs) > 0 {
		slices.Sort(qs)
		res.QP50 = qs[len(qs)*50/100]
		res.QP99 = qs[min(len(qs)-1, len(qs)*99/100)]
		res.QMax = qs[len(qs)-1]
		res.Util = bytes / (float64(busy) * float64(line) / 1e9)
	}
	return res
}
