package verbs_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/uroce/uroce/cc"
	"github.com/uroce/uroce/pkg/link/pipe"
	"github.com/uroce/uroce/pkg/netem"
	"github.com/uroce/uroce/verbs"
)

// TestCC: a QP's congestion control comes from its QPInit or the device
// default, and its counters and rate show through CCStats, QPStats and the
// device's Counters.
func TestCC(t *testing.T) {
	la, lb := pipe.New(pipe.Config{Seed: 1, AtoB: netem.Faults{Rate: 10e6, ECN: &netem.RED{Kmin: 0, Kmax: 0}}})
	da, db := verbs.Open(la, verbs.Inline()), verbs.Open(lb, verbs.Inline())
	t.Cleanup(func() { da.Close(); db.Close() })
	if err := da.SetCC(cc.Config{Kind: 99}); !errors.Is(err, cc.ErrUnknownKind) {
		t.Fatalf("SetCC of an unknown kind: %v, want cc.ErrUnknownKind", err)
	}
	if err := da.SetCC(cc.DefaultConfig(cc.KindHPCC, cc.Gbps)); !errors.Is(err, cc.ErrNoINT) {
		t.Fatalf("SetCC(HPCC): %v, want cc.ErrNoINT", err)
	}
	if err := da.SetCC(cc.DefaultConfig(cc.KindDCQCN, cc.Gbps)); err != nil {
		t.Fatal(err)
	}
	mk := func(d *verbs.Device, cfg *cc.Config) (*verbs.QueuePair, *verbs.CQ, *verbs.MR) {
		pd := d.AllocPD()
		cq := d.CreateCQ(64)
		q, err := pd.CreateQP(&verbs.QPInit{SendCQ: cq, RecvCQ: cq, Cap: verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16}, CC: cfg})
		if err != nil {
			t.Fatal(err)
		}
		mr, err := pd.RegMR(make([]byte, 1<<16), verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
		if err != nil {
			t.Fatal(err)
		}
		return q, cq, mr
	}
	qa, cqa, mra := mk(da, nil)
	none := cc.DefaultConfig(cc.KindNone, cc.Gbps)
	qb, _, mrb := mk(db, &none)
	if err := qa.Connect(qb.Endpoint(1), verbs.ConnectOptions{PSN: 100}); err != nil {
		t.Fatal(err)
	}
	if err := qb.Connect(qa.Endpoint(100), verbs.ConnectOptions{PSN: 1}); err != nil {
		t.Fatal(err)
	}
	if k := qa.CCStats().Kind; k != cc.KindDCQCN {
		t.Fatalf("QP with no CC of its own runs %v, want the device's dcqcn", k)
	}
	// Every packet queued behind another is marked, so the receiver
	// sends CNPs and the sender slows down.
	wr := verbs.SendWR{Opcode: verbs.WRWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{mra.SGE(0, 1<<16)}, RemoteAddr: mrb.Addr(), RKey: mrb.RKey()}
	if err := qa.PostSend(&wr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	wc := make([]verbs.WC, 1)
	db.Start() // the receiver polls no CQ: its engine runs in the background
	for done := false; !done; {
		n, err := cqa.Wait(ctx, wc)
		if err != nil {
			t.Fatal(err)
		}
		done = n == 1 && wc[0].Status == verbs.WCSuccess
	}
	s := qa.CCStats()
	if s.RPCNPHandled == 0 || s.Rate >= cc.Gbps {
		t.Errorf("sender: %+v", s)
	}
	if c := db.Counters().CC; c.NPECNMarkedRoCEPackets == 0 || c.NPCNPSent == 0 {
		t.Errorf("receiver device counters %+v", c)
	}
	st := da.QPStats(nil)
	if len(st) != 1 || st[0].QPN != qa.QPN() || st[0].CC.RPCNPHandled != s.RPCNPHandled || st[0].Counters.TxPackets == 0 {
		t.Errorf("QPStats %+v", st)
	}
}
