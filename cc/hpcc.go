package cc

import (
	"fmt"
	"math"
	"time"
)

// MaxINTHops is the most hops an INTPath holds: the five of the HPCC
// authors' ns-3 INT header (int-header.h, maxHop), enough for a three-tier
// Clos fabric.
const MaxINTHops = 5

// INTHop is one switch egress port's in-band network telemetry, as the
// switch stamps it on a data packet when the packet leaves the port (HPCC,
// Li et al., SIGCOMM 2019, §3.1 and Figure 4: B, ts, txBytes, qLen).
type INTHop struct {
	// QLen is the bytes queued at the port, behind the packet, when it
	// left.
	QLen uint32
	// TxBytes is the port's counter of bytes transmitted, this packet
	// included. Only differences between two stamps of one port are
	// used, so it may start anywhere and wrap at 2^64.
	TxBytes uint64
	// Rate is the port's link rate, B.
	Rate Rate
	// TS is when the packet left, in nanoseconds of the switch's clock;
	// like TxBytes only differences are used. A decoder of a narrower
	// wire field (24 bits in the authors' ns-3 header) widens it first.
	TS uint64
}

// INTPath is the telemetry of every hop a data packet crossed, in path
// order, as the receiver echoes it in the ACK (§3.1).
type INTPath struct {
	Hops [MaxINTHops]INTHop
	N    int // hops in use
}

// INTAlgorithm is an Algorithm fed in-band network telemetry. An engine
// whose ACKs carry an INTPath calls OnINT for them in place of OnAck.
type INTAlgorithm interface {
	Algorithm
	// OnINT records an ACK that acknowledged n new bytes and carried the
	// telemetry path collected by the packet it acknowledges. rtt is as
	// for OnAck: 0 when the packet was retransmitted. path is read during
	// the call and not kept.
	OnINT(now time.Time, n int, rtt time.Duration, path *INTPath)
}

// HPCCParams are HPCC's parameters (Li et al., SIGCOMM 2019, §3.3 and
// Algorithm 1; the values in §5.1). The window is in bytes.
type HPCCParams struct {
	// BaseRTT is T, the base round trip of the fabric: it sizes the
	// line-rate window W_init = B·T (bytes), converts the window to a
	// rate, R = W/T, turns a queue into utilisation, qLen/(B·T), and is
	// the horizon of U's moving average (§3.3, Algorithm 1 lines 5, 8-9,
	// 27). The authors' simulator uses the largest base RTT of the
	// fabric for every flow (config GLOBAL_T 1).
	BaseRTT time.Duration
	// Eta is η, the target utilisation of the most loaded link (§3.3:
	// 95 %).
	Eta float64
	// MaxStage is how many reference-window updates in a row may be
	// additive increases while U < η before one multiplicative
	// increase Wc·η/U (Algorithm 1 line 12; §5.1: 5).
	MaxStage int
	// AIFlows is N in the additive increase W_AI = W_init·(1−η)/N, the
	// number of flows that may share a link before the sum of their
	// increases exceeds the headroom 1−η (§3.3). The default 125 gives
	// W_AI = B·T/2500, the authors' ns-3 setting (run.py: additive
	// increase 10 Mb/s per 25 Gb/s of NIC rate, so W_AI = 10 Mb/s·T at
	// 25 Gb/s).
	AIFlows int
	// WAI, if not 0, is W_AI in bytes, overriding AIFlows.
	WAI float64
	// MSS is the bytes in one packet: Window never answers less, so
	// one packet may always be in flight and the rate alone holds the
	// flow back (the ns-3 model's window check lets a packet out
	// whenever nothing is in flight).
	MSS int
	// MinRate is the lowest rate (the window's floor is MinRate·T).
	MinRate Rate
}

// PaperHPCC returns the paper's parameters (§5.1): η = 95 %, maxStage 5,
// W_AI = W_init·(1−η)/125 (see AIFlows), for a fabric with T = 8 µs and
// 1024-byte packets. Set BaseRTT and MSS for the fabric at hand.
func PaperHPCC() HPCCParams {
	return HPCCParams{
		BaseRTT:  8 * time.Microsecond,
		Eta:      0.95,
		MaxStage: 5,
		AIFlows:  125,
		MSS:      1024,
		MinRate:  100 * Mbps,
	}
}

// NS3HPCC returns the parameters the authors' published ns-3 scripts run
// HPCC with: the paper's but maxStage 0 (run.py's MI_THRESH default), so
// every reference update is Wc·η/U + W_AI, a multiplicative increase
// whenever U < η. The authors' project page later recommends η = 99 %
// with maxStage 0; that is this preset with Eta set.
func NS3HPCC() HPCCParams {
	p := PaperHPCC()
	p.MaxStage = 0
	return p
}

