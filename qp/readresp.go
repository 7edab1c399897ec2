package qp

import "github.com/uroce/uroce/bth"

// The responder's responses to READ and atomic requests go out in PSN
// order, through the QP's pacer: DCQCN limits the QP that sends the data,
// and for a READ that is the responder (ConnectX's rate limiter is per QP,
// whatever the opcode; the requester, which receives the CE-marked READ
// responses, sends its CNP to this QP). A paced response cannot hold up the
// engine or the QP's later requests, so:
//
//   - the response in progress is r.rdRes, from r.rdPSN on; the pacer's
//     timer in the engine's wheel wakes the QP when tokens are there, and
//     sendResponses carries on from where it stopped;
//   - READ and atomic requests that arrive meanwhile are executed at once
//     and their resources marked owed: their responses follow in the
//     order of the resource ring, which is PSN order (IBA 9.7.5.1.1:
//     responses in the order of the requests);
//   - an ACK or NAK that falls due meanwhile (a SEND or WRITE, a sequence
//     error, an RNR NAK) waits in r.ackOwed until the responses before its
//     PSN are out, since an ACK for a later PSN would tell the requester
//     that an unanswered READ was lost (IBA 9.7.5.1.4, implicit NAK);
//   - a duplicate READ for the response in progress or an older one
//     restarts the responses there (IBA 9.7.5.1.3): the requester's
//     go-back-N sends every later request again, so nothing else stays
//     owed; a duplicate for a later one only marks it owed.

// pendingAck is an ACK or NAK held back behind READ or atomic responses.
type pendingAck struct {
	set bool
	// recv: every request it acknowledges since the last ACK handed
	// the application a receive completion (holdAck); held: the
	// ACK is held and its timer armed.
	recv, held bool
	syn        bth.Syndrome
	psn        bth.PSN
	msn        uint32
}

// oweResponse queues the response to res from psn (the request's first
// PSN, or a duplicate's), with the bytes [va, va+n) for a READ, and sends
// what the pacer allows now.
func (e *Engine) oweResponse(q *QP, res *resource, psn bth.PSN, va uint64, n uint32) {
	e.flushAck(q) // it acknowledges requests before this one
	r := &q.resp
	cur := r.rdRes
	switch {
	case cur != nil && res != cur && res.firstPSN.After(cur.firstPSN):
		// Answered after the one in progress, from its first PSN.
		res.owed = true
		return
	case cur != nil:
		// A retry from the response in progress or an older one.
		for i := range r.res {
			r.res[i].owed = false
		}
		r.ackOwed = pendingAck{}
	}
	q.responding = true
	e.startResponse(res, r, psn, va, n)
	if !e.sendResponses(q, sendBudget) {
		e.schedule(q)
	}
}

// startResponse makes res the response in progress, from psn. The first
// packet of a READ's original request is FIRST or ONLY; a replay from
// inside it continues with MIDDLE or LAST, as rxe does, so the requester's
// opcode sequence holds.
func (e *Engine) startResponse(res *resource, r *responder, psn bth.PSN, va uint64, n uint32) {
	res.owed = true
	r.rdRes, r.rdPSN, r.rdVA, r.rdN, r.rdFirst = res, psn, va, n, psn == res.firstPSN
}

// nextResponse retires the response in progress and starts the next owed
// one in ring order, sending a held-back ACK that falls between them.
func (e *Engine) nextResponse(q *QP) {
	r := &q.resp
	done := r.rdRes
	done.owed, done.sent = false, true
	r.rdRes = nil
	var next *resource
	if n := len(r.res); n > 0 {
		// In ring order from the one after done; the index wraps by a
		// compare, not a division per step (a division is tens of
		// cycles, and a READ's last response scans the whole ring).
		for k, j := 1, resIndex(r.res, done)+1; k < n; k, j = k+1, j+1 {
			if j == n {
				j = 0
			}
			if c := &r.res[j]; c.owed {
				next = c
				break
			}
		}
	}
	if a := r.ackOwed; a.set && (next == nil || a.psn.Before(next.firstPSN)) {
		r.ackOwed = pendingAck{}
		e.sendAckMSN(q, a.syn, a.psn, a.msn)
	}
	if next != nil {
		e.startResponse(next, r, next.firstPSN, next.va, next.length)
	}
}

// resIndex returns res's index in rs.
func resIndex(rs []resource, res *resource) int {
	for i := range rs {
		if &rs[i] == res {
			return i
		}
	}
	return 0
}

// ackAfterResponses reports whether an ACK or NAK for psn must wait
// behind the responses owed, and if so keeps it in r.ackOwed to go out
// after them (IBA 9.7.5.1.4); the latest one held wins, as it says all
// the earlier ones did. A class C NAK is never held: the QP goes to the
// error state with it.
func (e *Engine) ackAfterResponses(q *QP, syn bth.Syndrome, psn bth.PSN) bool {
	r := &q.resp
	if r.rdRes == nil {
		return false
	}
	if syn.Kind() == bth.KindNAK && syn.NAKCode() != bth.NAKPSNSequenceError {
		return false
	}
	r.ackOwed = pendingAck{set: true, syn: syn, psn: psn, msn: r.msn}
	return true
}

