package qp

import (
	"encoding/binary"

	"github.com/uroce/uroce/bth"
)

// opNone marks "no message in progress" where rxe keeps opcode -1.
const opNone = bth.Opcode(0xff)

// completer is the state that matches responses to WQEs (rxe's qp->comp).
type completer struct {
	psn      bth.PSN    // next response PSN expected
	opcode   bth.Opcode // last response opcode of a READ in progress, or opNone
	retryCnt uint8
	rnrRetry uint8
	// startedRetry: a go-back-N is under way; more gaps before it makes
	// progress do not start another (rxe's comp.started_retry).
	startedRetry bool
}

// compState is a step of the completer (rxe's enum comp_state).
type compState uint8

const (
	compGetWQE     compState = iota // the oldest outstanding WQE
	compCheckPSN                    // where the response falls against it
	compCheckAck                    // opcode sequence and syndrome
	compRead                        // place READ response data
	compAtomic                      // place the atomic's original value
	compWriteSend                   // an ACK of SEND/WRITE packets
	compUpdateComp                  // advance comp.psn
	compCompAck                     // the response completes the WQE
	compCompWQE                     // a later PSN implicitly completes it
	compErrorRetry                  // go-back-N (NAK, implicit NAK, timeout)
	compRNRRetry                    // wait the RNR timer, then go-back-N
	compError                       // the WQE fails, the QP goes to ERR
	compDone
)

// complete processes one response packet (rxe's rxe_completer).
func (e *Engine) complete(q *QP, p *bth.Packet) {
	op := p.Opcode()
	if op == bth.SelectiveAck {
		e.completeSACK(q, p) // sr.go
		return
	}
	e.completeOp(q, p, op)
}

