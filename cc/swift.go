package cc

import (
	"fmt"
	"math"
	"time"
)

// SwiftParams are Swift's parameters (Kumar et al., SIGCOMM 2020,
// Algorithm 1 and §3). Windows are in packets of MSS bytes, as in the paper.
type SwiftParams struct {
	// MSS is the bytes in one packet: the unit of the window.
	MSS int
	// BaseTarget is the delay target before flow scaling: the fabric's
	// base RTT plus the queueing it may add. Hop scaling is not done (the
	// engine does not know the hop count); fold it into BaseTarget.
	BaseTarget time.Duration
	// AI is the additive increase, in packets per RTT.
	AI float64
	// Beta is the multiplicative decrease factor β.
	Beta float64
	// MaxMDF bounds one decrease: the window keeps at least 1−MaxMDF.
	MaxMDF float64
	// FSRange is the largest extra target flow scaling adds; it adds it
	// at FSMinCwnd and nothing at FSMaxCwnd (§3.5).
	FSRange              time.Duration
	FSMinCwnd, FSMaxCwnd float64
	// MinCwnd and MaxCwnd bound the window. Below one packet Swift paces
	// one packet per RTT/cwnd (§3.3).
	MinCwnd, MaxCwnd float64
	// InitCwnd is the starting window; 0 means MaxCwnd.
	InitCwnd float64
	// RetxResetThreshold retransmissions in a row drop the window to
	// MinCwnd.
	RetxResetThreshold int
	// MinRate is the lowest pacing rate.
	MinRate Rate
}

// DefaultSwift returns Swift's parameters for a single-hop fabric with
// microsecond RTTs: a 25 µs base target, AI of one packet per RTT, β = 0.8,
// max_mdf = 0.5, flow scaling of up to 25 µs between 0.1 and 100 packets,
// windows from 0.001 to 1000 packets of 1024 bytes.
func DefaultSwift() SwiftParams {
	return SwiftParams{
		MSS:                1024,
		BaseTarget:         25 * time.Microsecond,
		AI:                 1,
		Beta:               0.8,
		MaxMDF:             0.5,
		FSRange:            25 * time.Microsecond,
		FSMinCwnd:          0.1,
		FSMaxCwnd:          100,
		MinCwnd:            0.001,
		MaxCwnd:            1000,
		RetxResetThreshold: 5,
		MinRate:            1 * Mbps,
	}
}

func (p *SwiftParams) check(line Rate) error {
	switch {
	case p.MSS <= 0:
		return fmt.Errorf("swift: mss %d: %w", p.MSS, ErrBadParams)
	case p.BaseTarget <= 0 || p.FSRange < 0:
		return fmt.Errorf("swift: target %v, range %v: %w", p.BaseTarget, p.FSRange, ErrBadParams)
	case !(p.AI > 0) || !(p.Beta > 0 && p.Beta <= 1) || !(p.MaxMDF > 0 && p.MaxMDF < 1):
		return fmt.Errorf("swift: ai %v, beta %v, max mdf %v: %w", p.AI, p.Beta, p.MaxMDF, ErrBadParams)
	case !(p.FSMinCwnd > 0 && p.FSMaxCwnd > p.FSMinCwnd):
		return fmt.Errorf("swift: flow scaling %v..%v: %w", p.FSMinCwnd, p.FSMaxCwnd, ErrBadParams)
	case !(p.MinCwnd > 0 && p.MaxCwnd >= p.MinCwnd) || p.InitCwnd < 0:
		return fmt.Errorf("swift: cwnd %v..%v: %w", p.MinCwnd, p.MaxCwnd, ErrBadParams)
	case p.RetxResetThreshold < 1:
		return fmt.Errorf("swift: retx reset %d: %w", p.RetxResetThreshold, ErrBadParams)
	case p.MinRate == 0 || p.MinRate > line:
		return fmt.Errorf("swift: min rate %v: %w", p.MinRate, ErrBadParams)
	}
	return nil
}

// Swift is delay-target window control (Kumar et al., SIGCOMM 2020) for one
// QP: additive increase below the target, multiplicative decrease in
// proportion to the excess delay at most once per RTT, and pacing when the
// window is below one packet.
type Swift struct {
	p    SwiftParams
	line Rate
	np   NP
	ctr  Counters

	cwnd         float64 // packets
	rtt          time.Duration
	lastDecrease time.Time
	decreased    bool
	retx         int
	fsAlpha      float64 // flow scaling α and β, in ns (§3.5)
	fsBeta       float64
}

