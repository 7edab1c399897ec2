package qp

import (
	"errors"
	"testing"
	"time"

	"github.com/uroce/uroce/pkg/netem"
)

func pollAll(s *side, cq *CQ) []Completion {
	var out []Completion
	for {
		n := cq.Poll(s.wc[:])
		if n == 0 {
			return out
		}
		out = append(out, s.wc[:n]...)
	}
}

// TestRemoteErrors: a bad R_Key, a range outside the region and a missing
// access flag complete the WR with a remote access error, flush the WRs
// behind it, and move both QPs to ERR.
func TestRemoteErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		wr   func(p *pair) SendWR
		want WCStatus
	}{
		{"bad rkey", func(p *pair) SendWR {
			return SendWR{Opcode: WRWrite, SGL: []SGE{p.a.sge(0, 16)}, RemoteAddr: memBase, RKey: p.b.mr.RKey ^ 0x100}
		}, WCRemAccessErr},
		{"out of bounds", func(p *pair) SendWR {
			return SendWR{Opcode: WRRead, SGL: []SGE{p.a.sge(0, 16)}, RemoteAddr: memBase + uint64(len(p.b.mem)) - 8, RKey: p.b.mr.RKey}
		}, WCRemAccessErr},
		{"no remote write on the MR", func(p *pair) SendWR {
			m, err := p.b.e.MRs.Register(1, make([]byte, 64), 0x1000, AccessLocalWrite|AccessRemoteRead)
			if err != nil {
				t.Fatal(err)
			}
			return SendWR{Opcode: WRWrite, SGL: []SGE{p.a.sge(0, 16)}, RemoteAddr: 0x1000, RKey: m.RKey}
		}, WCRemAccessErr},
		{"misaligned atomic", func(p *pair) SendWR {
			return SendWR{Opcode: WRFetchAdd, SGL: []SGE{p.a.sge(0, 8)}, RemoteAddr: memBase + 4, RKey: p.b.mr.RKey}
		}, WCRemInvReqErr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t, pairConfig{mtu: 1024, retry: 7, rnrRetry: 7})
			wr := tc.wr(p)
			wr.ID = 1
			if err := p.a.qp.PostSend(p.now, &wr); err != nil {
				t.Fatal(err)
			}
			for i := range 3 {
				if err := p.a.qp.PostSend(p.now, &SendWR{ID: uint64(2 + i), Opcode: WRWrite, Flags: FlagSignaled, SGL: []SGE{p.a.sge(0, 8)}, RemoteAddr: memBase, RKey: p.b.mr.RKey}); err != nil {
					t.Fatal(err)
				}
			}
			var wcs []Completion
			p.run(func() bool { wcs = append(wcs, pollAll(p.a, p.a.scq)...); return len(wcs) == 4 })
			if wcs[0].WRID != 1 || wcs[0].Status != tc.want {
				t.Fatalf("first completion %+v, want %v", wcs[0], tc.want)
			}
			for i, wc := range wcs[1:] {
				if wc.WRID != uint64(2+i) || wc.Status != WCWRFlushErr {
					t.Fatalf("completion %+v, want a flush of WR %d", wc, 2+i)
				}
			}
			if p.a.qp.State() != StateErr || p.b.qp.State() != StateErr {
				t.Fatalf("states %v %v", p.a.qp.State(), p.b.qp.State())
			}
			// In ERR a new WR completes at once, flushed.
			if err := p.a.qp.PostSend(p.now, &SendWR{ID: 9, Opcode: WRSend}); err != nil {
				t.Fatal(err)
			}
			if wc := pollAll(p.a, p.a.scq); len(wc) != 1 || wc[0].Status != WCWRFlushErr || wc[0].WRID != 9 {
				t.Fatalf("post in ERR: %+v", wc)
			}
		})
	}
}