// completeOp processes a response packet as one with opcode op.
func (e *Engine) completeOp(q *QP, p *bth.Packet, op bth.Opcode) {
	h := p.BTH()
	psn := h.PSN()
	if !psn.Before(q.req.highPSN) {
		// A response at or past the highest PSN sent answers nothing
		// this QP asked: a stale ACK of an earlier connection on the
		// same QPs, or a forged one. Taken as a coalesced ACK (IBA
		// 9.7.5.1.2) it would complete requests the responder has not
		// executed. IBA's valid responses lie between the oldest
		// unacknowledged PSN and the last one sent; rxe's check_psn
		// has no upper bound.
		q.ctr.Dropped++
		return
	}
	var w *sendWQE
	progress := false
	acked := q.comp.psn
	// An answer before comp.psn repeats one already taken: the peer saw
	// a request twice.
	again := psn.Before(q.comp.psn)
	state := compGetWQE
	for {
		switch state {
		case compGetWQE:
			q.retireLocal()
			if q.sq.head == q.sq.tail || q.sq.at(q.sq.head).state == wqePosted {
				// Nothing is waiting for a response: a stale or
				// duplicate packet, or the rest of a coalesced ACK.
				if !progress {
					q.ctr.Dropped++
				}
				state = compDone
				continue
			}
			w = q.sq.at(q.sq.head)
			state = compCheckPSN

		case compCheckPSN:
			state = e.checkPSN(q, w, p, psn, op)

		case compCheckAck:
			state = e.checkAck(q, w, p, op)

		case compRead:
			state = e.readResponse(q, w, p, psn)

		case compAtomic:
			orig := p.AtomicAckETH().OrigData()
			var buf [8]byte
			// The original value lands in host order, as verbs
			// returns it; it is big-endian only on the wire.
			binary.NativeEndian.PutUint64(buf[:], orig)
			scatter(w, 0, buf[:])
			state = compCompAck

		case compWriteSend:
			state = compUpdateComp
			if w.state == wqePending && psn == w.lastPSN {
				state = compCompAck
			}

		case compUpdateComp:
			if op.Has(bth.Last) {
				q.comp.opcode = opNone
			} else {
				q.comp.opcode = op
			}
			if !psn.Before(q.comp.psn) {
				q.comp.psn = psn.Next()
				q.comp.startedRetry = false
				progress = true
				e.schedule(q) // the PSN window moved
			}
			state = compDone

		case compCompAck, compCompWQE:
			if state == compCompWQE && !w.lastPSN.Before(q.comp.psn) {
				q.comp.psn = w.lastPSN.Next()
				q.comp.opcode = opNone
			}
			q.completeSend(w)
			// The head of a queue this emptied is the slot PostSend
			// fills next, a line no packet touched: among thousands of
			// QPs, a cache miss.
			if q.sq.head != q.sq.tail {
				q.retireLocal()
			}
			progress = true
			e.schedule(q) // credits, fence or window may have opened
			if state == compCompWQE {
				// The other SEND and WRITE WQEs a coalesced ACK
				// covers whole (IBA 9.7.5.1.2) complete as this one
				// did, by checkPSN's first case, without a turn of
				// the state machine each; the retry counts were
				// renewed for the first of them.
				for q.sq.head != q.sq.tail {
					w = q.sq.at(q.sq.head)
					if w.state != wqePending || !psn.After(w.lastPSN) || w.wr.Opcode.isReadAtomic() {
						break
					}
					if !w.lastPSN.Before(q.comp.psn) {
						q.comp.psn = w.lastPSN.Next()
						q.comp.opcode = opNone
					}
					q.completeSend(w)
				}
				state = compGetWQE
				continue
			}
			state = compDone
			if !psn.Before(q.comp.psn) {
				state = compUpdateComp
			}

		case compErrorRetry:
			state = e.errorRetry(q, w, false)

		case compRNRRetry:
			q.ctr.RNRNAKsRcvd++
			if q.comp.rnrRetry == 0 {
				w.status = WCRNRRetryExcErr
				q.ctr.RNRRetryExcErrs++
				state = compError
				continue
			}
			if q.comp.rnrRetry != 7 {
				q.comp.rnrRetry--
			}
			// IBA 9.7.5.2.8: the RNR NAK acknowledges what came
			// before it; retry from its PSN after the peer's timer.
			if psn.After(q.comp.psn) {
				q.comp.psn = psn
			}
			q.req.needRetry, q.req.waitRNR = true, true
			e.stopRetrans(q)
			us := bth.RNRTimeout(p.AETH().Syndrome().RNRTimer())
			e.setTimer(&q.rnr, e.now.Add(durationUS(us)))
			return

		case compError:
			if w.status == WCSuccess {
				w.status = WCBadRespErr
			}
			q.fail(w, w.status)
			return

		case compDone:
			if progress && q.selective() && q.sr.rdHeldN > 0 {
				// READ responses that came ahead (sr.go).
				e.srReadCatchUp(q)
			}
			// rxe kicks the timer down the road on every response;
			// we do on progress only, so stale duplicates cannot
			// postpone a retry forever.
			if progress {
				q.rtoAcked()
				q.rto.progressed(e.nowNS)
			} else if again && q.rto.duplicateAnswer(e.nowNS, psn, q.timeoutDur()) {
				q.ctr.SpuriousRetrans++
			}
			if progress || q.retrans.idx < 0 {
				e.rearmRetrans(q)
			}
			if progress {
				e.ccAck(q, acked, q.comp.psn)
			}
			return
		}
	}
}

// checkPSN places a response against the oldest WQE (rxe's check_psn).
func (e *Engine) checkPSN(q *QP, w *sendWQE, p *bth.Packet, psn bth.PSN, op bth.Opcode) compState {
	if psn.After(w.lastPSN) {
		if w.state != wqePending {
			q.ctr.Dropped++
			return compDone
		}
		// A response beyond this WQE: a coalesced ACK completes a
		// SEND/WRITE (IBA 9.7.5.1.2), but a READ or atomic needed
		// its own response, so that was lost: implicit NAK
		// (IBA 9.7.5.1.5). Under selective repeat a later READ's
		// response is placed in its own WQE instead (sr.go).
		if q.sr != nil && w.wr.Opcode == WRRead && op.Has(bth.Read) {
			if later := q.srWQE(psn); later != nil && later.wr.Opcode == WRRead {
				return e.srReadAhead(q, later, p, psn, op)
			}
		}
		if w.wr.Opcode.isReadAtomic() {
			q.ctr.ImplicitNAKs++
			return compErrorRetry
		}
		q.resetRetry()
		return compCompWQE
	}
	switch d := psn.Compare(q.comp.psn); {
	case d < 0:
		// Most likely a response to a retried packet.
		if psn == w.lastPSN && w.state == wqePending && op == bth.RCAcknowledge {
			return compCompAck
		}
		q.ctr.Dropped++
		return compDone
	case d > 0 && w.wr.Opcode == WRRead:
		// A gap in the READ response: implicit NAK (rxe drops
		// these and waits for the timer; asking again at once is
		// what IBA 9.7.5.1.5 allows and recovers faster).
		if !op.Has(bth.Read) {
			return compCheckAck
		}
		if q.sr != nil {
			// Selective repeat places it, and asks again for
			// what is missing only (sr.go).
			return e.srReadAhead(q, w, p, psn, op)
		}
		q.ctr.ImplicitNAKs++
		return compErrorRetry
	}
	return compCheckAck
}

