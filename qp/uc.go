package qp

import (
	"fmt"

	"github.com/uroce/uroce/bth"
)

// UC is the unreliable connected service (IBA 9.8.2): SEND and RDMA WRITE,
// with or without immediate data, over a connection like RC's, but with no
// ACKs, no retransmission and no READ or atomics. The requester completes a
// WR once its last packet is sent; the responder drops a message that lost
// a packet, whole, and starts again at the next FIRST or ONLY packet.

// opUCDrop is the responder's opcode while it drops the rest of a message
// (rxe's drop_msg): only a FIRST or ONLY packet ends it. Like opNone it is
// no opcode of the table.
const opUCDrop = bth.Opcode(0xfe)

// ucOpcode is the UC opcode of a request that RC sends as op: the same
// operation in the UC block (IBA Table 35).
func ucOpcode(op bth.Opcode) bth.Opcode { return op | 0x20 }

// service returns the transport service of the packets a QP of type t
// accepts.
func (t QPType) service() bth.Service {
	switch t {
	case QPTypeUC:
		return bth.ServiceUC
	case QPTypeUD, QPTypeGSI:
		return bth.ServiceUD
	}
	return bth.ServiceRC
}

// connected reports whether a QP of type t has one peer, set by its
// address vector: RC and UC.
func (t QPType) connected() bool { return t == 0 || t == QPTypeRC || t == QPTypeUC }

// ucTransitions are a UC QP's transitions (IBA 11.2.4.2 Table 91;
// rdma-core's qp_state_table for IBV_QPT_UC): RC's path and PSNs, without
// the ACK timeout, retry counts, RNR timer and READ/atomic credits, which
// a service with no ACKs and no READ has no use for.
var ucTransitions = map[[2]QPState]transition{
	{StateReset, StateInit}: {req: AttrPKeyIndex | AttrPort | AttrAccessFlags},
	{StateInit, StateInit}:  {opt: AttrPKeyIndex | AttrPort | AttrAccessFlags},
	{StateInit, StateRTR}: {
		req: AttrAV | AttrPathMTU | AttrDestQPN | AttrRQPSN,
		opt: AttrPKeyIndex | AttrAccessFlags,
	},
	{StateRTR, StateRTS}: {req: AttrSQPSN, opt: AttrAccessFlags},
	{StateRTS, StateRTS}: {opt: AttrAccessFlags},
	{StateRTS, StateSQD}: {},
	{StateSQD, StateRTS}: {opt: AttrAccessFlags},
	{StateSQD, StateSQD}: {opt: AttrAV | AttrPKeyIndex | AttrAccessFlags},
	{StateSQE, StateRTS}: {opt: AttrAccessFlags},
}

// checkUCWR refuses what a UC QP cannot send: READ and atomics, which
// need a response (rxe's rxe_wr_opcode_info has no UC mask for them, so
// ibv_post_send fails with EINVAL).
func checkUCWR(wr *SendWR) error {
	if wr.Opcode.isReadAtomic() {
		return fmt.Errorf("post send: %w: %s on a UC QP", ErrBadWR, wr.Opcode)
	}
	return nil
}

// runUCRequester sends q's messages, at most budget packets, and
// completes each WQE once its last packet is built: UC has no ACKs and no
// retransmission (IBA 9.8.2; rxe's requester completes a UC WQE at once).
// It reports whether it stopped with work left.
func (e *Engine) runUCRequester(q *QP, budget int) bool {
	for q.sq.next != q.sq.tail {
		w := q.sq.at(q.sq.next)
		if w.state == wqePosted {
			// IBA 10.3.1: in SQD no new WQE starts.
			if q.state == StateSQD {
				return false
			}
			if !w.validated {
				if st := e.validateSendWQE(q, w); st != WCSuccess {
					q.fail(w, st)
					return false
				}
				w.validated = true
			}
			w.firstPSN = q.req.psn
			w.offset = 0
			w.state = wqeProcessing
		}
		for w.state == wqeProcessing {
			if budget == 0 {
				return true
			}
			if e.ccPaceHold(q, w.nextPayload(int(q.mtu))+reqHeaderEstimate) {
				return false // the pacer's timer schedules us
			}
			if !e.sendUCPacket(q, w) {
				return true // no buffer: try again next turn
			}
			budget--
		}
		q.completeSend(w)
	}
	return false
}

