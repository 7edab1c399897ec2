package cc

import (
	"fmt"
	"time"
)

// TIMELYParams are TIMELY's parameters (Mittal et al., "TIMELY: RTT-based
// Congestion Control for the Datacenter", SIGCOMM 2015, Algorithm 1 and
// §6; [ns-3] is the TIMELY of the HPCC authors' simulator,
// alibaba-edu/High-Precision-Congestion-Control rdma-hw.cc UpdateRateTimely
// and run.py "timely").
type TIMELYParams struct {
	// EWMA is α, the weight of a new RTT difference in the smoothed
	// difference: rtt_diff ← (1−α)·rtt_diff + α·new_rtt_diff (Algorithm 1;
	// [ns-3] TimelyAlpha 0.875). Dimensionless, (0, 1].
	EWMA float64
	// Beta is β, the multiplicative decrease factor: R ← R·(1 − β·g) for
	// a positive normalised gradient g, R ← R·(1 − β·(1 − T_high/RTT))
	// above T_high (Algorithm 1; 0.8 in the paper and [ns-3]).
	Beta float64
	// TLow and THigh: below TLow the rate only increases, above THigh it
	// decreases in proportion to how far the RTT is above THigh (µs in
	// the paper: 50 and 500; [ns-3] the same in ns).
	TLow, THigh time.Duration
	// AddStep is δ, the additive increase per update (Mb/s; the paper's
	// 10 Mb/s is for its 10 Gb/s NICs; [ns-3] RATE_AI = 10 Mb/s per
	// 10 Gb/s of line rate).
	AddStep Rate
	// HAIThreshold is N: after this many consecutive updates with a
	// non-positive gradient, each increase is N·δ (hyperactive increase;
	// N = 5 in the paper; [ns-3] RATE_HAI = 5·RATE_AI after 5 stages).
	HAIThreshold int
	// MinRTT normalises the gradient, g = rtt_diff / minRTT (Algorithm 1);
	// 0 uses the least RTT seen. [ns-3] fixes it at 20 µs (TimelyMinRtt).
	MinRTT time.Duration
	// SegmentBytes is how many acknowledged bytes make one completion
	// event: TIMELY updates the rate once per segment (16-64 KB in §5),
	// not per ACK; 0 updates on every ACK.
	SegmentBytes int
	// MinRate is the lowest rate (the paper names none; [ns-3] MIN_RATE
	// 1 Gb/s in run.py).
	MinRate Rate
	// Patched selects Patched TIMELY (Zhu et al., "ECN or Delay: Lessons
	// Learnt from Analysis of DCQCN and TIMELY", CoNEXT 2016): between
	// TLow and THigh the rate moves by both the gradient and the RTT's
	// distance from RTTRef, R ← R·(1 − β·w(g)·e) + δ·(1 − w(g)) with
	// e = (RTT − RTTRef)/RTTRef and w(g) = 0 for g ≤ −¼, 2g + ½ between,
	// 1 for g ≥ ¼ (as eRPC's src/cc/timely.h reads the paper). The RTT
	// term gives the flows one fixed point, the fair one, where TIMELY's
	// gradient alone has a line of them.
	Patched bool
	// RTTRef is Patched TIMELY's reference RTT; 0 means TLow.
	RTTRef time.Duration
}

// DefaultTIMELY returns the paper's parameters as published, for its
// 10 Gb/s NICs: α = 0.875, β = 0.8, T_low = 50 µs, T_high = 500 µs,
// δ = 10 Mb/s, N = 5, 16 KB segments, the gradient normalised by the least
// RTT seen. At 40 Gb/s with an 8 µs fabric these never recover from the
// first congestion in the time of a run (docs/congestion.md measures why);
// NS3TIMELY is what DefaultConfig uses.
func DefaultTIMELY() TIMELYParams {
	return TIMELYParams{
		EWMA:         0.875,
		Beta:         0.8,
		TLow:         50 * time.Microsecond,
		THigh:        500 * time.Microsecond,
		AddStep:      10 * Mbps,
		HAIThreshold: 5,
		SegmentBytes: 16 << 10,
		MinRate:      1 * Mbps,
	}
}

// NS3TIMELY returns TIMELY as the HPCC authors' ns-3 configures it for a
// link of rate line: the paper's rule with δ scaled to the line rate
// (10 Mb/s per 10 Gb/s), the gradient normalised by a fixed 20 µs, and a
// floor of 1 Gb/s (or line, if lower).
func NS3TIMELY(line Rate) TIMELYParams {
	p := DefaultTIMELY()
	p.AddStep = max(Rate(uint64(10*Mbps)*uint64(line)/uint64(10*Gbps)), 1*Mbps)
	p.MinRTT = 20 * time.Microsecond
	p.MinRate = min(1*Gbps, line)
	return p
}

// PatchedTIMELY returns Patched TIMELY (Zhu et al., CoNEXT 2016) on
// NS3TIMELY's parameters, with RTTRef = T_low and β = 0.008. β multiplies
// e, which is 1 at twice T_low, so it must be far smaller than TIMELY's
// 0.8; 0.008 is measured in uroce-ccsim fair2 at 40 Gb/s (β 0.8: 65 %
// use, 0.08: 85 %, 0.008: 99 %, each with Jain 1.000).
func PatchedTIMELY(line Rate) TIMELYParams {
	p := NS3TIMELY(line)
	p.Patched = true
	p.Beta = 0.008
	return p
}