func (p *HPCCParams) check(line Rate) error {
	switch {
	case p.BaseRTT <= 0:
		return fmt.Errorf("hpcc: base rtt T %v, want > 0: %w", p.BaseRTT, ErrBadParams)
	case !(p.Eta > 0 && p.Eta <= 1):
		return fmt.Errorf("hpcc: eta %v, want in (0, 1]: %w", p.Eta, ErrBadParams)
	case p.MaxStage < 0:
		return fmt.Errorf("hpcc: max stage %d, want >= 0: %w", p.MaxStage, ErrBadParams)
	case p.WAI == 0 && p.AIFlows < 1:
		return fmt.Errorf("hpcc: additive increase flows N %d, want >= 1 (or W_AI set): %w", p.AIFlows, ErrBadParams)
	case !(p.WAI >= 0) || math.IsInf(p.WAI, 0):
		return fmt.Errorf("hpcc: W_AI %v bytes, want >= 0: %w", p.WAI, ErrBadParams)
	case p.MSS <= 0:
		return fmt.Errorf("hpcc: mss %d, want > 0: %w", p.MSS, ErrBadParams)
	case p.MinRate == 0 || p.MinRate > line:
		return fmt.Errorf("hpcc: min rate %v, want in (0, line rate %v]: %w", p.MinRate, line, ErrBadParams)
	}
	if w := p.wai(line); w >= float64(line.bytesIn(p.BaseRTT)) {
		return fmt.Errorf("hpcc: W_AI %.0f bytes is not below W_init %.0f bytes: %w", w, line.bytesIn(p.BaseRTT), ErrBadParams)
	}
	return nil
}

// bytesIn returns the bytes r carries in d.
func (r Rate) bytesIn(d time.Duration) float64 {
	return float64(r) / 8 * d.Seconds()
}

func (p *HPCCParams) wai(line Rate) float64 {
	if p.WAI != 0 {
		return p.WAI
	}
	return line.bytesIn(p.BaseRTT) * (1 - p.Eta) / float64(p.AIFlows)
}

// HPCC is High Precision Congestion Control (Li et al., SIGCOMM 2019) for
// one QP: a window sized from the in-band telemetry of every hop, so that
// the most loaded link's inflight bytes, queue included, sit at η of its
// bandwidth-delay product; the rate is W/T.
//
// It needs INT: an ACK without telemetry (OnAck) changes nothing, and New
// refuses KindHPCC because no uroce path delivers INT (ErrNoINT). A caller
// with an INT source builds it with NewHPCC and calls OnINT.
type HPCC struct {
	p    HPCCParams
	line Rate
	np   NP
	ctr  Counters

	t      float64 // T, seconds
	wInit  float64 // B·T, bytes
	wMin   float64 // MinRate·T, bytes
	wAI    float64 // bytes
	w      float64 // W, the window in use, bytes
	wc     float64 // Wc, the reference window, bytes
	u      float64 // U, the moving average of the normalised inflight
	stage  int     // incStage
	last   INTPath // L, the telemetry of the previous ACK
	have   bool    // last holds a path
	update time.Time
}

var _ INTAlgorithm = (*HPCC)(nil)

// NewHPCC returns an HPCC flow at line rate, for a caller whose ACKs carry
// INT. It returns an error wrapping ErrBadParams if p is out of range.
func NewHPCC(p HPCCParams, np NPParams, line Rate) (*HPCC, error) {
	if line == 0 {
		return nil, fmt.Errorf("hpcc: zero line rate: %w", ErrBadParams)
	}
	if err := p.check(line); err != nil {
		return nil, err
	}
	h := &HPCC{p: p, line: line, np: NewNP(np), t: p.BaseRTT.Seconds()}
	h.wInit = line.bytesIn(p.BaseRTT)
	h.wMin = p.MinRate.bytesIn(p.BaseRTT)
	h.wAI = p.wai(line)
	// A flow starts at line rate, W = Wc = W_init (§3.3).
	h.w, h.wc = h.wInit, h.wInit
	return h, nil
}

