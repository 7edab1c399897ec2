package qp

import (
	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/pkg/link"
)

// requester is the send side's packet generator state (rxe's qp->req).
type requester struct {
	psn       bth.PSN // next PSN to send
	highPSN   bth.PSN // one past the highest PSN ever sent, to count retransmits
	srAtomic  bth.PSN // see srAtomicOut
	noackPkts int16   // packets since the last AckReq, at most maxPktPerAck
	rdAtomic  int16   // free READ/atomic credits (max_rd_atomic, at most 255)
	needRetry bool    // the completer asked for go-back-N from comp.psn
	waitRNR   bool    // an RNR NAK timer is running
	// srAtomicOut: under selective repeat, an atomic or ATOMIC WRITE
	// went out with PSN srAtomic; until it is answered, no WRITE packet
	// after it may be placed ahead of it (sr.go).
	srAtomicOut bool
	// posted and done count send WRs posted and completed successfully
	// (Counters' PostedSends and CompletedSends, count16); pkts the
	// requests sent and the responses received.
	posted, done uint16
	pkts         pktCounts
}

// srAtomicSent notes an atomic or ATOMIC WRITE sent with PSN psn, under
// selective repeat: the responder must not place a later WRITE before it
// executes, since the atomic's result could change.
func (q *QP) srAtomicSent(psn bth.PSN) {
	if q.selective() {
		q.req.srAtomicOut, q.req.srAtomic = true, psn
	}
}

// srPlaceable reports whether the responder may place a WRITE packet sent
// now before the PSNs ahead of it arrive: no atomic sent earlier is still
// unanswered.
func (q *QP) srPlaceable() bool {
	if q.req.srAtomicOut && !q.comp.psn.After(q.req.srAtomic) {
		return false
	}
	q.req.srAtomicOut = false
	return true
}

// runRequester sends packets for q, at most budget of them (rxe's
// rxe_requester). It reports whether it stopped with work left (budget,
// no buffers), so the caller should run it again; a requester blocked on
// an ACK, a credit or a timer is scheduled by whoever unblocks it. Each
// turn of the outer loop takes the WQE at sq.next (starting it when not
// yet started: fence, drain, credits, keys); the inner loop sends its
// packets while the PSN window and the budget allow.
func (e *Engine) runRequester(q *QP, budget int) bool {
	if !q.state.sends() {
		return false
	}
	if q.typ != QPTypeRC {
		if q.typ == QPTypeUC {
			return e.runUCRequester(q, budget)
		}
		return e.runUDRequester(q, budget)
	}
	if q.req.needRetry && !q.req.waitRNR {
		q.retry()
	}
	var b sentBurst
	more := e.runRC(q, budget, &b)
	// One ACK timer for the turn's requests. A QP that stopped sending
	// during it (a WQE failed and moved it to ERR, which stops the
	// timer) gets none, as a call for each packet followed by the stop
	// would leave it.
	if b.n > 0 && q.state.sends() {
		e.armRetrans(q, b.ackReq, !b.fresh, b.psn, b.newest)
	}
	return more
}