var _ Algorithm = (*Swift)(nil)

// NewSwift returns a Swift flow. It returns an error wrapping ErrBadParams
// if p is out of range.
func NewSwift(p SwiftParams, np NPParams, line Rate) (*Swift, error) {
	if err := p.check(line); err != nil {
		return nil, err
	}
	s := &Swift{p: p, line: line, np: NewNP(np), cwnd: p.InitCwnd}
	if s.cwnd == 0 {
		s.cwnd = p.MaxCwnd
	}
	s.cwnd = min(max(s.cwnd, p.MinCwnd), p.MaxCwnd)
	s.fsAlpha = float64(p.FSRange) / (1/math.Sqrt(p.FSMinCwnd) - 1/math.Sqrt(p.FSMaxCwnd))
	s.fsBeta = -s.fsAlpha / math.Sqrt(p.FSMaxCwnd)
	return s, nil
}

// Target returns the delay target at the current window: BaseTarget plus
// flow scaling α/√cwnd + β clamped to [0, FSRange] (§3.5), so that flows
// with small windows aim a little higher and the queue stays fair.
func (s *Swift) Target() time.Duration {
	fs := s.fsAlpha/math.Sqrt(s.cwnd) + s.fsBeta
	fs = min(max(fs, 0), float64(s.p.FSRange))
	return s.p.BaseTarget + time.Duration(fs)
}

// canDecrease: Swift decreases at most once per RTT (Algorithm 1).
func (s *Swift) canDecrease(now time.Time) bool {
	return !s.decreased || now.Sub(s.lastDecrease) >= s.rtt
}

func (s *Swift) decrease(now time.Time, f float64) {
	s.cwnd = min(max(s.cwnd*f, s.p.MinCwnd), s.p.MaxCwnd)
	s.lastDecrease = now
	s.decreased = true
}

// OnAck is Algorithm 1's "on receiving ACK".
func (s *Swift) OnAck(now time.Time, n int, rtt time.Duration) {
	s.retx = 0
	if rtt <= 0 {
		return
	}
	s.rtt = rtt
	target := s.Target()
	if rtt < target {
		acked := float64(n) / float64(s.p.MSS)
		if s.cwnd >= 1 {
			s.cwnd += s.p.AI / s.cwnd * acked
		} else {
			s.cwnd += s.p.AI * acked
		}
		s.cwnd = min(s.cwnd, s.p.MaxCwnd)
		return
	}
	if s.canDecrease(now) {
		f := max(1-s.p.Beta*float64(rtt-target)/float64(rtt), 1-s.p.MaxMDF)
		s.decrease(now, f)
	}
}

// OnLoss is Algorithm 1's retransmission timeout: after RetxResetThreshold
// in a row the window drops to MinCwnd, before that it is cut by MaxMDF at
// most once per RTT.
func (s *Swift) OnLoss(now time.Time) {
	s.retx++
	if s.retx >= s.p.RetxResetThreshold {
		s.decrease(now, 0)
		return
	}
	if s.canDecrease(now) {
		s.decrease(now, 1-s.p.MaxMDF)
	}
}

// Cwnd returns the window in packets.
func (s *Swift) Cwnd() float64 { return s.cwnd }

// Window returns the window in bytes, at least one packet: below one packet
// the pacing rate, not the window, holds the flow back.
func (s *Swift) Window() int {
	return max(int(s.cwnd*float64(s.p.MSS)), s.p.MSS)
}

// Rate is the line rate while the window is at least one packet, and
// cwnd·MSS per RTT below that (§3.3: pacing below one packet of window).
func (s *Swift) Rate() Rate {
	if s.cwnd >= 1 || s.rtt == 0 {
		return s.line
	}
	r := s.cwnd * float64(s.p.MSS) * 8 * float64(time.Second) / float64(s.rtt)
	return clampRate(Rate(r), s.p.MinRate, s.line)
}

func (s *Swift) OnSent(time.Time, int)   {}
func (s *Swift) OnCNP(time.Time)         { s.ctr.RPCNPIgnored++ }
func (s *Swift) OnCE(now time.Time) bool { return s.np.OnCE(now, &s.ctr) }
func (s *Swift) OnTimer(time.Time)       {}
func (s *Swift) NextTimer() time.Time    { return time.Time{} }
func (s *Swift) Stats(time.Time) Stats {
	r := s.Rate()
	return Stats{Counters: s.ctr, Kind: KindSwift, Rate: r, TargetRate: r, Window: s.Window()}
}
