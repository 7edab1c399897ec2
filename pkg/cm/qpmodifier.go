package cm

import (
	"time"

	"github.com/uroce/uroce/pkg/cm/mad"
)

// QPState names the QP states the CM moves a connected QP to (IBA
// 11.2.4.2 via the verbs layer's Modify QP).
type QPState uint8

// QP states.
const (
	QPStateRTR   QPState = iota + 1 // ready to receive: path, remote QPN, RQ PSN
	QPStateRTS                      // ready to send: SQ PSN, timeouts, retries
	QPStateError                    // disconnected: flush everything
)

func (s QPState) String() string {
	switch s {
	case QPStateRTR:
		return "RTR"
	case QPStateRTS:
		return "RTS"
	case QPStateError:
		return "ERR"
	}
	return "QPState(?)"
}

// QPAttr is what the CM negotiated for a connected QP: everything Modify
// QP needs for INIT→RTR and RTR→RTS (IBA 11.2.4.2 Table 91; the kernel's
// ib_cm_init_qp_attr fills the same). It is a plain value the verbs
// layer copies into its own attribute struct.
type QPAttr struct {
	QPN     uint32 // the local QP the connection is for
	DestQPN uint32 // the peer's QP
	// SQPSN is the PSN the local send queue starts at: the peer's
	// Starting PSN (a side's Starting PSN in the REQ or REP is the PSN it
	// receives first, as ib_cm and the rping capture have it). RQPSN is
	// the local side's own Starting PSN.
	SQPSN, RQPSN uint32
	PathMTU      mad.MTU
	PKey         uint16
	// The address vector: the peer's GID and the local one to send from,
	// and the GRH (on RoCEv2: IP) fields.
	DestGID, SrcGID mad.GID
	FlowLabel       uint32
	HopLimit        uint8
	TrafficClass    uint8
	SL              uint8
	// Timeout is the local ACK timeout exponent (4.096 µs × 2^Timeout),
	// computed from the peer's target ACK delay and the packet lifetime
	// as the kernel's cm_ack_timeout does.
	Timeout uint8
	// RetryCount: transport retries (from the REQ, both sides).
	// RNRRetry: RNR retries for this side's sends (the REQ's RNR Retry
	// Count for the passive side, the REP's for the active side).
	RetryCount, RNRRetry uint8
	// MinRNRTimer is the RNR NAK timer code this side's responder uses
	// (IBA Table 45); a local choice from Config.
	MinRNRTimer uint8
	// MaxRdAtomic: READ/atomic this side may have outstanding as
	// initiator; MaxDestRdAtomic: those it answers as responder.
	MaxRdAtomic, MaxDestRdAtomic uint8
	// FlowControl: the peer's receive queue sends end-to-end credits
	// (IBA 9.7.7.2), so this side may honour them.
	FlowControl bool
	// SRQ: this side's QP takes receives from a shared receive queue.
	SRQ bool
	// SelectiveRepeat: both ends are uroce and agreed on selective
	// repeat (the REQ offered it, the REP took it), so the QP goes to
	// RTR with qp.RetransSelective; never with an ib_cm peer.
	SelectiveRepeat bool
}

// QPModifier moves the QP of a connection between states with the
// negotiated attributes. The manager calls it with QPStateRTR then
// QPStateRTS before sending the REP (passive, as rdma_cm's cma_accept_ib
// does) or the RTU (active, as cma_rep_recv does), and with
// QPStateError on disconnect. An error from RTR or RTS fails the
// connection (the active side rejects the REP; Accept returns it). It
// must not call back into the Manager.
type QPModifier interface {
	ModifyQP(now time.Time, to QPState, a *QPAttr) error
}