// runRC is runRequester's loop for an RC QP; b gathers what the ACK timer
// needs of the requests sent, for runRequester to arm it once.
func (e *Engine) runRC(q *QP, budget int, b *sentBurst) bool {
	for {
		if q.req.waitRNR || q.sq.next == q.sq.tail {
			return false
		}
		w := q.sq.at(q.sq.next)
		switch w.state {
		case wqeDone:
			// A local operation already executed, met again after a
			// go-back-N rewind.
			q.sq.next++
			q.retireLocal()
			continue
		case wqePosted:
			// IBA 10.3.1: in SQD the send queue finishes the WQE in
			// progress and starts no other.
			if q.state == StateSQD {
				return false
			}
			// IBV_SEND_FENCE: rxe waits for every earlier WQE to
			// complete, which covers IBA's READ/atomic fence (C10-?).
			if w.wr.Flags&FlagFence != 0 && q.sq.next != q.sq.head {
				return false
			}
			if w.wr.Opcode.isLocal() {
				// rxe_do_local_ops: executed when the requester
				// reaches it, completed in order behind what is
				// still outstanding.
				if st := e.executeLocal(q, w); st != WCSuccess {
					q.fail(w, st)
					return false
				}
				w.state = wqeDone
				q.sq.next++
				q.retireLocal()
				continue
			}
			// IBA 9.5.2: at most max_rd_atomic READ/atomic outstanding.
			if w.wr.Opcode.takesRdAtomic() && !w.hasRdAtomic {
				if q.req.rdAtomic <= 0 {
					return false
				}
				q.req.rdAtomic--
				w.hasRdAtomic = true
			}
			if !w.validated {
				if st := e.validateSendWQE(q, w); st != WCSuccess {
					q.fail(w, st)
					return false
				}
				w.validated = true
			}
			w.firstPSN = q.req.psn
			w.lastPSN = w.firstPSN.Add(w.npkts(int(q.mtu)) - 1)
			w.offset = 0
			w.state = wqeProcessing
		}
		for {
			if q.req.psn.Diff(q.comp.psn) >= maxUnackedPSNs && !q.srRoom() {
				return false // the completer schedules us when ACKs arrive
			}
			if budget == 0 {
				return true
			}
			if !q.ccNone && e.ccHold(q, w) {
				return false // the pacer's timer or an ACK schedules us
			}
			if !e.sendRequest(q, w, b) {
				return true // no buffer: try again next turn
			}
			budget--
			if w.state == wqePending {
				q.sq.next++
				q.retireLocal()
				break
			}
		}
	}
}

// npkts returns how many PSNs the WQE uses: its packets, or for a READ the
// packets of its response (IBA 9.7.1).
func (w *sendWQE) npkts(mtu int) int {
	if w.wr.Opcode.isAtomic() || w.length <= uint32(mtu) || w.wr.Opcode == WRFlush {
		return 1 // and no division for the common one-packet message
	}
	return int((uint64(w.length) + uint64(mtu) - 1) / uint64(mtu))
}

// nextPayload returns the payload of w's next request packet: none for a
// READ request or an atomic.
func (w *sendWQE) nextPayload(mtu int) int {
	if w.wr.Opcode.isReadAtomic() || w.offset >= w.length || w.wr.Opcode == WRFlush {
		return 0
	}
	return int(min(w.length-w.offset, uint32(mtu)))
}

// validateSendWQE resolves the local keys of a WQE before its first packet,
// as rxe's requester does when it first touches the data: an unknown key,
// another PD, a range outside the region or, for READ and atomic results,
// a region without local write is a local protection error; a message over
// 2^31 bytes or an atomic buffer of other than 8 bytes a local length error.
func (e *Engine) validateSendWQE(q *QP, w *sendWQE) WCStatus {
	if w.length > 1<<31 {
		return WCLocLenErr
	}
	if w.wr.Opcode.isAtomic() && w.length != 8 {
		return WCLocLenErr
	}
	w.mrs = w.mrs[:0]
	if w.wr.Flags&FlagInline != 0 {
		return WCSuccess
	}
	var need Access
	if w.wr.Opcode.isReadAtomic() {
		need = AccessLocalWrite
	}
	if len(w.sge) == 1 && w.sge[0].Length != 0 {
		// The common WR, one SGE: resolveSGL's checks without its loop.
		g := &w.sge[0]
		// Lookup, written out: it is too large to inline.
		m, ok := e.MRs.recentMR(g.LKey)
		if !ok {
			m = e.MRs.lookupCipher(g.LKey)
		}
		if !m.localOK(q.pd, need) {
			return WCLocProtErr
		}
		if _, ok := m.slice(g.Addr, uint64(g.Length)); !ok {
			return WCLocProtErr
		}
		w.mrs = append(w.mrs, m)
		return WCSuccess
	}
	var ok bool
	if w.mrs, ok = e.MRs.resolveSGL(w.mrs, w.sge, q.pd, need); !ok {
		return WCLocProtErr
	}
	return WCSuccess
}

