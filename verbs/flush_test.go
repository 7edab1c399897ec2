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

// TestFlushAtomicWrite: ATOMIC WRITE and FLUSH through the verbs API, on
// the calling goroutine and in background mode, with the completions rdma-core
// gives (IBV_WC_ATOMIC_WRITE, IBV_WC_FLUSH) and the errors a peer answers:
// a region without flush access, a misaligned ATOMIC WRITE.
func TestFlushAtomicWrite(t *testing.T) {
	for _, background := range []bool{false, true} {
		la, lb := pipe.New(pipe.Config{})
		da, db := verbs.Open(la, verbs.Inline()), verbs.Open(lb, verbs.Inline())
		defer da.Close()
		defer db.Close()
		// The responder runs in the background; the requester on the
		// goroutine that waits for its completions, or in the background.
		db.Start()
		if background {
			da.Start()
		}
		type end struct {
			cq     *verbs.CQ
			q      *verbs.QueuePair
			mr, ro *verbs.MR
		}
		mk := func(d *verbs.Device) *end {
			pd := d.AllocPD()
			e := &end{cq: d.CreateCQ(64)}
			var err error
			if e.q, err = pd.CreateQP(&verbs.QPInit{SendCQ: e.cq, RecvCQ: e.cq, Cap: verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxInline: 64}}); err != nil {
				t.Fatal(err)
			}
			if e.mr, err = pd.RegMR(make([]byte, 64<<10), verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessFlushGlobal); err != nil {
				t.Fatal(err)
			}
			if e.ro, err = pd.RegMR(make([]byte, 4096), verbs.AccessLocalWrite|verbs.AccessRemoteWrite); err != nil {
				t.Fatal(err)
			}
			if _, err := pd.RegMR(make([]byte, 4096), verbs.AccessLocalWrite|verbs.AccessFlushPersistent); err == nil {
				t.Error("a persistent-flush region registered over ordinary memory")
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
		val := []byte{0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88}
		copy(a.mr.Buf()[64:], val)
		for i, wr := range []verbs.SendWR{
			{Opcode: verbs.WRAtomicWrite, SGL: []verbs.SGE{a.mr.SGE(64, 8)}, RemoteAddr: b.mr.Addr() + 256, RKey: b.mr.RKey()},
			{Opcode: verbs.WRAtomicWrite, Flags: verbs.SendInline, InlineData: val[:], RemoteAddr: b.mr.Addr() + 512, RKey: b.mr.RKey()},
			{Opcode: verbs.WRFlush, FlushType: verbs.FlushGlobal, FlushLevel: verbs.FlushRange, FlushLen: 1024, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()},
			{Opcode: verbs.WRFlush, FlushType: verbs.FlushGlobal, FlushLevel: verbs.FlushMR, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()},
		} {
			wr.ID, wr.Flags = uint64(i), wr.Flags|verbs.SendSignaled
			if err := a.q.PostSend(&wr); err != nil {
				t.Fatal(err)
			}
			want := verbs.WCAtomicWrite
			if wr.Opcode == verbs.WRFlush {
				want = verbs.WCFlush
			}
			if wc := waitWC(t, ctx, a.cq); wc.Status != verbs.WCSuccess || wc.Opcode != want || wc.WRID != uint64(i) {
				t.Fatalf("WR %d: %+v\nrequester %+v\nresponder %+v", i, wc, a.q.Counters(), b.q.Counters())
			}
		}
		if !bytes.Equal(b.mr.Buf()[256:264], val) || !bytes.Equal(b.mr.Buf()[512:520], val) {
			t.Fatalf("atomic writes landed as % x and % x", b.mr.Buf()[256:264], b.mr.Buf()[512:520])
		}
		// A region without flush access: remote access error, and the QP
		// is in the error state after it.
		wr := verbs.SendWR{ID: 9, Opcode: verbs.WRFlush, Flags: verbs.SendSignaled, FlushType: verbs.FlushGlobal, FlushLen: 8, RemoteAddr: b.ro.Addr(), RKey: b.ro.RKey()}
		if err := a.q.PostSend(&wr); err != nil {
			t.Fatal(err)
		}
		if wc := waitWC(t, ctx, a.cq); wc.Status != verbs.WCRemAccessErr || wc.Opcode != verbs.WCFlush {
			t.Fatalf("flush without access: %+v", wc)
		}
		// An ATOMIC WRITE of other than 8 bytes fails at post time.
		wr = verbs.SendWR{Opcode: verbs.WRAtomicWrite, SGL: []verbs.SGE{a.mr.SGE(0, 4)}}
		if err := a.q.PostSend(&wr); !errors.Is(err, verbs.ErrBadWR) {
			t.Errorf("4-byte ATOMIC WRITE: %v, want ErrBadWR", err)
		}
	}
}
