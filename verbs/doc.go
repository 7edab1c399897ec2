// Package verbs is uroce's public API, shaped after rdma-core's libibverbs:
// a Device over one link, protection domains (PD), memory regions (MR),
// completion queues (CQ) and queue pairs (QueuePair) that take work
// requests by value: reliable-connected, unreliable connected (QPInit.Type
// QPTypeUC: SEND and WRITE without ACKs; a message that lost a packet is
// dropped whole), unreliable datagram (QPInit.Type
// QPTypeUD, addressed per WR with an AH from PD.CreateAH, ActivateUD for
// the INIT/RTR/RTS steps) and the GSI QP, QP1, which connection managers
// use for their MADs. A datagram arrives behind the 40-byte GRH area
// (GRHLen) with WC.SrcQP and WC.SrcGID naming its sender.
// Shared receive queues (PD.CreateSRQ, QPInit.SRQ) feed many QPs from one
// pool of receive WRs; their limit event, like every asynchronous event,
// comes out of Device.GetAsyncEvent. So do the port's: a device follows
// the state of the interface its link is bound to (Device.QueryPort),
// reporting EventPortErr each time it goes down and EventPortActive when
// it is back.
//
// A program in outline (the package example is the whole of it, and runs
// as a test):
//
//	la, lb := pipe.New(pipe.Config{}) // or verbs.OpenAddr on a local address
//	client, server := verbs.Open(la), verbs.Open(lb)
//	// On each: pd := d.AllocPD(); cq := d.CreateCQ(16)
//	// qp, _ := pd.CreateQP(&verbs.QPInit{SendCQ: cq, RecvCQ: cq, Cap: verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16}})
//	// mr, _ := pd.RegMR(buf, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
//	cqp.Connect(sqp.Endpoint(200), verbs.ConnectOptions{PSN: 100}) // and sqp.Connect(cqp.Endpoint(100), ...)
//	sqp.PostRecv(&verbs.RecvWR{ID: 1, SGL: []verbs.SGE{smr.SGE(0, 64)}})
//	cqp.PostSend(&verbs.SendWR{ID: 10, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{cmr.SGE(0, 7)}})
//	cqp.PostSend(&verbs.SendWR{ID: 11, Opcode: verbs.WRWrite, Flags: verbs.SendSignaled,
//		SGL: []verbs.SGE{cmr.SGE(100, 7)}, RemoteAddr: smr.Addr() + 100, RKey: smr.RKey()})
//	n, err := ccq.Wait(ctx, wc) // the completions, into wc []verbs.WC
//
// Data moves like this. PostSend hands a SendWR to the device's transport
// engine (package qp), which copies it into the QP's send queue and, in the
// same call, builds and sends the packets it may send now (with the
// DeferSends option, in the next call that runs the engine, together with
// those of the WRs posted meanwhile). Packets that
// arrive are read from the link and fed to the engine by whoever drives it.
// By default that is the device's own goroutine, started by Open: the
// device answers its peers whether or not the application calls it, and
// CQ.Wait blocks until completions come. A device opened with the Inline
// option is driven by the application itself, inside CQ.Poll and CQ.Wait
// (run-to-completion: no goroutine hand-off, lowest latency, as perftest's
// busy-polling loops want); it answers no peer while nobody polls it.
// Completions come out of CQ.Poll into a caller's slice, with no
// allocation.
//
// Every method is safe for concurrent use, yet the engine and the link
// have one owner at a time and no lock guards them: the owner is whoever
// holds the device's ownership word (a compare-and-swap). In inline mode a
// call that finds the engine free takes it, runs the engine to completion
// and lets go, so a PostSend-then-Poll loop on one goroutine never hands
// off or allocates. A call that finds the engine taken (by another
// goroutine, or by the device's goroutine) copies its work request into a
// request slot, pushes it on a lock-free ring, wakes the owner's link Wait
// (link.Waker) and waits for the verdict; the owner runs handed-over
// requests before it sleeps and before it lets go. Completions travel the
// other way through each CQ's own lock-free ring, which any number of
// goroutines may poll. The device's goroutine polls for a few idle rounds
// after work before it sleeps in the link; a link that cannot be woken (no
// link.Waker) is polled every 50 µs instead.
//
// What an operator watches comes out of the same objects: Counters on a
// QueuePair and a Device (rxe's hw_counters meanings; package metrics
// exports them to Prometheus), Latency (each signaled send WR's time from
// PostSend to its completion, in a histogram that is on by default and
// costs a few plain stores per completion), and SetLogger, which logs QP state
// changes and errors through log/slog (silent by default). The package
// example is a whole program; the others show each call.
//
// Costs (BenchmarkLatency, BenchmarkBandwidth and
// BenchmarkLatencyBackground, each reporting its time as a multiple of the
// bare link doing the same packet exchange in the same run, x-link): see
// BENCHMARKS.md.
package verbs
