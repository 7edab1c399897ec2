package qp

import (
	"encoding/binary"

	"github.com/uroce/uroce/bth"
)

// responder is the receive side's state (rxe's qp->resp).
type responder struct {
	// rdRes first: Process reads it for every QP it runs that owes
	// responses (QP.responding). What a WRITE ONLY packet and its ACK
	// touch follows it, all in one line (see QP); what only a longer
	// WRITE, a SEND, an error or a READ needs comes after.
	//
	// The READ or atomic response being sent (readresp.go).
	rdRes  *resource
	psn    bth.PSN // next request PSN expected (ePSN)
	ackPSN bth.PSN // one past the last SEND/WRITE packet executed
	msn    uint32  // messages completed (IBA 9.7.7.1)
	opcode bth.Opcode
	// sentPSNNAK: a sequence NAK went out; no other until the expected
	// PSN arrives (IBA 9.7.5.1.4, rxe's sent_psn_nak).
	sentPSNNAK bool
	// haveWQE: the receive WQE at rq.head is being filled by a SEND.
	haveWQE bool
	// status is that of the receive WQE in progress; with syndrome, the
	// NAK syndrome, a class C error being reported.
	status WCStatus
	// ackDue is the positive ACK that the requests of the receive burst
	// so far have asked for; it goes out once, at the burst's end (or
	// before anything else the responder sends), and covers them all.
	ackDue pendingAck
	// done counts receive WRs completed successfully (Counters'
	// CompletedRecvs, count16); pkts the requests received and the
	// responses sent.
	done uint16
	pkts pktCounts
	// mr is the region of the RDMA WRITE in progress, or of the last
	// one, which the next reuses when its R_Key is the same
	// (respondWrite).
	mr *MR
	// The rest of the RDMA WRITE in progress, which respondWrite keeps
	// only for a message of more than one packet.
	rkey   uint32
	resid  uint32
	length uint32
	va     uint64
	// offset is where the next SEND packet lands in the receive WQE.
	offset   uint32
	syndrome bth.Syndrome
	// ackOwed is an ACK or NAK waiting behind owed responses.
	ackOwed pendingAck
	// res are the READ/atomic responder resources (max_dest_rd_atomic),
	// recycled oldest first, to answer duplicates (IBA 9.7.5.1.3): they
	// are the whole of the READ and atomic replay state, so a peer that
	// never stops asking meets their number, not the memory's
	// (freeResource).
	res     []resource
	resNext int
	rdPSN   bth.PSN
	rdVA    uint64
	rdN     uint32
	rdFirst bool // the next packet is the response's first: FIRST or ONLY
}

type resKind uint8

const (
	resNone resKind = iota
	resRead
	resAtomic
	resFlush       // flush.go
	resAtomicWrite // flush.go
)

type resource struct {
	kind              resKind
	firstPSN, lastPSN bth.PSN
	va                uint64
	rkey              uint32
	length            uint32
	orig              uint64 // an atomic's result, replayed, never recomputed
	msn               uint32 // the MSN once the request was executed
	owed              bool   // its response is in progress or queued
	sent              bool   // its response went out in full once
}

// set makes res a new resource, neither owed nor sent. Field by field:
// a resource literal is built on the stack in small stores and copied in
// 16-byte loads, which cannot be forwarded from those stores and wait for
// them to reach the cache.
func (res *resource) set(kind resKind, first, last bth.PSN, va uint64, rkey, length uint32, orig uint64, msn uint32) {
	res.kind, res.firstPSN, res.lastPSN, res.va, res.rkey = kind, first, last, va, rkey
	res.length, res.orig, res.msn, res.owed, res.sent = length, orig, msn, false, false
}

// respState is a step of the responder (rxe's enum resp_states), in the
// order rxe checks a request.
type respState uint8

const (
	respCheckPSN respState = iota
	respCheckOpSeq
	respCheckOpValid
	respCheckResource
	respCheckLength
	respCheckRKey
	respExecute
	respComplete
	respAcknowledge
	respDuplicate
	respErrPSNOutOfSeq // class B: NAK sequence error, drop
	respErrRNR         // no receive WQE: RNR NAK, drop
	respErrClassC      // invalid request or access error: NAK, QP to ERR
	respDone
)