// checkAck checks the opcode sequence of READ responses and the
// syndrome (rxe's check_ack).
func (e *Engine) checkAck(q *QP, w *sendWQE, p *bth.Packet, op bth.Opcode) compState {
	if q.comp.opcode == opNone {
		if !op.Has(bth.First) {
			return compError
		}
	} else if op != bth.RCReadResponseMiddle && op != bth.RCReadResponseLast && op != bth.RCAcknowledge {
		// A retried READ may start again with FIRST or ONLY.
		if !(op == bth.RCReadResponseFirst && p.BTH().PSN() == w.firstPSN) && op != bth.RCReadResponseOnly {
			return compError
		}
	}
	switch op {
	case bth.RCReadResponseFirst, bth.RCReadResponseLast, bth.RCReadResponseOnly, bth.RCReadResponseMiddle:
		if op != bth.RCReadResponseMiddle && p.AETH().Syndrome().Kind() != bth.KindACK {
			return compError
		}
		if w.wr.Opcode != WRRead {
			if st, ok := extResponse(w, op, p.PayloadLen()); ok {
				q.resetRetry()
				return st
			}
			w.status = WCBadRespErr
			return compError
		}
		q.resetRetry()
		return compRead
	case bth.RCAtomicAcknowledge:
		if p.AETH().Syndrome().Kind() != bth.KindACK || !w.wr.Opcode.isAtomic() {
			w.status = WCBadRespErr
			return compError
		}
		q.resetRetry()
		return compAtomic
	case bth.RCAcknowledge:
		syn := p.AETH().Syndrome()
		switch syn.Kind() {
		case bth.KindACK:
			if w.wr.Opcode.isReadAtomic() {
				// An ACK inside a READ's PSNs (rxe: "read
				// retried"), or one for an atomic: not ours.
				q.ctr.Dropped++
				return compDone
			}
			q.resetRetry()
			return compWriteSend
		case bth.KindRNRNAK:
			return compRNRRetry
		case bth.KindNAK:
			switch syn.NAKCode() {
			case bth.NAKPSNSequenceError:
				// The NAK acknowledges every PSN before its own
				// (IBA 9.7.5.2.2): go back to it. When that moves
				// comp.psn it is forward progress, which renews the
				// retry count as an ACK does; the retry it starts
				// then spends one. rxe renews only on an ACK, which
				// its retrying forever hides: a 64-packet WRITE at
				// 5 % loss is mostly NAKed before its AckReq packet
				// gets through, and seven NAKs in a row failed the
				// lab's drop5pct write_bw cell with RETRY_EXC_ERR.
				q.ctr.SeqNAKsRcvd++
				if psn := p.BTH().PSN(); psn.After(q.comp.psn) {
					q.comp.psn = psn
					q.resetRetry()
				}
				return compErrorRetry
			case bth.NAKInvalidRequest:
				w.status = WCRemInvReqErr
			case bth.NAKRemoteAccessError:
				w.status = WCRemAccessErr
			default:
				w.status = WCRemOpErr
			}
			return compError
		}
	}
	return compError
}

// readResponse copies READ response data into the WQE's buffers at the
// packet's place in the message (rxe's do_read).
func (e *Engine) readResponse(q *QP, w *sendWQE, p *bth.Packet, psn bth.PSN) compState {
	if !readFits(q, w, p, psn) {
		w.status = WCBadRespErr
		return compError
	}
	scatter(w, uint32(psn.Diff(w.firstPSN))*uint32(q.mtu), p.Payload())
	if psn == w.lastPSN {
		return compCompAck
	}
	return compUpdateComp
}