func TestLocalErrors(t *testing.T) {
	p := newPair(t, pairConfig{mtu: 1024, retry: 7, rnrRetry: 7})
	// An SGE beyond its region: local protection error, QP to ERR.
	if err := p.a.qp.PostSend(p.now, &SendWR{ID: 1, Opcode: WRSend, SGL: []SGE{p.a.sge(len(p.a.mem)-4, 8)}}); err != nil {
		t.Fatal(err)
	}
	p.a.e.Process(p.now)
	wc := pollAll(p.a, p.a.scq)
	if len(wc) != 1 || wc[0].Status != WCLocProtErr || p.a.qp.State() != StateErr {
		t.Fatalf("%+v state %v", wc, p.a.qp.State())
	}
	// A READ into a region without local write.
	p = newPair(t, pairConfig{mtu: 1024, retry: 7, rnrRetry: 7})
	ro, _ := p.a.e.MRs.Register(1, make([]byte, 64), 0x1000, 0)
	if err := p.a.qp.PostSend(p.now, &SendWR{ID: 1, Opcode: WRRead, SGL: []SGE{{Addr: 0x1000, Length: 8, LKey: ro.LKey}}, RemoteAddr: memBase, RKey: p.b.mr.RKey}); err != nil {
		t.Fatal(err)
	}
	p.a.e.Process(p.now)
	if wc := pollAll(p.a, p.a.scq); len(wc) != 1 || wc[0].Status != WCLocProtErr {
		t.Fatalf("%+v", wc)
	}
}

// TestRNR: a SEND with no receive posted is RNR NAKed, retried after the
// RNR timer, and succeeds once a receive is posted; with rnr_retry
// exhausted it fails with WCRNRRetryExcErr.
func TestRNR(t *testing.T) {
	p := newPair(t, pairConfig{mtu: 1024, retry: 7, rnrRetry: 7, rnrTimer: 1})
	if err := p.a.qp.PostSend(p.now, &SendWR{ID: 1, Opcode: WRSend, Flags: FlagSignaled, SGL: []SGE{p.a.sge(0, 100)}}); err != nil {
		t.Fatal(err)
	}
	p.run(func() bool { return p.a.e.Stats().RNRNAKsRcvd >= 3 })
	if p.a.scq.Len() != 0 {
		t.Fatal("completed without a receive")
	}
	if err := p.b.qp.PostRecv(&RecvWR{ID: 5, SGL: []SGE{p.b.sge(0, 100)}}); err != nil {
		t.Fatal(err)
	}
	p.run(func() bool { return p.a.scq.Len() == 1 && p.b.rcq.Len() == 1 })
	if wc := pollAll(p.a, p.a.scq); wc[0].Status != WCSuccess {
		t.Fatalf("%+v", wc)
	}

	p = newPair(t, pairConfig{mtu: 1024, retry: 7, rnrRetry: 2, rnrTimer: 1})
	if err := p.a.qp.PostSend(p.now, &SendWR{ID: 1, Opcode: WRSend, SGL: []SGE{p.a.sge(0, 100)}}); err != nil {
		t.Fatal(err)
	}
	p.run(func() bool { return p.a.scq.Len() == 1 })
	if wc := pollAll(p.a, p.a.scq); wc[0].Status != WCRNRRetryExcErr || p.a.e.Stats().RNRNAKsRcvd != 3 {
		t.Fatalf("%+v after %d RNR NAKs", wc, p.a.e.Stats().RNRNAKsRcvd)
	}
}