// respond processes one request packet (rxe's rxe_responder) that
// respondWrite did not take.
func (e *Engine) respond(q *QP, p *bth.Packet) {
	r := &q.resp
	h := p.BTH()
	psn := h.PSN()
	op := p.Opcode()
	info := p.Info()
	var pl bth.SRPlace
	if info.Mask&(bth.Write|bth.HasRETH) == bth.Write && (q.selective() || h.Placed()) {
		// Selective repeat: a WRITE MIDDLE or LAST leads with where
		// it lands (sr.go).
		var ok bool
		if pl, ok = e.srPlacement(q, p); !ok {
			q.ctr.Dropped++
			return
		}
	}
	// A READ response in progress does not hold up the next request:
	// its answer is queued behind it (readresp.go).
	state := respCheckPSN
	recvDone := false // a receive WQE completed (ackBurst)
	for {
		switch state {
		case respCheckPSN:
			switch d := psn.Compare(r.psn); {
			case d > 0:
				if q.sr != nil {
					e.srAhead(q, p, info, psn, pl)
					return
				}
				if r.sentPSNNAK {
					q.ctr.Dropped++
					return
				}
				r.sentPSNNAK = true
				state = respErrPSNOutOfSeq
			case d < 0:
				state = respDuplicate
			default:
				r.sentPSNNAK = false
				state = respCheckOpSeq
			}

		case respCheckOpSeq:
			state = respCheckOpValid
			if !opSeqOK(r.opcode, op) {
				// Missing FIRST or LAST: IBA 9.9.3.1.2 class C.
				state = e.classC(q, bth.NAKInvalidRequest, WCRemInvReqErr)
			}

		case respCheckOpValid:
			state = respCheckResource
			a := q.access
			switch {
			case info.Mask&bth.Read != 0 && a&AccessRemoteRead == 0,
				info.Mask&bth.Write != 0 && a&AccessRemoteWrite == 0,
				info.Mask&bth.Atomic != 0 && a&AccessRemoteAtomic == 0,
				info.Mask&(bth.Flush|bth.AtomicWrite) != 0 && extRefused(a, p, info):
				// rxe answers a disabled operation with an
				// invalid request NAK (RESPST_ERR_UNSUPPORTED_OPCODE).
				state = e.classC(q, bth.NAKInvalidRequest, WCRemInvReqErr)
			}

		case respCheckResource:
			state = respCheckLength
			if info.Mask&(bth.Read|bth.Atomic|bth.Flush|bth.AtomicWrite) != 0 && !e.freeResource(q) {
				// More READ/atomic requests outstanding than
				// max_dest_rd_atomic: the invalid request NAK,
				// whose causes the IBA's NAK codes list
				// "too many RDMA READ or ATOMIC requests"
				// among (rxe's RESPST_ERR_TOO_MANY_RDMA_ATM_REQ).
				q.ctr.TooManyRdAtomic++
				state = e.classC(q, bth.NAKInvalidRequest, WCRemInvReqErr)
			} else if info.Mask&bth.ConsumesRecv != 0 && !r.haveWQE {
				// An empty receive queue or SRQ: RNR NAK (rxe's
				// RESPST_ERR_RNR, for the SRQ too).
				if !q.takeRecv() {
					state = respErrRNR
					continue
				}
				r.haveWQE = true
				r.offset = 0
			}

		case respCheckLength:
			state = e.checkLength(q, p, info)

		case respCheckRKey:
			state = e.checkRKey(q, p, info)

		case respExecute:
			state = e.execute(q, p, info, psn)

		case respComplete:
			if r.haveWQE {
				r.haveWQE = false
				wc, imm, flags := WCRecv, uint32(0), WCFlags(0)
				if info.Mask&bth.HasImmDt != 0 {
					imm, flags = p.ImmDt().Imm(), WCWithImm
				}
				if info.Mask&bth.HasIETH != 0 && r.status == WCSuccess {
					// The key it invalidated, in ibv_wc's union.
					imm, flags = p.IETH().RKey(), WCWithInv
				}
				n := r.offset
				if info.Mask&bth.Write != 0 {
					wc, n = WCRecvRDMAWithImm, r.length
				}
				q.completeRecv(r.status, wc, n, imm, flags)
				recvDone = true
			}
			state = respAcknowledge
			if r.status != WCSuccess {
				state = respErrClassC
			}

		case respAcknowledge:
			if h.AckReq() {
				// Under selective repeat the PSNs placed ahead of
				// this one may have executed with it (sr.go).
				e.ackBurst(q, r.ackPSN.Add(-1), recvDone)
			}
			return

		case respDuplicate:
			q.ctr.DupRequests++
			e.duplicate(q, p, info, psn)
			return

		case respErrPSNOutOfSeq:
			q.ctr.SeqNAKsSent++
			e.sendAck(q, bth.NAK(bth.NAKPSNSequenceError), r.psn)
			return

		case respErrRNR:
			q.ctr.RNRNAKsSent++
			e.sendAck(q, bth.RNRNAK(q.attr.MinRNRTimer), psn)
			return

		case respErrClassC:
			q.ctr.ErrNAKsSent++
			if r.syndrome == bth.NAK(bth.NAKRemoteAccessError) {
				q.ctr.RemAccessErrs++
			}
			e.sendAck(q, r.syndrome, psn)
			q.toError()
			return

		case respDone:
			return
		}
	}
}

