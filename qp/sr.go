package qp

import (
	"math/bits"

	"github.com/uroce/uroce/bth"
)

// Selective repeat (RetransSelective), between uroce peers only. Go-back-N
// makes one lost packet cost the whole flight behind it: the responder
// drops everything after a gap until the missing PSN comes (IBA 9.7.5.2.2)
// and the requester sends it all again. Under selective repeat, as IRN
// (SIGCOMM 2018) proposes:
//
//   - the responder places an RDMA WRITE packet that arrives ahead of a
//     gap, since each carries where it lands (bth's placement header and
//     Placeable bit), and keeps a bitmap of what it placed. When the gap
//     fills it moves its expected PSN past everything placed, counting
//     the messages that ended there, so completions and the MSN stay in
//     order. A SEND, a WRITE with immediate data (both take a receive WQE
//     in order), a READ, an atomic, or a WRITE the requester did not mark
//     Placeable is dropped ahead of a gap, as before, and sent again;
//   - instead of a sequence NAK it answers with a selective ACK: the
//     cumulative ACK and a bitmap of the PSNs it holds beyond the gap;
//   - the requester resends a packet once the peer holds srDupThresh
//     later ones (FACK: reordering by fewer costs nothing), and on a
//     timeout resends the first missing packet and probes with the last,
//     whose answer shows what else is missing. A retry is charged as
//     under go-back-N: once per IBA timeout without progress.
//
// A gap in a READ response or a lost READ or atomic request still goes
// back N, which the responder answers as it always has.

// srDupThresh is how many PSNs after a missing one the peer must hold
// before it is taken as lost, as TCP's three duplicate ACKs (RFC 5681,
// RFC 6675's DupThresh): a packet overtaken by fewer is only reordered.
const srDupThresh = 3

// srPktPerAck is how often a selective-repeat requester asks for an ACK
// within a message, where rxe asks every RXE_MAX_PKT_PER_ACK (64): an ACK
// the network delays behind a few later ones then still comes well before
// the 128 packets in flight run out, rather than after the ACK timer.
const srPktPerAck = 16

// pktPerAck is how many packets of a message go out between AckReqs.
func (q *QP) pktPerAck() int {
	if q.selective() {
		return srPktPerAck
	}
	return maxPktPerAck
}

// psnBits is a bitmap over SACKWindow consecutive PSNs, indexed by the
// PSN modulo the window: the PSNs it covers lie in a window that slides
// forward, and bits are cleared as the window's start passes them.
type psnBits [bth.SACKWindow / 64]uint64

func (b *psnBits) has(p bth.PSN) bool {
	i := uint32(p) % bth.SACKWindow
	return b[i/64]&(1<<(i%64)) != 0
}

func (b *psnBits) set(p bth.PSN) {
	i := uint32(p) % bth.SACKWindow
	b[i/64] |= 1 << (i % 64)
}

// clear clears p's bit and reports whether it was set.
func (b *psnBits) clear(p bth.PSN) bool {
	i := uint32(p) % bth.SACKWindow
	was := b[i/64]&(1<<(i%64)) != 0
	b[i/64] &^= 1 << (i % 64)
	return was
}

// srState is a selective-repeat QP's state on both sides.
type srState struct {
	// The responder's: the PSNs after the expected one that were placed
	// ahead of it, and which of them end a message.
	rcv, last psnBits
	rcvN      int
	rbase     bth.PSN // PSNs before it have no bit set in rcv or last
	// The requester's: the PSNs the peer reported holding (sackedN of
	// them), and those resent since the last timeout.
	sacked, resent psnBits
	sackedN        int
	sbase          bth.PSN // PSNs before it have no bit in sacked or resent
	// xmit is the order in which each PSN last went out, by the count
	// xmitN of request packets sent, and maxHeld the latest of them
	// among the PSNs the peer reported: a resent packet that later ones
	// overtook was lost again (RACK, RFC 8985, in transmission order
	// rather than time).
	xmit           [bth.SACKWindow]uint32
	xmitN, maxHeld uint32
	// high is one past the highest PSN the peer reported holding.
	high     bth.PSN
	haveHigh bool
	// READ response packets placed ahead of comp.psn (rdHeldN of them,
	// the highest one before rdHigh), and how far the gaps before them
	// were asked for again (rdAsked).
	rdHeld          psnBits
	rdHeldN         int
	rdHigh, rdAsked bth.PSN
	// A loss recovery is under way until comp.psn reaches recoverEnd:
	// congestion control hears of one loss per recovery, as TCP's
	// (RFC 6675 5).
	recovering bool
	recoverEnd bth.PSN
}

