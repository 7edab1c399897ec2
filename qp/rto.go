package qp

import (
	"time"

	"github.com/uroce/uroce/bth"
)

// RetransFlags choose how an RC requester times out its requests (a uroce
// attribute, Attr.Retrans with AttrRetrans; rdma-core has none). The zero
// value is adaptive retransmission with IBA's retry count; either way the
// peer sees standard RC, since only this side's timer changes.
type RetransFlags uint8

const (
	// RetransFixed uses the IBA local ACK timer alone: every retry waits
	// 4.096 µs × 2^Timeout (IBA 9.7.6.1.3), as rxe does. Without it the
	// requester retransmits after an RTO learnt from the QP's round
	// trips (RFC 6298), never later than that timer, as ConnectX's
	// adaptive retransmission does.
	RetransFixed RetransFlags = 1 << iota
	// RetransRetry7Forever makes a RetryCnt of 7 retry forever, as rxe
	// does. IBA (9.7.6.1.3, C9-140) and ConnectX count 7 as seven
	// retries, then fail the WR with WCRetryExcErr; only an RNRRetry of
	// 7 means forever.
	RetransRetry7Forever
	// RetransSelective is selective repeat, between uroce peers only:
	// every WRITE packet carries its own placement, the responder places
	// packets that arrive out of order and acknowledges them selectively,
	// and the requester resends only what was lost (sr.go). It changes
	// the wire, so both sides must set it, at INIT to RTR at the latest,
	// and only a uroce peer may be asked: the connection manager's and
	// uroce-perf's exchanges negotiate it. rxe and ConnectX never see it.
	RetransSelective
)

// minRTO is the adaptive timer's floor. A wheel timer fires up to a tick
// (16.4 µs) late, and the engine's turns come at the pace its owner drives
// them: RTT samples already include what a turn usually adds, but not the
// rare stalls neither side's samples show, a Go scheduler or GC pause on
// a loaded host or a peer's deferred ACK (rxe answers from a work queue),
// which take a few hundred microseconds. Sixteen ticks, 262 µs, keeps a
// spurious timeout to those stalls, and costs only a go-back-N that the
// retry count does not pay for; it is still well under the 67 ms of the
// default IBA timer, and a few times the ~50 µs round trip of rxe or a
// userspace engine, which is what the loss tail is measured against.
const minRTO = 16 << tickShift * time.Nanosecond

// rtoState is a QP's retransmission timer state. The wheel's retrans timer
// is armed for the earlier of two deadlines: last + rto·2^backoff while a
// request that asked for an ACK is unanswered (an early, adaptive
// retransmission), and budget (where the fixed IBA timer would fire). Only
// a timeout at budget spends a retry: early ones are free, so a dead peer
// fails at the same time in both modes, RetryCnt+1 IBA timeouts after the
// last progress.
type rtoState struct {
	// What a request or its answer touches comes first, in two cache
	// lines (see QP); the suspect times after them are touched only
	// around an early retransmission. Times are on the engine's clock
	// (Engine.nowNS), 0 for none.
	//
	// srtt and rttvar are RFC 6298's, 0 before the first sample.
	srtt, rttvar time.Duration
	// rto is the current RTO before backoff, 0 (the IBA timeout) until
	// the first sample.
	rto time.Duration
	// floor is the least RTO: minRTO until needless retransmissions
	// raise it (duplicateAnswer).
	floor time.Duration
	// last is the latest send of a request with AckReq, or progress:
	// the adaptive deadline counts from it, as TCP restarts its timer
	// (RFC 6298 5.1, 5.3). Moving it costs a store; the timer catches
	// up lazily when it fires. Requests without AckReq are not waited
	// for: a QP paced far below the line rate sends 64 of them (rxe's
	// ACK interval) over much longer than an RTO.
	last int64
	// budget is when the IBA timer would fire; zero while it is not
	// running.
	budget int64
	// timing: the request whose first answer has PSN timedPSN, sent
	// once at timedAt, is being timed. One request at a time, as Karn
	// and Partridge time one segment per round trip: a ring of send
	// times would need as many slots as PSNs in flight, which one READ
	// alone can exceed.
	timedAt  int64
	timedPSN bth.PSN
	// ackPSN is the last PSN the latest request with AckReq asks to be
	// answered (a READ's last response); ackWait that it is unanswered.
	ackPSN  bth.PSN
	ackWait bool
	timing  bool
	// backoff counts the timeouts since the last sample (RFC 6298 5.5).
	backoff uint8
	// ibaOnly: only the IBA timer runs, because the oldest unanswered
	// request is a READ or more than earlyMaxBytes are unanswered
	// (earlyOK).
	ibaOnly bool
	// samples counts the RTT samples taken, a clock in round trips.
	samples uint32
	// armed is the deadline the retrans timer was last set for (setRTO),
	// so a request compares integers, not time.Time values.
	armed int64
	// suspect: an early retransmission went out at retransAt, resending
	// requests unanswered since lateSince, and the first answer after it
	// came at answeredAt (zero before); an answer to both copies would
	// show it needless. An RTT sample reads suspect; what follows
	// retransPSN is read only around an early retransmission.
	suspect bool
	// retransPSN is the first PSN the early retransmission resent.
	retransPSN                       bth.PSN
	retransAt, lateSince, answeredAt int64
	// lateSeen: a needless retransmission was found at sample lateAt,
	// its first copy answered lateWait after it went out.
	lateWait time.Duration
	lateAt   uint32
	lateSeen bool
}

