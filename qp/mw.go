package qp

import (
	"fmt"
	"sync/atomic"

	"github.com/uroce/uroce/bth"
)

// Memory windows and fast registration (IBA 10.6.7, 10.7.2.2; rxe's
// rxe_mw.c and rxe_reg_fast_mr) let a consumer grant a peer access to part
// of a region, and take it back, with work requests on the send queue
// rather than a registration call:
//
//   - A window is allocated on a PD with a key and no access. A bind
//     (WRBindMW) gives it a range of a region registered with AccessMWBind,
//     remote access flags and a new key; the peer uses that key as an
//     R_Key. A type 1 window answers any QP of its PD and is taken back by
//     binding it again (length 0 unbinds); a type 2B window answers only
//     the QP that bound it and is taken back by invalidation: LOCAL_INV on
//     the local send queue, or a peer's SEND with invalidate naming its
//     key.
//   - A fast-registration region (AllocFast) has keys and no memory; Map
//     gives it a buffer while it is free, a REG_MR work request makes it
//     valid under a new key and access flags, and LOCAL_INV or a peer's
//     SEND with invalidate makes it free again. Regions from Register
//     cannot be invalidated, as rxe's user regions cannot.
//
// Keys stay what mrkey.go makes them: a bind or registration moves the
// slot to its next generation, so the old key stops working at once and
// the new one tells nothing about any other.

// MWType is a memory window's type (ibv_mw_type).
type MWType uint8

// Memory window types, rdma-core's values.
const (
	MWType1 MWType = 1
	// MWType2 is IBA's type 2B: bound to one QP.
	MWType2 MWType = 2
)

// AccessMWBind lets windows be bound to a region (IBV_ACCESS_MW_BIND,
// C10-73). AccessZeroBased asks for a zero-based window
// (IBV_ACCESS_ZERO_BASED), which uroce does not offer.
const (
	AccessMWBind    Access = 1 << 4
	AccessZeroBased Access = 1 << 5

	// accessRemote are the flags a bind may give a window.
	accessRemote = AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic
)

// MW is a memory window (ibv_mw). Its key changes with every bind; RKey
// gives the current one and NextRKey the one the next bind should carry.
type MW struct {
	Type MWType
	PD   uint32
	rkey atomic.Uint32
	next atomic.Uint32

	// The engine's alone:
	idx   uint32
	bound bool
	qpn   uint32 // the QP a bound type 2 window answers
	mr    *MR    // the region it is bound to
	// view is what the bound window lets a peer reach: a part of mr
	// under the window's key and access. Remote lookups find it in the
	// window's slot.
	view MR
}

// RKey returns the window's current key.
func (w *MW) RKey() uint32 { return w.rkey.Load() }

// NextRKey returns the key the window's next bind gives it: put it in
// MWBind.RKey (rdma-core's ibv_inc_rkey).
func (w *MW) NextRKey() uint32 { return w.next.Load() }

// MWBind is a bind work request's part (ibv_mw_bind_info and the bind_mw
// part of ibv_send_wr): the window named by its current key MWKey takes
// the new key RKey (its NextRKey) and lets a peer reach [Addr,
// Addr+Length) of the region whose local key is MRKey with the remote
// Access flags. A type 1 window with Length 0 is unbound.
type MWBind struct {
	MWKey  uint32
	RKey   uint32
	MRKey  uint32
	Addr   uint64
	Length uint64
	Access Access
}

// MRReg is a fast-registration work request's part (ib_reg_wr): the
// region named by its current key MRKey, mapped by Map and free, becomes
// valid under Key (its NextKey) with the Access flags.
type MRReg struct {
	MRKey  uint32
	Key    uint32
	Access Access
}

// nextKey returns the key of slot idx's generation after gen, and that
// generation. Key 0 is a zero-length READ's R_Key (C9-88) and names
// nothing: a generation that would make it is skipped.
func (t *MRTable) nextKey(idx uint32, gen uint16) (uint32, uint16) {
	gen = (gen + 1) & keyGenMask
	key := t.keys.encrypt(idx<<keyGenBits | uint32(gen))
	if key == 0 {
		gen = (gen + 1) & keyGenMask
		key = t.keys.encrypt(idx<<keyGenBits | uint32(gen))
	}
	return key, gen
}

// newSlot takes a free slot, oldest first, or a new one.
func (t *MRTable) newSlot() (uint32, error) {
	if !t.keyed {
		t.keys, t.keyed = randomKeyCipher(), true
	}
	if t.freeHead < len(t.free) {
		idx := t.free[t.freeHead]
		t.freeHead++
		if t.freeHead == len(t.free) {
			t.free, t.freeHead = t.free[:0], 0
		}
		return idx, nil
	}
	if len(t.slots) >= maxMRSlots {
		return 0, fmt.Errorf("%w: table full", ErrBusy)
	}
	// Slot 0 is never used, so a key decrypting to it never names a
	// region.
	if len(t.slots) == 0 {
		t.slots = append(t.slots, mrSlot{})
	}
	t.slots = append(t.slots, mrSlot{})
	return uint32(len(t.slots) - 1), nil
}