// TestPeerGone: with every packet lost, the WR fails after retry_cnt
// retries with WCRetryExcErr and the rest are flushed.
func TestPeerGone(t *testing.T) {
	p := newPair(t, pairConfig{mtu: 1024, retry: 3, rnrRetry: 7, faults: netem.Faults{Drop: 1}})
	start := p.now
	for i := range 3 {
		if err := p.a.qp.PostSend(p.now, &SendWR{ID: uint64(i), Opcode: WRWrite, SGL: []SGE{p.a.sge(0, 10)}, RemoteAddr: memBase, RKey: p.b.mr.RKey}); err != nil {
			t.Fatal(err)
		}
	}
	var wcs []Completion
	p.run(func() bool { wcs = append(wcs, pollAll(p.a, p.a.scq)...); return len(wcs) == 3 })
	if wcs[0].Status != WCRetryExcErr || wcs[1].Status != WCWRFlushErr || wcs[2].Status != WCWRFlushErr {
		t.Fatalf("%+v", wcs)
	}
	if st := p.a.e.Stats(); st.Timeouts != 4 {
		t.Errorf("%d timeouts, want retry_cnt+1 = 4", st.Timeouts)
	}
	// Four timeouts of 4.096 µs × 2^14 each.
	if el, want := p.now.Sub(start), 4*time.Duration(4096<<14); el != want {
		t.Errorf("failed after %v, want %v", el, want)
	}
}

func TestStateAndQueueErrors(t *testing.T) {
	e := NewEngine(&fakePort{free: -1, size: 2048})
	cq := NewCQ(8)
	q, err := e.CreateQP(QPConfig{PD: 1, SendCQ: cq, RecvCQ: cq, MaxSendWR: 2, MaxRecvWR: 1})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(0, 0)
	if err := q.PostSend(now, &SendWR{}); !errors.Is(err, ErrBadState) {
		t.Errorf("post send in RESET: %v", err)
	}
	if err := q.PostRecv(&RecvWR{}); !errors.Is(err, ErrBadState) {
		t.Errorf("post recv in RESET: %v", err)
	}
	if err := q.Modify(&Attr{State: StateRTR}, AttrState); !errors.Is(err, ErrBadTransition) {
		t.Errorf("RESET to RTR: %v", err)
	}
	if err := q.Modify(&Attr{State: StateInit}, AttrState); !errors.Is(err, ErrMissingAttr) {
		t.Errorf("RESET to INIT without access flags: %v", err)
	}
	if err := q.Modify(&Attr{State: StateInit, AccessFlags: AccessRemoteWrite}, AttrState|AttrAccessFlags); err != nil {
		t.Fatal(err)
	}
	if err := q.PostRecv(&RecvWR{}); err != nil {
		t.Errorf("post recv in INIT: %v", err)
	}
	if err := q.PostRecv(&RecvWR{}); !errors.Is(err, ErrQueueFull) {
		t.Errorf("second recv on a queue of one: %v", err)
	}
	rtr := Attr{State: StateRTR, DestAddr: ctxPeer, PathMTU: 1000, DestQPN: 5, MaxDestRdAtomic: 1}
	m := AttrState | AttrAV | AttrPathMTU | AttrDestQPN | AttrRQPSN | AttrMaxDestRdAtomic | AttrMinRNRTimer
	if err := q.Modify(&rtr, m); !errors.Is(err, ErrBadAttr) {
		t.Errorf("path MTU 1000: %v", err)
	}
	rtr.PathMTU = 1024
	if err := q.Modify(&rtr, m); err != nil {
		t.Fatal(err)
	}
	if err := q.PostSend(now, &SendWR{}); !errors.Is(err, ErrBadState) {
		t.Errorf("post send in RTR: %v", err)
	}
	rts := Attr{State: StateRTS, Timeout: 32, RetryCnt: 7, RNRRetry: 7}
	rm := AttrState | AttrTimeout | AttrRetryCnt | AttrRNRRetry | AttrSQPSN | AttrMaxQPRdAtomic
	if err := q.Modify(&rts, rm); !errors.Is(err, ErrBadAttr) {
		t.Errorf("timeout 32: %v", err)
	}
	rts.Timeout = 8
	if err := q.Modify(&rts, rm); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := q.PostSend(now, &SendWR{ID: uint64(i), Opcode: WRSend}); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.PostSend(now, &SendWR{Opcode: WRSend}); !errors.Is(err, ErrQueueFull) {
		t.Errorf("third send on a queue of two: %v", err)
	}
	if err := q.PostSend(now, &SendWR{Opcode: WRSend, Flags: FlagInline, InlineData: make([]byte, 1)}); !errors.Is(err, ErrQueueFull) && !errors.Is(err, ErrBadWR) {
		t.Errorf("inline beyond MaxInline: %v", err)
	}
	if err := q.Modify(&Attr{State: StateErr}, AttrState); err != nil {
		t.Fatal(err)
	}
	if n := cq.Len(); n != 3 {
		t.Errorf("%d flush completions, want 3", n)
	}
	if err := q.Modify(&Attr{State: StateReset}, AttrState); err != nil {
		t.Fatal(err)
	}
}

