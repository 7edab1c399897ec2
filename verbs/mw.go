package verbs

import (
	"fmt"

	"github.com/uroce/uroce/qp"
)

// MW is a memory window (ibv_mw): a key under which a peer reaches part of
// a region, granted and taken back with work requests (IBA 10.6.7).
// docs/features.md has the rules.
type MW struct {
	pd *PD
	w  *qp.MW
}

// AllocMW makes a memory window on the PD (ibv_alloc_mw): a type 1 window
// is valid and unbound, a type 2 window free until a bind.
func (pd *PD) AllocMW(typ MWType) (*MW, error) {
	var w *qp.MW
	err := pd.d.withEngine(func() (err error) {
		w, err = pd.d.e.MRs.AllocMW(pd.id, typ)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &MW{pd: pd, w: w}, nil
}

// Dealloc frees the window (ibv_dealloc_mw); its key stops working at once.
func (w *MW) Dealloc() error {
	d := w.pd.d
	return d.withEngine(func() error { return d.e.MRs.DeallocMW(w.w) })
}

// Type returns the window's type.
func (w *MW) Type() MWType { return w.w.Type }

// RKey returns the window's current key: after a bind completes, the key a
// peer uses.
func (w *MW) RKey() uint32 { return w.w.RKey() }

// NextRKey returns the key the window's next bind gives it (rdma-core's
// ibv_inc_rkey).
func (w *MW) NextRKey() uint32 { return w.w.NextRKey() }

// BindMW posts a WRBindMW that lets the peer reach [off, off+n) of mr
// through w with the remote access flags, and returns the key the window
// has once the bind completes (ibv_bind_mw, which posts the same WR). mr
// needs AccessMWBind; n = 0 unbinds a type 1 window. The WR completes with
// WCBindMW, or WCMWBindErr for a bind the rules refuse (and the QP moves
// to the error state, as rxe's does).
func (q *QueuePair) BindMW(w *MW, id uint64, flags SendFlags, mr *MR, off, n int, access Access) (uint32, error) {
	if off < 0 || n < 0 {
		return 0, fmt.Errorf("bind MW: %w: range [%d, +%d)", ErrBadAttr, off, n)
	}
	key := w.NextRKey()
	wr := SendWR{ID: id, Opcode: WRBindMW, Flags: flags, Bind: MWBind{MWKey: w.RKey(), RKey: key, MRKey: mr.LKey(),
		Addr: mr.Addr() + uint64(off), Length: uint64(n), Access: access}}
	if err := q.PostSend(&wr); err != nil {
		return 0, err
	}
	return key, nil
}

// FastMR is a fast-registration region (ib_alloc_mr): keys and no
// memory until Map gives it a buffer and a WRRegMR makes it valid; a
// WRLocalInv, or a peer's WRSendWithInv, makes it free again.
type FastMR struct {
	MR
}

// AllocFastMR makes a fast-registration region of at most maxLen bytes.
func (pd *PD) AllocFastMR(maxLen int) (*FastMR, error) {
	var m *qp.MR
	err := pd.d.withEngine(func() (err error) {
		m, err = pd.d.e.MRs.AllocFast(pd.id, maxLen)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &FastMR{MR{pd: pd, m: m}}, nil
}

// Map gives the free region its memory, buf at its own address (as RegMR
// does), for the next WRRegMR (ib_map_mr_sg).
func (m *FastMR) Map(buf []byte) error {
	d := m.pd.d
	return d.withEngine(func() error { return d.e.MRs.Map(m.m, buf, addrOf(buf)) })
}

// NextKey returns the key the region's next WRRegMR gives it
// (ib_update_fast_reg_key): put it in MRReg.Key.
func (m *FastMR) NextKey() uint32 { return m.m.NextKey() }

// Reg returns the WRRegMR part that makes the region valid under its next
// key with the access flags.
func (m *FastMR) Reg(access Access) MRReg {
	return MRReg{MRKey: m.LKey(), Key: m.NextKey(), Access: access}
}
