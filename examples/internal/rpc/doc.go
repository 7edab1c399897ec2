// Package rpc is a request/response layer over uroce's reliable-connected
// queue pairs, in the style of eRPC and HERD: two-sided SEND/RECV with
// receive buffers posted ahead of time, many requests in flight per QP, and a
// per-request context deadline. It uses only the public verbs API.
//
// A request travels as one SEND with immediate data. The 32-bit immediate is
// the request ID, the client's slot index in its low 16 bits and the slot's
// generation in its high 16 bits; the payload starts with a 4-byte header
// (method, reserved). The reply is a SEND with the same immediate and a
// header holding a status. Both are posted inline (the engine copies them at
// post time), so no send buffer outlives PostSend.
//
// Flow control is by credit, as in eRPC: a client has Slots request slots,
// and each side keeps Slots receive buffers posted, so a SEND never finds an
// empty receive queue (no RNR NAK, IBA 9.7.5.2.8) while both follow the
// protocol. A slot is reused only once its SEND has completed, its reply
// has arrived and its caller has taken the result (or given up): the reply's
// receive buffer is reposted before the slot is freed, so the client's
// receive queue never runs dry either.
//
// Deadlines: when a caller's context ends first, Call returns the context's
// error at once and the slot is marked abandoned. The late reply, when it
// comes, is counted and dropped, its receive buffer reposted and the slot
// freed. The caller's response buffer is written only while the caller
// waits, under the client's lock, so it is free again when Call returns.
//
// The same slots carry one-sided RDMA READs (Client.Read) with the same
// deadline rules: the READ lands in the slot's own registered buffer and is
// copied out only while the caller still waits, so an abandoned READ that
// completes late cannot scribble on memory the caller reused.
//
// Completions are taken by whichever waiting caller holds the client's
// poll token, as eRPC's run-to-completion callers do: its CQ.Wait drives an
// inline device's engine, so a lone caller's reply reaches it with no
// goroutine hand-off; other callers sleep until the holder delivers their
// results or lets the token go. While no caller waits, the client's own
// goroutine polls every idlePoll, so ACKs and late replies are still taken.
// A server has one goroutine looping in CQ.Wait. Server handlers run on it,
// one at a time, like eRPC's dispatch-thread handlers: a handler that
// blocks stalls every connection of its server.
//
// How a waiter waits is the link's choice, not this package's: CQ.Wait
// sleeps in the link, and a busy-polling link (afxdp.WaitBusyPoll) spins
// there. Then a server spins a CPU for as long as it is open, requests or
// not, and so does a caller for as long as it waits; more spinners than
// free cores and the kernel's scheduler preempts them for milliseconds at
// a time, which is what the tail shows (examples/rpc/README.md). Busy-poll
// only on cores of their own; otherwise use a link that sleeps.
package rpc