func (p *TIMELYParams) check(line Rate) error {
	switch {
	case !(p.EWMA > 0 && p.EWMA <= 1):
		return fmt.Errorf("timely: ewma %v: %w", p.EWMA, ErrBadParams)
	case !(p.Beta > 0 && p.Beta <= 1):
		return fmt.Errorf("timely: beta %v: %w", p.Beta, ErrBadParams)
	case p.TLow <= 0 || p.THigh <= p.TLow:
		return fmt.Errorf("timely: thresholds %v, %v: %w", p.TLow, p.THigh, ErrBadParams)
	case p.HAIThreshold < 1:
		return fmt.Errorf("timely: hai threshold %d: %w", p.HAIThreshold, ErrBadParams)
	case p.MinRTT < 0 || p.SegmentBytes < 0 || p.RTTRef < 0:
		return fmt.Errorf("timely: min rtt %v, segment %d: %w", p.MinRTT, p.SegmentBytes, ErrBadParams)
	case p.MinRate == 0 || p.MinRate > line:
		return fmt.Errorf("timely: min rate %v: %w", p.MinRate, ErrBadParams)
	}
	return nil
}

// TIMELY is RTT-gradient rate control (Mittal et al., SIGCOMM 2015) for one
// QP. The RTT is measured from the requester's send to the ACK, which the
// engine passes to OnAck.
type TIMELY struct {
	p    TIMELYParams
	line Rate
	np   NP
	ctr  Counters

	rate     float64 // bits per second
	prevRTT  time.Duration
	rttDiff  float64 // smoothed RTT difference, ns
	minRTT   time.Duration
	negCount int // consecutive completions with gradient <= 0
	acked    int // bytes acknowledged since the last update
}

var _ Algorithm = (*TIMELY)(nil)

// NewTIMELY returns a TIMELY flow at line rate. It returns an error wrapping
// ErrBadParams if p is out of range.
func NewTIMELY(p TIMELYParams, np NPParams, line Rate) (*TIMELY, error) {
	if err := p.check(line); err != nil {
		return nil, err
	}
	return &TIMELY{p: p, line: line, np: NewNP(np), rate: float64(line), minRTT: p.MinRTT}, nil
}

// OnAck feeds an RTT sample; once a segment's worth of bytes has been
// acknowledged it runs Algorithm 1 of the paper.
func (t *TIMELY) OnAck(now time.Time, n int, rtt time.Duration) {
	t.acked += n
	if rtt <= 0 || t.acked < t.p.SegmentBytes {
		return
	}
	t.acked = 0
	if t.p.MinRTT == 0 && (t.minRTT == 0 || rtt < t.minRTT) {
		t.minRTT = rtt
	}
	if t.prevRTT == 0 {
		// The first sample has no difference to take.
		t.prevRTT = rtt
		return
	}
	newDiff := float64(rtt - t.prevRTT)
	t.prevRTT = rtt
	t.rttDiff = (1-t.p.EWMA)*t.rttDiff + t.p.EWMA*newDiff
	gradient := t.rttDiff / float64(t.minRTT)
	switch {
	case rtt < t.p.TLow:
		t.rate += float64(t.p.AddStep)
	case rtt > t.p.THigh:
		t.negCount = 0
		t.rate *= 1 - t.p.Beta*(1-float64(t.p.THigh)/float64(rtt))
	case t.p.Patched:
		ref := t.p.RTTRef
		if ref == 0 {
			ref = t.p.TLow
		}
		w := min(max(2*gradient+0.5, 0), 1)
		e := float64(rtt-ref) / float64(ref)
		t.rate = t.rate*(1-t.p.Beta*w*e) + float64(t.p.AddStep)*(1-w)
	case gradient <= 0:
		t.negCount++
		n := 1.0
		if t.negCount >= t.p.HAIThreshold {
			n = float64(t.p.HAIThreshold)
		}
		t.rate += n * float64(t.p.AddStep)
	default:
		t.negCount = 0
		t.rate *= 1 - t.p.Beta*gradient
	}
	t.rate = min(max(t.rate, float64(t.p.MinRate)), float64(t.line))
}

// Gradient returns the normalised RTT gradient of the last update.
func (t *TIMELY) Gradient() float64 {
	if t.minRTT == 0 {
		return 0
	}
	return t.rttDiff / float64(t.minRTT)
}

func (t *TIMELY) OnSent(time.Time, int)   {}
func (t *TIMELY) OnCNP(time.Time)         { t.ctr.RPCNPIgnored++ }
func (t *TIMELY) OnCE(now time.Time) bool { return t.np.OnCE(now, &t.ctr) }
func (t *TIMELY) OnLoss(time.Time)        {}
func (t *TIMELY) OnTimer(time.Time)       {}
func (t *TIMELY) NextTimer() time.Time    { return time.Time{} }
func (t *TIMELY) Rate() Rate              { return clampRate(Rate(t.rate), t.p.MinRate, t.line) }
func (t *TIMELY) Window() int             { return 0 }
func (t *TIMELY) Stats(time.Time) Stats {
	r := t.Rate()
	return Stats{Counters: t.ctr, Kind: KindTIMELY, Rate: r, TargetRate: r}
}
