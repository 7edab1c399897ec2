package qp

import (
	"fmt"
	"time"
	"unsafe"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/cc"
	"github.com/uroce/uroce/cc/cnp"
	"github.com/uroce/uroce/pkg/link"
)

// DefaultLineRate is the line rate of the engine's default congestion
// control when nobody names one: the highest rate any algorithm answers.
const DefaultLineRate = 100 * cc.Gbps

// DefaultPacerBurst is the token bucket depth of a paced QP. A software
// engine wakes up late by up to milliseconds on a loaded machine (Go's
// scheduler, the kernel's timers); the tokens it earned meanwhile must still
// be there, or the QP sends below its rate and its congestion control
// misreads the network. 64 KiB covers 5 ms at 100 Mb/s and is still a small
// burst for a switch queue (16 full 4 KiB packets).
const DefaultPacerBurst = 64 << 10

// paceQuantum is how many bytes beyond the next packet a paced QP waits
// for once its pacer holds it: it then sends them back to back.
const paceQuantum = 12 << 10

// ipUDPLen is what the bottleneck sees in front of the RoCE packet on
// IPv4: the IP and UDP headers. The pacer counts IP datagram bytes, as a
// switch's queue and a rate limiter do.
const ipUDPLen = bth.IPv4MinLen + bth.UDPLen

// reqHeaderEstimate is a request's headers up to and including the ICRC
// plus ipUDPLen, at their largest (BTH, RETH, ImmDt, ICRC): what the pacer
// asks for before the packet is built; the exact length is taken after.
const reqHeaderEstimate = bth.BTHLen + bth.RETHLen + bth.ImmDtLen + bth.ICRCLen + ipUDPLen

// respHeaderEstimate is a READ response's headers (BTH, AETH, ICRC) plus
// ipUDPLen, at their largest.
const respHeaderEstimate = bth.BTHLen + bth.AETHLen + bth.ICRCLen + ipUDPLen

// ccState is one QP's congestion control: the algorithm, the pacer that
// holds the requester to the algorithm's rate, and two timers in the
// engine's timer wheel, so a QP costs the same whatever the number of QPs.
type ccState struct {
	// The fields every packet touches come first, in one line: the
	// algorithm, what the pacer and the ECN marking need, the RTT.
	alg  cc.Algorithm
	rate cc.Rate
	// paced: the requester waits on the pacer (every algorithm but none,
	// which never slows down).
	paced bool
	// inert: the algorithm is none, whose rate, window and timer never
	// change and which ignores OnSent and OnAck; the per-packet hooks
	// skip those calls and the sync after them.
	inert bool
	// ect: data packets carry ECT(0), so a congestion point marks rather
	// than drops them (DCQCN §3; ConnectX sets ECT on RoCE when ECN is on
	// for the priority).
	ect  bool
	kind cc.Kind
	// ackReqAt is when the requester, paced, last asked for an ACK;
	// zero before. It ends the first line: an unpaced QP's packets touch
	// that line and the sent slots their sends reach, nothing else here
	// (one without congestion control only the slots); the timer, which
	// every event of an algorithm other than none looks at (ccSync),
	// starts the second.
	ackReqAt time.Time
	_        [8]byte
	// timer is the algorithm's (NextTimer); pace wakes the requester
	// when the pacer will have tokens.
	timer timer
	pace  timer
	pacer cc.Pacer
	cfg   cc.Config // as selected, for a QP reset
	// sent holds the send time of the packet whose PSN is the slot, on
	// the engine's clock (monoClock), for RTT samples; 0 for a
	// retransmitted packet (Karn's rule). A send reaches its slot when a
	// later one takes its place in the QP's lastSent before its ACK. Eight
	// bytes a slot rather than a time.Time's 24 keep the ring at 1 KiB a QP.
	// The engine's clock counts by time.Time's Sub, which takes the
	// monotonic readings of the caller's clock, so a step of the wall clock
	// cannot bend it.
	sent [maxUnackedPSNs]int64
}

// lastSent is a QP's newest request packet's send time, as ccState.sent
// would hold it, and its PSN; held says the slot holds a send the ring
// lacks.
type lastSent struct {
	at   int64
	psn  bth.PSN
	held bool
}

// qpBlock is what CreateQP allocates: a QP and its congestion control in
// one object, so the lines a packet touches of both share pages. The
// block's slot starts a cache line and the block itself 8 bytes in (the
// runtime's type header of a large object); the padding starts cc on a
// line, so its first line holds what an unpaced QP's packets touch
// (TestQPLayout).
type qpBlock struct {
	qp QP
	_  [(64 + 56 - unsafe.Sizeof(QP{})%64) % 64]byte
	cc ccState
}

