// Package cc is congestion control for uroce's queue pairs: pure logic that
// answers "how fast may this QP send", fed by events the transport engine
// (package qp) sees. It knows nothing about packets' bytes or sockets and
// never reads the clock: every event carries the time, as quic-go's
// SendAlgorithm does, so tests step timers exactly with a fake clock and the
// simulator (cmd/uroce-ccsim) runs this same code.
//
// One Algorithm value per QP. The engine tells it what happened:
//
//	OnSent    the requester put bytes on the wire (data and retransmissions)
//	OnAck     an ACK acknowledged bytes, with an RTT sample
//	OnCNP     a CNP arrived for this QP            (DCQCN reaction point)
//	OnCE      a CE-marked packet arrived for this QP (DCQCN notification
//	          point); the answer says whether to send a CNP back now
//	OnLoss    a retransmission timeout or a NAK sequence error
//	OnTimer   the time NextTimer named has come
//
// and asks it Rate (bits per second to pace at) and Window (bytes allowed in
// flight; 0 means no window). A Pacer, one per QP, turns the rate into "may
// these n bytes go now, or in how long".
//
// Algorithms: DCQCN (Zhu et al., SIGCOMM 2015) with ConnectX's firmware
// parameters (FirmwareDCQCN), the paper's (PaperDCQCN) or the HPCC authors'
// ns-3 model's (NS3DCQCN); TIMELY (Mittal et al., SIGCOMM 2015) as the
// paper publishes it (DefaultTIMELY), scaled to the line rate as ns-3 runs
// it (NS3TIMELY) or patched (PatchedTIMELY, Zhu et al., CoNEXT 2016); Swift (Kumar et al., SIGCOMM 2020); HPCC (Li et al.,
// SIGCOMM 2019), which needs in-band network telemetry from the switches
// (INTPath, INTAlgorithm.OnINT) and so runs only where a path delivers it,
// the simulator today: New refuses it with ErrNoINT; and None, which
// never slows down, for comparison. Every algorithm also plays the DCQCN
// notification point for its QP, because a ConnectX peer expects CNPs
// whatever this side runs. The CNP's wire encoding is in cc/cnp.
//
// How the presets behave under congestion, in the simulator and on a real
// bottleneck, is in docs/congestion.md.
//
// Nothing here is safe for concurrent use: the engine loop that owns a QP owns
// its Algorithm and Pacer, and copies Stats out for readers.
package cc