// selective reports whether q does selective repeat.
func (q *QP) selective() bool { return q.retransFlags&RetransSelective != 0 }

// srModified keeps the selective-repeat state in step with Modify: it is
// allocated when the QP asks for it, and its windows start at the PSNs
// the QP starts from.
func (q *QP) srModified(mask AttrMask) {
	if !q.selective() || q.typ != QPTypeRC {
		// An RC QP has sr exactly when it does selective repeat, so
		// the hot paths ask q.selective(), whose line they read
		// anyway, rather than load sr from the QP's last line.
		q.sr = nil
		return
	}
	if q.sr == nil {
		q.sr = &srState{rbase: q.resp.psn, sbase: q.comp.psn}
	}
	if mask&AttrRQPSN != 0 {
		q.sr.rcv, q.sr.last, q.sr.rcvN, q.sr.rbase = psnBits{}, psnBits{}, 0, q.resp.psn
	}
	if mask&AttrSQPSN != 0 {
		q.sr.sacked, q.sr.resent, q.sr.sackedN, q.sr.sbase = psnBits{}, psnBits{}, 0, q.comp.psn
		q.sr.rdHeld, q.sr.rdHeldN, q.sr.rdHigh, q.sr.rdAsked = psnBits{}, 0, q.comp.psn, q.comp.psn
		q.sr.haveHigh, q.sr.recovering = false, false
	}
}

// srPlacement takes the placement header off the front of a WRITE MIDDLE
// or LAST packet's payload. For a packet in sequence it sets the WRITE in
// progress from it, as a FIRST's RETH does, so that the packet is checked
// as one starting at its own place: after placed packets were skipped the
// responder's own record of the message is stale. It reports false for a
// packet too short to carry the header, which is dropped. A packet whose
// Placed bit disagrees with the QP (one end does selective repeat, the
// other not) is an invalid request, which ends the QP (class C) rather
// than taking data for an address or an address for data.
func (e *Engine) srPlacement(q *QP, p *bth.Packet) (bth.SRPlace, bool) {
	if p.BTH().Placed() != q.selective() {
		if p.BTH().PSN() == q.resp.psn {
			q.ctr.ErrNAKsSent++
			e.sendAck(q, bth.NAK(bth.NAKInvalidRequest), q.resp.psn)
			q.toError()
		}
		return nil, false
	}
	b := p.CutFront(bth.SRPlaceLen)
	if b == nil {
		return nil, false
	}
	pl := bth.SRPlace(b)
	r := &q.resp
	if p.BTH().PSN() != r.psn {
		return pl, true
	}
	reth := pl.RETH()
	va, rkey, length, off := reth.VA(), reth.RKey(), reth.DMALen(), pl.Offset()
	if off > length {
		// Caught by the length checks: the packet's data cannot fit.
		off = length
	}
	// The region found for the message's earlier packets still holds if
	// the packet continues them where they ended.
	if !(r.mr != nil && r.rkey == rkey && r.va == va+uint64(off) && r.opcode != opNone) {
		r.mr = nil
	}
	r.va, r.rkey, r.resid, r.length = va+uint64(off), rkey, length-off, length
	return pl, true
}

// srAhead handles a request that arrived ahead of the expected PSN: a
// WRITE packet that may be placed is, the rest are dropped (where
// go-back-N sends a sequence NAK). The requester hears what the responder
// holds in a selective ACK at the end of the burst, when one is due
// (srLossShown).
func (e *Engine) srAhead(q *QP, p *bth.Packet, info *bth.OpcodeInfo, psn bth.PSN, pl bth.SRPlace) {
	r, s := &q.resp, q.sr
	if psn.Diff(r.psn) > bth.SACKWindow {
		// Beyond what the requester may have in flight.
		q.ctr.Dropped++
		return
	}
	switch {
	case s.rcv.has(psn):
		// Resent while held: the requester must hear that it is.
		q.ctr.DupRequests++
	case e.srPlace(q, p, info, pl):
		s.rcv.set(psn)
		if info.Mask&bth.Last != 0 {
			s.last.set(psn)
		}
		s.rcvN++
		q.ctr.PlacedAhead++
		if !p.BTH().AckReq() && !q.srLossShown(psn) {
			return
		}
	case !r.sentPSNNAK:
		// A request that cannot be placed ahead is dropped, and the
		// requester goes back N from the gap, as without selective
		// repeat: a sequence NAK, once per gap (IBA 9.7.5.2.2).
		r.sentPSNNAK = true
		q.ctr.SeqNAKsSent++
		e.sendAck(q, bth.NAK(bth.NAKPSNSequenceError), r.psn)
		return
	default:
		q.ctr.Dropped++
		return
	}
	e.ackBurst(q, r.psn.Add(-1), false)
}

