package qp

import (
	"bytes"
	"errors"
	"testing"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/pkg/netem"
)

// TestMWTable checks the bind, invalidation and registration rules of
// rxe_mw.c and rxe_reg_fast_mr one by one, on the table alone.
func TestMWTable(t *testing.T) {
	var tb MRTable
	mem := make([]byte, 4096)
	mr, err := tb.Register(1, mem, 0x1000, AccessLocalWrite|AccessMWBind)
	if err != nil {
		t.Fatal(err)
	}
	ro, err := tb.Register(1, make([]byte, 4096), 0x10000, AccessMWBind)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := tb.Register(1, make([]byte, 4096), 0x20000, AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	w2, _ := tb.AllocMW(1, MWType2)
	w1, _ := tb.AllocMW(1, MWType1)
	bind := func(w *MW, b MWBind, qpn, pd uint32) error {
		b.MWKey, b.RKey = w.RKey(), w.NextRKey()
		return tb.bind(qpn, pd, &b)
	}
	rw := AccessRemoteRead | AccessRemoteWrite
	for _, tc := range []struct {
		name string
		w    *MW
		b    MWBind
		pd   uint32
		want error
	}{
		{"another PD", w2, MWBind{MRKey: mr.LKey, Addr: 0x1000, Length: 64, Access: rw}, 2, ErrBadMR},
		{"region without bind access", w2, MWBind{MRKey: plain.LKey, Addr: 0x20000, Length: 64, Access: rw}, 1, ErrBadMR},
		{"writable on a read-only region", w2, MWBind{MRKey: ro.LKey, Addr: 0x10000, Length: 64, Access: rw}, 1, ErrBadMR},
		{"past the region", w2, MWBind{MRKey: mr.LKey, Addr: 0x1000 + 4000, Length: 97, Access: rw}, 1, ErrBadMR},
		{"before the region", w2, MWBind{MRKey: mr.LKey, Addr: 0xfff, Length: 2, Access: rw}, 1, ErrBadMR},
		{"zero based", w2, MWBind{MRKey: mr.LKey, Addr: 0x1000, Length: 64, Access: rw | AccessZeroBased}, 1, ErrBadMR},
		{"type 2 of length 0", w2, MWBind{MRKey: mr.LKey}, 1, ErrBadMR},
		{"unknown region", w2, MWBind{MRKey: 12345, Addr: 0x1000, Length: 64, Access: rw}, 1, ErrNoMR},
	} {
		if err := bind(tc.w, tc.b, 7, tc.pd); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	// A key that is not the window's own is refused, and so is a stale
	// window key.
	if err := tb.bind(7, 1, &MWBind{MWKey: w2.RKey(), RKey: w1.NextRKey(), MRKey: mr.LKey, Addr: 0x1000, Length: 64, Access: rw}); !errors.Is(err, ErrBadMR) {
		t.Errorf("another window's key: %v", err)
	}

	old := w2.RKey()
	if err := bind(w2, MWBind{MRKey: mr.LKey, Addr: 0x1100, Length: 256, Access: rw}, 7, 1); err != nil {
		t.Fatal(err)
	}
	if w2.RKey() == old || tb.LookupRemote(old, 1, 7, 0) != nil {
		t.Fatal("the window's old key still works")
	}
	v := tb.LookupRemote(w2.RKey(), 1, 7, AccessRemoteWrite)
	if v == nil || v.Addr != 0x1100 || &v.Buf[0] != &mem[0x100] || len(v.Buf) != 256 {
		t.Fatalf("bound window's view %+v", v)
	}
	if _, ok := v.slice(0x1100+200, 57); ok {
		t.Error("a range past the window passes")
	}
	switch {
	case tb.LookupRemote(w2.RKey(), 1, 8, 0) != nil:
		t.Error("a type 2 window answers another QP")
	case tb.LookupRemote(w2.RKey(), 1, 7, AccessRemoteAtomic) != nil:
		t.Error("a window grants access it was not bound with")
	case tb.Lookup(w2.RKey(), 1, 0) != nil:
		t.Error("a window's key works as a local key")
	}
	if err := bind(w2, MWBind{MRKey: mr.LKey, Addr: 0x1000, Length: 64, Access: rw}, 7, 1); !errors.Is(err, ErrBusy) {
		t.Errorf("binding a bound type 2 window: %v", err)
	}
	if err := tb.Deregister(mr.LKey); !errors.Is(err, ErrBusy) {
		t.Errorf("deregistering a region with a bound window: %v", err)
	}
	if err := tb.invalidate(8, 1, w2.RKey()); !errors.Is(err, ErrNoMR) {
		t.Errorf("another QP invalidates a type 2 window: %v", err)
	}
	if err := tb.invalidate(7, 1, w2.RKey()); err != nil {
		t.Fatal(err)
	}
	if tb.LookupRemote(w2.RKey(), 1, 7, 0) != nil {
		t.Fatal("an invalidated window still works")
	}
	if err := tb.invalidate(7, 1, w2.RKey()); !errors.Is(err, ErrBadMR) {
		t.Errorf("invalidating a free window: %v", err)
	}

	// Type 1: any QP of the PD; unbound by a bind of length 0, never
	// invalidated (o10-37.2.26).
	if err := bind(w1, MWBind{MRKey: ro.LKey, Addr: 0x10000, Length: 4096, Access: AccessRemoteRead}, 7, 1); err != nil {
		t.Fatal(err)
	}
	if tb.LookupRemote(w1.RKey(), 1, 99, AccessRemoteRead) == nil {
		t.Error("a type 1 window does not answer another QP of its PD")
	}
	if err := tb.invalidate(7, 1, w1.RKey()); !errors.Is(err, ErrBadMR) {
		t.Errorf("invalidating a type 1 window: %v", err)
	}
	if err := bind(w1, MWBind{}, 7, 1); err != nil {
		t.Fatal(err)
	}
	if tb.LookupRemote(w1.RKey(), 1, 7, 0) != nil {
		t.Error("an unbound type 1 window works")
	}
	if err := tb.Deregister(ro.LKey); err != nil {
		t.Errorf("deregistering a region its window left: %v", err)
	}
	if err := tb.DeallocMW(w1); err != nil {
		t.Fatal(err)
	}
	if err := tb.invalidate(7, 1, plain.LKey); !errors.Is(err, ErrBadMR) {
		t.Errorf("invalidating a registered region: %v", err)
	}

	// Fast registration: free until REG_MR, free again after LOCAL_INV.
	f, err := tb.AllocFast(1, 8192)
	if err != nil {
		t.Fatal(err)
	}
	if tb.LookupRemote(f.RKey, 1, 7, 0) != nil || tb.Lookup(f.LKey, 1, 0) != nil {
		t.Fatal("a free fast-registration region works")
	}
	if err := tb.Map(f, make([]byte, 8193), 0x40000); !errors.Is(err, ErrBadMR) {
		t.Errorf("mapping past the region's size: %v", err)
	}
	fmem := make([]byte, 8192)
	if err := tb.Map(f, fmem, 0x40000); err != nil {
		t.Fatal(err)
	}
	reg := MRReg{MRKey: f.LKey, Key: f.NextKey(), Access: AccessLocalWrite | AccessRemoteWrite}
	if err := tb.regFast(2, &reg); !errors.Is(err, ErrBadMR) {
		t.Errorf("registering on another PD: %v", err)
	}
	if err := tb.regFast(1, &MRReg{MRKey: f.LKey, Key: w2.RKey(), Access: AccessLocalWrite}); !errors.Is(err, ErrBadMR) {
		t.Errorf("registering under another slot's key: %v", err)
	}
	oldKey := f.LKey
	if err := tb.regFast(1, &reg); err != nil {
		t.Fatal(err)
	}
	if f.RKey != reg.Key || tb.LookupRemote(oldKey, 1, 7, 0) != nil {
		t.Fatal("the old key works after REG_MR")
	}
	if m := tb.LookupRemote(f.RKey, 1, 7, AccessRemoteWrite); m != f || &m.Buf[0] != &fmem[0] || m.Addr != 0x40000 {
		t.Fatalf("registered region %+v", m)
	}
	if err := tb.Map(f, fmem, 0x40000); !errors.Is(err, ErrBusy) {
		t.Errorf("mapping a valid region: %v", err)
	}
	if err := tb.regFast(1, &MRReg{MRKey: f.LKey, Key: f.NextKey(), Access: AccessLocalWrite}); !errors.Is(err, ErrBusy) {
		t.Errorf("registering a valid region: %v", err)
	}
	if err := tb.invalidate(7, 1, f.RKey); err != nil {
		t.Fatal(err)
	}
	if tb.LookupRemote(f.RKey, 1, 7, 0) != nil || tb.Lookup(f.LKey, 1, 0) != nil {
		t.Fatal("an invalidated region works")
	}
}

// mwPair is a pair whose responder b has a region windows may bind to.
type mwPair struct {
	*pair
	bmr *MR // b's region [memBase+1 MiB, +64 KiB) with AccessMWBind
}

func newMWPair(t *testing.T, faults netem.Faults) *mwPair {
	p := newPair(t, pairConfig{mtu: 1024, mem: 2 << 20, faults: faults, seed: 11, retry: 7, rnrRetry: 7, timeout: 8})
	bmr, err := p.b.e.MRs.Register(1, p.b.mem[1<<20:1<<20+65536], memBase+1<<20, accessAll|AccessMWBind)
	if err != nil {
		t.Fatal(err)
	}
	return &mwPair{pair: p, bmr: bmr}
}

// post posts a signaled WR on s and runs the pair until it completes,
// returning its completion.
func (p *mwPair) post(s *side, wr SendWR) Completion {
	p.t.Helper()
	wr.Flags |= FlagSignaled
	if err := s.qp.PostSend(p.now, &wr); err != nil {
		p.t.Fatal(err)
	}
	var wc Completion
	p.run(func() bool {
		if s.scq.Poll(s.wc[:1]) == 1 {
			wc = s.wc[0]
			return true
		}
		return false
	})
	return wc
}

// TestMWPair runs memory windows between two engines: a type 2 window
// bound by a BIND_MW WR, reached by WRITEs and READs through its key,
// and taken back by the peer's SEND with invalidate, after which the
// key fails as rxe's does (a remote access error). Over a clean and a
// lossy pipe, where go-back-N replays the send queue around the bind.
func TestMWPair(t *testing.T) {
	for _, tc := range []struct {
		name   string
		faults netem.Faults
	}{
		{"clean", netem.Faults{}},
		{"lossy", netem.Faults{Drop: 0.05, Duplicate: 0.02, Reorder: 0.02}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newMWPair(t, tc.faults)
			a, b := p.a, p.b
			w, err := b.e.MRs.AllocMW(1, MWType2)
			if err != nil {
				t.Fatal(err)
			}
			// b: a WRITE, the bind and a WRITE behind it complete in
			// order, the bind once.
			if err := b.qp.PostSend(p.now, &SendWR{ID: 1, Opcode: WRWrite, Flags: FlagSignaled, SGL: []SGE{b.sge(0, 3000)}, RemoteAddr: memBase, RKey: a.mr.RKey}); err != nil {
				t.Fatal(err)
			}
			key := w.NextRKey()
			wc := p.post(b, SendWR{ID: 2, Opcode: WRBindMW, Bind: MWBind{MWKey: w.RKey(), RKey: key, MRKey: p.bmr.LKey, Addr: memBase + 1<<20 + 4096, Length: 8192, Access: AccessRemoteWrite | AccessRemoteRead}})
			if wc.WRID != 1 || wc.Status != WCSuccess {
				t.Fatalf("first completion %+v, want the WRITE", wc)
			}
			p.run(func() bool { return b.scq.Poll(b.wc[:1]) == 1 })
			if wc := b.wc[0]; wc.WRID != 2 || wc.Status != WCSuccess || wc.Opcode != WCBindMW {
				t.Fatalf("bind completion %+v", wc)
			}
			if w.RKey() != key {
				t.Fatalf("window key %#x, want %#x", w.RKey(), key)
			}

			for i := range 3000 {
				a.mem[i] = byte(i*7 + 1)
			}
			if wc := p.post(a, SendWR{Opcode: WRWrite, SGL: []SGE{a.sge(0, 3000)}, RemoteAddr: memBase + 1<<20 + 4096 + 100, RKey: key}); wc.Status != WCSuccess {
				t.Fatalf("WRITE through the window: %+v", wc)
			}
			if !bytes.Equal(b.mem[1<<20+4096+100:][:3000], a.mem[:3000]) {
				t.Fatal("the WRITE through the window landed wrong")
			}
			if wc := p.post(a, SendWR{Opcode: WRRead, SGL: []SGE{a.sge(8192, 3000)}, RemoteAddr: memBase + 1<<20 + 4096 + 100, RKey: key}); wc.Status != WCSuccess {
				t.Fatalf("READ through the window: %+v", wc)
			}
			if !bytes.Equal(a.mem[8192:][:3000], a.mem[:3000]) {
				t.Fatal("the READ through the window read wrong")
			}

			// a's SEND with invalidate takes the window back.
			if err := b.qp.PostRecv(&RecvWR{ID: 9, SGL: []SGE{b.sge(65536, 4096)}}); err != nil {
				t.Fatal(err)
			}
			if wc := p.post(a, SendWR{Opcode: WRSendWithInv, SGL: []SGE{a.sge(0, 2500)}, InvalidateRKey: key}); wc.Status != WCSuccess || wc.Opcode != WCSend {
				t.Fatalf("SEND with invalidate: %+v", wc)
			}
			p.run(func() bool { return b.rcq.Poll(b.wc[:1]) == 1 })
			if wc := b.wc[0]; wc.Status != WCSuccess || wc.Flags != WCWithInv || wc.Imm != key || wc.ByteLen != 2500 || wc.Opcode != WCRecv {
				t.Fatalf("receive of the SEND with invalidate %+v", wc)
			}
			if b.e.MRs.LookupRemote(key, 1, b.qp.QPN(), 0) != nil {
				t.Fatal("the window still works")
			}
			if a.qp.Counters().Retransmits == 0 && tc.faults.Drop != 0 {
				t.Error("nothing retransmitted on a lossy pipe")
			}
			// The key now fails, as a bad key does: a remote access
			// error.
			if wc := p.post(a, SendWR{Opcode: WRWrite, SGL: []SGE{a.sge(0, 64)}, RemoteAddr: memBase + 1<<20 + 4096, RKey: key}); wc.Status != WCRemAccessErr {
				t.Fatalf("WRITE through an invalidated window: %+v", wc)
			}
		})
	}
}

// TestLocalInvAndFastReg: REG_MR makes a fast-registration region valid
// under a new key, LOCAL_INV takes it back, and a peer's WRITE to it
// then fails; a SEND with invalidate naming a key the responder may not
// invalidate completes the receive with WCRemInvReqErr and moves the
// responder to ERR (rxe's class J) while the sender's SEND succeeds.
func TestLocalInvAndFastReg(t *testing.T) {
	p := newMWPair(t, netem.Faults{})
	a, b := p.a, p.b
	f, err := b.e.MRs.AllocFast(1, 16384)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.e.MRs.Map(f, b.mem[1<<20+65536:][:16384], memBase+1<<20+65536); err != nil {
		t.Fatal(err)
	}
	key := f.NextKey()
	if wc := p.post(b, SendWR{Opcode: WRRegMR, Reg: MRReg{MRKey: f.LKey, Key: key, Access: AccessLocalWrite | AccessRemoteWrite}}); wc.Status != WCSuccess || wc.Opcode != WCRegMR {
		t.Fatalf("REG_MR: %+v", wc)
	}
	copy(a.mem, "fast registration")
	if wc := p.post(a, SendWR{Opcode: WRWrite, SGL: []SGE{a.sge(0, 17)}, RemoteAddr: memBase + 1<<20 + 65536 + 8, RKey: key}); wc.Status != WCSuccess {
		t.Fatalf("WRITE to the registered region: %+v", wc)
	}
	if string(b.mem[1<<20+65536+8:][:17]) != "fast registration" {
		t.Fatal("the WRITE landed wrong")
	}
	if wc := p.post(b, SendWR{Opcode: WRLocalInv, InvalidateRKey: key}); wc.Status != WCSuccess || wc.Opcode != WCLocalInv {
		t.Fatalf("LOCAL_INV: %+v", wc)
	}
	if wc := p.post(a, SendWR{Opcode: WRWrite, SGL: []SGE{a.sge(0, 17)}, RemoteAddr: memBase + 1<<20 + 65536 + 8, RKey: key}); wc.Status != WCRemAccessErr {
		t.Fatalf("WRITE to an invalidated region: %+v", wc)
	}

	// LOCAL_INV of a registered region, on a fresh pair: refused.
	p = newMWPair(t, netem.Faults{})
	if wc := p.post(p.b, SendWR{Opcode: WRLocalInv, InvalidateRKey: p.bmr.LKey}); wc.Status != WCLocQPOpErr || p.b.qp.State() != StateErr {
		t.Fatalf("LOCAL_INV of a registered region: %+v, QP %s", wc, p.b.qp.State())
	}

	// Class J on a fresh pair.
	p = newMWPair(t, netem.Faults{})
	a, b = p.a, p.b
	if err := b.qp.PostRecv(&RecvWR{ID: 5, SGL: []SGE{b.sge(0, 4096)}}); err != nil {
		t.Fatal(err)
	}
	if wc := p.post(a, SendWR{Opcode: WRSendWithInv, SGL: []SGE{a.sge(0, 100)}, InvalidateRKey: p.bmr.RKey}); wc.Status != WCSuccess {
		t.Fatalf("SEND with a bad invalidate: sender %+v", wc)
	}
	p.run(func() bool { return b.rcq.Poll(b.wc[:1]) == 1 })
	if wc := b.wc[0]; wc.Status != WCRemInvReqErr || wc.Flags&WCWithInv != 0 || b.qp.State() != StateErr {
		t.Fatalf("receiver %+v, QP %s", wc, b.qp.State())
	}
	if b.e.MRs.LookupRemote(p.bmr.RKey, 1, b.qp.QPN(), AccessRemoteWrite) == nil {
		t.Fatal("a registered region was invalidated")
	}
}

// TestWindowFastPath: the responder's one-pass WRITE path keeps the last
// message's region for the next, but never a window's: a type 2 window
// invalidated and bound again for another QP, under a new key, must not
// answer this QP through the region it kept (C10-72's QP association).
func TestWindowFastPath(t *testing.T) {
	c := New(t)
	defer c.Cleanup()
	tb := &c.E.MRs
	mr, err := tb.Register(1, c.Mem, ctxMemBase, accessAll|AccessMWBind)
	if err != nil {
		t.Fatal(err)
	}
	w, _ := tb.AllocMW(1, MWType2)
	rw := AccessRemoteWrite | AccessRemoteRead
	bind := func(qpn uint32) uint32 {
		t.Helper()
		key := w.NextRKey()
		if err := tb.bind(qpn, 1, &MWBind{MWKey: w.RKey(), RKey: key, MRKey: mr.LKey, Addr: ctxMemBase + 1024, Length: 1024, Access: rw}); err != nil {
			t.Fatal(err)
		}
		return key
	}
	write := func(key uint32, b byte) {
		c.SendRequest(bth.RCWriteOnly, &bth.PacketFields{RETH: bth.RETHFields{VA: ctxMemBase + 1024, RKey: key, DMALen: 8}}, bytes.Repeat([]byte{b}, 8), true)
	}
	k1 := bind(c.QP.QPN())
	write(k1, 1)
	c.Expect(opcodeIs(bth.RCAcknowledge), aethIs(ack, 1))
	write(k1, 2) // the kept region's path
	c.Expect(opcodeIs(bth.RCAcknowledge), aethIs(ack, 2))
	if c.Mem[1024] != 2 {
		t.Fatalf("WRITEs through the window landed as %d", c.Mem[1024])
	}
	if err := tb.invalidate(c.QP.QPN(), 1, k1); err != nil {
		t.Fatal(err)
	}
	k2 := bind(c.QP.QPN() + 1)
	write(k2, 3)
	c.Expect(opcodeIs(bth.RCAcknowledge), aethIs(bth.NAK(bth.NAKRemoteAccessError), 2))
	if c.Mem[1024] != 2 {
		t.Fatal("a window bound to another QP took this QP's WRITE")
	}
}
