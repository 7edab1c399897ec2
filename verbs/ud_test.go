package verbs_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/uroce/uroce/pkg/link/pipe"
	"github.com/uroce/uroce/verbs"
)

type udEnd struct {
	d  *verbs.Device
	pd *verbs.PD
	cq *verbs.CQ
	q  *verbs.QueuePair
	mr *verbs.MR
}

func newUDEnd(t *testing.T, d *verbs.Device, typ verbs.QPType, qkey uint32) *udEnd {
	t.Helper()
	e := &udEnd{d: d, pd: d.AllocPD(), cq: d.CreateCQ(256)}
	var err error
	e.q, err = e.pd.CreateQP(&verbs.QPInit{Type: typ, SendCQ: e.cq, RecvCQ: e.cq, Cap: verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.q.ActivateUD(qkey, 0x42); err != nil {
		t.Fatal(err)
	}
	if e.mr, err = e.pd.RegMR(make([]byte, 64*2048), verbs.AccessLocalWrite); err != nil {
		t.Fatal(err)
	}
	for i := range 32 {
		if err := e.q.PostRecv(&verbs.RecvWR{ID: uint64(i), SGL: []verbs.SGE{e.mr.SGE(32*2048+i*1024, 1024)}}); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// TestUDPingPong: datagrams both ways between two devices, inline and in
// background mode, UD and GSI: payloads, GRH, source QP and address.
func TestUDPingPong(t *testing.T) {
	for _, c := range []struct {
		name       string
		typ        verbs.QPType
		background bool
	}{
		{"ud-inline", verbs.QPTypeUD, false},
		{"ud-background", verbs.QPTypeUD, true},
		{"gsi-inline", verbs.QPTypeGSI, false},
		{"gsi-background", verbs.QPTypeGSI, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			la, lb := pipe.New(pipe.Config{})
			da, db := verbs.Open(la, verbs.Inline()), verbs.Open(lb, verbs.Inline())
			defer da.Close()
			defer db.Close()
			if c.background {
				da.Start()
				db.Start()
			}
			a, b := newUDEnd(t, da, c.typ, 0x11111111), newUDEnd(t, db, c.typ, 0x11111111)
			if c.typ == verbs.QPTypeGSI && (a.q.QPN() != 1 || b.q.QPN() != 1) {
				t.Fatalf("GSI QPNs %d %d", a.q.QPN(), b.q.QPN())
			}
			gb, err := db.GID(0)
			if err != nil {
				t.Fatal(err)
			}
			ah, err := a.pd.CreateAH(verbs.AHAttr{DGID: gb, HopLimit: 1})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			for i := range 20 {
				msg := fmt.Appendf(nil, "ping %d from %d", i, a.q.QPN())
				copy(a.mr.Buf()[i*64:], msg)
				wr := verbs.SendWR{ID: uint64(100 + i), Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{a.mr.SGE(i*64, len(msg))},
					AH: ah, RemoteQPN: b.q.QPN(), RemoteQKey: 0x11111111}
				if err := a.q.PostSend(&wr); err != nil {
					t.Fatal(err)
				}
				wc := waitWC(t, ctx, a.cq)
				if wc.Status != verbs.WCSuccess || wc.WRID != uint64(100+i) {
					t.Fatalf("send %d: %+v", i, wc)
				}
				wc = waitWC(t, ctx, b.cq)
				if wc.Status != verbs.WCSuccess || wc.Opcode != verbs.WCRecv || wc.Flags&verbs.WCGRH == 0 ||
					wc.ByteLen != uint32(verbs.GRHLen+len(msg)) || wc.SrcQP != a.q.QPN() || wc.SrcGID != da.Addr() {
					t.Fatalf("recv %d: %+v", i, wc)
				}
				off := 32*2048 + int(wc.WRID)*1024
				if got := b.mr.Buf()[off+verbs.GRHLen : off+int(wc.ByteLen)]; !bytes.Equal(got, msg) {
					t.Fatalf("recv %d: %q", i, got)
				}
				// Answer to where it came from, as a CM would.
				back, err := b.pd.CreateAH(verbs.AHAttr{DGID: wc.SrcGID})
				if err != nil {
					t.Fatal(err)
				}
				if err := b.q.PostRecv(&verbs.RecvWR{ID: wc.WRID, SGL: []verbs.SGE{b.mr.SGE(off, 1024)}}); err != nil {
					t.Fatal(err)
				}
				wr = verbs.SendWR{ID: 7, Opcode: verbs.WRSendWithImm, Imm: uint32(i), SGL: []verbs.SGE{b.mr.SGE(off+verbs.GRHLen, len(msg))},
					AH: back, RemoteQPN: wc.SrcQP, RemoteQKey: 0x80000000}
				if err := b.q.PostSend(&wr); err != nil {
					t.Fatal(err)
				}
				wc = waitWC(t, ctx, a.cq)
				if wc.Status != verbs.WCSuccess || wc.Flags&verbs.WCWithImm == 0 || wc.Imm != uint32(i) || wc.SrcQP != b.q.QPN() {
					t.Fatalf("echo %d: %+v", i, wc)
				}
				off = 32*2048 + int(wc.WRID)*1024
				if got := a.mr.Buf()[off+verbs.GRHLen : off+int(wc.ByteLen)]; !bytes.Equal(got, msg) {
					t.Fatalf("echo %d: %q", i, got)
				}
				if err := a.q.PostRecv(&verbs.RecvWR{ID: wc.WRID, SGL: []verbs.SGE{a.mr.SGE(off, 1024)}}); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func waitWC(t *testing.T, ctx context.Context, cq *verbs.CQ) verbs.WC {
	t.Helper()
	var wc [1]verbs.WC
	n, err := cq.Wait(ctx, wc[:])
	if err != nil || n != 1 {
		t.Fatalf("wait: %d, %v", n, err)
	}
	return wc[0]
}

func TestUDErrors(t *testing.T) {
	la, lb := pipe.New(pipe.Config{})
	da := verbs.Open(la, verbs.Inline())
	defer da.Close()
	defer lb.Close()
	pd := da.AllocPD()
	cq := da.CreateCQ(4)
	if _, err := pd.CreateQP(&verbs.QPInit{Type: verbs.QPTypeGSI, SendCQ: cq, RecvCQ: cq, Cap: verbs.QPCap{MaxSendWR: 1}}); err != nil {
		t.Fatal(err)
	}
	if _, err := pd.CreateQP(&verbs.QPInit{Type: verbs.QPTypeGSI, SendCQ: cq, RecvCQ: cq, Cap: verbs.QPCap{MaxSendWR: 1}}); !errors.Is(err, verbs.ErrBusy) {
		t.Fatalf("second GSI QP: %v", err)
	}
	for _, a := range []verbs.AHAttr{{}, {DGID: lb.Info().Addr, FlowLabel: 1 << 20}} {
		if _, err := pd.CreateAH(a); !errors.Is(err, verbs.ErrBadAttr) {
			t.Errorf("CreateAH(%+v): %v", a, err)
		}
	}
	if _, err := da.GID(1); !errors.Is(err, verbs.ErrNoAddr) {
		t.Fatalf("GID(1): %v", err)
	}
}

// TestUDPostNoAlloc: a UD WR built afresh for every post, AH and SGL
// included, stays on the caller's stack, and its receive allocates
// nothing either.
func TestUDPostNoAlloc(t *testing.T) {
	la, lb := pipe.New(pipe.Config{})
	da, db := verbs.Open(la, verbs.Inline()), verbs.Open(lb, verbs.Inline())
	defer da.Close()
	defer db.Close()
	a, b := newUDEnd(t, da, verbs.QPTypeUD, 5), newUDEnd(t, db, verbs.QPTypeUD, 5)
	dst := db.Addr()
	ctx := context.Background()
	i := 0
	op := func() {
		ah := verbs.AH{DGID: dst}
		err := a.q.PostSend(&verbs.SendWR{Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{a.mr.SGE(0, 64)},
			AH: &ah, RemoteQPN: b.q.QPN(), RemoteQKey: 5})
		if err != nil {
			t.Fatal(err)
		}
		waitWC(t, ctx, a.cq)
		wc := waitWC(t, ctx, b.cq)
		if err := b.q.PostRecv(&verbs.RecvWR{ID: wc.WRID, SGL: []verbs.SGE{b.mr.SGE(32*2048+int(wc.WRID)*1024, 1024)}}); err != nil {
			t.Fatal(err)
		}
		i++
	}
	for range 100 {
		op()
	}
	if n := testing.AllocsPerRun(200, op); n != 0 {
		t.Errorf("%v allocations per datagram", n)
	}
}