// msgOpcodes are the opcodes of a SEND's or a WRITE's packets by their
// place in the message (IBA 9.4: FIRST, MIDDLE, LAST, ONLY; immediate
// data on the last).
type msgOpcodes struct {
	first, middle, last, lastImm, only, onlyImm bth.Opcode
}

var (
	sendOpcodes  = msgOpcodes{bth.RCSendFirst, bth.RCSendMiddle, bth.RCSendLast, bth.RCSendLastImm, bth.RCSendOnly, bth.RCSendOnlyImm}
	writeOpcodes = msgOpcodes{bth.RCWriteFirst, bth.RCWriteMiddle, bth.RCWriteLast, bth.RCWriteLastImm, bth.RCWriteOnly, bth.RCWriteOnlyImm}
)

// at returns the opcode of the packet that is first and/or last in its
// message, with immediate data when imm.
func (m *msgOpcodes) at(first, last, imm bool) bth.Opcode {
	switch {
	case first && last && imm:
		return m.onlyImm
	case first && last:
		return m.only
	case first:
		return m.first
	case last && imm:
		return m.lastImm
	case last:
		return m.last
	}
	return m.middle
}

// nextOpcode returns the opcode of a request packet of op: for a SEND or
// WRITE by its place in the message, for a READ or an atomic its one.
func nextOpcode(op WROpcode, first, last bool) bth.Opcode {
	switch op {
	case WRSend, WRSendWithImm:
		return sendOpcodes.at(first, last, op.hasImm())
	case WRSendWithInv:
		switch {
		case first && last:
			return bth.RCSendOnlyInvalidate
		case last:
			return bth.RCSendLastInvalidate
		}
		return sendOpcodes.at(first, false, false)
	case WRWrite, WRWriteWithImm:
		return writeOpcodes.at(first, last, op.hasImm())
	case WRRead:
		return bth.RCReadRequest
	case WRCompareSwap:
		return bth.RCCompareSwap
	case WRFetchAdd:
		return bth.RCFetchAdd
	}
	return 0xff
}

// sendRequest builds and sends the next packet of w. It reports false
// when no buffer was free.
func (e *Engine) sendRequest(q *QP, w *sendWQE, b *sentBurst) bool {
	if q.ack&ackHeld != 0 {
		// The held ACK leaves first, in the same transmit (holdAck).
		e.flushAck(q)
	}
	psn := q.req.psn
	op := w.wr.Opcode
	var lp *link.Packet
	var payload uint32
	var last, ackReq bool
	if (op == WRWrite || op == WRSend) && w.offset == 0 && w.length <= uint32(q.mtu) && !q.selective() {
		// The common message, a SEND or WRITE of one packet.
		if lp = e.buildOnly(q, w, psn); lp == nil {
			return false
		}
		payload, last, ackReq = w.length, true, true
	} else if lp, payload, last, ackReq = e.buildRequest(q, w, psn, w.offset, 0, false); lp == nil {
		return false
	}
	t := e.nowNS // the send time for RTT samples; 0 for none (Karn)
	retransmit := psn.Before(q.req.highPSN)
	if retransmit {
		q.ctr.Retransmits++
		t = 0
	}
	if q.selective() {
		q.sr.srSent(psn)
	}
	newest := psn
	if op == WRRead {
		newest = w.lastPSN
	}
	// ccSent, written out: it is too large to inline.
	q.sentAt(newest, t)
	if !q.ccNone {
		e.ccSentAlg(q, lp.Len+ipUDPLen)
	}
	switch {
	case op == WRRead:
		q.req.psn = w.lastPSN.Next()
	default:
		q.req.psn = psn.Next()
		w.offset += payload
	}
	if !q.req.psn.Before(q.req.highPSN) {
		q.req.highPSN = q.req.psn
	}
	if last {
		w.state = wqePending
	} else {
		w.state = wqeProcessing
	}
	b.sent(ackReq, retransmit, psn, newest)
	return true
}

