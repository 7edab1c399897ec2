package cc

import (
	"fmt"
	"time"
)

// alphaOne is 1.0 in DCQCN's 10-bit fixed point; α never exceeds alphaMax.
const (
	alphaOne = 1024
	alphaMax = 1023
)

// DCQCNParams are the reaction point's parameters, named after the
// ConnectX firmware settings (mlxconfig names in each comment; mlx5 sysfs
// uses the same names in lower case).
type DCQCNParams struct {
	// TimeReset is the rate increase timer: time between increases when no
	// CNP arrives (RPG_TIME_RESET; the paper's T).
	TimeReset time.Duration
	// ByteReset is the byte counter: bytes sent between increases when no
	// CNP arrives; 0 disables it (RPG_BYTE_RESET; the paper's B).
	ByteReset int64
	// Threshold is how many timer or byte counter events each stage of
	// fast recovery lasts before additive, then hyper increase
	// (RPG_THRESHOLD; the paper's F).
	Threshold int
	// AIRate is the additive increase step of the target rate
	// (RPG_AI_RATE; R_AI).
	AIRate Rate
	// HAIRate is the hyper increase step (RPG_HAI_RATE; R_HAI).
	HAIRate Rate
	// GD is log2 of the divisor of α in a cut: Rc -= Rc·α/2^GD with α in
	// 10-bit fixed point, so 11 is the paper's Rc·(1−α/2) (RPG_GD).
	GD uint
	// MinDecFac bounds one cut: the new rate is at least MinDecFac % of
	// the old; 100 disables cuts (RPG_MIN_DEC_FAC).
	MinDecFac int
	// MinRate is the lowest rate (RPG_MIN_RATE).
	MinRate Rate
	// RateToSetOnFirstCNP is the rate (current and target) a flow gets on
	// its first CNP; 0 means cut from the line rate as any CNP does
	// (RATE_TO_SET_ON_FIRST_CNP).
	RateToSetOnFirstCNP Rate
	// G is the weight of the old α in 10-bit fixed point: on a cut
	// α ← α·G/1024 + (1024−G), and each AlphaPeriod without one
	// α ← α·G/1024, so the paper's g is (1024−G)/1024 (DCE_TCP_G).
	G uint32
	// AlphaPeriod is the α update period (DCE_TCP_RTT; the paper's K).
	AlphaPeriod time.Duration
	// AlphaPeriodic updates α once per AlphaPeriod on a fixed schedule,
	// as the firmware does: up (α·G/1024 + 1024−G) if a CNP came in the
	// period, down (α·G/1024) if none did, never both. Without it α rises
	// on every CNP and decays for each AlphaPeriod with none, the period
	// restarting at the CNP, as the paper words it (§3.1: "if the RP
	// does not get feedback for K time units").
	AlphaPeriodic bool
	// RateReduceMonitorPeriod is the least time between two cuts; CNPs
	// within it are folded into one cut at its end
	// (RATE_REDUCE_MONITOR_PERIOD). 0 cuts on every CNP.
	RateReduceMonitorPeriod time.Duration
	// InitialAlpha is α when a flow gets its first CNP
	// (INITIAL_ALPHA_VALUE).
	InitialAlpha uint32
	// ClampTgtRate sets the target rate to the current rate on every
	// CNP (CLAMP_TGT_RATE), as the paper's algorithm does.
	ClampTgtRate bool
	// ClampTgtRateAfterTimeInc sets the target rate to the current rate
	// on a CNP if the timer (not only the byte counter) raised the rate
	// since the last cut (CLAMP_TGT_RATE_AFTER_TIME_INC).
	ClampTgtRateAfterTimeInc bool
}

// FirmwareDCQCN returns ConnectX's firmware defaults (mlxconfig).
func FirmwareDCQCN() DCQCNParams {
	return DCQCNParams{
		TimeReset:                300 * time.Microsecond,
		ByteReset:                32767,
		Threshold:                1,
		AIRate:                   5 * Mbps,
		HAIRate:                  50 * Mbps,
		GD:                       11,
		MinDecFac:                50,
		MinRate:                  1 * Mbps,
		RateToSetOnFirstCNP:      0,
		G:                        1019,
		AlphaPeriod:              1 * time.Microsecond,
		AlphaPeriodic:            true,
		RateReduceMonitorPeriod:  4 * time.Microsecond,
		InitialAlpha:             1023,
		ClampTgtRate:             false,
		ClampTgtRateAfterTimeInc: true,
	}
}