// cc returns the QP's congestion control state, which lies in the QP's
// block (CreateQP makes every QP in one): found from q's address rather
// than through a pointer, which would take 8 bytes of the requester's
// hot line (TestQPLayout).
func (q *QP) cc() *ccState { return &(*qpBlock)(unsafe.Pointer(q)).cc }

// smallRing is the largest send ring (in WQEs, 1 KiB) a QP keeps in its
// own block.
const smallRing = 4

// qpBlockSmall is a qpBlock with its send ring, for QPs whose ring holds
// at most smallRing WQEs: a service with thousands of QPs gives each a
// short queue, and with the ring beside the QP a request's WQE shares
// the QP's pages rather than needing a page walk of its own, after the
// QP's. PostSend in BenchmarkManyQPs/10000 takes some 60 ns less. The
// padding starts each WQE on a line, as in a ring of its own
// (TestQPLayout).
type qpBlockSmall struct {
	qpBlock
	_  [(64 + 56 - unsafe.Sizeof(qpBlock{})%64) % 64]byte
	sq [smallRing]sendWQE
}

// ccInit gives q a fresh algorithm from cfg (the engine's default when
// nil). Neither the algorithm nor the pacer, whose bucket starts full,
// needs a start time: their first event brings one.
func (e *Engine) ccInit(q *QP, cfg *cc.Config) error {
	c := e.CC
	if cfg != nil {
		c = *cfg
	}
	if c.LineRate == 0 {
		c.LineRate = DefaultLineRate
	}
	alg, err := cc.New(&c)
	if err != nil {
		return err
	}
	s := q.cc()
	e.stopTimer(&s.timer)
	e.stopTimer(&s.pace)
	burst := e.PacerBurst
	if burst <= 0 {
		burst = DefaultPacerBurst
	}
	s.alg, s.kind, s.cfg = alg, c.Kind, c
	s.paced = c.Kind != cc.KindNone
	s.inert = c.Kind == cc.KindNone
	s.ect = c.Kind != cc.KindNone
	q.ccNone = c.Kind == cc.KindNone
	s.rate = alg.Rate()
	s.pacer = cc.NewPacer(s.rate, burst)
	clear(s.sent[:])
	q.ccSRTT, q.lastSent = 0, lastSent{}
	return nil
}

// SetCC replaces the QP's congestion control with the algorithm cfg
// selects (the engine's default when nil), starting afresh. It returns an
// error wrapping cc.ErrUnknownKind or cc.ErrBadParams.
func (q *QP) SetCC(cfg *cc.Config) error {
	if err := q.e.ccInit(q, cfg); err != nil {
		return fmt.Errorf("set congestion control of QP %d: %w", q.qpn, err)
	}
	q.e.ccSync(q)
	q.e.schedule(q)
	return nil
}

// CCStats returns a snapshot of the QP's congestion control as of now:
// the mlx5 counters, the current rate and DCQCN's α.
func (q *QP) CCStats(now time.Time) cc.Stats { return q.cc().alg.Stats(now) }

// SRTT returns the smoothed round-trip time from a request's send to its
// ACK (RFC 6298's gain of 1/8, Karn's rule), or 0 before the first sample.
func (q *QP) SRTT() time.Duration { return q.ccSRTT }

// CCKind returns the QP's congestion control algorithm.
func (q *QP) CCKind() cc.Kind { return q.cc().kind }

// ccHold reports whether the requester must wait before sending w's next
// packet: for the pacer (then its timer is armed) or for the algorithm's
// window (then an ACK schedules the QP). The caller asks only for a QP
// with congestion control (not ccNone): the check is then no call.
func (e *Engine) ccHold(q *QP, w *sendWQE) bool {
	s := q.cc()
	if s.inert {
		return false
	}
	n := w.nextPayload(int(q.mtu))
	if w := s.alg.Window(); w > 0 && int(q.req.psn.Diff(q.comp.psn))*int(q.mtu) >= w {
		return true
	}
	if !s.paced {
		return false
	}
	n += reqHeaderEstimate
	if s.pacer.Delay(e.now, n) == 0 {
		return false
	}
	e.ccArmPace(q, n)
	return true
}

