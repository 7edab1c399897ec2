package cc

import (
	"fmt"
	"time"
)

// TIMELYParams are TIMELY's parameters (Mittal et al., SIGCOMM 2015,
// Algorithm 1 and §6).
type TIMELYParams struct {
	// EWMA is α, the weight of a new RTT difference in the smoothed
	// gradient.
	EWMA float64
	// Beta is β, the multiplicative decrease factor.
	Beta float64
	// TLow and THigh: below TLow the rate only increases, above THigh it
	// decreases in proportion to how far the RTT is above THigh.
	TLow, THigh time.Duration
	// AddStep is δ, the additive increase.
	AddStep Rate
	// HAIThreshold is N: after this many consecutive completions with a
	// non-positive gradient, each increase is N·δ (hyperactive increase).
	HAIThreshold int
	// MinRTT normalises the gradient; 0 uses the least RTT seen.
	MinRTT time.Duration
	// SegmentBytes is how many acknowledged bytes make one completion
	// event: TIMELY updates the rate once per segment (16-64 KB in §5),
	// not per ACK.
	SegmentBytes int
	// MinRate is the lowest rate.
	MinRate Rate
}

// DefaultTIMELY returns the paper's parameters: α = 0.875, β = 0.8,
// T_low = 50 µs, T_high = 500 µs, δ = 10 Mb/s, N = 5, 16 KB segments.
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
	case p.MinRTT < 0 || p.SegmentBytes < 0:
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
