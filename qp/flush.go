package qp

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/uroce/uroce/bth"
)

// RDMA FLUSH and ATOMIC WRITE (IBA 1.5), as rxe does them since Linux 6.2.
//
// Both are RC only and, like a READ, take a responder resource
// (max_dest_rd_atomic) whose answer is a zero-length RDMA READ Response
// Only; a duplicate is answered again from the resource and never
// executed twice (rxe's process_flush, atomic_write_reply and
// duplicate_request). An ATOMIC WRITE also takes one of the requester's
// max_rd_atomic credits, a FLUSH does not (rxe's requester counts
// RXE_READ_OR_ATOMIC_MASK | RXE_ATOMIC_WRITE_MASK).

// FlushType is a FLUSH's placement type, a set of bits (the FETH's PLT;
// rdma-core's enum ibv_placement_type).
type FlushType uint8

// Placement types, with rdma-core's values.
const (
	// FlushGlobal: the data is visible to every observer of the memory.
	FlushGlobal FlushType = 1 << 0
	// FlushPersistent: the data is in persistent memory. uroce's
	// regions are ordinary memory and cannot have AccessFlushPersistent,
	// so such a FLUSH fails with a remote access error, as it does on
	// rxe over memory that is not persistent.
	FlushPersistent FlushType = 1 << 1
)

// FlushLevel is a FLUSH's selectivity level (the FETH's SEL; rdma-core's
// enum ibv_selectivity_level).
type FlushLevel uint8

// Selectivity levels, with rdma-core's values.
const (
	FlushRange FlushLevel = 0 // the range [RemoteAddr, RemoteAddr+FlushLen)
	FlushMR    FlushLevel = 1 // the whole region the R_Key names
)

// checkExtWR checks a FLUSH or ATOMIC WRITE work request at post time:
// only an RC QP has them (rxe's rxe_wr_opcode_info gives them an RC mask
// only, so ibv_post_send fails with EINVAL elsewhere); a FLUSH carries no
// data; an ATOMIC WRITE carries exactly 8 bytes (ibv_wr_atomic_write takes
// no other size).
func checkExtWR(t QPType, wr *SendWR) error {
	if t != QPTypeRC {
		return fmt.Errorf("post send: %w: %s on a %s QP", ErrBadWR, wr.Opcode, t)
	}
	if wr.Opcode == WRFlush {
		if len(wr.SGL) > 0 || len(wr.InlineData) > 0 {
			return fmt.Errorf("post send: %w: FLUSH with data", ErrBadWR)
		}
		return nil
	}
	n := 0
	if wr.Flags&FlagInline != 0 {
		n = len(wr.InlineData)
	} else {
		for _, g := range wr.SGL {
			n += int(g.Length)
		}
	}
	if n != 8 {
		return fmt.Errorf("post send: %w: ATOMIC_WRITE of %d bytes, not 8", ErrBadWR, n)
	}
	return nil
}

// isExt reports whether o is a FLUSH or an ATOMIC WRITE.
func (o WROpcode) isExt() bool { return o == WRFlush || o == WRAtomicWrite }

// takesRdAtomic reports whether o needs a max_rd_atomic credit: READ and
// atomics (IBA 9.5.2), and in rxe an ATOMIC WRITE, not a FLUSH.
func (o WROpcode) takesRdAtomic() bool { return o.isReadAtomic() || o == WRAtomicWrite }

// extRequest fills in the headers of a FLUSH (FETH, RETH) or ATOMIC WRITE
// (RETH, 8 bytes of payload) request and returns its payload size (rxe's
// init_req_packet: the RETH's length is ibv_wr_flush's len, or 8).
func (e *Engine) extRequest(w *sendWQE, bf *bth.BTHFields) uint32 {
	pf := &e.pf
	pf.RETH = bth.RETHFields{VA: w.wr.RemoteAddr, RKey: w.wr.RKey, DMALen: w.length}
	if w.wr.Opcode == WRFlush {
		bf.Opcode = bth.RCFlush
		pf.FETH.PlacementType, pf.FETH.Selectivity = uint8(w.wr.FlushType), uint8(w.wr.FlushLevel)
		return 0
	}
	bf.Opcode = bth.RCAtomicWrite
	return 8
}

// extResponse places a READ response against a FLUSH or ATOMIC WRITE WQE:
// rxe's check_ack takes a READ Response Only as the acknowledgement of
// either (it carries no data), and anything else as a bad response.
func extResponse(w *sendWQE, op bth.Opcode, n int) (compState, bool) {
	if !w.wr.Opcode.isExt() || op != bth.RCReadResponseOnly || n != 0 {
		return compError, false
	}
	return compWriteSend, true
}

