// Package qp is the transport engine: the InfiniBand transport of IBA
// chapter 9 for reliable-connected (RC), unreliable connected (UC, uc.go),
// unreliable datagram (UD) and GSI queue pairs, as Linux Soft-RoCE
// (rdma_rxe) and ConnectX implement it, written as pure logic.
//
// Nothing here does I/O or reads a clock. The caller (package verbs, a test,
// the simulator) hands the Engine received packets and the current time, and
// the Engine writes the packets to send straight into link buffers it takes
// from a Port (Alloc, then headers encoded in place with bth, then Send) and
// the completions into completion queues (CQ), which are rings of values.
//
// Data moves like this. PostSend copies a work request into a send WQE ring
// slot. The requester (requester.go) walks the ring, segments each WQE into
// FIRST/MIDDLE/LAST/ONLY packets at the path MTU and gives each a PSN. At the
// peer the responder (responder.go) checks each request in rxe's order (PSN,
// opcode sequence, resources, length, R_Key and bounds), executes it against
// a memory region, and answers with ACKs, NAKs, READ responses or atomic
// ACKs; the requests of one receive burst that ask for an ACK share one,
// for the latest of them (IBA 9.7.5.1.2), sent before Receive returns.
// Back at the requester the completer (completer.go) matches those
// responses against the outstanding WQEs, retries on NAKs and timeouts,
// and writes completions. The three are separate state machines, as in rxe.
//
// One Engine owns every QP of a device and is not safe for concurrent use:
// one goroutine (or one lock) drives it. Timers (retransmit, RNR) sit in a
// hashed timing wheel (timer.go), so arming, moving and stopping one costs
// the same whatever the number of QPs; QPs with work to do wait on a ready
// list.
//
// Congestion control (cc.go) sits beside the three: every QP has a
// cc.Algorithm (QPConfig.CC, else Engine.CC; "none" by default) and a
// cc.Pacer. The requester asks the pacer before each packet, first
// transmissions and retransmissions alike, and waits on a timer in the same
// wheel when it must; so do READ responses and their replays, which the QP's
// rate limits as ConnectX's does (readresp.go: responses queue in PSN order
// and ACKs wait behind them, so a paced response holds up neither the
// engine nor the QP's later requests); data of a QP with congestion control
// carries ECT(0); a
// CE-marked packet makes the QP's notification point answer with a CNP to
// the peer's QP (at most one per min_time_between_cnps); a CNP, an ACK with
// its RTT sample, or a go-back-N is reported to the algorithm, whose new
// rate the pacer takes at once.
//
// UD and GSI QPs (ud.go; QPConfig.Type) share the queues, the WQE rings and
// the completion path, not the three machines: a datagram is one SEND Only
// packet with a DETH, addressed by its WR's AH, completed as it leaves; a
// received one is checked against the QP's Q_Key and lands behind the
// 40-byte GRH area of the next receive WQE, or is dropped and counted. The
// GSI QP is QP1, steered to by DestQP 1, with the fixed Q_Key 0x80010000.
//
// A shared receive queue (srq.go, QPConfig.SRQ) holds receive WQEs for
// many QPs: the responder copies the oldest into the QP when a message
// starts (as rxe's get_srq_wqe does), answers RNR NAKs while it is empty,
// and raises EventSRQLimitReached through Engine.OnAsyncEvent once the
// armed limit is crossed.
//
// Registered memory (MR) is a Go byte slice at a virtual address the caller
// chooses; the responder only ever copies inside [Addr, Addr+len) of an MR
// whose key, protection domain and access flags allow it.
package qp