// buildRequest builds w's request packet with PSN psn, whose data starts
// at byte off of the message, and queues it for sending; a READ asks for
// readLen bytes from there, 0 meaning the rest. A resend (of selective
// repeat, sr.go) always asks for an ACK and leaves the requester's count
// of packets since the last AckReq alone. It returns nil when no buffer
// was free.
func (e *Engine) buildRequest(q *QP, w *sendWQE, psn bth.PSN, off, readLen uint32, resend bool) (lp *link.Packet, payload uint32, last, ackReq bool) {
	mtu := uint32(q.mtu)
	op := w.wr.Opcode
	bf := bth.BTHFields{PSN: psn}
	pf := &e.pf
	place := false // a selective-repeat placement header leads the payload
	switch {
	case op == WRRead:
		// A retry of a partly answered READ asks for the rest only
		// (rxe's req_retry advances the iova by the PSNs received).
		bf.Opcode = bth.RCReadRequest
		if readLen == 0 {
			readLen = w.length - off
		}
		pf.RETH = bth.RETHFields{VA: w.wr.RemoteAddr + uint64(off), RKey: w.wr.RKey, DMALen: readLen}
		last = true
	case op.isAtomic():
		bf.Opcode = nextOpcode(op, true, true)
		pf.AtomicETH = bth.AtomicETHFields{VA: w.wr.RemoteAddr, RKey: w.wr.RKey, SwapAdd: w.compareAdd}
		if op == WRCompareSwap {
			pf.AtomicETH.SwapAdd, pf.AtomicETH.Compare = w.swap, w.compareAdd
		}
		last = true
		q.srAtomicSent(psn)
	case op.isExt():
		payload = e.extRequest(w, &bf)
		last = true
		q.srAtomicSent(psn)
	default:
		first := off == 0
		rem := w.length - off
		last = rem <= mtu
		payload = min(rem, mtu)
		bf.Opcode = nextOpcode(op, first, last)
		if op.isWrite() {
			if first {
				pf.RETH = bth.RETHFields{VA: w.wr.RemoteAddr, RKey: w.wr.RKey, DMALen: w.length}
			}
			if q.selective() {
				bf.Placeable = q.srPlaceable()
				place = !first
				bf.Placed = place
			}
		}
		if last && op.hasImm() {
			pf.ImmDt = w.imm
		}
		if last && op == WRSendWithInv {
			pf.IETH = w.imm
		}
		bf.SE = last && w.wr.Flags&FlagSolicited != 0
	}
	// rxe sets AckReq on the last packet of a message and on every
	// RXE_MAX_PKT_PER_ACK-th packet within one; a packet that fills the
	// congestion window asks too (ccWindowFull).
	if resend {
		bf.AckReq = true
	} else {
		q.req.noackPkts++
		bf.AckReq = last || int(q.req.noackPkts) > q.pktPerAck() || e.ccAckDue(q) || e.ccWindowFull(q)
		if bf.AckReq {
			q.req.noackPkts = 0
		}
	}
	if bf.AckReq && !q.ccNone && q.cc().paced {
		// Only ccAckDue reads it, for a paced QP; an unpaced one
		// leaves the line it lies in alone.
		q.cc().ackReqAt = e.now
	}
	n := int(payload)
	if place {
		n += bth.SRPlaceLen
	}
	lp, dst := e.newPacket(q, &bf, n, false)
	if lp == nil {
		if !resend {
			q.req.noackPkts--
		}
		return nil, 0, false, false
	}
	if place {
		bth.SRPlace(dst).Encode(&bth.SRPlaceFields{
			RETH:   bth.RETHFields{VA: w.wr.RemoteAddr, RKey: w.wr.RKey, DMALen: w.length},
			Offset: off,
		})
		dst = dst[bth.SRPlaceLen:]
	}
	if payload > 0 {
		gather(dst, w, off)
	}
	if resend {
		e.ccSent(q, lp.Len+ipUDPLen, psn, true)
	}
	return lp, payload, last, bf.AckReq
}