// ccWindowFull reports whether the request packet about to go out fills
// the algorithm's window (Swift's and HPCC's; DCQCN and TIMELY have none).
// It must ask for an ACK: the requester then waits for one, and a
// responder acknowledges only requests with AckReq, coalescing the rest
// (IBA 9.7.5.1.2; rxe the same), so without it the QP sat idle until the
// IBA timer fired (Swift through a 1 Gb/s bottleneck: 544 packets, then
// nothing for the 67 ms local ACK timeout, over and over).
func (e *Engine) ccWindowFull(q *QP) bool {
	if q.ccNone {
		return false
	}
	s := q.cc()
	if s.inert {
		return false
	}
	w := s.alg.Window()
	return w > 0 && int(q.req.psn.Diff(q.comp.psn)+1)*int(q.mtu) >= w
}

// ccArmPace arms the QP's pacer timer for when n bytes and paceQuantum more
// will be there: a QP woken when a few packets' worth is there rather than
// the next packet's keeps the tokens (the bucket is deeper than
// paceQuantum), and a software engine that wakes a quarter as often loses
// less to scheduling on a busy machine. The requester and the READ
// responder share the timer; an earlier deadline already armed stays.
func (e *Engine) ccArmPace(q *QP, n int) {
	s := q.cc()
	d := s.pacer.Delay(e.now, n+paceQuantum)
	if d == cc.Never {
		return
	}
	if when := e.now.Add(d); s.pace.idx < 0 || e.timers.ns(when) < s.pace.when {
		e.setTimer(&s.pace, when)
	}
}

// ccPaceHold reports whether a paced QP must wait for tokens before a
// packet of wire bytes, and if so arms the pacer's timer. Only the pacer
// applies, no window: READ responses answer requests the peer already let
// in (they share the QP's pacer with its requests: DCQCN's rate limiter is
// per QP, and for a READ the responder is the QP whose data crosses the
// congested link), and a UC QP has no ACKs to open a window.
func (e *Engine) ccPaceHold(q *QP, wire int) bool {
	s := q.cc()
	if !s.paced || s.pacer.Delay(e.now, wire) == 0 {
		return false
	}
	e.ccArmPace(q, wire)
	return true
}

// ccSentResponse accounts a READ response packet of wire bytes: the
// pacer's tokens and the algorithm's byte counter (DCQCN counts every byte
// the QP transmits). It takes no RTT sample: those time requests.
func (e *Engine) ccSentResponse(q *QP, wire int) {
	s := q.cc()
	if s.paced {
		s.pacer.Take(e.now, wire)
	}
	if s.inert {
		return
	}
	s.alg.OnSent(e.now, wire)
	e.ccSync(q)
}

// ccSentAck charges an ACK, NAK or atomic ACK of wire bytes to the QP's
// pacer, so everything a paced QP sends stays within its rate. An ACK
// is never held for tokens: the peer's requester times out on a late one
// (IBA 9.7.6.1.3) and its window waits on it, so holding ACKs would slow
// the flow that is not congested. The debt it leaves delays the QP's next
// request or READ response instead. It feeds no byte counter: DCQCN
// counts the QP's data.
func (e *Engine) ccSentAck(q *QP, lp *link.Packet) {
	if lp != nil && !q.ccNone && q.cc().paced {
		q.cc().pacer.Take(e.now, lp.Len+ipUDPLen)
	}
}

// ccAckDue reports whether a paced QP's next request should ask for an
// ACK although rxe's every-64-packets rule would not: a QP paced far below
// the line rate may take longer than the local ACK timeout to send 64
// packets, and then a request with nothing wrong would time out. Asking at
// least every eighth of the timeout keeps the ACK timer meaning loss.
func (e *Engine) ccAckDue(q *QP) bool {
	if q.ccNone {
		return false
	}
	s := q.cc()
	if !s.paced {
		return false
	}
	d := q.timeoutDur()
	if d == 0 || !s.ackReqAt.IsZero() && e.now.Sub(s.ackReqAt) < d/8 {
		return false
	}
	s.ackReqAt = e.now
	return true
}

// ccSent accounts a request packet of wire bytes that went out with PSNs
// up to last: the send time for RTT samples and, with an algorithm, the
// pacer's tokens and its byte counter.
func (e *Engine) ccSent(q *QP, wire int, last bth.PSN, retransmit bool) {
	var t int64 // 0: no sample
	if !retransmit {
		t = e.nowNS
	}
	q.sentAt(last, t)
	if !q.ccNone {
		e.ccSentAlg(q, wire)
	}
}

// sentAt records the send at t of the request answered up to PSN last.
// The newest send stays in the QP's line; the one it displaces, not yet
// acknowledged, goes to the ring. A QP with one request in flight, as a
// latency-bound one among thousands, touches no line of the ring.
func (q *QP) sentAt(last bth.PSN, t int64) {
	c := &q.lastSent
	if c.held && c.psn != last {
		q.cc().sent[uint32(c.psn)&(maxUnackedPSNs-1)] = c.at
	}
	c.at, c.psn, c.held = t, last, true
}