// PaperDCQCN returns the parameters of the DCQCN paper (§5): g = 1/256,
// α and rate increase timers of 55 µs, a 10 MB byte counter, F = 5,
// R_AI = 40 Mb/s, a cut on every CNP with Rt ← Rc. The paper does not
// restate R_HAI; it is 10·R_AI here, the ratio QCN and the firmware use.
func PaperDCQCN() DCQCNParams {
	return DCQCNParams{
		TimeReset:               55 * time.Microsecond,
		ByteReset:               10 << 20,
		Threshold:               5,
		AIRate:                  40 * Mbps,
		HAIRate:                 400 * Mbps,
		GD:                      11,
		MinDecFac:               50,
		MinRate:                 1 * Mbps,
		G:                       alphaOne - alphaOne/256,
		AlphaPeriod:             55 * time.Microsecond,
		RateReduceMonitorPeriod: 0,
		InitialAlpha:            alphaMax,
		ClampTgtRate:            true,
	}
}

func (p *DCQCNParams) check(line Rate) error {
	switch {
	case p.TimeReset <= 0:
		return fmt.Errorf("dcqcn: time reset %v: %w", p.TimeReset, ErrBadParams)
	case p.ByteReset < 0:
		return fmt.Errorf("dcqcn: byte reset %d: %w", p.ByteReset, ErrBadParams)
	case p.Threshold < 1:
		return fmt.Errorf("dcqcn: threshold %d: %w", p.Threshold, ErrBadParams)
	case p.GD < 10 || p.GD > 20:
		// 10 would let a cut reach zero; the firmware accepts 10..11.
		return fmt.Errorf("dcqcn: gd %d: %w", p.GD, ErrBadParams)
	case p.MinDecFac < 0 || p.MinDecFac > 100:
		return fmt.Errorf("dcqcn: min dec fac %d%%: %w", p.MinDecFac, ErrBadParams)
	case p.MinRate == 0 || p.MinRate > line:
		return fmt.Errorf("dcqcn: min rate %v: %w", p.MinRate, ErrBadParams)
	case p.G > alphaMax:
		return fmt.Errorf("dcqcn: g %d: %w", p.G, ErrBadParams)
	case p.AlphaPeriod <= 0:
		return fmt.Errorf("dcqcn: alpha period %v: %w", p.AlphaPeriod, ErrBadParams)
	case p.RateReduceMonitorPeriod < 0:
		return fmt.Errorf("dcqcn: rate reduce monitor period %v: %w", p.RateReduceMonitorPeriod, ErrBadParams)
	case p.InitialAlpha > alphaMax:
		return fmt.Errorf("dcqcn: initial alpha %d: %w", p.InitialAlpha, ErrBadParams)
	}
	return nil
}

// DCQCN is the reaction point of DCQCN (Zhu et al., SIGCOMM 2015, §3.1 and
// Fig. 7) for one QP, plus the QP's notification point.
//
// A flow runs unlimited at line rate until its first CNP, which allocates
// its "rate limiter" (the firmware's term): from then on CNPs cut the rate
// and timers raise it, until it is back at line rate and the limiter is
// released.
type DCQCN struct {
	p    DCQCNParams
	line Rate
	np   NP
	ctr  Counters

	limited bool
	rc, rt  Rate   // current and target rate
	alpha   uint32 // 10-bit fixed point
	alphaAt time.Time
	// alphaUp: a CNP raised α in the period that began at alphaAt
	// (AlphaPeriodic), so that period ends without a decay.
	alphaUp bool

	lastCut    time.Time
	cutPending bool // a CNP came within RateReduceMonitorPeriod of lastCut

	incAt   time.Time // next timer increase
	t, bc   int       // timer and byte counter events since the last cut
	bytes   int64     // bytes sent since the last byte counter event
	timeInc bool      // the timer raised the rate since the last cut
}

var _ Algorithm = (*DCQCN)(nil)