// freeSlot empties slot idx and queues it for reuse after every other.
func (t *MRTable) freeSlot(idx uint32) {
	s := &t.slots[idx]
	s.mr, s.mw, s.key = nil, nil, 0
	if t.freeHead > 0 && 2*t.freeHead >= len(t.free) {
		// Half the list is spent: move the rest down rather than
		// let append grow it.
		n := copy(t.free, t.free[t.freeHead:])
		t.free, t.freeHead = t.free[:n], 0
	}
	t.free = append(t.free, idx)
}

// slotOf returns the slot whose current key is key, or nil.
func (t *MRTable) slotOf(key uint32) (*mrSlot, uint32) {
	if key == 0 || len(t.slots) == 0 {
		return nil, 0
	}
	idx := t.keys.decrypt(key) >> keyGenBits
	if idx == 0 || int(idx) >= len(t.slots) {
		return nil, 0
	}
	s := &t.slots[idx]
	if s.key != key {
		return nil, 0
	}
	return s, idx
}

// rekeySlot moves slot idx to key, which must be one of the slot's own
// (its NextKey): a consumer picks it before posting the WR, as IBA lets
// it pick a key's low byte (10.6.3.4), and nothing else may change.
func (t *MRTable) rekeySlot(idx, key uint32) bool {
	v := t.keys.decrypt(key)
	if key == 0 || v>>keyGenBits != idx {
		return false
	}
	s := &t.slots[idx]
	s.key = key
	s.gen = uint16(v & keyGenMask)
	t.recent[uint8(key)] = idx
	return true
}

// AllocMW makes a memory window on pd (ibv_alloc_mw): a type 1 window is
// valid and unbound, a type 2 window free.
func (t *MRTable) AllocMW(pd uint32, typ MWType) (*MW, error) {
	if typ != MWType1 && typ != MWType2 {
		return nil, fmt.Errorf("alloc MW: %w: type %d", ErrBadMR, typ)
	}
	idx, err := t.newSlot()
	if err != nil {
		return nil, fmt.Errorf("alloc MW: %w", err)
	}
	s := &t.slots[idx]
	key, gen := t.nextKey(idx, s.gen)
	s.key, s.gen = key, gen
	w := &MW{Type: typ, PD: pd, idx: idx}
	w.rkey.Store(key)
	next, _ := t.nextKey(idx, gen)
	w.next.Store(next)
	s.mw = w
	return w, nil
}

// DeallocMW frees a window (ibv_dealloc_mw): its key stops working at once.
func (t *MRTable) DeallocMW(w *MW) error {
	s, idx := t.slotOf(w.RKey())
	if s == nil || s.mw != w {
		return fmt.Errorf("dealloc MW %#x: %w", w.RKey(), ErrNoMR)
	}
	w.unbind()
	t.freeSlot(idx)
	return nil
}

// unbind takes a window's access away.
func (w *MW) unbind() {
	if w.bound {
		w.mr.nmw--
	}
	w.bound, w.mr, w.qpn = false, nil, 0
	w.view = MR{}
}

