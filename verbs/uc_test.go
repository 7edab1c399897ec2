package verbs_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/uroce/uroce/pkg/link/pipe"
	"github.com/uroce/uroce/verbs"
)

// TestUCPingPong: UC QPs connected with Connect, inline and in background
// mode: SEND, SEND with immediate, WRITE and WRITE with immediate both
// ways, each sender completing with no ACK, and READ refused at post
// time.
func TestUCPingPong(t *testing.T) {
	for _, background := range []bool{false, true} {
		la, lb := pipe.New(pipe.Config{})
		da, db := verbs.Open(la, verbs.Inline()), verbs.Open(lb, verbs.Inline())
		defer da.Close()
		defer db.Close()
		if background {
			da.Start()
			db.Start()
		}
		type end struct {
			pd *verbs.PD
			cq *verbs.CQ
			q  *verbs.QueuePair
			mr *verbs.MR
		}
		mk := func(d *verbs.Device) *end {
			e := &end{pd: d.AllocPD(), cq: d.CreateCQ(64)}
			var err error
			if e.q, err = e.pd.CreateQP(&verbs.QPInit{Type: verbs.QPTypeUC, SendCQ: e.cq, RecvCQ: e.cq,
				Cap: verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16}}); err != nil {
				t.Fatal(err)
			}
			if e.mr, err = e.pd.RegMR(make([]byte, 64<<10), verbs.AccessLocalWrite|verbs.AccessRemoteWrite); err != nil {
				t.Fatal(err)
			}
			return e
		}
		a, b := mk(da), mk(db)
		if err := a.q.Connect(b.q.Endpoint(0), verbs.ConnectOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := b.q.Connect(a.q.Endpoint(0), verbs.ConnectOptions{}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		mtu := da.MaxPathMTU()
		want := uint64(0) // the packets b sends
		for i, op := range []verbs.WROpcode{verbs.WRSend, verbs.WRSendWithImm, verbs.WRWrite, verbs.WRWriteWithImm} {
			for _, dir := range [][2]*end{{a, b}, {b, a}} {
				s, r := dir[0], dir[1]
				n := 5000 + i // several packets at any path MTU
				if s == b {
					k := uint64((n + mtu - 1) / mtu)
					if op == verbs.WRWrite {
						k *= 2
					}
					want += k
				}
				msg := bytes.Repeat([]byte{byte(i + 1)}, n)
				copy(s.mr.Buf(), msg)
				if err := r.q.PostRecv(&verbs.RecvWR{ID: 9, SGL: []verbs.SGE{r.mr.SGE(0x8000, 0x4000)}}); err != nil {
					t.Fatal(err)
				}
				wr := verbs.SendWR{ID: uint64(i), Opcode: op, Flags: verbs.SendSignaled, SGL: []verbs.SGE{s.mr.SGE(0, n)},
					Imm: 77, RemoteAddr: r.mr.Addr() + 0x8000, RKey: r.mr.RKey()}
				if err := s.q.PostSend(&wr); err != nil {
					t.Fatal(err)
				}
				if wc := waitWC(t, ctx, s.cq); wc.Status != verbs.WCSuccess || wc.WRID != uint64(i) {
					t.Fatalf("%v: send %+v", op, wc)
				}
				if op == verbs.WRWrite {
					// Nothing completes at the receiver: a SEND
					// behind the WRITE uses the WQE, and arrives
					// after it.
					wr.Opcode = verbs.WRSend
					if err := s.q.PostSend(&wr); err != nil {
						t.Fatal(err)
					}
					waitWC(t, ctx, s.cq)
				}
				wc := waitWC(t, ctx, r.cq)
				if wc.Status != verbs.WCSuccess || wc.WRID != 9 || int(wc.ByteLen) != n || wc.SrcQP != s.q.QPN() ||
					(op == verbs.WRSendWithImm || op == verbs.WRWriteWithImm) != (wc.Flags&verbs.WCWithImm != 0) {
					t.Fatalf("%v: recv %+v", op, wc)
				}
				if !bytes.Equal(r.mr.Buf()[0x8000:0x8000+n], msg) {
					t.Fatalf("%v: data differs", op)
				}
			}
		}
		err := a.q.PostSend(&verbs.SendWR{Opcode: verbs.WRRead, SGL: []verbs.SGE{a.mr.SGE(0, 8)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()})
		if !errors.Is(err, verbs.ErrBadWR) {
			t.Fatalf("READ on UC: %v", err)
		}
		if c := a.q.Counters(); c.RxPackets != want {
			// b's five messages' packets, and never an ACK.
			t.Errorf("a received %d packets, b sent %d", c.RxPackets, want)
		}
	}
}