// NewDCQCN returns a DCQCN flow at line rate. It returns an error wrapping
// ErrBadParams if p is out of range.
func NewDCQCN(p DCQCNParams, np NPParams, line Rate) (*DCQCN, error) {
	if err := p.check(line); err != nil {
		return nil, err
	}
	return &DCQCN{p: p, line: line, np: NewNP(np), rc: line, rt: line}, nil
}

// Params returns the parameters.
func (d *DCQCN) Params() DCQCNParams { return d.p }

// OnCNP handles a CNP: it cuts the rate now, or at the end of the
// rate reduce monitor period if the last cut was more recent than that.
func (d *DCQCN) OnCNP(now time.Time) {
	d.ctr.RPCNPHandled++
	d.OnTimer(now) // increases due before the CNP happen first
	if d.limited && d.p.AlphaPeriodic {
		// The firmware raises α for every period with a CNP, whether
		// or not the CNP cuts the rate now.
		d.alphaCNP(now)
	}
	if d.limited && d.p.RateReduceMonitorPeriod > 0 && now.Sub(d.lastCut) < d.p.RateReduceMonitorPeriod {
		d.cutPending = true
		return
	}
	d.cut(now)
}

// cut is the rate decrease of DCQCN §3.1: Rt ← Rc, α ← (1−g)α + g,
// Rc ← Rc·(1 − α/2), in the firmware's fixed point, floored by
// RPG_MIN_DEC_FAC and RPG_MIN_RATE. It restarts the increase timer and byte
// counter and the fast recovery count.
func (d *DCQCN) cut(now time.Time) {
	first := !d.limited
	if first {
		// First CNP: the firmware allocates a rate limiter starting from
		// INITIAL_ALPHA_VALUE and RATE_TO_SET_ON_FIRST_CNP.
		d.limited = true
		d.alpha = d.p.InitialAlpha
		d.alphaAt = now
		d.alphaUp = false
		d.rc, d.rt = d.line, d.line
		if r := d.p.RateToSetOnFirstCNP; r != 0 {
			d.rc = clampRate(r, d.p.MinRate, d.line)
			d.rt = d.rc
			d.restart(now)
			return
		}
	}
	if d.p.ClampTgtRate || (d.p.ClampTgtRateAfterTimeInc && d.timeInc) || d.rt < d.rc {
		d.rt = d.rc
	}
	// The issue and the firmware update α on the CNP, then cut with it.
	switch {
	case d.p.AlphaPeriodic && first:
		d.alphaCNP(now)
	case d.p.AlphaPeriodic:
		// OnCNP counted the CNPs; a cut deferred to the end of the
		// monitor period settles α as of then.
		d.decayAlpha(now)
	default:
		d.decayAlpha(now)
		d.alpha = min(alphaMax, d.alpha*d.p.G>>10+(alphaOne-d.p.G))
		d.alphaAt = now
	}
	old := d.rc
	r := old - Rate(uint64(old)*uint64(d.alpha)>>d.p.GD)
	floor := Rate(uint64(old) * uint64(d.p.MinDecFac) / 100)
	d.rc = clampRate(max(r, floor), d.p.MinRate, d.line)
	d.restart(now)
}

func (d *DCQCN) restart(now time.Time) {
	d.lastCut = now
	d.cutPending = false
	d.incAt = now.Add(d.p.TimeReset)
	d.t, d.bc, d.bytes = 0, 0, 0
	d.timeInc = false
}

// decayAlpha applies α ← α·G/1024 once per whole AlphaPeriod since α last
// changed: the firmware updates α every DCE_TCP_RTT, and a period with no
// CNP lowers it (the paper's α timer, §3.1). Doing it lazily spares the
// engine a timer per microsecond per QP; α reaches 0 in at most a few
// hundred steps, so the loop is bounded.
func (d *DCQCN) decayAlpha(now time.Time) {
	n := int64(now.Sub(d.alphaAt) / d.p.AlphaPeriod)
	if n <= 0 {
		return
	}
	decays := n
	if d.alphaUp {
		// The first period had a CNP: it ended with α up, not down.
		decays--
	}
	a := d.alpha
	for i := int64(0); i < decays && a > 0; i++ {
		a = a * d.p.G >> 10
	}
	d.alpha = a
	d.alphaAt = d.alphaAt.Add(time.Duration(n) * d.p.AlphaPeriod)
	d.alphaUp = false
}