// srLossShown reports whether psn, just placed, is the srDupThresh-th PSN
// held in a row after a missing one: the first moment the requester can
// take that one as lost. A packet placed ahead of a gap is otherwise
// answered only if it asked for an ACK (every srPktPerAck packets and the
// last of each message), as IBA 9.7.5.1.2 lets one ACK cover many
// requests. One selective ACK per packet ahead of a gap, as a TCP
// receiver's duplicate ACKs, cost each side a system call per packet or
// two on a lossy link (4.5 selective ACKs per packet dropped over veth at
// 5 % loss), where the requester needs one per loss and the ACK cadence.
func (q *QP) srLossShown(psn bth.PSN) bool {
	r, s := &q.resp, q.sr
	for k := 1; k < srDupThresh; k++ {
		if p := psn.Add(-k); !p.After(r.psn) || !s.rcv.has(p) {
			return false
		}
	}
	m := psn.Add(-srDupThresh)
	return m == r.psn || m.After(r.psn) && !s.rcv.has(m)
}

// srPlace writes a WRITE packet that arrived ahead of the expected PSN into
// its region, with the checks the packet would meet in sequence (rxe's
// check_length and check_rkey). It reports false when the packet may not
// be placed or fails a check: it is then dropped, and when it comes again
// in sequence it meets those checks and their NAK.
func (e *Engine) srPlace(q *QP, p *bth.Packet, info *bth.OpcodeInfo, pl bth.SRPlace) bool {
	if info.Mask&bth.Write == 0 || info.Mask&bth.ConsumesRecv != 0 || !p.BTH().Placeable() ||
		q.access&AccessRemoteWrite == 0 {
		return false
	}
	var reth bth.RETH
	var off uint32
	if info.Mask&bth.HasRETH != 0 {
		reth = p.RETH()
	} else {
		reth, off = pl.RETH(), pl.Offset()
	}
	va, length := reth.VA(), reth.DMALen()
	if length > 1<<31 || off > length {
		return false
	}
	data, mtu, rem := p.Payload(), uint32(q.mtu), length-off
	if info.Mask&bth.Last != 0 {
		if uint32(len(data)) != rem || rem > mtu || p.PadCnt() != int(-rem&3) {
			return false
		}
	} else if uint32(len(data)) != mtu || rem <= mtu || p.PadCnt() != 0 {
		return false
	}
	if length == 0 {
		return true // C9-88: no address or key to check
	}
	mr := e.MRs.LookupRemote(reth.RKey(), q.pd, q.qpn, AccessRemoteWrite)
	if mr == nil {
		return false
	}
	if _, ok := mr.slice(va, uint64(length)); !ok {
		return false
	}
	dst, _ := mr.slice(va+uint64(off), uint64(len(data)))
	copy(dst, data)
	return true
}

// srCatchUp moves the expected PSN past the packets placed ahead of it,
// once the request at the gap has executed: each completes as if it had
// just arrived, and the ACK that follows covers them.
func (e *Engine) srCatchUp(q *QP) {
	r, s := &q.resp, q.sr
	if s.rcvN == 0 {
		s.rbase = r.psn
		return
	}
	// A READ moves the expected PSN past its response's PSNs at once:
	// no packet may have been placed there, but a bit a hostile peer set
	// must not survive to stand for a later PSN.
	if n := r.psn.Diff(s.rbase); n > 0 {
		for p := s.rbase; p != r.psn && n > 0; p, n = p.Next(), n-1 {
			s.last.clear(p)
			if s.rcv.clear(p) {
				s.rcvN--
			}
		}
	}
	moved := false
	for s.rcvN > 0 && s.rcv.clear(r.psn) {
		s.rcvN--
		r.opcode = bth.RCWriteMiddle
		if s.last.clear(r.psn) {
			r.msn++
			r.opcode = opNone
		}
		r.psn = r.psn.Next()
		moved = true
	}
	s.rbase = r.psn
	if moved {
		r.ackPSN = r.psn
		e.ackBurst(q, r.psn.Add(-1), false)
	}
}