// respondWrite is the responder's path for the common request, which
// receiveOne tries before respond: an RC WRITE without immediate data
// (FIRST, MIDDLE, LAST or ONLY) at the expected PSN on a QP without
// selective repeat. It makes the checks of respond's states in their
// order (PSN, opcode sequence, access, length, R_Key, range, pad) in one
// pass and executes the packet. On any other packet or any failed check
// it changes nothing and reports false, and the state machine takes the
// packet from the start and answers it as IBA requires.
//
// The region of the previous message is kept in r.mr: a new message with
// the same R_Key reuses it when it is still valid (MR.valid, cleared by
// Deregister and by invalidation) and still allows the QP's PD and remote
// write, which is what MRTable.LookupRemote would check; the range is
// checked per message. A window's view is never reused (mw.go).
func (e *Engine) respondWrite(q *QP, p *bth.Packet, h bth.BTH, psn bth.PSN, op bth.Opcode) bool {
	r := &q.resp
	if op-bth.RCWriteFirst > bth.RCWriteOnly-bth.RCWriteFirst || op == bth.RCWriteLastImm ||
		psn != r.psn || q.selective() || h.Placed() || q.access&AccessRemoteWrite == 0 ||
		!writeSeqOK(r.opcode, op) {
		return false
	}
	data := p.Payload()
	n := uint32(len(data))
	mtu := uint32(q.mtu)
	// The rest of a message is read from the responder only for its
	// later packets, and kept only while one follows: a WRITE ONLY
	// touches none of it, nor its line (QP).
	var va uint64
	var resid, rkey, length uint32
	mr := r.mr
	switch op {
	case bth.RCWriteOnly, bth.RCWriteFirst:
		reth := p.RETH()
		rkey, length = reth.RKey(), reth.DMALen()
		// C9-92 and C9-94; a zero-length WRITE (C9-88) takes the
		// general path.
		if op == bth.RCWriteOnly && n > mtu || op == bth.RCWriteFirst && n != mtu ||
			length == 0 || length > 1<<31 {
			return false
		}
		va, resid = reth.VA(), length
		// A window's view is looked up afresh for every message: it
		// may have been invalidated and bound again, under a new key,
		// for another QP (LookupRemote's type 2 check).
		if mr == nil || !mr.valid || mr.win != nil || mr.RKey != rkey || mr.PD != q.pd || mr.Access&AccessRemoteWrite == 0 {
			if mr = e.MRs.LookupRemote(rkey, q.pd, q.qpn, AccessRemoteWrite); mr == nil {
				return false
			}
		}
	case bth.RCWriteMiddle:
		if n != mtu || mr == nil {
			return false
		}
		va, resid, rkey, length = r.va, r.resid, r.rkey, r.length
	default: // LAST
		if n == 0 || n > mtu || mr == nil {
			return false
		}
		va, resid, rkey, length = r.va, r.resid, r.rkey, r.length
	}
	pad := p.PadCnt()
	if resid > mtu {
		if n != mtu || pad != 0 {
			return false
		}
	} else if n != resid || pad != int(-resid&3) {
		return false
	}
	// The range check of rxe's check_rkey, on every packet: the rest of
	// the message must lie in the region.
	dst, ok := mr.slice(va, uint64(resid))
	if !ok {
		return false
	}
	copy(dst, data) // n <= resid, checked above
	r.sentPSNNAK = false
	r.mr = mr
	if resid != n {
		// FIRST or MIDDLE: the message goes on.
		r.va, r.resid, r.rkey, r.length = va+uint64(n), resid-n, rkey, length
	}
	r.psn = psn.Next()
	r.ackPSN = r.psn
	r.opcode = op
	if op == bth.RCWriteOnly || op == bth.RCWriteLast {
		r.msn++
		r.opcode = opNone
	}
	if h.AckReq() {
		if d := &r.ackDue; d.set && r.rdRes == nil && q.ack&ackHeld == 0 {
			// ackBurst for a burst's later WRITE, without the call.
			d.recv, d.syn, d.psn, d.msn = false, bth.ACK(bth.CreditsInvalid), psn, r.msn
		} else {
			e.ackBurst(q, psn, false)
		}
	}
	return true
}

