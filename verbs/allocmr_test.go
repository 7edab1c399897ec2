package verbs_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/uroce/uroce/pkg/link/pipe"
	"github.com/uroce/uroce/verbs"
)

// TestAllocMR moves data between regions of mapped memory: a WRITE into
// the peer's and a READ back out of it, page-aligned and sized as asked;
// after Dereg the peer's key earns a remote access error (a completion
// status, not a fault), and Close unmaps without touching anything.
func TestAllocMR(t *testing.T) {
	la, lb := pipe.New(pipe.Config{})
	a, b := verbs.Open(la, verbs.Inline()), verbs.Open(lb, verbs.Inline())
	defer a.Close()
	defer b.Close()
	const size = 100 << 10
	all := verbs.AccessLocalWrite | verbs.AccessRemoteWrite | verbs.AccessRemoteRead
	setup := func(d *verbs.Device) (*verbs.QueuePair, *verbs.MR, *verbs.CQ) {
		pd := d.AllocPD()
		cq := d.CreateCQ(16)
		q, err := pd.CreateQP(&verbs.QPInit{SendCQ: cq, RecvCQ: cq, Cap: verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16}})
		if err != nil {
			t.Fatal(err)
		}
		mr, err := pd.AllocMR(size, all)
		if err != nil {
			t.Fatal(err)
		}
		if len(mr.Buf()) != size || mr.Addr()%4096 != 0 {
			t.Fatalf("region of %d bytes at %#x, want %d page-aligned", len(mr.Buf()), mr.Addr(), size)
		}
		return q, mr, cq
	}
	qa, ma, ca := setup(a)
	qb, mb, cb := setup(b)
	connectRC(t, qa, qb)
	wait := func() verbs.WC {
		var wc [1]verbs.WC
		var none [0]verbs.WC
		for {
			if ca.Poll(wc[:]) == 1 {
				return wc[0]
			}
			cb.Poll(none[:])
		}
	}
	for i := range ma.Buf() {
		ma.Buf()[i] = byte(i * 7)
	}
	post := func(op verbs.WROpcode, local int) verbs.WC {
		t.Helper()
		err := qa.PostSend(&verbs.SendWR{ID: 1, Opcode: op, Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{ma.SGE(local, size/2)}, RemoteAddr: mb.Addr(), RKey: mb.RKey()})
		if err != nil {
			t.Fatal(err)
		}
		return wait()
	}
	if wc := post(verbs.WRWrite, 0); wc.Status != verbs.WCSuccess {
		t.Fatalf("WRITE: %v", wc.Status)
	}
	// Synchronise with b's engine before reading its memory: a call that
	// runs on the engine's owner.
	_ = b.Counters()
	if !bytes.Equal(mb.Buf()[:size/2], ma.Buf()[:size/2]) {
		t.Fatal("WRITE: peer's region differs")
	}
	if wc := post(verbs.WRRead, size/2); wc.Status != verbs.WCSuccess {
		t.Fatalf("READ: %v", wc.Status)
	}
	if !bytes.Equal(ma.Buf()[size/2:], ma.Buf()[:size/2]) {
		t.Fatal("READ: data differs")
	}
	if err := mb.Dereg(); err != nil {
		t.Fatal(err)
	}
	if wc := post(verbs.WRWrite, 0); wc.Status != verbs.WCRemAccessErr {
		t.Fatalf("WRITE after Dereg: %v, want remote access error", wc.Status)
	}
	if _, err := a.AllocPD().AllocMR(0, all); !errors.Is(err, verbs.ErrBadWR) {
		t.Errorf("AllocMR(0): %v", err)
	}
}