// srSACK fills b with the PSNs held beyond the expected one, for a
// selective ACK that acknowledges PSN acked; it reports false when there
// are none, and a plain ACK will do. Bit k stands for PSN acked+2+k
// (bth.SACK). The ACK's PSN is the one its AckReq request left
// (ackBurst), and packets of the same burst executed after it may have
// moved the expected PSN on: the bitmap must count from the ACK's PSN,
// or the requester takes each held PSN for one lower and never resends
// that one until a timeout.
func (q *QP) srSACK(b bth.SACK, acked bth.PSN) bool {
	s := q.sr
	if s == nil || s.rcvN == 0 {
		return false
	}
	clear(b)
	// Bit i of rcv is every PSN ≡ i modulo the window; the one held is
	// the one after the expected PSN, which is after acked+1.
	next, from := q.resp.psn.Next(), acked.Add(2)
	for w, word := range s.rcv {
		for word != 0 {
			i := uint32(w*64 + bits.TrailingZeros64(word))
			word &= word - 1
			p := next.Add(int((i - uint32(next)) % bth.SACKWindow))
			if k := p.Diff(from); k >= 0 && k < bth.SACKWindow {
				b.Set(k)
			}
		}
	}
	return true
}

// completeSACK takes a selective ACK: its cumulative part as an ACK, then
// its bitmap.
func (e *Engine) completeSACK(q *QP, p *bth.Packet) {
	if q.sr == nil || p.PayloadLen() != bth.SACKLen || p.AETH().Syndrome().Kind() != bth.KindACK {
		q.ctr.Dropped++
		return
	}
	q.ctr.SACKsRcvd++
	psn := p.BTH().PSN()
	if !psn.Before(q.comp.psn) {
		e.completeOp(q, p, bth.RCAcknowledge)
		if !q.state.sends() {
			return
		}
	}
	e.srSACKed(q, psn.Next(), bth.SACK(p.Payload()))
}

// srSync clears the requester's bits of the PSNs comp.psn has passed.
func (q *QP) srSync() {
	s := q.sr
	n := q.comp.psn.Diff(s.sbase)
	if n <= 0 {
		return
	}
	if n >= bth.SACKWindow {
		s.sacked, s.resent, s.sackedN = psnBits{}, psnBits{}, 0
		s.rdHeld, s.rdHeldN = psnBits{}, 0
	} else {
		for p := s.sbase; p != q.comp.psn; p = p.Next() {
			if s.sacked.clear(p) {
				s.sackedN--
			}
			if s.rdHeld.clear(p) {
				s.rdHeldN--
			}
			s.resent.clear(p)
		}
	}
	s.sbase = q.comp.psn
	if s.recovering && !q.comp.psn.Before(s.recoverEnd) {
		s.recovering = false
	}
	if s.haveHigh && !s.high.After(q.comp.psn) {
		s.haveHigh = false
	}
}

// srSACKed records what a selective ACK says the peer holds from PSN
// first+1 on, first being the PSN it still misses, and resends what it
// shows lost.
func (e *Engine) srSACKed(q *QP, first bth.PSN, b bth.SACK) {
	s := q.sr
	q.srSync()
	n := s.sackedN
	for j, c := range b {
		for c != 0 {
			k := j*8 + bits.LeadingZeros8(c)
			c &^= 0x80 >> (k & 7)
			p := first.Add(k + 1)
			if p.Before(q.comp.psn) || !p.Before(q.req.psn) || s.sacked.has(p) {
				continue
			}
			s.sacked.set(p)
			s.sackedN++
			if x := s.xmit[uint32(p)%bth.SACKWindow]; int32(x-s.maxHeld) > 0 {
				s.maxHeld = x
			}
			if !s.haveHigh || !p.Before(s.high) {
				s.high, s.haveHigh = p.Next(), true
			}
		}
	}
	if s.sackedN == n || !s.haveHigh {
		return
	}
	e.schedule(q) // the flight shrank
	if r := &q.rto; r.timing && !r.timedPSN.Before(q.comp.psn) && s.sacked.has(r.timedPSN) {
		// The peer holds the request being timed: its round trip
		// is over, whatever is missing before it.
		q.rtoSample()
	}
	// A PSN is lost when the peer holds srDupThresh after it, or, once
	// resent, when it holds srDupThresh packets sent after the resend.
	lim := s.high.Diff(q.comp.psn)
	for d := 0; d < lim-srDupThresh; d++ {
		p := q.comp.psn.Add(d)
		if s.sacked.has(p) {
			continue
		}
		if s.resent.has(p) && int32(s.maxHeld-s.xmit[uint32(p)%bth.SACKWindow]) <= srDupThresh {
			continue
		}
		if !e.srResend(q, p, false) {
			return
		}
	}
}