// opSeqOK checks a request's opcode against the last one of the message in
// progress (rxe's check_op_seq).
func opSeqOK(prev, op bth.Opcode) bool {
	switch prev {
	case bth.RCSendFirst, bth.RCSendMiddle:
		switch op {
		case bth.RCSendMiddle, bth.RCSendLast, bth.RCSendLastImm, bth.RCSendLastInvalidate:
			return true
		}
		return false
	case bth.RCWriteFirst, bth.RCWriteMiddle:
		switch op {
		case bth.RCWriteMiddle, bth.RCWriteLast, bth.RCWriteLastImm:
			return true
		}
		return false
	}
	return op.Has(bth.First) || !op.Has(bth.Send) && !op.Has(bth.Write)
}

// writeSeqOK is opSeqOK for op a WRITE opcode without immediate (First,
// Middle, Last or Only), in a few instructions rather than a call: a
// Middle or Last continues a WRITE in progress, a First or Only starts
// one where no message is in progress.
func writeSeqOK(prev, op bth.Opcode) bool {
	inWrite := prev == bth.RCWriteFirst || prev == bth.RCWriteMiddle
	inSend := prev == bth.RCSendFirst || prev == bth.RCSendMiddle
	return !inSend && inWrite == (op == bth.RCWriteMiddle || op == bth.RCWriteLast)
}

// classC records a class C error (IBA 9.9.3.1.2): the request is NAKed with
// code c, the receive WQE in progress completes with st, the QP goes to ERR.
func (e *Engine) classC(q *QP, c bth.NAKCode, st WCStatus) respState {
	q.resp.syndrome = bth.NAK(c)
	q.resp.status = st
	return respComplete
}

// checkLength checks payload sizes against the path MTU (IBA C9-92, rxe's
// check_length) and the DMA length (C9-94).
func (e *Engine) checkLength(q *QP, p *bth.Packet, info *bth.OpcodeInfo) respState {
	mtu := int(q.mtu)
	n := len(p.Payload())
	if info.Mask&bth.HasPayload != 0 {
		first, last := info.Mask&bth.First != 0, info.Mask&bth.Last != 0
		switch {
		case first && last:
			if n > mtu {
				return e.classC(q, bth.NAKInvalidRequest, WCRemInvReqErr)
			}
		case first || info.Mask&bth.Middle != 0:
			if n != mtu {
				return e.classC(q, bth.NAKInvalidRequest, WCRemInvReqErr)
			}
		case last:
			if n == 0 || n > mtu {
				return e.classC(q, bth.NAKInvalidRequest, WCRemInvReqErr)
			}
		}
	}
	if info.Mask&bth.HasRETH != 0 && p.RETH().DMALen() > 1<<31 {
		return e.classC(q, bth.NAKInvalidRequest, WCRemInvReqErr)
	}
	if info.Mask&(bth.Read|bth.Write|bth.Atomic|bth.Flush|bth.AtomicWrite) != 0 {
		return respCheckRKey
	}
	return respExecute
}

