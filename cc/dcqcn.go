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
// ConnectX firmware settings. Each comment gives the unit and the rule, and
// the names in the three places a ConnectX user meets them: mlxconfig
// (NVConfig, upper case), the mlx5 driver's per-port debugfs
// (cc_params/rp_*, kernel drivers/infiniband/hw/mlx5/cong.c, which writes
// the firmware's cong_control_r_roce_ecn_rp fields of the same names), and
// NVIDIA's "DCQCN Parameters" page (ConnectX-4 and later). [paper] is Zhu
// et al., "Congestion Control for Large-Scale RDMA Deployments", SIGCOMM
// 2015, §3.1 and Fig. 7; [ns-3] is the DCQCN ("mlx" mode) of the HPCC
// authors' simulator, alibaba-edu/High-Precision-Congestion-Control,
// simulation/src/point-to-point/model/rdma-hw.cc and simulation/run.py.
//
// Where the sources disagree (the byte counter, the increase stages, g,
// the CNP interval), each reading is a preset: FirmwareDCQCN, PaperDCQCN,
// NS3DCQCN.
type DCQCNParams struct {
	// TimeReset is the rate increase timer: one increase event per
	// TimeReset without a CNP. Unit µs in every source (RPG_TIME_RESET,
	// rp_time_reset; [paper] T = 55 µs; firmware default 300; [ns-3]
	// RP_TIMER 300 in run.py's "dcqcn", 55 in "dcqcn_paper").
	TimeReset time.Duration
	// ByteReset is the byte counter: one increase event per ByteReset
	// bytes sent without a CNP; 0 disables it. Unit bytes: the kernel's
	// 802.1Qau object (include/uapi/linux/dcbnl.h, struct ieee_qcn,
	// "given in Bytes") and NVIDIA's page (RPG_BYTE_RESET, rp_byte_reset,
	// 0..32767, default 32767) agree; [paper] B = 10 MB. [ns-3] has no
	// byte counter at all: its increases come from the timer alone.
	ByteReset int64
	// Threshold is F: how many increase events of a counter make fast
	// recovery end (RPG_THRESHOLD, rp_threshold; count; firmware 1,
	// [paper] 5, [ns-3] FAST_RECOVERY_TIMES 1).
	Threshold int
	// AIRate is R_AI, added to the target rate per additive increase
	// event (RPG_AI_RATE, rp_ai_rate; Mb/s; firmware 5, [paper] 40,
	// [ns-3] 5 Mb/s per 25 Gb/s of line rate).
	AIRate Rate
	// HAIRate is R_HAI, the hyper increase step (RPG_HAI_RATE,
	// rp_hai_rate; Mb/s; firmware 50; [ns-3] 50 per 25 Gb/s).
	HAIRate Rate
	// GD sets the cut Rc ← Rc − Rc·α/2^GD with α in 10-bit fixed point,
	// so 11 is the paper's Rc·(1−α/2) (RPG_GD, rp_gd; a shift: NVIDIA
	// lists 10..11, default 11).
	GD uint
	// MinDecFac bounds one cut: the new rate is at least MinDecFac % of
	// the old; 100 disables cuts (RPG_MIN_DEC_FAC, rp_min_dec_fac; %;
	// default 50).
	MinDecFac int
	// MinRate is the lowest rate (RPG_MIN_RATE, rp_min_rate; Mb/s;
	// firmware 1; [ns-3] MIN_RATE 1000 in run.py).
	MinRate Rate
	// RateToSetOnFirstCNP is the rate (current and target) a flow gets on
	// its first CNP; 0 means cut from the line rate as any CNP does
	// (RATE_TO_SET_ON_FIRST_CNP, rp_rate_to_set_on_first_cnp; Mb/s;
	// default 0; [ns-3] RateOnFirstCnp 1.0 of the current rate, the same).
	RateToSetOnFirstCNP Rate
	// G is the weight of the old α, in 10-bit fixed point (DCE_TCP_G,
	// rp_dce_tcp_g; 0..1023, default 1019): per AlphaPeriod, α ←
	// α·G/1024 + (1024−G) if a CNP came in the period, α ← α·G/1024 if
	// none did (NVIDIA's page). The paper's g is therefore (1024−G)/1024:
	// 5/1024 ≈ 1/205 by default; [paper] and [ns-3] use g = 1/256 (G 1020).
	G uint32
	// AlphaPeriod is the α update period (DCE_TCP_RTT, rp_dce_tcp_rtt;
	// µs; firmware 1; [paper] K = 55 µs; [ns-3] ALPHA_RESUME_INTERVAL 1).
	AlphaPeriod time.Duration
	// AlphaPeriodic updates α once per AlphaPeriod on a fixed schedule,
	// as the firmware (NVIDIA: "updated once every ... regardless of the
	// reception of a CNP") and [ns-3] (UpdateAlphaMlx) do: up if a CNP
	// came in the period, down if none did, never both. Without it α
	// rises on every CNP and decays for each AlphaPeriod with none, the
	// period restarting at the CNP, as [paper] §3.1 words it.
	AlphaPeriodic bool
	// RateReduceMonitorPeriod is the least time between two cuts; CNPs
	// within it are folded into one cut at its end
	// (RATE_REDUCE_MONITOR_PERIOD, rp_rate_reduce_monitor_period; µs;
	// default 4; [ns-3] RATE_DECREASE_INTERVAL 4, checked on a fixed
	// 4 µs schedule). 0 cuts on every CNP ([paper]).
	RateReduceMonitorPeriod time.Duration
	// InitialAlpha is α when a flow gets its first CNP, 10-bit fixed
	// point (INITIAL_ALPHA_VALUE, rp_initial_alpha_value; default 1023;
	// [ns-3] 1.0).
	InitialAlpha uint32
	// ClampTgtRate sets the target rate to the current rate on every
	// CNP (CLAMP_TGT_RATE, rp_clamp_tgt_rate; flag; default 0), as the
	// paper's algorithm does.
	ClampTgtRate bool
	// ClampTgtRateAfterTimeInc sets the target rate to the current rate
	// on a CNP if the timer (not only the byte counter) raised the rate
	// since the last cut (CLAMP_TGT_RATE_AFTER_TIME_INC,
	// rp_clamp_tgt_rate_ati; flag; default 1; [ns-3] CLAMP_TARGET_RATE 0
	// clamps only when rpTimeStage > 0, the same rule).
	ClampTgtRateAfterTimeInc bool
	// TimerStages runs the increase stages on the timer count alone, as
	// [ns-3] does (RateIncEventMlx): the k-th timer event after a cut is
	// fast recovery while k ≤ F, additive at k = F+1 and hyper after,
	// adding one R_HAI per event. Without it the stages follow QCN and
	// [paper] Fig. 7: hyper increase needs both counters past F and adds
	// i·R_HAI with i = min(T, BC) − F.
	TimerStages bool
}

