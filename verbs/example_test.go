package verbs_test

import (
	"context"
	"fmt"

	"github.com/uroce/uroce/pkg/link/pipe"
	"github.com/uroce/uroce/verbs"
)

// connectedPair opens two devices joined by an in-memory pipe and connects
// one QP on each; their region is 64 KiB with every access.
func connectedPair() (a, b *verbs.Device, qa, qb *verbs.QueuePair, ma, mb *verbs.MR, ca, cb *verbs.CQ) {
	la, lb := pipe.New(pipe.Config{})
	a, b = verbs.Open(la, verbs.Inline()), verbs.Open(lb, verbs.Inline())
	setup := func(d *verbs.Device) (*verbs.QueuePair, *verbs.MR, *verbs.CQ) {
		pd := d.AllocPD()
		cq := d.CreateCQ(64)
		q, err := pd.CreateQP(&verbs.QPInit{SendCQ: cq, RecvCQ: cq, Cap: verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxInline: 64}})
		if err != nil {
			panic(err)
		}
		mr, err := pd.RegMR(make([]byte, 64<<10), verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead|verbs.AccessRemoteAtomic)
		if err != nil {
			panic(err)
		}
		return q, mr, cq
	}
	qa, ma, ca = setup(a)
	qb, mb, cb = setup(b)
	if err := qa.Connect(qb.Endpoint(2000), verbs.ConnectOptions{PSN: 1000}); err != nil {
		panic(err)
	}
	if err := qb.Connect(qa.Endpoint(1000), verbs.ConnectOptions{PSN: 2000}); err != nil {
		panic(err)
	}
	return
}

// waitOne drives both devices until cq holds a completion (the peer's
// device must run too: here, in the same goroutine).
func waitOne(cq *verbs.CQ, other *verbs.CQ) verbs.WC {
	var wc [1]verbs.WC
	var none [0]verbs.WC
	for {
		if cq.Poll(wc[:]) == 1 {
			return wc[0]
		}
		other.Poll(none[:])
	}
}

func ExampleQueuePair_PostSend() {
	a, b, qa, qb, ma, mb, ca, cb := connectedPair()
	defer a.Close()
	defer b.Close()

	copy(ma.Buf(), "hello, RDMA")
	// An RDMA WRITE of 11 bytes to the peer's region, signaled.
	err := qa.PostSend(&verbs.SendWR{
		ID:         1,
		Opcode:     verbs.WRWrite,
		Flags:      verbs.SendSignaled,
		SGL:        []verbs.SGE{ma.SGE(0, 11)},
		RemoteAddr: mb.Addr(),
		RKey:       mb.RKey(),
	})
	if err != nil {
		panic(err)
	}
	wc := waitOne(ca, cb)
	fmt.Println(wc.WRID, wc.Status, wc.Opcode, wc.ByteLen)
	fmt.Println(string(mb.Buf()[:11]))
	_ = qb
	// Output:
	// 1 success RDMA_WRITE 11
	// hello, RDMA
}

func ExampleQueuePair_PostRecv() {
	a, b, qa, qb, ma, mb, ca, cb := connectedPair()
	defer a.Close()
	defer b.Close()

	// The receiver posts a buffer; the sender SENDs with immediate data.
	if err := qb.PostRecv(&verbs.RecvWR{ID: 7, SGL: []verbs.SGE{mb.SGE(0, 128)}}); err != nil {
		panic(err)
	}
	copy(ma.Buf(), "ping")
	if err := qa.PostSend(&verbs.SendWR{ID: 1, Opcode: verbs.WRSendWithImm, Imm: 42, SGL: []verbs.SGE{ma.SGE(0, 4)}}); err != nil {
		panic(err)
	}
	wc := waitOne(cb, ca)
	fmt.Println(wc.WRID, wc.Status, wc.Opcode, wc.ByteLen, wc.Imm, string(mb.Buf()[:4]))
	// Output:
	// 7 success RECV 4 42 ping
}

func ExampleCQ_Wait() {
	a, b, qa, _, ma, mb, ca, _ := connectedPair()
	defer a.Close()
	defer b.Close()
	// connectedPair opened the devices Inline; Start gives them the
	// goroutine that Open starts by default, so the application can block.
	a.Start()
	b.Start()
	binary := mb.Buf()
	binary[0] = 41
	if err := qa.PostSend(&verbs.SendWR{ID: 3, Opcode: verbs.WRFetchAdd, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{ma.SGE(0, 8)}, RemoteAddr: mb.Addr(), RKey: mb.RKey(), CompareAdd: 1}); err != nil {
		panic(err)
	}
	var wc [4]verbs.WC
	n, err := ca.Wait(context.Background(), wc[:])
	if err != nil {
		panic(err)
	}
	fmt.Println(n, wc[0].Opcode, wc[0].Status, ma.Buf()[0], binary[0])
	// Output:
	// 1 FETCH_ADD success 41 42
}