// ccSentAlg gives the pacer and the algorithm a request packet of wire
// bytes.
func (e *Engine) ccSentAlg(q *QP, wire int) {
	s := q.cc()
	if s.paced {
		s.pacer.Take(e.now, wire)
	}
	if s.inert {
		return
	}
	s.alg.OnSent(e.now, wire)
	e.ccSync(q)
}

// ccAck tells the algorithm that the PSNs [from, to) were acknowledged.
func (e *Engine) ccAck(q *QP, from, to bth.PSN) {
	n := int(to.Diff(from))
	if n <= 0 {
		return
	}
	s := q.cc()
	var rtt time.Duration
	newest := to.Add(-1)
	c := &q.lastSent
	var t int64
	if c.held && c.psn == newest {
		t = c.at
	} else {
		t = s.sent[uint32(newest)&(maxUnackedPSNs-1)]
	}
	// Every PSN before to is acknowledged: a held send among them is
	// never asked for again, so it need not reach the ring.
	if c.held && c.psn.Before(to) {
		c.held = false
	}
	// Under selective repeat the PSNs in flight may span more than the
	// ring: a slot a later PSN took gives no sample.
	if t != 0 && q.req.psn.Diff(to) < maxUnackedPSNs {
		rtt = time.Duration(max(e.nowNS-t, 0))
	}
	if rtt > 0 {
		if q.ccSRTT == 0 {
			q.ccSRTT = rtt
		} else {
			q.ccSRTT += (rtt - q.ccSRTT) / 8
		}
	}
	if q.ccNone || s.inert {
		return
	}
	s.alg.OnAck(e.now, n*int(q.mtu), rtt)
	e.ccSync(q)
}

// ccLoss tells the algorithm that a go-back-N started.
func (e *Engine) ccLoss(q *QP) {
	q.cc().alg.OnLoss(e.now)
	e.ccSync(q)
}

// ccCE is the notification point: a CE-marked packet arrived for q, and
// the algorithm may ask for a CNP to the peer's QP.
func (e *Engine) ccCE(q *QP) {
	if q.cc().alg.OnCE(e.now) && q.state.receives() {
		e.sendCNP(q)
	}
}

// ccCNP is the reaction point: a CNP named q.
func (e *Engine) ccCNP(q *QP) {
	q.cc().alg.OnCNP(e.now)
	e.ccSync(q)
}

// ccTimer runs the algorithm's timer.
func (e *Engine) ccTimer(q *QP) {
	q.cc().alg.OnTimer(e.now)
	e.ccSync(q)
}

// ccSync carries the algorithm's answers over after an event: the pacer's
// rate and the timer. A QP waiting on the pacer is looked at again when its
// rate changed, since its wake-up time was worked out at the old rate.
func (e *Engine) ccSync(q *QP) {
	s := q.cc()
	if r := s.alg.Rate(); r != s.rate {
		s.rate = r
		if s.paced {
			s.pacer.SetRate(e.now, r)
			if s.pace.idx >= 0 {
				e.stopTimer(&s.pace)
				e.schedule(q)
			}
		}
	}
	switch nt := s.alg.NextTimer(); {
	case nt.IsZero():
		e.stopTimer(&s.timer)
	case s.timer.idx < 0 || e.timers.ns(nt) != s.timer.when:
		e.setTimer(&s.timer, nt)
	}
}

// sendCNP sends a CNP to the peer's QP: BTH opcode 0x81, P_Key 0xFFFF,
// BECN, 16 reserved bytes, in an IP packet with DSCP 48 and Not-ECT, as
// ConnectX does (cc/cnp).
func (e *Engine) sendCNP(q *QP) {
	if len(e.txq) == cap(e.txq) {
		e.sendBatch()
	}
	lp := e.allocTx()
	if lp == nil {
		e.Counters.NoBuffer++
		return
	}
	n, err := cnp.Encode(lp.Buf[lp.Off:], q.destQPN)
	if err != nil {
		e.Counters.NoBuffer++
		e.one[0] = lp
		e.port.Release(e.one[:])
		e.one[0] = nil
		return
	}
	lp.Len = n
	lp.Remote = q.destAddr
	lp.SrcPort = q.sport
	lp.TOS = cnp.DSCP<<2 | link.ECNNotECT
	e.txq = append(e.txq, lp)
}
