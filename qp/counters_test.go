package qp

import (
	"testing"

	"github.com/uroce/uroce/pkg/link/pipe"
)

// TestRDMASends checks rxe's rdma_sends: SEND and SEND with immediate WRs
// completed, whether signaled or not, and no other opcode; the receiver's
// CompletedRecvs (rdma_recvs) matches them.
func TestRDMASends(t *testing.T) {
	p := newPair(t, pairConfig{mtu: 1024, faults: pipe.Faults{Drop: 0.05}, seed: 11, retry: 7, timeout: 8})
	ops := []WROpcode{WRSend, WRWrite, WRSendWithImm, WRRead, WRSend, WRWriteWithImm, WRFetchAdd, WRSend}
	sends, recvs := uint64(0), uint64(0)
	for i, op := range ops {
		switch op {
		case WRSend, WRSendWithImm:
			sends++
			fallthrough
		case WRWriteWithImm:
			recvs++
			if err := p.b.qp.PostRecv(&RecvWR{ID: uint64(i), SGL: []SGE{p.b.sge(4096, 2048)}}); err != nil {
				t.Fatal(err)
			}
		}
		wr := SendWR{ID: uint64(i), Opcode: op, SGL: []SGE{p.a.sge(0, 1500)}, RemoteAddr: memBase, RKey: p.b.mr.RKey}
		if op == WRFetchAdd {
			wr.SGL = []SGE{p.a.sge(0, 8)}
		}
		if i%2 == 0 {
			wr.Flags = FlagSignaled
		}
		if err := p.a.qp.PostSend(p.now, &wr); err != nil {
			t.Fatal(err)
		}
	}
	p.run(func() bool { return p.a.qp.sq.head == p.a.qp.sq.tail })
	a, b := p.a.qp.Counters, p.b.qp.Counters
	if a.CompletedSends != uint64(len(ops)) || a.RDMASends != sends {
		t.Fatalf("completed %d WRs, %d of them SENDs; want %d and %d", a.CompletedSends, a.RDMASends, len(ops), sends)
	}
	if b.RDMASends != 0 || b.CompletedRecvs != recvs {
		t.Fatalf("receiver: %d SENDs, %d receives completed; want 0 and %d", b.RDMASends, b.CompletedRecvs, recvs)
	}
	if a.Retransmits == 0 {
		t.Fatal("no retransmission under 5 % loss: the test did not exercise retries")
	}
	if s := p.a.e.Stats(); s.RDMASends != sends {
		t.Fatalf("engine rdma_sends %d, want %d", s.RDMASends, sends)
	}
}
