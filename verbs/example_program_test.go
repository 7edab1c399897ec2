package verbs_test

import (
	"context"
	"fmt"
	"log"

	"github.com/uroce/uroce/pkg/link/pipe"
	"github.com/uroce/uroce/verbs"
)

// A whole program: two devices, one QP each, connected; a SEND into a
// posted receive and an RDMA WRITE, then the counters, the completion
// latency, and the teardown.
//
// The devices here are joined by an in-memory pipe so the example runs
// anywhere. Over the network, open a device on a local address instead,
// with the unprivileged kernel UDP backend:
//
//	dev, err := verbs.OpenAddr(netip.MustParseAddr("192.0.2.1"))
//
// and exchange each side's Endpoint (address, QPN, first PSN) out of band,
// over TCP as perftest does, before Connect.
func Example() {
	la, lb := pipe.New(pipe.Config{})
	client, server := verbs.Open(la), verbs.Open(lb)
	defer client.Close()
	defer server.Close()
	// Each device's own goroutine drives its engine: the server answers
	// the client with no call of the program's, and CQ.Wait blocks.
	// (Opened with verbs.Inline, the program would drive both itself.)

	type side struct {
		qp *verbs.QueuePair
		cq *verbs.CQ
		mr *verbs.MR
	}
	open := func(d *verbs.Device) side {
		pd := d.AllocPD()
		cq := d.CreateCQ(16)
		qp, err := pd.CreateQP(&verbs.QPInit{SendCQ: cq, RecvCQ: cq, Cap: verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16}})
		if err != nil {
			log.Fatal(err)
		}
		// Memory the peer may write into: RegMR registers a Go
		// slice (PD.AllocMR gives page-aligned memory instead).
		mr, err := pd.RegMR(make([]byte, 4096), verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
		if err != nil {
			log.Fatal(err)
		}
		return side{qp, cq, mr}
	}
	c, s := open(client), open(server)

	// Connect both ways: RESET → INIT → RTR → RTS with the peer's
	// endpoint (the ibv_modify_qp sequence of ibv_rc_pingpong).
	if err := c.qp.Connect(s.qp.Endpoint(200), verbs.ConnectOptions{PSN: 100}); err != nil {
		log.Fatal(err)
	}
	if err := s.qp.Connect(c.qp.Endpoint(100), verbs.ConnectOptions{PSN: 200}); err != nil {
		log.Fatal(err)
	}

	// SEND needs a receive posted on the other side first.
	if err := s.qp.PostRecv(&verbs.RecvWR{ID: 1, SGL: []verbs.SGE{s.mr.SGE(0, 64)}}); err != nil {
		log.Fatal(err)
	}
	copy(c.mr.Buf(), "request")
	if err := c.qp.PostSend(&verbs.SendWR{ID: 10, Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{c.mr.SGE(0, 7)}}); err != nil {
		log.Fatal(err)
	}
	// An RDMA WRITE lands in the server's memory without its CPU: the
	// client names the remote address and R_Key the server gave it.
	copy(c.mr.Buf()[100:], "written")
	if err := c.qp.PostSend(&verbs.SendWR{ID: 11, Opcode: verbs.WRWrite, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{c.mr.SGE(100, 7)}, RemoteAddr: s.mr.Addr() + 100, RKey: s.mr.RKey()}); err != nil {
		log.Fatal(err)
	}

	wc := make([]verbs.WC, 4)
	for got := 0; got < 2; {
		n, err := c.cq.Wait(context.Background(), wc)
		if err != nil {
			log.Fatal(err)
		}
		for _, w := range wc[:n] {
			fmt.Println("client:", w.WRID, w.Opcode, w.Status)
		}
		got += n
	}
	n, err := s.cq.Wait(context.Background(), wc)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("server:", wc[0].WRID, wc[0].Opcode, wc[0].Status, n, string(s.mr.Buf()[:wc[0].ByteLen]))
	fmt.Println("server memory:", string(s.mr.Buf()[100:107]))

	// Counters under rxe's names (sent_pkts is TxPackets, ...), and the
	// completion latency of the signaled WRs.
	cnt := c.qp.Counters()
	fmt.Println("posted", cnt.PostedSends, "completed", cnt.CompletedSends, "retransmitted", cnt.Retransmits)
	lat := c.qp.Latency()
	fmt.Println("latencies recorded:", lat.Count(), "P50 ≤ P99.9:", lat.Quantile(0.5) <= lat.Quantile(0.999))

	// Teardown in ibv order: QPs, then MRs and CQs; Close (deferred)
	// stops the engines and closes the links.
	for _, x := range []side{c, s} {
		if err := x.qp.Destroy(); err != nil {
			log.Fatal(err)
		}
		if err := x.mr.Dereg(); err != nil {
			log.Fatal(err)
		}
		if err := x.cq.Destroy(); err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// client: 10 SEND success
	// client: 11 RDMA_WRITE success
	// server: 1 RECV success 1 request
	// server memory: written
	// posted 2 completed 2 retransmitted 0
	// latencies recorded: 2 P50 ≤ P99.9: true
}