// checkRKey resolves the R_Key and checks the range and access of an RDMA
// or atomic request (rxe's check_rkey): a bad key, range or permission is
// a remote access error (class C).
func (e *Engine) checkRKey(q *QP, p *bth.Packet, info *bth.OpcodeInfo) respState {
	r := &q.resp
	var need Access
	switch {
	case info.Mask&(bth.Flush|bth.AtomicWrite) != 0:
		return e.checkRKeyExt(q, p, info)
	case info.Mask&(bth.Read|bth.Write) != 0:
		if info.Mask&bth.HasRETH != 0 {
			reth := p.RETH()
			r.va, r.rkey, r.resid, r.length = reth.VA(), reth.RKey(), reth.DMALen(), reth.DMALen()
			r.mr = nil
		}
		need = AccessRemoteWrite
		if info.Mask&bth.Read != 0 {
			need = AccessRemoteRead
		}
	default:
		a := p.AtomicETH()
		r.va, r.rkey, r.resid, r.length = a.VA(), a.RKey(), 8, 8
		r.mr = nil
		// IBA 9.4.5: the target must be 8-byte aligned; rxe NAKs a
		// misaligned atomic as an invalid request.
		if r.va&7 != 0 {
			return e.classC(q, bth.NAKInvalidRequest, WCRemInvReqErr)
		}
		need = AccessRemoteAtomic
	}
	n := len(p.Payload())
	// A zero-length READ or WRITE need not carry a valid address or key
	// (C9-88).
	if info.Mask&(bth.Read|bth.Write) != 0 && r.length == 0 {
		if n != 0 {
			return e.classC(q, bth.NAKInvalidRequest, WCRemInvReqErr)
		}
		r.mr = nil
		return respExecute
	}
	if r.mr == nil {
		r.mr = e.MRs.LookupRemote(r.rkey, q.pd, q.qpn, need)
		if r.mr == nil {
			return e.classC(q, bth.NAKRemoteAccessError, WCRemAccessErr)
		}
	}
	if _, ok := r.mr.slice(r.va, uint64(r.resid)); !ok {
		return e.classC(q, bth.NAKRemoteAccessError, WCRemAccessErr)
	}
	if info.Mask&bth.Write != 0 {
		pad := p.PadCnt()
		if r.resid > uint32(q.mtu) {
			if n != int(q.mtu) || pad != 0 {
				return e.classC(q, bth.NAKInvalidRequest, WCRemInvReqErr)
			}
		} else if uint32(n) != r.resid || pad != int(-r.resid&3) {
			return e.classC(q, bth.NAKInvalidRequest, WCRemInvReqErr)
		}
	}
	return respExecute
}

