package qp

import (
	"fmt"
	"sync/atomic"
)

// Access is a set of memory region and QP access flags (ibv_access_flags).
type Access uint32

// Access flags, with rdma-core's values.
const (
	AccessLocalWrite   Access = 1 << 0
	AccessRemoteWrite  Access = 1 << 1
	AccessRemoteRead   Access = 1 << 2
	AccessRemoteAtomic Access = 1 << 3
	// AccessFlushGlobal and AccessFlushPersistent let a FLUSH of that
	// placement type reach the region, or the QP (IBA 1.5; rdma-core's
	// IBV_ACCESS_FLUSH_GLOBAL and IBV_ACCESS_FLUSH_PERSISTENT).
	AccessFlushGlobal     Access = 1 << 8
	AccessFlushPersistent Access = 1 << 9

	accessAll = AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic | AccessFlushGlobal
	// A QP may allow persistent FLUSHes, as rxe's do; a region may not
	// (Register).
	accessQP = accessAll | AccessFlushPersistent
)

// MR is a registered memory region: Buf is reachable at the virtual
// addresses [Addr, Addr+len(Buf)) under LKey locally and RKey remotely.
// Registering costs O(1) and pins nothing: Buf is ordinary Go memory the
// MR keeps alive.
type MR struct {
	Buf    []byte
	Addr   uint64
	LKey   uint32
	RKey   uint32
	Access Access
	PD     uint32
	valid  bool

	// A fast-registration region (mw.go) is free until a REG_MR makes
	// it valid: fast, at most maxLen bytes, its next key in next.
	fast   bool
	maxLen int
	next   atomic.Uint32
	// win is the window a bound window's view belongs to (mw.go); nmw
	// counts the windows bound to this region.
	win *MW
	nmw int
}

// slice returns the bytes at [va, va+n) if they lie inside the region.
func (m *MR) slice(va uint64, n uint64) ([]byte, bool) {
	if va < m.Addr {
		return nil, false
	}
	off := va - m.Addr
	size := uint64(len(m.Buf))
	if off > size || n > size-off {
		return nil, false
	}
	return m.Buf[off : off+n], true
}

// MRTable maps keys to regions in O(1): a key is the encryption of the
// slot's index and a per-slot generation (mrkey.go) under a cipher drawn
// at random for the table, so keys cannot be guessed from one another and
// a stale key of a reused slot does not match. Freed slots are reused
// oldest first, so a slot, and with it a key, comes back as late as it
// can. The zero value is an empty table.
type MRTable struct {
	slots []mrSlot
	// free holds the free slots, free[freeHead:] in the order freed.
	free     []uint32
	freeHead int
	keys     keyCipher
	keyed    bool
	// recent maps a key's low byte to the slot of the key seen last
	// with it: a lookup whose slot holds that very key skips the
	// cipher's 22 rounds, which cost a lookup tenfold.
	recent [256]uint32
}

type mrSlot struct {
	mr  *MR // a region, or a bound window's view of one
	mw  *MW // the window the slot holds, bound or not
	key uint32
	gen uint16
}

// Register adds a region and returns it with its keys. Remote write or
// atomic access requires local write, as IBA 10.6.3.1 and ibv_reg_mr do.
// It returns ErrBadMR for such a combination or unknown flags, and
// ErrBusy when the table holds its most regions (about a million).
func (t *MRTable) Register(pd uint32, buf []byte, addr uint64, access Access) (*MR, error) {
	if access&AccessFlushPersistent != 0 {
		// rxe registers it only over persistent memory pages; a Go
		// byte slice is ordinary memory, whose stores no FLUSH can
		// make persistent.
		return nil, fmt.Errorf("register: %w: persistent flush access needs persistent memory", ErrBadMR)
	}
	if access&^(accessAll|AccessMWBind) != 0 {
		return nil, fmt.Errorf("register: %w: unknown access flags %#x", ErrBadMR, uint32(access))
	}
	if access&(AccessRemoteWrite|AccessRemoteAtomic) != 0 && access&AccessLocalWrite == 0 {
		return nil, fmt.Errorf("register: %w: remote write or atomic needs local write", ErrBadMR)
	}
	if addr+uint64(len(buf)) < addr {
		return nil, fmt.Errorf("register: %w: region wraps the address space", ErrBadMR)
	}
	idx, err := t.newSlot()
	if err != nil {
		return nil, fmt.Errorf("register: %w", err)
	}
	s := &t.slots[idx]
	key, gen := t.nextKey(idx, s.gen)
	s.gen = gen
	m := &MR{Buf: buf, Addr: addr, LKey: key, RKey: key, Access: access, PD: pd, valid: true}
	s.mr, s.key = m, key
	t.recent[uint8(key)] = idx
	return m, nil
}

