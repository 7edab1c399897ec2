// Package verbs is uroce's public API, shaped after rdma-core's libibverbs:
// a Device over one link, protection domains (PD), memory regions (MR),
// completion queues (CQ) and reliable-connected queue pairs (QueuePair)
// that take work requests by value.
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
// The device serialises every call with one mutex: the engine owns all QP
// state and is single-threaded. In inline mode, a Wait sleeps in the link
// without holding it, so other goroutines may post meanwhile.
package verbs