// srSent notes that the request packet with PSN psn went out.
func (s *srState) srSent(psn bth.PSN) {
	s.xmitN++
	s.xmit[uint32(psn)%bth.SACKWindow] = s.xmitN
}

// srRoom reports whether a selective-repeat requester whose PSNs reach
// rxe's 128 past the oldest unacknowledged one may send more: while at
// most that many are in flight, neither acknowledged nor held by the
// peer, and the peer's bitmap reaches the next PSN.
func (q *QP) srRoom() bool {
	if q.sr == nil {
		return false
	}
	q.srSync()
	span := q.req.psn.Diff(q.comp.psn)
	return span < bth.SACKWindow && span-q.sr.sackedN < maxUnackedPSNs
}

// srTimeout is selective repeat's answer to the ACK timer: the first
// unanswered packet again, and the newest one the peer has not reported,
// whose answer shows the rest that is missing. Every packet may then be
// resent once more.
func (e *Engine) srTimeout(q *QP) {
	s := q.sr
	q.srSync()
	s.resent, s.rdAsked = psnBits{}, q.comp.psn
	if !q.req.psn.After(q.comp.psn) {
		return
	}
	if e.srResend(q, q.comp.psn, true) {
		for p := q.req.psn.Add(-1); p.After(q.comp.psn); p = p.Add(-1) {
			if !s.sacked.has(p) {
				e.srResend(q, p, true)
				break
			}
		}
	}
	if q.retrans.idx < 0 && q.req.psn.After(q.comp.psn) && !q.req.needRetry {
		// Nothing went out (no buffer): the timer must still run.
		e.armRetrans(q, false, true, q.comp.psn, q.comp.psn)
	}
}

// srWQE returns the WQE sent with PSN psn among those not yet completed,
// or nil.
func (q *QP) srWQE(psn bth.PSN) *sendWQE {
	for i := q.sq.head; i != q.sq.tail; i++ {
		c := q.sq.at(i)
		if c.state == wqePosted || psn.Before(c.firstPSN) {
			return nil
		}
		if !psn.After(c.lastPSN) {
			return c
		}
	}
	return nil
}

// srResend sends the request packet with PSN psn once more. A packet of a
// READ, an atomic or a FLUSH is not resent alone: the QP goes back N, as
// it would without selective repeat (once per gap unless the timer
// asks). It reports false when it went back N or found no buffer, so the
// caller stops resending.
func (e *Engine) srResend(q *QP, psn bth.PSN, timeout bool) bool {
	s := q.sr
	w := q.srWQE(psn)
	if w == nil {
		return true // answered meanwhile, or not sent
	}
	off := uint32(psn.Diff(w.firstPSN)) * uint32(q.mtu)
	var readLen uint32
	switch op := w.wr.Opcode; {
	case op == WRRead:
		// Ask again for the gap alone: up to the next response packet
		// held, or the end.
		end := psn.Next()
		for !end.After(w.lastPSN) && !s.rdHeld.has(end) {
			end = end.Next()
		}
		readLen = min(uint32(end.Diff(psn))*uint32(q.mtu), w.length-off)
		if end.After(s.rdAsked) {
			s.rdAsked = end
		}
	case op.isAtomic() || op.isExt():
		if timeout || !q.comp.startedRetry {
			e.goBackN(q)
		}
		return false
	}
	if lp, _, _, _ := e.buildRequest(q, w, psn, off, readLen, true); lp == nil {
		return false
	}
	s.resent.set(psn)
	s.srSent(psn)
	if q.rto.timing && q.rto.timedPSN == psn {
		q.rto.timing = false // Karn's rule
	}
	q.ctr.Retransmits++
	q.ctr.SelectiveResends++
	if !s.recovering {
		s.recovering, s.recoverEnd = true, q.req.psn
		e.ccLoss(q)
	}
	e.armRetrans(q, true, true, psn, psn)
	return true
}