// bind executes a bind WR posted on QP qpn of pd (rxe_bind_mw with the
// checks of rxe_check_bind_mw), or says why not.
func (t *MRTable) bind(qpn, pd uint32, b *MWBind) error {
	s, idx := t.slotOf(b.MWKey)
	if s == nil || s.mw == nil {
		return fmt.Errorf("bind MW %#x: %w", b.MWKey, ErrNoMR)
	}
	w := s.mw
	if w.PD != pd {
		return fmt.Errorf("bind MW %#x: %w: window of PD %d, QP of PD %d", b.MWKey, ErrBadMR, w.PD, pd)
	}
	if b.Access&^accessRemote != 0 {
		// Zero-based windows included: rxe refuses them for type 1
		// (o10-36.2.2) and uroce has none.
		return fmt.Errorf("bind MW %#x: %w: access %#x", b.MWKey, ErrBadMR, uint32(b.Access))
	}
	if w.Type == MWType2 {
		if w.bound { // o10-37.2.30: only a free window binds
			return fmt.Errorf("bind MW %#x: %w: a bound type 2 window", b.MWKey, ErrBusy)
		}
		if b.Length == 0 { // o10-37.2.40: invalidate it instead
			return fmt.Errorf("bind MW %#x: %w: type 2 window of length 0", b.MWKey, ErrBadMR)
		}
	}
	var mr *MR
	var buf []byte
	if b.Length > 0 {
		mr = t.lookup(b.MRKey)
		switch {
		case mr == nil || !mr.valid || mr.win != nil || mr.PD != pd:
			return fmt.Errorf("bind MW %#x: region %#x: %w", b.MWKey, b.MRKey, ErrNoMR)
		case mr.Access&AccessMWBind == 0: // C10-73
			return fmt.Errorf("bind MW %#x: %w: region without bind access", b.MWKey, ErrBadMR)
		case b.Access&(AccessRemoteWrite|AccessRemoteAtomic) != 0 && mr.Access&AccessLocalWrite == 0: // C10-74
			return fmt.Errorf("bind MW %#x: %w: writable window on a region without local write", b.MWKey, ErrBadMR)
		}
		var ok bool
		if buf, ok = mr.slice(b.Addr, b.Length); !ok { // C10-75
			return fmt.Errorf("bind MW %#x: %w: [%#x, +%d) outside the region", b.MWKey, ErrBadMR, b.Addr, b.Length)
		}
	}
	if !t.rekeySlot(idx, b.RKey) {
		return fmt.Errorf("bind MW %#x: %w: key %#x is not the window's", b.MWKey, ErrBadMR, b.RKey)
	}
	w.unbind()
	w.rkey.Store(b.RKey)
	next, _ := t.nextKey(idx, s.gen)
	w.next.Store(next)
	s.mr = nil
	if mr == nil {
		return nil
	}
	w.bound, w.mr = true, mr
	mr.nmw++
	if w.Type == MWType2 {
		w.qpn = qpn
	}
	w.view = MR{Buf: buf, Addr: b.Addr, LKey: b.RKey, RKey: b.RKey, Access: b.Access, PD: pd, valid: true, win: w}
	s.mr = &w.view
	return nil
}

// AllocFast makes a fast-registration region of at most maxLen bytes on
// pd (ib_alloc_mr): free, with keys and no memory.
func (t *MRTable) AllocFast(pd uint32, maxLen int) (*MR, error) {
	if maxLen <= 0 || maxLen > 1<<31 {
		return nil, fmt.Errorf("alloc MR: %w: length %d", ErrBadMR, maxLen)
	}
	idx, err := t.newSlot()
	if err != nil {
		return nil, fmt.Errorf("alloc MR: %w", err)
	}
	s := &t.slots[idx]
	key, gen := t.nextKey(idx, s.gen)
	s.key, s.gen = key, gen
	m := &MR{LKey: key, RKey: key, PD: pd, fast: true, maxLen: maxLen}
	next, _ := t.nextKey(idx, gen)
	m.next.Store(next)
	s.mr = m
	t.recent[uint8(key)] = idx
	return m, nil
}

// NextKey returns the key a fast-registration region's next REG_MR gives
// it: put it in MRReg.Key (ib_update_fast_reg_key).
func (m *MR) NextKey() uint32 { return m.next.Load() }

// Map gives a free fast-registration region its memory, buf at virtual
// address addr (ib_map_mr_sg), for the next REG_MR to make valid.
func (t *MRTable) Map(m *MR, buf []byte, addr uint64) error {
	switch {
	case !m.fast:
		return fmt.Errorf("map MR %#x: %w: not a fast-registration region", m.LKey, ErrBadMR)
	case m.valid:
		return fmt.Errorf("map MR %#x: %w: region is valid; invalidate it first", m.LKey, ErrBusy)
	case len(buf) > m.maxLen:
		return fmt.Errorf("map MR %#x: %w: %d bytes, at most %d", m.LKey, ErrBadMR, len(buf), m.maxLen)
	case addr+uint64(len(buf)) < addr:
		return fmt.Errorf("map MR %#x: %w: region wraps the address space", m.LKey, ErrBadMR)
	}
	m.Buf, m.Addr = buf, addr
	return nil
}

// regFast executes a REG_MR WR posted on a QP of pd (rxe_reg_fast_mr).
func (t *MRTable) regFast(pd uint32, r *MRReg) error {
	s, idx := t.slotOf(r.MRKey)
	if s == nil || s.mr == nil || !s.mr.fast {
		return fmt.Errorf("reg MR %#x: %w", r.MRKey, ErrNoMR)
	}
	m := s.mr
	switch {
	case m.valid:
		return fmt.Errorf("reg MR %#x: %w: region is not free", r.MRKey, ErrBusy)
	case m.PD != pd:
		return fmt.Errorf("reg MR %#x: %w: region of PD %d, QP of PD %d", r.MRKey, ErrBadMR, m.PD, pd)
	case r.Access&^(accessAll|AccessMWBind) != 0,
		r.Access&(AccessRemoteWrite|AccessRemoteAtomic) != 0 && r.Access&AccessLocalWrite == 0:
		return fmt.Errorf("reg MR %#x: %w: access %#x", r.MRKey, ErrBadMR, uint32(r.Access))
	}
	if !t.rekeySlot(idx, r.Key) {
		return fmt.Errorf("reg MR %#x: %w: key %#x is not the region's", r.MRKey, ErrBadMR, r.Key)
	}
	m.LKey, m.RKey, m.Access, m.valid = r.Key, r.Key, r.Access, true
	next, _ := t.nextKey(idx, s.gen)
	m.next.Store(next)
	return nil
}