// lateMemory is how many round trips sampled apart two needless
// retransmissions may be for the floor to rise: as long as the floor takes
// to ease back most of the way (1/64 of its excess per sample).
const lateMemory = 64

// earlyMaxBytes bounds the unanswered data of a QP that retransmits
// early. The ACK of a request waits behind the QP's own packets ahead of
// it in the bottleneck's queue, a delay no earlier RTT sample shows when
// the queue was empty: 32 KiB is the floor's worth at 1 Gb/s. A larger
// flight loses packets to the responder's sequence NAK (IBA 9.7.5.2.2),
// not to the timer, and an early go-back-N there resends it all.
const earlyMaxBytes = 32 << 10

// earlyOK reports whether q may retransmit before the IBA timeout: a few
// requests unanswered, the latency-bound case that the fixed timer turns
// into a tail of tens of milliseconds, and no large READ first in line. A
// READ's response comes as the responder and the queues before it let it,
// not at the pace of ACKs; a lost packet of it is found by the implicit
// NAK of the next (IBA 9.7.5.1.5); and asking again early makes the
// responder send all of it once more, into the queue that delayed it. A
// READ of no more than the bytes a flight may have unanswered costs no
// more asked twice: rping's 1000-byte READ, whose loss otherwise waited
// out the IBA timer (TestLabLossRping).
func (q *QP) earlyOK() bool {
	if q.selective() {
		// Selective repeat asks again for the READ's gaps alone too.
		return true
	}
	if q.req.psn.Diff(q.comp.psn)*int(q.mtu) > earlyMaxBytes {
		return false
	}
	if q.sq.head == q.sq.tail {
		return true
	}
	w := q.sq.at(q.sq.head)
	return w.wr.Opcode != WRRead || w.length <= earlyMaxBytes
}

// adaptive reports whether q retransmits on its RTO: not asked for the
// fixed timer, and with a finite IBA timeout to cap it.
func (q *QP) adaptive() bool {
	return q.retransFlags&RetransFixed == 0 && q.timeout != 0
}

// retryForever reports whether a retry count of n never runs out.
func (q *QP) retryForever(n uint8) bool {
	return n == 7 && q.retransFlags&RetransRetry7Forever != 0
}

// rtoAcked takes an RTT sample when the completer's progress answered the
// request being timed, and folds it into the estimate (RFC 6298 2.2, 2.3).
// Only a sample ends the backoff (RFC 6298 5.7): the ACK of a retried
// request would end it at every spurious timeout.
func (q *QP) rtoAcked() {
	s := &q.rto
	if !s.timing || !q.comp.psn.After(s.timedPSN) {
		return
	}
	q.rtoSample()
}

// rtoSample ends the timing of the request being timed, answered now.
func (q *QP) rtoSample() {
	s := &q.rto
	s.timing = false
	rtt := time.Duration(q.e.nowNS - s.timedAt)
	if rtt <= 0 {
		return
	}
	s.samples++
	if !s.suspect && s.floor > minRTO {
		// A round trip with no retransmission: the floor eases back
		// by 1/64 of its excess, so it falls when stalls stop.
		s.floor -= (s.floor - minRTO) / 64
	}
	if s.srtt == 0 {
		s.srtt, s.rttvar = rtt, rtt/2
	} else {
		d := s.srtt - rtt
		if d < 0 {
			d = -d
		}
		s.rttvar += (d - s.rttvar) / 4
		s.srtt += (rtt - s.srtt) / 8
	}
	s.rto = rtoOf(s.srtt, s.rttvar, max(s.floor, minRTO), q.timeoutDur())
	s.backoff = 0
}

