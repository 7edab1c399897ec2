package verbs_test

import (
	"bytes"
	"testing"

	"github.com/uroce/uroce/pkg/link"
	"github.com/uroce/uroce/pkg/link/pipe"
	"github.com/uroce/uroce/verbs"
)

// sendCounter counts a link's Send calls: one system call each on afxdp.
type sendCounter struct {
	link.Link
	sends int
}

func (s *sendCounter) Send(pkts []*link.Packet) (int, error) {
	s.sends++
	return s.Link.Send(pkts)
}

// TestDeferSends: with DeferSends a run of posts sends nothing until the
// next poll, which sends the WRs' packets in one batch; without it each
// PostSend sends its own. Either way the data lands and the signaled WR
// completes.
func TestDeferSends(t *testing.T) {
	const n = 40
	for _, deferred := range []bool{false, true} {
		la, lb := pipe.New(pipe.Config{})
		ls := &sendCounter{Link: la}
		opts := []verbs.Option{verbs.Inline()}
		if deferred {
			opts = append(opts, verbs.DeferSends())
		}
		a, b := verbs.Open(ls, opts...), verbs.Open(lb, verbs.Inline())
		setup := func(d *verbs.Device) (*verbs.QueuePair, *verbs.MR, *verbs.CQ) {
			cq := d.CreateCQ(64)
			pd := d.AllocPD()
			q, err := pd.CreateQP(&verbs.QPInit{SendCQ: cq, RecvCQ: cq, Cap: verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 1}})
			if err != nil {
				t.Fatal(err)
			}
			mr, err := pd.RegMR(make([]byte, n*64), verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
			if err != nil {
				t.Fatal(err)
			}
			return q, mr, cq
		}
		qa, ma, ca := setup(a)
		qb, mb, cb := setup(b)
		connectRC(t, qa, qb)
		for i := range ma.Buf() {
			ma.Buf()[i] = byte(i)
		}
		ls.sends = 0
		for i := range n {
			wr := verbs.SendWR{ID: uint64(i), Opcode: verbs.WRWrite, SGL: []verbs.SGE{ma.SGE(i*64, 64)},
				RemoteAddr: mb.Addr() + uint64(i*64), RKey: mb.RKey()}
			if i == n-1 {
				wr.Flags = verbs.SendSignaled
			}
			if err := qa.PostSend(&wr); err != nil {
				t.Fatal(err)
			}
		}
		// The test's goroutine is the devices' only one: the link's
		// counters may be read here.
		if tx := ls.Stats().TxPackets; deferred && tx != 0 || !deferred && tx != n {
			t.Errorf("deferred %v: %d packets sent before the poll", deferred, tx)
		}
		if wc := waitOne(ca, cb); wc.WRID != n-1 || wc.Status != verbs.WCSuccess {
			t.Errorf("deferred %v: completion %+v", deferred, wc)
		}
		if !bytes.Equal(mb.Buf(), ma.Buf()) {
			t.Errorf("deferred %v: data differs", deferred)
		}
		if deferred && ls.sends != 1 || !deferred && ls.sends != n {
			t.Errorf("deferred %v: %d link sends for %d WRs", deferred, ls.sends, n)
		}
		a.Close()
		b.Close()
	}
}