// buildOnly is buildRequest for a SEND or WRITE without immediate data
// whose whole message fits one packet, without selective repeat: a
// SEND_ONLY or RDMA_WRITE_ONLY, which is the last packet of its message
// and so asks for an ACK (rxe sets AckReq on every message's last
// packet), with the solicited event bit of its WR.
func (e *Engine) buildOnly(q *QP, w *sendWQE, psn bth.PSN) *link.Packet {
	bf := bth.BTHFields{Opcode: bth.RCSendOnly, PSN: psn, AckReq: true, SE: w.wr.Flags&FlagSolicited != 0}
	if w.wr.Opcode == WRWrite {
		bf.Opcode = bth.RCWriteOnly
		e.pf.RETH = bth.RETHFields{VA: w.wr.RemoteAddr, RKey: w.wr.RKey, DMALen: w.length}
	}
	if !q.ccNone && q.cc().paced {
		q.cc().ackReqAt = e.now // as buildRequest does for an AckReq
	}
	lp, dst := e.newPacket(q, &bf, int(w.length), false)
	if lp == nil {
		return nil
	}
	q.req.noackPkts = 0
	if w.length > 0 {
		if len(w.sge) == 1 && w.wr.Flags&FlagInline == 0 && w.mrs[0] != nil {
			// gather's common WR, written out: gather is too
			// large to inline.
			src, _ := w.mrs[0].slice(w.sge[0].Addr, uint64(w.sge[0].Length))
			copy(dst, src)
		} else {
			gather(dst, w, 0)
		}
	}
	return lp
}

// gather copies the WQE's data from byte off on into dst.
func gather(dst []byte, w *sendWQE, off uint32) {
	if w.wr.Flags&FlagInline != 0 {
		copy(dst, w.inline[off:])
		return
	}
	if len(w.sge) == 1 && w.mrs[0] != nil {
		// The common WR, one SGE: copySGL's walk without the loop.
		g := &w.sge[0]
		src, _ := w.mrs[0].slice(g.Addr+uint64(off), uint64(g.Length-off))
		copy(dst, src)
		return
	}
	copySGL(w.sge, w.mrs, off, dst, false)
}

// retry rewinds the send queue for go-back-N from comp.psn (rxe's
// req_retry): the oldest WQE resumes at the first unacknowledged packet,
// later ones start again with the same PSNs.
func (q *QP) retry() {
	q.req.needRetry = false
	q.rto.timing = false // Karn's rule: a request sent twice gives no sample
	q.req.psn = q.comp.psn
	q.req.noackPkts = 0
	// The WQE the requester is in the middle of (paced, or stopped by
	// the PSN window) rewinds too: its offset is past comp.psn.
	stop := q.sq.next
	if stop != q.sq.tail && q.sq.at(stop).state == wqeProcessing {
		stop++
	}
	q.sq.next = q.sq.head
	for i := q.sq.head; i != stop; i++ {
		w := q.sq.at(i)
		if w.state == wqePosted {
			break
		}
		if w.state == wqeDone {
			continue // a local operation runs once
		}
		if i == q.sq.head {
			if d := q.comp.psn.Diff(w.firstPSN); d > 0 && !q.comp.psn.After(w.lastPSN) {
				w.state = wqeProcessing
				w.offset = uint32(d) * uint32(q.mtu)
				continue
			}
		}
		w.state = wqePosted
	}
}
