package qp

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/pkg/link"
)

// FuzzDatagram feeds arbitrary packets to a UD QP and to the GSI QP, each
// with one receive WQE between guard bytes: the engine must never panic,
// never write outside the WQE's buffer, never complete a receive longer
// than it, and send nothing in answer (UD has no responses).
func FuzzDatagram(f *testing.F) {
	seed := func(op bth.Opcode, qkey uint32, payload []byte, src netip.Addr, gsi bool) {
		pf := bth.PacketFields{BTH: bth.BTHFields{Opcode: op, PKey: 0xffff, PSN: 5}, DETH: bth.DETHFields{QKey: qkey, SrcQP: 0x33}, ImmDt: 7}
		b := make([]byte, bth.PacketLen(op, len(payload)))
		if _, err := pf.Encode(b, payload); err != nil {
			f.Fatal(err)
		}
		a := src.As16()
		f.Add(b, a[:], gsi)
	}
	v4, v6 := netip.MustParseAddr("10.0.0.9"), netip.MustParseAddr("fd00::9")
	seed(bth.UDSendOnly, 0x77, []byte("hello"), v4, false)
	seed(bth.UDSendOnlyImm, 0x77, make([]byte, 160), v6, false)
	seed(bth.UDSendOnly, GSIQKey, make([]byte, 256), v4, true)
	seed(bth.UDSendOnly, 0x78, []byte("wrong qkey"), v4, false)
	seed(bth.RCSendOnly, 0, []byte("RC to UD"), v4, false)
	f.Fuzz(func(t *testing.T, pkt, src []byte, gsi bool) {
		port := &fakePort{free: 64, size: 4200}
		e := NewEngine(port)
		cq := NewCQ(16)
		typ, qkey := QPTypeUD, uint32(0x77)
		if gsi {
			typ = QPTypeGSI
		}
		q, err := e.CreateQP(QPConfig{Type: typ, PD: 1, SendCQ: cq, RecvCQ: cq, MaxSendWR: 4, MaxRecvWR: 4, MaxRecvSGE: 2})
		if err != nil {
			t.Fatal(err)
		}
		now := time.Unix(1000, 0)
		for _, st := range []struct {
			a Attr
			m AttrMask
		}{
			{Attr{State: StateInit, QKey: qkey}, AttrState | AttrQKey},
			{Attr{State: StateRTR}, AttrState},
			{Attr{State: StateRTS, SQPSN: 1}, AttrState | AttrSQPSN},
		} {
			if err := q.Modify(&st.a, st.m); err != nil {
				t.Fatal(err)
			}
		}
		all := make([]byte, 4096)
		for i := range all {
			all[i] = byte(i*31 + 7)
		}
		before := bytes.Clone(all)
		mr, err := e.MRs.Register(1, all, 0x10000, AccessLocalWrite)
		if err != nil {
			t.Fatal(err)
		}
		// Two SGEs of 100 and 150 bytes at [1000, 1100) and [2000, 2150).
		if err := q.PostRecv(&RecvWR{ID: 1, SGL: []SGE{{Addr: 0x10000 + 1000, Length: 100, LKey: mr.LKey}, {Addr: 0x10000 + 2000, Length: 150, LKey: mr.LKey}}}); err != nil {
			t.Fatal(err)
		}
		if len(pkt) >= bth.BTHLen {
			bth.BTH(pkt).SetDestQP(q.QPN())
		}
		var a16 [16]byte
		copy(a16[:], src)
		remote := netip.AddrFrom16(a16).Unmap()
		buf := make([]byte, link.Headroom+len(pkt))
		copy(buf[link.Headroom:], pkt)
		lp := &link.Packet{Buf: buf, Off: link.Headroom, Len: len(pkt), Remote: remote}
		for range 2 {
			e.Receive(now, []*link.Packet{lp})
			e.Process(now)
		}
		if !bytes.Equal(all[:1000], before[:1000]) || !bytes.Equal(all[1100:2000], before[1100:2000]) || !bytes.Equal(all[2150:], before[2150:]) {
			t.Fatal("wrote outside the receive buffers")
		}
		var wc [16]Completion
		for _, c := range wc[:cq.Poll(wc[:])] {
			if c.Status == WCSuccess && (c.ByteLen > 250 || c.ByteLen < GRHLen || c.Flags&WCGRH == 0) {
				t.Fatalf("completion %+v", c)
			}
		}
		if len(port.sent) != 0 {
			t.Fatalf("a datagram QP answered with %d packets", len(port.sent))
		}
	})
}