// srReadAhead places a READ response packet that came ahead of comp.psn,
// after the checks it would meet in sequence, and asks again for the gaps
// before it that it shows lost.
func (e *Engine) srReadAhead(q *QP, w *sendWQE, p *bth.Packet, psn bth.PSN, op bth.Opcode) compState {
	s := q.sr
	q.srSync()
	if op != bth.RCReadResponseMiddle && p.AETH().Syndrome().Kind() != bth.KindACK || !readFits(q, w, p, psn) {
		q.ctr.Dropped++
		return compDone
	}
	if !s.rdHeld.has(psn) {
		scatter(w, uint32(psn.Diff(w.firstPSN))*uint32(q.mtu), p.Payload())
		s.rdHeld.set(psn)
		s.rdHeldN++
		q.ctr.PlacedAhead++
		if !psn.Before(s.rdHigh) {
			s.rdHigh = psn.Next()
		}
	}
	e.srReadGaps(q)
	return compDone
}

// srReadGaps asks again for each gap in the READ responses that
// srDupThresh packets held after it show lost, once per gap until a
// timeout.
func (e *Engine) srReadGaps(q *QP) {
	s := q.sr
	if s.rdAsked.Before(q.comp.psn) {
		s.rdAsked = q.comp.psn
	}
	for p := s.rdAsked; s.rdHigh.Diff(p) > srDupThresh; p = p.Next() {
		if s.rdHeld.has(p) {
			continue
		}
		if w := q.srWQE(p); w == nil || w.wr.Opcode != WRRead {
			continue // a WRITE's PSN is the SACKs' business
		}
		if !e.srResend(q, p, false) {
			return
		}
		p = s.rdAsked.Add(-1) // past the gap asked for
	}
}

// srReadCatchUp moves comp.psn past the READ response packets that came
// ahead of it, now that the ones before them arrived, completing each READ
// whose response that ends, and asks for the next gaps.
func (e *Engine) srReadCatchUp(q *QP) {
	s := q.sr
	for q.sq.head != q.sq.tail {
		w := q.sq.at(q.sq.head)
		if w.state == wqePosted || w.wr.Opcode != WRRead || q.comp.psn.Before(w.firstPSN) ||
			q.comp.psn.After(w.lastPSN) || !s.rdHeld.has(q.comp.psn) {
			break
		}
		for !q.comp.psn.After(w.lastPSN) && s.rdHeld.clear(q.comp.psn) {
			s.rdHeldN--
			q.comp.psn = q.comp.psn.Next()
			q.comp.opcode = bth.RCReadResponseMiddle
		}
		if !q.comp.psn.After(w.lastPSN) {
			break
		}
		q.comp.opcode = opNone
		q.completeSend(w)
		q.retireLocal()
	}
	if s.rdHeldN > 0 {
		e.srReadGaps(q)
	}
}

// srReplayRead answers a READ asked again under selective repeat: the
// requester holds the rest of the responses, so the packets asked for go
// out at once, and the responses in progress or owed after it carry on,
// where go-back-N's retry starts them all again (oweResponse). What finds
// no buffer is asked for again.
func (e *Engine) srReplayRead(q *QP, res *resource, psn bth.PSN, va uint64, n uint32) {
	e.flushAck(q)
	var mr *MR
	if n > 0 {
		if mr = e.MRs.LookupRemote(res.rkey, q.pd, q.qpn, AccessRemoteRead); mr == nil {
			return // deregistered since: the requester times out
		}
	}
	first := psn == res.firstPSN
	for sent := 0; sent < bth.SACKWindow; sent++ {
		if !e.sendReadResponse(q, res, mr, psn, va, n, first) {
			return
		}
		size := min(n, uint32(q.mtu))
		first, psn, va, n = false, psn.Next(), va+uint64(size), n-size
		if n == 0 {
			return
		}
	}
}