// Deregister removes a region; its keys stop working at once. It returns
// ErrNoMR for an unknown key.
func (t *MRTable) Deregister(key uint32) error {
	s, idx := t.slotOf(key)
	if s == nil || s.mr == nil || s.mw != nil {
		return fmt.Errorf("deregister %#x: %w", key, ErrNoMR)
	}
	m := s.mr
	if m.nmw > 0 {
		// rxe refuses too: the windows would point at nothing.
		return fmt.Errorf("deregister %#x: %w: %d windows bound to it", key, ErrBusy, m.nmw)
	}
	m.valid = false
	t.freeSlot(idx)
	return nil
}

func (t *MRTable) lookup(key uint32) *MR {
	if m, ok := t.recentMR(key); ok {
		return m
	}
	return t.lookupCipher(key)
}

// recentMR is lookup for a key that recent remembers, without a call:
// Lookup and LookupRemote try it before lookupCipher. Slot 0 is never
// used and holds key 0, as a free slot does, and neither holds a
// region: key 0 finds none.
func (t *MRTable) recentMR(key uint32) (*MR, bool) {
	if r := t.recent[uint8(key)]; r < uint32(len(t.slots)) && t.slots[r].key == key {
		return t.slots[r].mr, true
	}
	return nil, false
}

// lookupCipher is lookup by the key's slot index, which it remembers in
// recent.
func (t *MRTable) lookupCipher(key uint32) *MR {
	if key == 0 || len(t.slots) == 0 {
		return nil
	}
	idx := t.keys.decrypt(key) >> keyGenBits
	if idx == 0 || int(idx) >= len(t.slots) {
		return nil
	}
	// The slot's key is the one its generation makes.
	s := &t.slots[idx]
	if s.mr == nil || s.key != key {
		return nil
	}
	t.recent[uint8(key)] = idx
	return s.mr
}

// Lookup returns the region of a local key if it is valid, belongs to pd
// and allows every flag in need, or nil (rxe's lookup_mr). A window's key
// is no local key (IBA 10.6.7).
func (t *MRTable) Lookup(key, pd uint32, need Access) *MR {
	// lookup, written out: it is too large to inline, and every WR
	// and WRITE looks up a key.
	m, ok := t.recentMR(key)
	if !ok {
		m = t.lookupCipher(key)
	}
	if !m.localOK(pd, need) {
		return nil
	}
	return m
}

// localOK reports whether m, the region a key names or nil, serves as a
// local key of pd with every flag in need.
func (m *MR) localOK(pd uint32, need Access) bool {
	return m != nil && m.valid && m.win == nil && m.PD == pd && m.Access&need == need
}

// LookupRemote returns what a request's R_Key reaches on QP qpn of pd: a
// valid region, or a bound window's view of one, that allows every flag
// in need (rxe's lookup_mr and rxe_lookup_mw). A type 2 window answers
// only the QP it is bound to.
func (t *MRTable) LookupRemote(key, pd, qpn uint32, need Access) *MR {
	m, ok := t.recentMR(key) // lookup, written out, as in Lookup
	if !ok {
		m = t.lookupCipher(key)
	}
	if m == nil || !m.valid || m.PD != pd || m.Access&need != need {
		return nil
	}
	if w := m.win; w != nil && w.Type == MWType2 && w.qpn != qpn {
		return nil
	}
	return m
}

// resolveSGL appends to mrs the region of each SGE, with every flag in
// need and holding the SGE's whole range, and nil for an empty SGE: the
// checks rxe makes when a WQE's data is first touched (lookup_mr,
// mr_check_range). It reports false at the first SGE that fails them.
func (t *MRTable) resolveSGL(mrs []*MR, sge []SGE, pd uint32, need Access) ([]*MR, bool) {
	for i := range sge {
		g := &sge[i]
		if g.Length == 0 {
			mrs = append(mrs, nil)
			continue
		}
		m := t.Lookup(g.LKey, pd, need)
		if m == nil {
			return mrs, false
		}
		if _, ok := m.slice(g.Addr, uint64(g.Length)); !ok {
			return mrs, false
		}
		mrs = append(mrs, m)
	}
	return mrs, true
}

// copySGL copies between b and the memory an SGL names, from byte off of
// the SGL's concatenated buffers on: into the buffers when in, out of them
// otherwise. mrs[i] is sge[i]'s region, resolved and range-checked when the
// WQE was first used (nil for an empty SGE), as rxe's copy_data walks a
// WQE's DMA state. It stops when b or the SGL runs out.
func copySGL(sge []SGE, mrs []*MR, off uint32, b []byte, in bool) {
	for i := range sge {
		g := &sge[i]
		if len(b) == 0 {
			return
		}
		if off >= g.Length {
			off -= g.Length
			continue
		}
		m, _ := mrs[i].slice(g.Addr+uint64(off), uint64(g.Length-off))
		var n int
		if in {
			n = copy(m, b)
		} else {
			n = copy(b, m)
		}
		b = b[n:]
		off = 0
	}
}
