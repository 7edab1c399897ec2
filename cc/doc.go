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
// parameters (FirmwareDCQCN) or the paper's (PaperDCQCN); TIMELY (Mittal et
// al., SIGCOMM 2015); Swift (Kumar et al., SIGCOMM 2020); and None, which
// never slows down, for comparison. Every algorithm also plays the DCQCN
// notification point for its QP, because a ConnectX peer expects CNPs
// whatever this side runs.
//
// FirmwareDCQCN is what ConnectX runs out of the box, and at tens of Gb/s
// it holds a congested queue near PFC's pause threshold (cmd/uroce-ccsim's
// dcqcn rows) where the paper's parameters hold it near RED's Kmax. That is
// the firmware defaults' own dynamics, not a misreading: RPG_BYTE_RESET is
// 32767 bytes (mlxconfig: "Given in Bytes"; a 15-bit field), one increase
// event per 6.5 µs at 40 Gb/s against the paper's 10 MB, and RPG_THRESHOLD
// 1 makes the first event after a cut fast recovery, Rc ← (Rt+Rc)/2, and
// the next ones additive and hyper increases. CLAMP_TGT_RATE 0 with
// CLAMP_TGT_RATE_AFTER_TIME_INC 1 sets Rt ← Rc on a CNP only if the 300 µs
// timer raised the rate since the last cut, which it never does while cuts
// come every few µs (the timer restarts at each), so Rt stays at the rate
// the episode began with: line rate, since RATE_TO_SET_ON_FIRST_CNP is 0.
// Any lull of some tens of µs in the CE marks then takes every flow back
// to near line rate within a few byte counter events, and N flows overrun
// the port N-fold. The ns-3 model of ConnectX's DCQCN in HPCC's simulator
// (Li et al., SIGCOMM 2019) clamps Rt by the same rule. With the byte
// counter off (the simulator's dcqcn-nobc) the same preset keeps two flows
// off PFC entirely.
//
// PaperDCQCN at 40 Gb/s with the paper's RED (Kmin 5 KB, Kmax 200 KB, Pmax
// 1 %) holds the queue near Kmax (PFC pauses only the line-rate start of an
// 8:1 or 16:1 incast), but evens out unequal rates slowly, as the algorithm
// prescribes: a flow starts at line rate, so one
// joining two others overruns the port until five CNPs 50 µs apart (α
// starts at 1) halve it to about 1.2 Gb/s, while they fall to about 11.
// From there every flow climbs by the same R_AI (40 Mb/s per 55 µs timer;
// the 10 MB byte counter does not count F events between cuts in these runs,
// so R_HAI never applies), and as a cut sets Rt ← Rc, fast recovery undoes
// most of it within five timers; only CE marks in proportion to rate close
// the gap, which takes some 50 ms (cmd/uroce-ccsim's joinleave at -scale 2,
// and its TestDCQCNPaperProperties). Under 8:1 and 16:1 incast each flow's
// 1 ms throughput swings by up to 35–40 % around its share while the means
// over tens of ms are fair (Jain 0.99).
//
// α follows the firmware's documented update: once per DCE_TCP_RTT, up if a
// CNP came in that period and down if not (DCQCNParams.AlphaPeriodic); the
// paper preset keeps the paper's "decay after K with no CNP".
//
// The congestion point's marking (RED, the switch's job) is in pkg/netem.
// The CNP's wire encoding is in cc/cnp.
//
// Nothing here is safe for concurrent use: the engine loop that owns a QP owns
// its Algorithm and Pacer, and copies Stats out for readers.
package cc