// execute carries out a request that passed every check.
func (e *Engine) execute(q *QP, p *bth.Packet, info *bth.OpcodeInfo, psn bth.PSN) respState {
	r := &q.resp
	data := p.Payload()
	switch {
	case info.Mask&bth.Send != 0:
		w := q.recvWQE()
		if uint64(r.offset)+uint64(len(data)) > uint64(w.length) {
			// The message overruns the receive buffers: the
			// receiver sees a local length error, the sender an
			// invalid request (IBA 9.9.3.1.2, rxe's ERR_LENGTH).
			return e.classC(q, bth.NAKInvalidRequest, WCLocLenErr)
		}
		if !e.scatterRecv(q, w, r.offset, data) {
			// A bad local key in the receive WQE: a local error,
			// NAKed as a remote operational error (IBA class E).
			return e.classC(q, bth.NAKRemoteOperationalError, WCLocProtErr)
		}
		r.offset += uint32(len(data))
		if info.Mask&bth.HasIETH != 0 {
			return e.invalidateRecv(q, p, psn)
		}
	case info.Mask&bth.Write != 0:
		if len(data) > 0 {
			dst, _ := r.mr.slice(r.va, uint64(len(data)))
			copy(dst, data)
			r.va += uint64(len(data))
			r.resid -= uint32(len(data))
		}
	case info.Mask&bth.Read != 0:
		// IBA C9-148: the MSN counts a READ when it is accepted.
		r.msn++
		res := r.newResource()
		npkts := 1
		if r.length > 0 {
			npkts = int((uint64(r.length) + uint64(q.mtu) - 1) / uint64(q.mtu))
		}
		res.set(resRead, psn, psn.Add(npkts-1), r.va, r.rkey, r.length, 0, r.msn)
		r.psn = psn.Add(npkts)
		r.opcode = opNone
		e.oweResponse(q, res, psn, r.va, r.length)
		if q.sr != nil {
			e.srCatchUp(q)
		}
		return respDone
	case info.Mask&bth.Atomic != 0:
		dst, _ := r.mr.slice(r.va, 8)
		// Target memory holds host-order values, as verbs atomics
		// see them; only the wire is big-endian.
		orig := binary.NativeEndian.Uint64(dst)
		a := p.AtomicETH()
		if p.Opcode() == bth.RCCompareSwap {
			if orig == a.Compare() {
				binary.NativeEndian.PutUint64(dst, a.SwapAdd())
			}
		} else {
			binary.NativeEndian.PutUint64(dst, orig+a.SwapAdd())
		}
		r.msn++
		res := r.newResource()
		res.set(resAtomic, psn, psn, r.va, r.rkey, 8, orig, r.msn)
		r.psn = psn.Next()
		r.opcode = opNone
		e.oweResponse(q, res, psn, 0, 0)
		if q.sr != nil {
			e.srCatchUp(q)
		}
		return respDone
	case info.Mask&(bth.Flush|bth.AtomicWrite) != 0:
		return e.executeExt(q, p, info, psn)
	}
	r.psn = psn.Next()
	r.ackPSN = r.psn
	r.opcode = p.Opcode()
	if info.Mask&bth.Last != 0 {
		r.msn++
		r.opcode = opNone
	}
	if q.sr != nil {
		e.srCatchUp(q)
	}
	if info.Mask&bth.Completes != 0 {
		return respComplete
	}
	return respAcknowledge
}

// freeResource reports whether a new READ or atomic request has a
// responder resource: the oldest, which newResource recycles, unless its
// response has never gone out in full. A requester may have no more such
// requests outstanding than the responder's max_dest_rd_atomic, and one
// is outstanding until its response arrives, so a peer that reaches an
// unanswered resource asks for more than it may (and recycling it would
// lose the response in progress, or an atomic's result before it was
// ever sent). A resource owed again only for a duplicate was answered
// before: the requester that moved on has that answer, so the replay
// stops and the resource is free.
func (e *Engine) freeResource(q *QP) bool {
	r := &q.resp
	if len(r.res) == 0 {
		return false
	}
	res := &r.res[r.resNext]
	switch {
	case !res.owed:
		return true
	case !res.sent:
		return false
	case r.rdRes == res:
		e.nextResponse(q)
	default:
		res.owed = false
	}
	return true
}

func (r *responder) newResource() *resource {
	res := &r.res[r.resNext]
	r.resNext++
	if r.resNext == len(r.res) {
		r.resNext = 0
	}
	return res
}

// scatterRecv copies SEND data into a receive WQE's buffers at off,
// resolving its keys on first use. It reports false for a bad key.
func (e *Engine) scatterRecv(q *QP, w *recvWQE, off uint32, data []byte) bool {
	if len(w.mrs) == 0 && len(w.sge) > 0 {
		var ok bool
		if w.mrs, ok = e.MRs.resolveSGL(w.mrs, w.sge, q.pd, AccessLocalWrite); !ok {
			return false
		}
	}
	copySGL(w.sge, w.mrs, off, data, true)
	return true
}