// extRefused reports whether the QP's access flags refuse a FLUSH or
// ATOMIC WRITE (rxe's check_qp_attr_access): an ATOMIC WRITE needs remote
// write, a FLUSH the flush access of each placement type it asks for.
func extRefused(a Access, p *bth.Packet, info *bth.OpcodeInfo) bool {
	if info.Mask&bth.AtomicWrite != 0 {
		return a&AccessRemoteWrite == 0
	}
	return a&flushAccess(p.FETH().PlacementType()) != flushAccess(p.FETH().PlacementType())
}

// flushAccess is the access a FLUSH of placement type plt needs.
func flushAccess(plt uint8) Access {
	var a Access
	if FlushType(plt)&FlushGlobal != 0 {
		a |= AccessFlushGlobal
	}
	if FlushType(plt)&FlushPersistent != 0 {
		a |= AccessFlushPersistent
	}
	return a
}

// checkRKeyExt resolves the R_Key of a FLUSH or ATOMIC WRITE (rxe's
// check_rkey): the region needs the flush access of the placement type,
// or remote write; a FLUSH of the whole region skips the range check; an
// ATOMIC WRITE's DMA length and payload are 8 bytes with no pad. A bad key,
// range or permission is a remote access error, a bad length an invalid
// request (class C).
func (e *Engine) checkRKeyExt(q *QP, p *bth.Packet, info *bth.OpcodeInfo) respState {
	r := &q.resp
	reth := p.RETH()
	r.va, r.rkey, r.resid, r.length = reth.VA(), reth.RKey(), reth.DMALen(), reth.DMALen()
	flush := info.Mask&bth.Flush != 0
	need := AccessRemoteWrite
	if flush {
		need = flushAccess(p.FETH().PlacementType())
	}
	r.mr = e.MRs.LookupRemote(r.rkey, q.pd, q.qpn, need)
	if r.mr == nil {
		return e.classC(q, bth.NAKRemoteAccessError, WCRemAccessErr)
	}
	if !flush || FlushLevel(p.FETH().Selectivity()) != FlushMR {
		if _, ok := r.mr.slice(r.va, uint64(r.resid)); !ok {
			return e.classC(q, bth.NAKRemoteAccessError, WCRemAccessErr)
		}
	}
	if !flush && (r.resid != 8 || p.PayloadLen() != 8 || p.PadCnt() != 0) {
		return e.classC(q, bth.NAKInvalidRequest, WCRemInvReqErr)
	}
	return respExecute
}

// executeExt executes a new FLUSH or ATOMIC WRITE and owes its response
// from a responder resource. An ATOMIC WRITE to an address that is not
// 8-byte aligned is an invalid request (rxe's RESPST_ERR_MISALIGNED_ATOMIC,
// IBA A19.4.2); else its 8 bytes land in one atomic store, in the order
// the wire carries them (rxe's rxe_mr_do_atomic_write stores the payload
// as it is). A FLUSH has nothing left to do: the engine stored every
// earlier request's data into the region's memory before it took this
// one, which is all global visibility asks of ordinary memory.
func (e *Engine) executeExt(q *QP, p *bth.Packet, info *bth.OpcodeInfo, psn bth.PSN) respState {
	r := &q.resp
	kind := resFlush
	if info.Mask&bth.AtomicWrite != 0 {
		kind = resAtomicWrite
		dst, _ := r.mr.slice(r.va, 8)
		ptr := unsafe.Pointer(unsafe.SliceData(dst))
		if r.va&7 != 0 || uintptr(ptr)&7 != 0 {
			return e.classC(q, bth.NAKInvalidRequest, WCRemInvReqErr)
		}
		atomic.StoreUint64((*uint64)(ptr), binary.NativeEndian.Uint64(p.Payload()))
	}
	r.msn++
	res := r.newResource()
	res.set(kind, psn, psn, r.va, r.rkey, 0, 0, r.msn)
	r.psn = psn.Next()
	r.ackPSN = r.psn // rxe's ack_psn, as for an atomic
	r.opcode = opNone
	e.oweResponse(q, res, psn, 0, 0)
	if q.sr != nil {
		e.srCatchUp(q)
	}
	return respDone
}

// duplicateExt answers a duplicate FLUSH or ATOMIC WRITE from its
// resource, without executing it again (IBA oA19-14, oA19-15; rxe replays
// the acknowledgement only). One whose resource was recycled is dropped
// (class D).
func (e *Engine) duplicateExt(q *QP, info *bth.OpcodeInfo, psn bth.PSN) {
	kind := resFlush
	if info.Mask&bth.AtomicWrite != 0 {
		kind = resAtomicWrite
	}
	res := q.resp.find(psn, kind)
	if res == nil || res.firstPSN != psn {
		return
	}
	e.oweResponse(q, res, psn, 0, 0)
}