// sendUCPacket builds the next packet of a UC SEND or WRITE: RC's packet
// with the UC opcode and AckReq clear, as rxe sends it (IBA 9.8.2: a UC
// responder never acknowledges). It reports false when no buffer was free.
func (e *Engine) sendUCPacket(q *QP, w *sendWQE) bool {
	mtu := uint32(q.mtu)
	op := w.wr.Opcode
	first := w.offset == 0
	rem := w.length - w.offset
	last := rem <= mtu
	payload := min(rem, mtu)
	bf := bth.BTHFields{PSN: q.req.psn, Opcode: ucOpcode(nextOpcode(op, first, last)),
		SE: last && w.wr.Flags&FlagSolicited != 0}
	if first && op.isWrite() {
		e.pf.RETH = bth.RETHFields{VA: w.wr.RemoteAddr, RKey: w.wr.RKey, DMALen: w.length}
	}
	if last && op.hasImm() {
		e.pf.ImmDt = w.imm
	}
	lp, dst := e.newPacket(q, &bf, int(payload), false)
	if lp == nil {
		return false
	}
	if payload > 0 {
		gather(dst, w, w.offset)
	}
	if q.cc().paced {
		q.cc().pacer.Take(e.now, lp.Len+ipUDPLen)
	}
	q.req.psn = q.req.psn.Next()
	q.req.highPSN = q.req.psn
	w.offset += payload
	if last {
		w.lastPSN = q.req.psn.Add(-1)
		w.state = wqePending
	}
	return true
}

// respondUC processes one UC request packet (rxe's responder for
// IB_QPT_UC). A packet out of sequence, by PSN or by opcode, ends the
// message in progress, which is dropped whole; a FIRST or ONLY packet then
// starts the next one (IBA 9.8.2: the responder resynchronizes on a
// new message; rxe's check_psn and check_op_seq). Errors that RC answers
// with a NAK drop the message silently (class D, rxe's drop_msg). No
// packet is ever acknowledged.
func (e *Engine) respondUC(q *QP, p *bth.Packet) {
	r := &q.resp
	psn := p.BTH().PSN()
	op := p.Opcode()
	info := p.Info()
	if psn != r.psn || !ucOpSeqOK(r.opcode, op) {
		q.abandonUC()
		if info.Mask&bth.First == 0 {
			q.ctr.Dropped++
			return
		}
		r.opcode = opNone
	}
	if info.Mask&bth.Write != 0 && q.access&AccessRemoteWrite == 0 {
		q.dropUC()
		return
	}
	if info.Mask&bth.ConsumesRecv != 0 && !r.haveWQE {
		// No receive WQE: class D, the message is dropped (rxe's
		// RESPST_ERR_RNR for UC).
		if !q.takeRecv() {
			q.dropUC()
			return
		}
		r.haveWQE = true
		r.offset = 0
	}
	// The checks and execution are RC's; what RC NAKs as a class C
	// error (classC sets the status) drops the message here.
	state := e.checkLength(q, p, info)
	if state == respCheckRKey {
		state = e.checkRKey(q, p, info)
	}
	if state == respExecute {
		state = e.execute(q, p, info, psn)
	}
	switch st := r.status; {
	case st == WCLocProtErr:
		// A bad local key in the receive WQE: class A, the WQE
		// completes in error and the QP goes to ERR, as for RC
		// (rxe's RESPST_ERR_MALFORMED_WQE).
		r.haveWQE = false
		q.completeRecv(st, WCRecv, 0, 0, 0)
		q.toError()
		return
	case st != WCSuccess:
		r.status = WCSuccess
		q.dropUC()
		return
	}
	if state == respComplete && r.haveWQE {
		r.haveWQE = false
		wc, imm, flags := WCRecv, uint32(0), WCFlags(0)
		if info.Mask&bth.HasImmDt != 0 {
			imm, flags = p.ImmDt().Imm(), WCWithImm
		}
		n := r.offset
		if info.Mask&bth.Write != 0 {
			wc, n = WCRecvRDMAWithImm, r.length
		}
		q.completeRecv(WCSuccess, wc, n, imm, flags)
	}
}

// ucOpSeqOK checks a UC request's opcode against the message in progress
// (rxe's check_op_seq for UC): a message continues with its MIDDLE or
// LAST packets; between messages only a FIRST or ONLY packet may come.
func ucOpSeqOK(prev, op bth.Opcode) bool {
	switch prev {
	case bth.UCSendFirst, bth.UCSendMiddle:
		return op == bth.UCSendMiddle || op == bth.UCSendLast || op == bth.UCSendLastImm
	case bth.UCWriteFirst, bth.UCWriteMiddle:
		return op == bth.UCWriteMiddle || op == bth.UCWriteLast || op == bth.UCWriteLastImm
	case opUCDrop:
		return false
	}
	return op.Has(bth.First)
}

// abandonUC ends the message in progress without completing it: the rest
// of it is dropped, and a receive WQE it was filling takes the next
// message from its start (rxe's class D1 handling resets the WQE; IBA
// 9.8.2 leaves what was written undefined).
func (q *QP) abandonUC() {
	r := &q.resp
	r.offset = 0
	r.mr = nil
	r.opcode = opUCDrop
}

// dropUC drops the packet and the rest of its message.
func (q *QP) dropUC() {
	q.ctr.Dropped++
	q.abandonUC()
}

// checkTypeWR checks a send WR against what a QP of type t other than RC
// can send.
func checkTypeWR(t QPType, wr *SendWR) error {
	if t == QPTypeUC {
		return checkUCWR(wr)
	}
	return checkUDWR(wr)
}