// measureInflight is Algorithm 1's MeasureInflight (lines 1-10): of every
// hop, the normalised inflight bytes u' = min(qLen, qLen_prev)/(B·T) +
// txRate/B, where txRate is the bytes the port sent between the previous
// ACK's stamp and this one's; the most loaded hop's u' enters the moving
// average U with weight τ/T, τ being the time between its two stamps
// (at most T). It returns false when no hop gives a sample: the first
// ACK, a changed hop count, or stamps with no time between them.
func (h *HPCC) measureInflight(path *INTPath) bool {
	if !h.have || path.N != h.last.N {
		return false
	}
	var u, tau float64
	ok := false
	for i := range path.N {
		cur, prev := &path.Hops[i], &h.last.Hops[i]
		dt := float64(cur.TS - prev.TS) // ns; wraps as the counters do
		if cur.TS == prev.TS || cur.Rate == 0 || dt > math.MaxInt64 {
			continue
		}
		b := float64(cur.Rate) / 8 // bytes per second
		tx := float64(cur.TxBytes-prev.TxBytes) / (dt * 1e-9)
		// The smaller of the two queues: a queue that is draining
		// already is not reacted to again (§3.3; ns-3 rdma-hw.cc takes
		// the same min).
		q := float64(min(cur.QLen, prev.QLen))
		if v := q/(b*h.t) + tx/b; !ok || v > u {
			u, tau, ok = v, dt*1e-9, true
		}
	}
	if !ok {
		return false
	}
	tau = min(tau, h.t)
	h.u = (1-tau/h.t)*h.u + tau/h.t*u
	return true
}

// computeWind is Algorithm 1's ComputeWind (lines 11-20): a
// multiplicative step to η when the link is over it (or after MaxStage
// additive steps below it), else an additive one; the reference window
// Wc and incStage move only when updateWc is set, once per RTT, so that
// the per-ACK reactions in between all start from the same Wc and a
// queue seen by many ACKs of one RTT is not cut for again and again
// (§3.2).
func (h *HPCC) computeWind(updateWc bool) {
	var w float64
	mi := h.u >= h.p.Eta || h.stage >= h.p.MaxStage
	if mi {
		if h.u > 0 {
			w = h.wc/(h.u/h.p.Eta) + h.wAI
		} else {
			w = h.wInit // an idle path: U = 0 allows any window
		}
	} else {
		w = h.wc + h.wAI
	}
	w = min(max(w, h.wMin), h.wInit)
	h.w = w
	if !updateWc {
		return
	}
	h.ctr.HPCCWindowUpdates++
	h.wc = w
	if mi {
		h.stage = 0
	} else {
		h.stage++
	}
}

// OnINT is Algorithm 1's NewAck (lines 21-28). Wc moves on the first ACK
// for data sent after its last update ("ack.seq > lastUpdateSeq", with
// lastUpdateSeq = snd_nxt then): the acknowledged packet left at now−rtt,
// which is the same test without a sequence number. An ACK with no RTT
// sample (a retransmission) reacts without moving Wc.
func (h *HPCC) OnINT(now time.Time, n int, rtt time.Duration, path *INTPath) {
	if path == nil || path.N <= 0 || path.N > MaxINTHops {
		h.ctr.HPCCAcksWithoutINT++
		return
	}
	h.ctr.HPCCINTAcks++
	if !h.have {
		// The first ACK only records L; the first update of Wc waits for
		// data sent after it (the ns-3 model starts lastUpdateSeq so).
		h.last, h.have, h.update = *path, true, now
		return
	}
	if h.measureInflight(path) {
		full := rtt > 0 && !now.Add(-rtt).Before(h.update)
		h.computeWind(full)
		if full {
			h.update = now
		}
	}
	h.last = *path
}

// OnAck records an ACK without telemetry: HPCC has no signal in it, so
// only the counter moves.
func (h *HPCC) OnAck(time.Time, int, time.Duration) { h.ctr.HPCCAcksWithoutINT++ }

// OnLoss changes nothing: HPCC runs on a lossless (PFC) fabric and its
// paper gives no loss reaction; the telemetry already shows the queue.
func (h *HPCC) OnLoss(time.Time) {}

// Window returns W in bytes, at least one packet.
func (h *HPCC) Window() int { return max(int(h.w), h.p.MSS) }

// RefWindow returns Wc, the reference window, in bytes.
func (h *HPCC) RefWindow() float64 { return h.wc }

// U returns the moving average of the most loaded hop's normalised
// inflight bytes.
func (h *HPCC) U() float64 { return h.u }

// Rate is W/T (Algorithm 1 line 27), in [MinRate, line rate].
func (h *HPCC) Rate() Rate {
	return clampRate(Rate(h.w*8/h.t), h.p.MinRate, h.line)
}

func (h *HPCC) OnSent(time.Time, int)   {}
func (h *HPCC) OnCNP(time.Time)         { h.ctr.RPCNPIgnored++ }
func (h *HPCC) OnCE(now time.Time) bool { return h.np.OnCE(now, &h.ctr) }
func (h *HPCC) OnTimer(time.Time)       {}
func (h *HPCC) NextTimer() time.Time    { return time.Time{} }
func (h *HPCC) Stats(time.Time) Stats {
	r := h.Rate()
	return Stats{Counters: h.ctr, Kind: KindHPCC, Rate: r, TargetRate: r, Window: h.Window()}
}
