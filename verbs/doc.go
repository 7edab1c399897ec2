// Package verbs is uroce's public API, shaped after rdma-core's libibverbs:
// a Device over one link, protection domains (PD), memory regions (MR),
// completion queues (CQ) and queue pairs (QueuePair) that take work
// requests by value: reliable-connected, unreliable datagram (QPInit.Type
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
// Data moves like this. PostSend hands a SendWR to the device's transport
// engine (package qp), which copies it into the QP's send queue and, in the
// same call, builds and sends the packets it may send now. Packets that
// arrive are read from the link and fed to the engine by whoever drives it:
// in the default inline mode that is the application itself, inside
// CQ.Poll and CQ.Wait (run-to-completion: no goroutine hand-off, lowest
// latency); after Device.Start a background goroutine does it, for
// applications that block. Completions come out of CQ.Poll into a caller's
// slice, with no allocation.
//
// Every method is safe for concurrent use, yet the engine and the link
// have one owner at a time and no lock guards them: the owner is whoever
// holds the device's ownership word (a compare-and-swap). In inline mode a
// call that finds the engine free takes it, runs the engine to completion
// and lets go, so a PostSend-then-Poll loop on one goroutine never hands
// off or allocates. A call that finds the engine taken (by another
// goroutine, or by the background goroutine after Start) copies its work
// request into a request slot, pushes it on a lock-free ring, wakes the
// owner's link Wait (link.Waker) and waits for the verdict; the owner runs
// handed-over requests before it sleeps and before it lets go.
// Completions travel the other way through each CQ's own lock-free ring,
// which any number of goroutines may poll. The background goroutine polls
// for a few idle rounds after work before it sleeps in the link; a link
// that cannot be woken (no link.Waker) is polled every 50 µs instead.
//
// What an operator watches comes out of the same objects: Counters on a
// QueuePair and a Device (rxe's hw_counters meanings; package metrics
// exports them to Prometheus), Latency (each signaled send WR's time from
// PostSend to its completion, in a histogram that is on by default and
// costs two atomic adds per completion), and SetLogger, which logs QP state
// changes and errors through log/slog (silent by default). The package
// example is a whole program; the others show each call.
//
// Costs (BenchmarkLatency, BenchmarkBandwidth and
// BenchmarkLatencyBackground, each reporting its time as a multiple of the
// bare link doing the same packet exchange in the same run, x-link): see
// BENCHMARKS.md.
package verbs