// earlyRetransmit notes an early retransmission at now of the requests
// from PSN from on. Their previous copy went out at s.last, or at the
// previous early retransmission if that is still unanswered: a duplicate
// answer shows that copy late, not the original, after a backoff.
func (s *rtoState) earlyRetransmit(now int64, from bth.PSN) {
	prev := s.last
	if s.suspect && s.answeredAt == 0 && !from.Before(s.retransPSN) {
		prev = s.retransAt
	}
	s.suspect, s.retransAt, s.lateSince, s.answeredAt = true, now, prev, 0
	s.retransPSN = from
}

// progressed notes the first answer after an early retransmission.
func (s *rtoState) progressed(now int64) {
	if s.suspect && s.answeredAt == 0 {
		s.answeredAt = now
	}
}

// duplicateAnswer handles an answer at now to a request already answered,
// and reports whether it shows an early retransmission needless: the peer
// answered both copies, so the first was only late, as a DSACK shows TCP
// (RFC 3708). RFC 6298's SRTT + 4·RTTVAR forgets a rare long round trip
// within a few short ones (RTTVAR loses a quarter each sample), so a peer
// stalling one answer in seven, as rxe in a TCG guest does, is
// retransmitted into at nearly every stall: 15 % of a clean send_lat's
// requests against rxe in the lab. When a second needless retransmission
// follows within lateMemory round trips, the floor rises to twice the
// time the late request took (its previous copy's wait, until the first
// answer), the shorter of the two, at most ceil; while it stays raised,
// each one raises it. A single one is a stall that need not come again,
// a thread preempted on a loaded host: raised to twice it, the floor made
// every loss of the next hundred round trips wait for it
// (TestRareStallLossTail). Only an answer to a resent PSN counts, and only
// for one IBA timeout after the retransmission; later duplicates prove
// nothing about it.
func (s *rtoState) duplicateAnswer(now int64, psn bth.PSN, ceil time.Duration) bool {
	if !s.suspect || psn.Before(s.retransPSN) {
		// An answer to a request the retransmission did not resend
		// is only reordered (a stalled ACK overtaken by a later one).
		return false
	}
	s.suspect = false
	if time.Duration(now-s.retransAt) > ceil {
		return false
	}
	// The first answer is the earlier copy's when the path keeps order;
	// if the resent copy overtook it, the first answer is the resent
	// one's and the wait it shows is shorter than the real one, so the
	// floor errs low rather than ratcheting up.
	late := time.Duration(now - s.lateSince)
	if s.answeredAt != 0 {
		late = time.Duration(s.answeredAt - s.lateSince)
	}
	switch {
	case s.floor >= 2*minRTO:
		// Raised, and not yet eased back: the peer stalls often.
		s.floor = min(ceil, max(s.floor, 2*late))
	case s.lateSeen && s.samples == s.lateAt:
		// The same stall answering a second request late: no round
		// trip came between.
		return true
	case s.lateSeen && s.samples-s.lateAt <= lateMemory:
		s.floor = min(ceil, max(s.floor, 2*min(late, s.lateWait)))
	}
	s.rto = max(s.rto, s.floor)
	s.lateSeen, s.lateAt, s.lateWait = true, s.samples, late
	return true
}

// rtoOf is RFC 6298's RTO, SRTT + max(G, 4·RTTVAR) with G the wheel's
// tick, held between floor and the IBA timeout ceil.
func rtoOf(srtt, rttvar, floor, ceil time.Duration) time.Duration {
	r := srtt + max(1<<tickShift, 4*rttvar)
	return min(max(r, floor), ceil)
}

// rtoCur is the RTO with the backoff of consecutive timeouts applied
// (RFC 6298 5.5), at most ceil.
func (s *rtoState) rtoCur(ceil time.Duration) time.Duration {
	r := s.rto
	if r == 0 {
		return ceil
	}
	for i := uint8(0); i < s.backoff && r < ceil; i++ {
		r *= 2
	}
	return min(r, ceil)
}