// invalidate takes key's access away for QP qpn of pd (LOCAL_INV, or a
// SEND with invalidate from the QP's peer; rxe's rxe_invalidate_mr and
// rxe_invalidate_mw): a bound type 2 window of that QP becomes free, a
// fast-registration region with no window bound to it becomes free. The
// key itself stays the slot's until the next bind or registration.
func (t *MRTable) invalidate(qpn, pd, key uint32) error {
	s, _ := t.slotOf(key)
	switch {
	case s == nil:
		return fmt.Errorf("invalidate %#x: %w", key, ErrNoMR)
	case s.mw != nil:
		w := s.mw
		switch {
		case w.Type == MWType1: // o10-37.2.26
			return fmt.Errorf("invalidate %#x: %w: a type 1 window", key, ErrBadMR)
		case !w.bound:
			return fmt.Errorf("invalidate %#x: %w: window not bound", key, ErrBadMR)
		case w.PD != pd || w.qpn != qpn:
			// Only the QP a type 2B window is bound to may take it
			// back; rxe checks neither.
			return fmt.Errorf("invalidate %#x: %w: window of another QP", key, ErrNoMR)
		}
		w.unbind()
		s.mr = nil
		return nil
	case s.mr != nil && s.mr.fast:
		m := s.mr
		switch {
		case m.PD != pd:
			return fmt.Errorf("invalidate %#x: %w: region of another PD", key, ErrNoMR)
		case m.nmw > 0:
			return fmt.Errorf("invalidate %#x: %w: windows are bound to the region", key, ErrBusy)
		}
		m.valid = false
		return nil
	}
	return fmt.Errorf("invalidate %#x: %w: a registered region", key, ErrBadMR)
}

// executeLocal runs a local operation at the requester (rxe's
// rxe_do_local_ops), returning the status its WQE completes with: a
// failed bind is a bind error, a failed invalidation or registration a
// local QP operation error, and either moves the QP to ERR.
func (e *Engine) executeLocal(q *QP, w *sendWQE) WCStatus {
	var err error
	switch w.wr.Opcode {
	case WRLocalInv:
		err = e.MRs.invalidate(q.qpn, q.pd, w.imm)
	case WRBindMW:
		if err = e.MRs.bind(q.qpn, q.pd, &w.local.bind); err != nil {
			return WCMWBindErr
		}
	case WRRegMR:
		err = e.MRs.regFast(q.pd, &w.local.reg)
	}
	if err != nil {
		return WCLocQPOpErr
	}
	return WCSuccess
}

// retireLocal completes the executed local operations at the head of the
// send queue: they wait for no response, only for the WQEs before them
// (rxe's completer finds them in wqe_state_done).
func (q *QP) retireLocal() {
	// A first look that inlines at the callers (the head of an empty
	// queue may be a spent slot; the loop looks again): most heads are
	// no local operation.
	if q.sq.at(q.sq.head).state == wqeDone {
		q.retireLocalRun()
	}
}

func (q *QP) retireLocalRun() {
	for q.sq.head != q.sq.tail && q.sq.at(q.sq.head).state == wqeDone {
		q.completeSend(q.sq.at(q.sq.head))
	}
}

// invalidateRecv ends a SEND with invalidate whose data has landed: it
// invalidates the IETH's key for this QP, and the message completes as any
// SEND, with WCWithInv. If the key names nothing this QP may invalidate,
// the message is still taken and acknowledged (rxe answers with an ACK),
// but the receive completes with WCRemInvReqErr and the QP moves to ERR
// (rxe's RESPST_ERR_INVALIDATE_RKEY, its class J).
func (e *Engine) invalidateRecv(q *QP, p *bth.Packet, psn bth.PSN) respState {
	r := &q.resp
	r.psn = psn.Next()
	r.ackPSN = r.psn
	r.msn++
	r.opcode = opNone
	if q.sr != nil {
		e.srCatchUp(q)
	}
	if err := e.MRs.invalidate(q.qpn, q.pd, p.IETH().RKey()); err == nil {
		return respComplete
	}
	r.haveWQE = false
	q.completeRecv(WCRemInvReqErr, WCRecv, r.offset, 0, 0)
	e.sendAck(q, bth.ACK(bth.CreditsInvalid), psn)
	q.toError()
	return respDone
}
