package verbs_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/uroce/uroce/pkg/link/pipe"
	"github.com/uroce/uroce/verbs"
)

// TestMemoryWindows: the verbs calls a storage target makes (NVMe-oF's
// pattern). b binds a type 2 window over part of its region and hands a
// its key; a WRITEs through it and then SENDs with invalidate, after which
// the key fails. A fast-registration region is mapped, registered with
// WRRegMR, written by a, and taken back with WRLocalInv.
func TestMemoryWindows(t *testing.T) {
	la, lb := pipe.New(pipe.Config{})
	da, db := verbs.Open(la, verbs.Inline()), verbs.Open(lb, verbs.Inline())
	defer da.Close()
	defer db.Close()
	db.Start()
	type end struct {
		pd *verbs.PD
		cq *verbs.CQ
		q  *verbs.QueuePair
		mr *verbs.MR
	}
	mk := func(d *verbs.Device) *end {
		e := &end{pd: d.AllocPD(), cq: d.CreateCQ(64)}
		var err error
		if e.q, err = e.pd.CreateQP(&verbs.QPInit{SendCQ: e.cq, RecvCQ: e.cq, Cap: verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16}}); err != nil {
			t.Fatal(err)
		}
		if e.mr, err = e.pd.RegMR(make([]byte, 64<<10), verbs.AccessLocalWrite|verbs.AccessMWBind); err != nil {
			t.Fatal(err)
		}
		return e
	}
	a, b := mk(da), mk(db)
	for _, c := range [][2]*end{{a, b}, {b, a}} {
		if err := c[0].q.Connect(c[1].q.Endpoint(0), verbs.ConnectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	wc := func(e *end, want verbs.WCOpcode) verbs.WC {
		t.Helper()
		c := waitWC(t, ctx, e.cq)
		if c.Status != verbs.WCSuccess || c.Opcode != want {
			t.Fatalf("completion %+v, want %v success", c, want)
		}
		return c
	}

	mw, err := b.pd.AllocMW(verbs.MWType2)
	if err != nil {
		t.Fatal(err)
	}
	key, err := b.q.BindMW(mw, 1, verbs.SendSignaled, b.mr, 4096, 8192, verbs.AccessRemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	// b's engine runs in the background; its own completions come on
	// its CQ.
	wc(b, verbs.WCBindMW)
	if mw.RKey() != key {
		t.Fatalf("window key %#x, want %#x", mw.RKey(), key)
	}
	msg := []byte("through a window")
	copy(a.mr.Buf(), msg)
	if err := a.q.PostSend(&verbs.SendWR{Opcode: verbs.WRWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{a.mr.SGE(0, len(msg))},
		RemoteAddr: b.mr.Addr() + 4096 + 10, RKey: key}); err != nil {
		t.Fatal(err)
	}
	wc(a, verbs.WCWrite)
	if !bytes.Equal(b.mr.Buf()[4096+10:][:len(msg)], msg) {
		t.Fatal("the WRITE through the window landed wrong")
	}
	if err := b.q.PostRecv(&verbs.RecvWR{ID: 7, SGL: []verbs.SGE{b.mr.SGE(0, 256)}}); err != nil {
		t.Fatal(err)
	}
	if err := a.q.PostSend(&verbs.SendWR{Opcode: verbs.WRSendWithInv, Flags: verbs.SendSignaled, SGL: []verbs.SGE{a.mr.SGE(0, 8)}, InvalidateRKey: key}); err != nil {
		t.Fatal(err)
	}
	wc(a, verbs.WCSend)
	if c := wc(b, verbs.WCRecv); c.Flags&verbs.WCWithInv == 0 || c.Imm != key {
		t.Fatalf("receive %+v, want WCWithInv of %#x", c, key)
	}
	if err := a.q.PostSend(&verbs.SendWR{Opcode: verbs.WRWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{a.mr.SGE(0, 8)},
		RemoteAddr: b.mr.Addr() + 4096, RKey: key}); err != nil {
		t.Fatal(err)
	}
	if c := waitWC(t, ctx, a.cq); c.Status != verbs.WCRemAccessErr {
		t.Fatalf("WRITE through an invalidated window: %+v", c)
	}
	if err := mw.Dealloc(); err != nil {
		t.Fatal(err)
	}

	// Fast registration on a fresh pair of QPs (a's is in ERR now).
	a, b = mk(da), mk(db)
	for _, c := range [][2]*end{{a, b}, {b, a}} {
		if err := c[0].q.Connect(c[1].q.Endpoint(0), verbs.ConnectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	copy(a.mr.Buf(), msg)
	f, err := b.pd.AllocFastMR(4096)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	if err := f.Map(buf); err != nil {
		t.Fatal(err)
	}
	reg := f.Reg(verbs.AccessLocalWrite | verbs.AccessRemoteWrite)
	if err := b.q.PostSend(&verbs.SendWR{Opcode: verbs.WRRegMR, Flags: verbs.SendSignaled, Reg: reg}); err != nil {
		t.Fatal(err)
	}
	wc(b, verbs.WCRegMR)
	if f.RKey() != reg.Key {
		t.Fatalf("region key %#x, want %#x", f.RKey(), reg.Key)
	}
	if err := a.q.PostSend(&verbs.SendWR{Opcode: verbs.WRWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{a.mr.SGE(0, len(msg))},
		RemoteAddr: f.Addr() + 100, RKey: f.RKey()}); err != nil {
		t.Fatal(err)
	}
	wc(a, verbs.WCWrite)
	if !bytes.Equal(buf[100:][:len(msg)], msg) {
		t.Fatal("the WRITE to the fast-registration region landed wrong")
	}
	if err := b.q.PostSend(&verbs.SendWR{Opcode: verbs.WRLocalInv, Flags: verbs.SendSignaled, InvalidateRKey: f.RKey()}); err != nil {
		t.Fatal(err)
	}
	wc(b, verbs.WCLocalInv)
	if err := a.q.PostSend(&verbs.SendWR{Opcode: verbs.WRWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{a.mr.SGE(0, 8)},
		RemoteAddr: f.Addr(), RKey: f.RKey()}); err != nil {
		t.Fatal(err)
	}
	if c := waitWC(t, ctx, a.cq); c.Status != verbs.WCRemAccessErr {
		t.Fatalf("WRITE to an invalidated region: %+v", c)
	}
}