// deadline is when the adaptive timer should fire.
func (s *rtoState) deadline(ceil time.Duration) int64 {
	if !s.ackWait || s.ibaOnly {
		return s.budget
	}
	return min(s.last+int64(s.rtoCur(ceil)), s.budget)
}

// setRTO arms q's retrans timer for when, on the engine's clock.
func (e *Engine) setRTO(q *QP, when int64) {
	q.rto.armed = when
	e.setTimer(&q.retrans, e.now.Add(time.Duration(when-e.nowNS)))
}

// sentBurst gathers what armRetrans needs of the requests that one turn of
// runRequester sent. They all went out at the engine's one now, so one
// call arms the ACK timer as a call for each would: within a turn the
// deadline only moves earlier, but for ibaOnly, whose later deadline
// rtoExpired takes when the earlier one fires.
type sentBurst struct {
	n      int     // requests sent
	ackReq bool    // one of them asked for an ACK
	fresh  bool    // one of those went out for the first time, with PSN psn
	psn    bth.PSN // the request to time: the first fresh one with AckReq
	newest bth.PSN // the last PSN that the last request with AckReq is answered with
}

// sent adds a request with PSN psn, answered up to newest, to the burst.
func (b *sentBurst) sent(ackReq, retransmit bool, psn, newest bth.PSN) {
	b.n++
	if ackReq {
		if !retransmit && !b.fresh {
			b.fresh, b.psn = true, psn
		}
		b.ackReq, b.newest = true, newest
	}
}

// armRetrans starts the ACK timer if it is not running, at the send of a
// request with PSN psn whose answers end at newest; ackReq says it asked
// for an ACK, retransmit that it was sent before.
func (e *Engine) armRetrans(q *QP, ackReq, retransmit bool, psn, newest bth.PSN) {
	d := q.timeoutDur()
	if d == 0 {
		return
	}
	now := e.nowNS
	if !q.adaptive() {
		if q.retrans.idx < 0 {
			e.setRTO(q, now+int64(d))
		}
		return
	}
	s := &q.rto
	s.ibaOnly = !q.earlyOK()
	if ackReq {
		s.last, s.ackPSN, s.ackWait = now, newest, true
		// Its first answer, an ACK or a READ's first response, has
		// its PSN: a READ is timed to the start of its response, not
		// its end, which depends on its size.
		if !retransmit && !s.timing {
			s.timing, s.timedPSN, s.timedAt = true, psn, now
		}
	}
	if s.budget == 0 {
		s.budget = now + int64(d)
	}
	// Only a deadline that moved earlier moves the timer now.
	if when := s.deadline(d); q.retrans.idx < 0 || when < s.armed {
		e.setRTO(q, when)
	}
}

// restartRetrans restarts the ACK timer (the completer's progress).
func (e *Engine) restartRetrans(q *QP) {
	d := q.timeoutDur()
	if d == 0 {
		return
	}
	now := e.nowNS
	if !q.adaptive() {
		e.setRTO(q, now+int64(d))
		return
	}
	s := &q.rto
	s.last, s.budget = now, now+int64(d)
	s.ibaOnly = !q.earlyOK()
	if s.ackWait && q.comp.psn.After(s.ackPSN) {
		s.ackWait = false
	}
	e.setRTO(q, s.deadline(d))
}

// stopRetrans stops the ACK timer and its budget.
func (e *Engine) stopRetrans(q *QP) {
	e.stopTimer(&q.retrans)
	q.rto.budget, q.rto.ackWait = 0, false
}

// rtoExpired decides what the ACK timer that fired means in adaptive
// mode: not yet due (the timer was re-armed for the moved deadline, and
// nothing is to be done), an early retransmission, or a timeout at the IBA
// budget that spends a retry.
func (e *Engine) rtoExpired(q *QP) (due, charged bool) {
	s := &q.rto
	d := q.timeoutDur()
	if s.budget == 0 {
		// Fired with no budget running (the timer armed before the mode
		// or timeout changed): a full IBA timeout is its own budget.
		s.budget = e.nowNS
	}
	if when := s.deadline(d); e.nowNS < when {
		e.setRTO(q, when)
		return false, false
	}
	if s.backoff < 31 {
		s.backoff++
	}
	if e.nowNS >= s.budget {
		// The retransmission arms the next budget, a full IBA timeout
		// on, as the fixed timer re-arms at its send.
		s.budget = 0
		return true, true
	}
	return true, false
}