// readFits checks a READ response packet's length against its place in
// the WQE's response: full MTU but for the last, which ends the message.
// Under selective repeat a response asked again for a gap ends (LAST)
// where the gap does, inside the message, and is full too.
func readFits(q *QP, w *sendWQE, p *bth.Packet, psn bth.PSN) bool {
	mtu := uint32(q.mtu)
	off := uint64(psn.Diff(w.firstPSN)) * uint64(mtu)
	n := p.PayloadLen()
	end := off + uint64(n)
	last := p.Has(bth.Last)
	if q.sr != nil && psn != w.lastPSN {
		last = false
	}
	return end <= uint64(w.length) && (last || uint32(n) == mtu) && (!last || end == uint64(w.length)) && last == (psn == w.lastPSN)
}

// scatter copies data into the WQE's buffers from byte off on.
func scatter(w *sendWQE, off uint32, data []byte) { copySGL(w.sge, w.mrs, off, data, true) }

// errorRetry decides on a go-back-N (rxe's COMPST_ERROR_RETRY): it spends
// one retry, and fails the WQE when none are left. A RetryCnt of 7 is
// seven retries (IBA 9.7.6.1.3, C9-140; ConnectX), unless the QP asked
// for rxe's "7 is forever" (RetransRetry7Forever).
func (e *Engine) errorRetry(q *QP, w *sendWQE, timeout bool) compState {
	if q.comp.startedRetry && !timeout {
		return compDone
	}
	if q.comp.retryCnt == 0 {
		w.status = WCRetryExcErr
		q.ctr.RetryExcErrs++
		return compError
	}
	if !q.retryForever(q.comp.retryCnt) {
		q.comp.retryCnt--
	}
	q.ctr.CompleterRetries++
	if timeout && q.sr != nil {
		e.srTimeout(q)
		return compDone
	}
	e.goBackN(q)
	return compDone
}

// goBackN asks the requester to resend from comp.psn; nothing is resent
// when everything sent has been answered.
func (e *Engine) goBackN(q *QP) {
	if q.req.psn.After(q.comp.psn) {
		q.req.needRetry = true
		q.comp.startedRetry = true
		e.schedule(q)
		e.ccLoss(q)
	}
}

// retransTimeout handles the local ACK timeout (IBA 9.7.6.1.3), and in
// adaptive mode the RTO's early retransmissions, which spend no retry:
// the retry count is charged once per IBA timeout without progress, so
// RetryCnt bounds the time a dead peer takes to fail, not the number of
// packets sent to it.
func (e *Engine) retransTimeout(q *QP) {
	if !q.state.sends() || q.sq.head == q.sq.next && (q.sq.head == q.sq.tail || q.sq.at(q.sq.head).state == wqePosted) {
		q.rto.budget = 0
		return
	}
	w := q.sq.at(q.sq.head)
	if w.state == wqePosted {
		q.rto.budget = 0
		return
	}
	if q.adaptive() {
		due, charged := e.rtoExpired(q)
		if !due {
			return
		}
		if !charged {
			q.ctr.Timeouts++
			q.ctr.EarlyRetransTimeouts++
			q.rto.earlyRetransmit(e.nowNS, q.comp.psn)
			if q.sr != nil {
				e.srTimeout(q)
				return
			}
			e.goBackN(q)
			return
		}
	}
	q.ctr.Timeouts++
	if e.errorRetry(q, w, true) == compError {
		q.fail(w, w.status)
	}
}

// rearmRetrans restarts the ACK timer while requests are unanswered and
// stops it otherwise (rxe's COMPST_EXIT).
func (e *Engine) rearmRetrans(q *QP) {
	if q.state.sends() && q.req.psn.After(q.comp.psn) && !q.req.waitRNR {
		e.restartRetrans(q)
		return
	}
	e.stopRetrans(q)
}

func (q *QP) resetRetry() {
	q.comp.retryCnt = q.retryCnt
	q.comp.rnrRetry = q.rnrRetry
}