// sendResponses sends the owed READ and atomic responses, at most budget
// packets, as the QP's pacer allows (rxe's read_reply, resumable). It
// reports whether the QP need not run again for them: they are all out,
// or the pacer's timer will wake it; false means the budget ran out or
// the link had no buffer. Only FIRST, LAST and ONLY carry an AETH (IBA
// 9.4.3); every packet carries the MSN of its request.
func (e *Engine) sendResponses(q *QP, budget int) bool {
	r := &q.resp
	var mr *MR
	var mrOf *resource
	for r.rdRes != nil {
		res := r.rdRes
		if budget == 0 {
			return false
		}
		if res.kind == resAtomic {
			// An atomic ACK is an acknowledgement: not paced, as
			// ACKs are not (it carries no data, and is Not-ECT).
			if !e.sendAtomicAckMSN(q, res.firstPSN, res.orig, res.msn) {
				return false
			}
			budget--
			e.nextResponse(q)
			continue
		}
		mtu := uint32(q.mtu)
		size := min(r.rdN, mtu)
		if e.ccPaceHold(q, int(size)+respHeaderEstimate) {
			return true
		}
		if size > 0 && mrOf != res {
			mr, mrOf = e.MRs.LookupRemote(res.rkey, q.pd, q.qpn, AccessRemoteRead), res
			if mr == nil {
				// Deregistered since: the requester times out.
				e.nextResponse(q)
				continue
			}
		}
		if !e.sendReadResponse(q, res, mr, r.rdPSN, r.rdVA, r.rdN, r.rdFirst) {
			return false
		}
		budget--
		r.rdFirst = false
		r.rdPSN = r.rdPSN.Next()
		r.rdVA += uint64(size)
		r.rdN -= size
		if r.rdN == 0 {
			e.nextResponse(q)
		}
	}
	return true
}

// sendReadResponse sends the READ response packet of res with PSN psn, of
// the bytes from va on, n of which remain in the response; first says it
// starts the response. It reports false when the link had no buffer.
func (e *Engine) sendReadResponse(q *QP, res *resource, mr *MR, psn bth.PSN, va uint64, n uint32, first bool) bool {
	mtu := uint32(q.mtu)
	size := min(n, mtu)
	var op bth.Opcode
	switch {
	case first && n <= mtu:
		op = bth.RCReadResponseOnly
	case first:
		op = bth.RCReadResponseFirst
	case n <= mtu:
		op = bth.RCReadResponseLast
	default:
		op = bth.RCReadResponseMiddle
	}
	bf := bth.BTHFields{Opcode: op, PSN: psn}
	e.pf.AETH.Syndrome = bth.ACK(bth.CreditsInvalid)
	e.pf.AETH.MSN = res.msn & bth.QPNMask
	lp, dst := e.newPacket(q, &bf, int(size), true)
	if lp == nil {
		return false
	}
	if size > 0 {
		if src, ok := mr.slice(va, uint64(size)); ok {
			copy(dst, src)
		} else {
			clear(dst)
		}
	}
	e.ccSentResponse(q, lp.Len+ipUDPLen)
	return true
}

// sendAckMSN sends an ACKNOWLEDGE for psn with the MSN it had when it fell
// due.
func (e *Engine) sendAckMSN(q *QP, syn bth.Syndrome, psn bth.PSN, msn uint32) {
	bf := bth.BTHFields{Opcode: bth.RCAcknowledge, PSN: psn}
	e.pf.AETH.Syndrome = syn
	e.pf.AETH.MSN = msn & bth.QPNMask
	if q.selective() && syn.Kind() == bth.KindACK && q.srSACK(e.sack[:], psn) {
		// Selective repeat: the ACK says what is held beyond the gap.
		bf.Opcode = bth.SelectiveAck
		lp, dst := e.newPacket(q, &bf, bth.SACKLen, true)
		if lp != nil {
			copy(dst, e.sack[:])
			q.ctr.SACKsSent++
		}
		e.ccSentAck(q, lp)
		return
	}
	lp, _ := e.newPacket(q, &bf, 0, true)
	e.ccSentAck(q, lp)
}

// sendAtomicAckMSN sends an ATOMIC ACKNOWLEDGE with the original value and
// the MSN of its request; false when the link has no buffer.
func (e *Engine) sendAtomicAckMSN(q *QP, psn bth.PSN, orig uint64, msn uint32) bool {
	bf := bth.BTHFields{Opcode: bth.RCAtomicAcknowledge, PSN: psn}
	e.pf.AETH.Syndrome = bth.ACK(bth.CreditsInvalid)
	e.pf.AETH.MSN = msn & bth.QPNMask
	e.pf.AtomicAckETH = orig
	lp, _ := e.newPacket(q, &bf, 0, true)
	e.ccSentAck(q, lp)
	return lp != nil
}