// duplicate answers a request whose PSN was already executed (IBA
// 9.7.5.1.3, rxe's duplicate_request): a SEND or WRITE is ACKed again, a
// READ is executed again from the cached request, an atomic is answered
// from the cached result and never executed twice.
func (e *Engine) duplicate(q *QP, p *bth.Packet, info *bth.OpcodeInfo, psn bth.PSN) {
	r := &q.resp
	switch {
	case info.Mask&(bth.Send|bth.Write) != 0:
		// C9-105: ACK again, with the last PSN executed.
		e.sendAck(q, bth.ACK(bth.CreditsInvalid), r.ackPSN.Add(-1))
	case info.Mask&bth.Read != 0:
		res := r.find(psn, resRead)
		if res == nil {
			return // class D: drop
		}
		reth := p.RETH()
		va, n := reth.VA(), reth.DMALen()
		// The retry must ask for the tail of the original request;
		// under selective repeat, for any part of it that starts at
		// the packet its PSN names (sr.go).
		end := va + uint64(n)
		if reth.RKey() != res.rkey || va < res.va || n > res.length || end > res.va+uint64(res.length) ||
			end != res.va+uint64(res.length) && (q.sr == nil || va-res.va != uint64(psn.Diff(res.firstPSN))*uint64(q.mtu)) {
			return
		}
		if q.sr != nil {
			e.srReplayRead(q, res, psn, va, n)
			return
		}
		e.oweResponse(q, res, psn, va, n)
	case info.Mask&bth.Atomic != 0:
		res := r.find(psn, resAtomic)
		if res == nil || res.firstPSN != psn {
			return
		}
		e.oweResponse(q, res, psn, 0, 0)
	case info.Mask&(bth.Flush|bth.AtomicWrite) != 0:
		e.duplicateExt(q, info, psn)
	}
}

func (r *responder) find(psn bth.PSN, kind resKind) *resource {
	for i := range r.res {
		res := &r.res[i]
		if res.kind == kind && !psn.Before(res.firstPSN) && !psn.After(res.lastPSN) {
			return res
		}
	}
	return nil
}

// ackBurst answers a request that asked for an ACK with one ACK at the end
// of the receive burst, for the latest PSN executed by then: IBA 9.7.5.1.2
// lets one ACK acknowledge every request before its PSN (coalescing), and
// a requester, rxe's among them, completes each SEND or WRITE it covers.
// Every request with AckReq is still answered before Receive returns, as
// rxe answers each one; the burst sends one ACK where it sent many. An
// ACK behind owed READ or atomic responses waits in ackOwed as before.
//
// recv says the request handed the application a receive completion: its
// ACK may then be held for a while (holdAck).
func (e *Engine) ackBurst(q *QP, psn bth.PSN, recv bool) {
	r := &q.resp
	if r.rdRes != nil {
		e.sendAck(q, bth.ACK(bth.CreditsInvalid), psn)
		return
	}
	// Field by field, never the whole pendingAck: the previous request
	// of the burst has just stored these fields one by one, and a wider
	// load over several of those stores (as a copy, or a literal built
	// on the stack, makes) cannot be forwarded from them and waits.
	d := &r.ackDue
	set := d.set
	if !set || q.ack&ackHeld != 0 {
		// A held ACK is decided on again at this burst's end.
		q.ack &^= ackHeld
		e.acks = append(e.acks, q)
	}
	// respondWrite makes this store itself for a WRITE after the
	// burst's first request with AckReq.
	d.set, d.recv, d.syn, d.psn, d.msn = true, recv && (!set || d.recv), bth.ACK(bth.CreditsInvalid), psn, r.msn
}

// ackSkip is how many ACKs that could be held a QP sends at once after a
// held one ran out (holdAck): a QP whose application does not answer
// holds one ACK in ackSkip+1, not every one. A QP that sends a request
// meanwhile answers, if late, and holds again.
const ackSkip = 64