// alphaCNP counts a CNP in the α period that holds now (AlphaPeriodic): the
// periods that ended before it are settled, and the period's one increase
// is applied now, so that a cut at now uses it. A second CNP in the same
// period changes nothing.
func (d *DCQCN) alphaCNP(now time.Time) {
	d.decayAlpha(now)
	if !d.alphaUp {
		d.alpha = min(alphaMax, d.alpha*d.p.G>>10+(alphaOne-d.p.G))
		d.alphaUp = true
	}
}

// increase is one rate increase event of DCQCN §3.1 (after QCN): fast
// recovery while both counts are at most F, additive once one exceeds F,
// hyper once both do, with i = min(T, BC) − F.
func (d *DCQCN) increase(byTimer bool) {
	if byTimer {
		d.t++
		d.timeInc = true
	} else {
		d.bc++
	}
	f := d.p.Threshold
	switch {
	case d.t > f && d.bc > f:
		i := min(d.t, d.bc) - f
		d.rt += Rate(i) * d.p.HAIRate
	case d.t > f || d.bc > f:
		d.rt += d.p.AIRate
	}
	d.rt = min(d.rt, d.line)
	d.rc = (d.rt + d.rc) / 2
	if d.rc >= d.line-1 {
		// Back at line rate: the firmware frees the flow's rate limiter.
		d.rc, d.rt = d.line, d.line
		d.limited = false
		d.cutPending = false
	}
}

// OnSent runs the byte counter.
func (d *DCQCN) OnSent(now time.Time, n int) {
	if !d.limited || d.p.ByteReset == 0 {
		return
	}
	d.OnTimer(now)
	d.bytes += int64(n)
	for d.limited && d.bytes >= d.p.ByteReset {
		d.bytes -= d.p.ByteReset
		d.increase(false)
	}
}

// OnTimer runs the rate increase timer and a pending cut, in time order,
// each at the time it was due.
func (d *DCQCN) OnTimer(now time.Time) {
	for d.limited {
		if d.cutPending {
			cutAt := d.lastCut.Add(d.p.RateReduceMonitorPeriod)
			if !cutAt.After(now) && !cutAt.After(d.incAt) {
				d.cut(cutAt)
				continue
			}
		}
		if d.incAt.After(now) {
			return
		}
		at := d.incAt
		d.incAt = at.Add(d.p.TimeReset)
		d.increase(true)
	}
}

// NextTimer returns the earlier of the next timer increase and a pending
// cut; zero while the flow runs at line rate.
func (d *DCQCN) NextTimer() time.Time {
	if !d.limited {
		return time.Time{}
	}
	if d.cutPending {
		if c := d.lastCut.Add(d.p.RateReduceMonitorPeriod); c.Before(d.incAt) {
			return c
		}
	}
	return d.incAt
}

func (d *DCQCN) OnCE(now time.Time) bool             { return d.np.OnCE(now, &d.ctr) }
func (d *DCQCN) OnAck(time.Time, int, time.Duration) {}
func (d *DCQCN) OnLoss(time.Time)                    {}
func (d *DCQCN) Rate() Rate                          { return d.rc }
func (d *DCQCN) Window() int                         { return 0 }

// TargetRate returns Rt.
func (d *DCQCN) TargetRate() Rate { return d.rt }

// Alpha returns α as of now, in 10-bit fixed point.
func (d *DCQCN) Alpha(now time.Time) uint32 {
	if !d.limited && d.alpha == 0 {
		return 0
	}
	saved, savedAt, savedUp := d.alpha, d.alphaAt, d.alphaUp
	d.decayAlpha(now)
	a := d.alpha
	d.alpha, d.alphaAt, d.alphaUp = saved, savedAt, savedUp
	return a
}

func (d *DCQCN) Stats(now time.Time) Stats {
	return Stats{Counters: d.ctr, Kind: KindDCQCN, Rate: d.rc, TargetRate: d.rt, Alpha: d.Alpha(now)}
}