// FirmwareDCQCN returns ConnectX's firmware defaults (NVIDIA's DCQCN
// parameter page; mlxconfig and the mlx5 debugfs show the same values).
// With the byte counter in bytes these recover a cut flow within tens of
// µs; uroce-ccsim shows the oscillation this gives (docs/congestion.md).
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

// NS3DCQCN returns the DCQCN the HPCC authors' ns-3 simulator runs as
// "dcqcn" (run.py, mode 1), which most later papers compare against: no
// byte counter, a 300 µs timer with F = 1 and stages on the timer alone,
// R_AI = 5 and R_HAI = 50 Mb/s per 25 Gb/s of line rate, g = 1/256 every
// 1 µs, a cut at most every 4 µs, rates from 1 Gb/s. It is the firmware
// model those authors use, with the byte counter left out.
func NS3DCQCN(line Rate) DCQCNParams {
	p := FirmwareDCQCN()
	p.ByteReset = 0
	p.TimerStages = true
	p.AIRate = max(Rate(uint64(5*Mbps)*uint64(line)/uint64(25*Gbps)), 1*Mbps)
	p.HAIRate = max(Rate(uint64(50*Mbps)*uint64(line)/uint64(25*Gbps)), 1*Mbps)
	p.G = alphaOne - alphaOne/256
	p.MinRate = min(1*Gbps, line)
	return p
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
	case d.p.TimerStages && d.t > f+1:
		d.rt += d.p.HAIRate
	case d.p.TimerStages && d.t > f:
		d.rt += d.p.AIRate
	case d.p.TimerStages:
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