func TestNextOpcode(t *testing.T) {
	for _, tc := range []struct {
		op          WROpcode
		first, last bool
		want        string
	}{
		{WRSend, true, true, "RC_SEND_ONLY"},
		{WRSend, true, false, "RC_SEND_FIRST"},
		{WRSend, false, false, "RC_SEND_MIDDLE"},
		{WRSendWithImm, false, true, "RC_SEND_LAST_WITH_IMMEDIATE"},
		{WRSendWithImm, true, true, "RC_SEND_ONLY_WITH_IMMEDIATE"},
		{WRWrite, true, false, "RC_RDMA_WRITE_FIRST"},
		{WRWrite, false, true, "RC_RDMA_WRITE_LAST"},
		{WRWriteWithImm, false, true, "RC_RDMA_WRITE_LAST_WITH_IMMEDIATE"},
		{WRWriteWithImm, true, true, "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE"},
		{WRRead, true, true, "RC_RDMA_READ_REQUEST"},
		{WRFetchAdd, true, true, "RC_FETCH_ADD"},
		{WRCompareSwap, true, true, "RC_COMPARE_SWAP"},
	} {
		if got := nextOpcode(tc.op, tc.first, tc.last).String(); got != tc.want {
			t.Errorf("nextOpcode(%v, %v, %v) = %s, want %s", tc.op, tc.first, tc.last, got, tc.want)
		}
	}
}

// TestLocalErrorAfterSends: a WQE that fails its local checks in the turn
// that sent the WQEs before it moves the QP to ERR with no ACK timer left
// running, and every WR completes: the sent ones flushed, the failed one
// with its own status.
func TestLocalErrorAfterSends(t *testing.T) {
	p := newPair(t, pairConfig{mtu: 1024, retry: 7, rnrRetry: 7})
	for id := uint64(1); id <= 2; id++ {
		if err := p.a.qp.PostSend(p.now, &SendWR{ID: id, Opcode: WRWrite, Flags: FlagSignaled, SGL: []SGE{p.a.sge(0, 64)}, RemoteAddr: memBase, RKey: p.b.mr.RKey}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.a.qp.PostSend(p.now, &SendWR{ID: 3, Opcode: WRWrite, Flags: FlagSignaled, SGL: []SGE{p.a.sge(len(p.a.mem)-4, 8)}, RemoteAddr: memBase, RKey: p.b.mr.RKey}); err != nil {
		t.Fatal(err)
	}
	p.a.e.Process(p.now)
	if p.a.qp.State() != StateErr {
		t.Fatalf("state %v", p.a.qp.State())
	}
	if p.a.qp.retrans.idx >= 0 {
		t.Fatal("ACK timer running on a QP in ERR")
	}
	want := []WCStatus{WCWRFlushErr, WCWRFlushErr, WCLocProtErr}
	wc := pollAll(p.a, p.a.scq)
	if len(wc) != len(want) {
		t.Fatalf("%d completions: %+v", len(wc), wc)
	}
	for i, c := range wc {
		if c.WRID != uint64(i+1) || c.Status != want[i] {
			t.Fatalf("completion %d: %+v, want WR %d %v", i, c, i+1, want[i])
		}
	}
}