// ackFlags are a QP's ACK-holding bits, in its first line.
type ackFlags uint8

const (
	ackDelays ackFlags = 1 << iota // QPConfig.AckDelay is positive
	ackHeld                        // an ACK is held (holdAck)
)

// holdAck decides at a burst's end whether q's due ACK waits for the QP's
// next request instead of going now (QPConfig.AckDelay), and if so arms
// its timer once: the delay counts from the first request it covers. It
// holds only an ACK of requests that each handed the application a
// receive completion, which the application may answer at once; one of an
// RDMA WRITE, which the application is not told about, goes now.
func (e *Engine) holdAck(q *QP) bool {
	a := &q.resp.ackDue
	if !a.recv || q.ack&ackDelays == 0 {
		return false
	}
	if !a.held {
		if q.ackSkip > 0 {
			if q.req.psn == q.ackSkipPSN {
				q.ackSkip--
				return false
			}
			q.ackSkip = 0
		}
		a.held = true
		e.setTimer(&q.ackTimer, e.now.Add(q.cfg.AckDelay))
	}
	q.ack |= ackHeld
	return true
}

// ackTimeout sends a held ACK whose delay ran out: the application did
// not answer in time, so the next ackSkip are not held unless the QP
// sends a request before them.
func (e *Engine) ackTimeout(q *QP) {
	q.ackSkip, q.ackSkipPSN = ackSkip, q.req.psn
	q.ack &^= ackHeld
	q.resp.ackDue.held = false // its timer is the one that fired
	if q.resp.ackDue.set && q.state.receives() {
		e.flushAck(q)
	}
}

// releaseAck sends the ACK the QP owes, held (holdAck) or due at the
// burst's end, before the QP stops answering: moved to ERR or RESET, or
// destroyed. That ACK covers requests already executed and handed to the
// application, which rxe acknowledges as it executes them. Lost with the
// QP, it would leave the peer retransmitting them to a QP that no longer
// answers: forever at a retry count of 7 (rxe's, and rsocket's), as when
// an rsocket closes right after the peer's last message.
func (e *Engine) releaseAck(q *QP) {
	e.flushAck(q)
	e.stopTimer(&q.ackTimer)
	q.ack &^= ackHeld
}

// flushAck sends the QP's coalesced ACK, if one is due: at the end of the
// burst, and before any other ACK, NAK or response of the QP, so that the
// responder's answers keep their PSN order.
func (e *Engine) flushAck(q *QP) {
	if a := q.resp.ackDue; a.set {
		q.resp.ackDue = pendingAck{}
		if a.held {
			// It leaves before its delay ran out: a request takes
			// it, or another answer must follow it in PSN order.
			q.ack &^= ackHeld
			e.stopTimer(&q.ackTimer)
		}
		if r := &q.resp; q.selective() && q.sr != nil && r.rdRes == nil && r.ackPSN == r.psn && a.syn.Kind() == bth.KindACK {
			// Selective repeat: the SENDs and WRITEs the burst
			// executed after the request that asked (gap fillers
			// without AckReq) are acknowledged too (IBA
			// 9.7.5.1.2), so that the ACK's PSN is where the
			// selective ACK's bitmap starts.
			a.psn, a.msn = r.psn.Add(-1), r.msn
		}
		e.sendAckMSN(q, a.syn, a.psn, a.msn)
	}
}

// sendAck sends an ACKNOWLEDGE with a syndrome for psn and the current MSN.
func (e *Engine) sendAck(q *QP, syn bth.Syndrome, psn bth.PSN) {
	e.flushAck(q)
	if e.ackAfterResponses(q, syn, psn) {
		return
	}
	bf := bth.BTHFields{Opcode: bth.RCAcknowledge, PSN: psn}
	e.pf.AETH.Syndrome = syn
	e.pf.AETH.MSN = q.resp.msn & bth.QPNMask
	lp, _ := e.newPacket(q, &bf, 0, true)
	e.ccSentAck(q, lp)
}
