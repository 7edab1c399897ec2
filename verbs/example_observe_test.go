package verbs_test

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/uroce/uroce/verbs"
)

// writeN posts n signaled 64-byte WRITEs from qa and polls each one
// (connectedPair and waitOne are in example_test.go; the package example
// shows the same setup in full).
func writeN(n int, qa *verbs.QueuePair, ma, mb *verbs.MR, ca, cb *verbs.CQ) {
	for i := range n {
		wr := verbs.SendWR{ID: uint64(i), Opcode: verbs.WRWrite, Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{ma.SGE(0, 64)}, RemoteAddr: mb.Addr(), RKey: mb.RKey()}
		if err := qa.PostSend(&wr); err != nil {
			panic(err)
		}
		if wc := waitOne(ca, cb); wc.Status != verbs.WCSuccess {
			panic(wc.Status)
		}
	}
}

// Counters are kept per QP and summed per device, under rxe's hw_counters
// meanings: TxPackets is sent_pkts, SeqNAKsSent out_of_seq_request,
// Retransmits the packets go-back-N sent again, and so on (package
// metrics exports them under those names).
func ExampleQueuePair_Counters() {
	a, b, qa, qb, ma, mb, ca, cb := connectedPair()
	defer a.Close()
	defer b.Close()
	writeN(3, qa, ma, mb, ca, cb)

	c := qa.Counters()
	fmt.Println("sent:", c.TxPackets, "packets,", c.TxBytes, "bytes; completed:", c.CompletedSends)
	r := qb.Counters()
	fmt.Println("peer received:", r.RxPackets, "packets,", r.RxBytes, "bytes")
	fmt.Println("retransmits:", c.Retransmits, "NAKs received:", c.SeqNAKsRcvd)
	d := a.Counters() // the device: every QP's, plus packets no QP took
	fmt.Println("device sent:", d.TxPackets, "no QP:", d.NoQP)
	// Output:
	// sent: 3 packets, 192 bytes; completed: 3
	// peer received: 3 packets, 192 bytes
	// retransmits: 0 NAKs received: 0
	// device sent: 3 no QP: 0
}

// Every signaled send WR that completes records its post-to-completion
// time in its QP's histogram, on by default; read it from any goroutine.
func ExampleQueuePair_Latency() {
	a, b, qa, _, ma, mb, ca, cb := connectedPair()
	defer a.Close()
	defer b.Close()
	writeN(100, qa, ma, mb, ca, cb)

	l := qa.Latency()
	p50, p99, p999 := l.Quantile(0.5), l.Quantile(0.99), l.Quantile(0.999)
	fmt.Println("completions:", l.Count())
	fmt.Println("ordered:", 0 < p50 && p50 <= p99 && p99 <= p999 && p999 <= l.Max())
	// The device's histogram merges its QPs', destroyed ones included.
	fmt.Println("device:", a.Latency().Count())
	// Output:
	// completions: 100
	// ordered: true
	// device: 100
}

// A device logs its QPs' state changes once it has a logger: Modify's
// moves at Debug, the engine's moves to ERR at Warn with the failed WR's
// status. Each record names the QP and its peer.
func ExampleDevice_SetLogger() {
	a, b, qa, qb, ma, mb, ca, cb := connectedPair()
	defer a.Close()
	defer b.Close()
	// A text handler without the time, so the output is reproducible.
	noTime := func(_ []string, at slog.Attr) slog.Attr {
		if at.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return at
	}
	a.SetLogger(slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{Level: slog.LevelDebug, ReplaceAttr: noTime})))

	// A WRITE with a wrong R_Key: the peer NAKs it, the WR fails with a
	// remote access error and the QP goes to ERR.
	if err := qa.PostSend(&verbs.SendWR{ID: 7, Opcode: verbs.WRWrite, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{ma.SGE(0, 8)}, RemoteAddr: mb.Addr(), RKey: mb.RKey() ^ 1}); err != nil {
		panic(err)
	}
	fmt.Println(waitOne(ca, cb).Status)
	// Back to RESET, as an application does before reconnecting.
	if err := qa.Modify(&verbs.QPAttr{State: verbs.StateReset}, verbs.AttrState); err != nil {
		panic(err)
	}
	_ = qb
	// Output:
	// level=WARN msg="qp error" qpn=17 peer=10.0.0.2 peer_qpn=17 from=RTS to=ERR status="remote access error" wr_id=7
	// remote access error
	// level=DEBUG msg="qp state" qpn=17 peer=10.0.0.2 peer_qpn=17 from=ERR to=RESET
}
