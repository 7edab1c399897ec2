package qp

import "github.com/uroce/uroce/cc"

// Counters count a QP's traffic and transport events; the engine keeps the
// same set summed over all QPs, plus what it could not deliver to a QP.
type Counters struct {
	TxPackets, RxPackets uint64
	TxBytes, RxBytes     uint64
	PostedSends          uint64
	CompletedSends       uint64
	// RDMASends counts SEND and SEND with immediate WRs completed
	// successfully, RC or UD (rxe's rdma_sends, counted in its
	// completer's do_complete); CompletedRecvs is rxe's rdma_recvs.
	RDMASends      uint64
	CompletedRecvs uint64
	// Retransmits counts request packets sent again (go-back-N).
	Retransmits uint64
	// Timeouts counts local ACK timeouts that started a retry.
	Timeouts uint64
	// SeqNAKsRcvd counts NAK PSN sequence errors received; SeqNAKsSent
	// those sent (rxe's out_of_seq_request).
	SeqNAKsRcvd, SeqNAKsSent uint64
	// RNRNAKsRcvd and RNRNAKsSent count receiver-not-ready NAKs.
	RNRNAKsRcvd, RNRNAKsSent uint64
	// ImplicitNAKs counts retries started by a response after a gap.
	ImplicitNAKs uint64
	// DupRequests counts duplicate requests answered or dropped.
	DupRequests uint64
	// ErrNAKsSent counts NAKs for invalid requests and access errors.
	ErrNAKsSent uint64
	// Dropped counts packets the QP ignored (stale responses, bad
	// sequence, wrong state).
	Dropped uint64
	// RetryExcErrs and RNRRetryExcErrs count WRs failed for running out
	// of retries or RNR retries (rxe's retry_exceeded_err and
	// retry_rnr_exceeded_err).
	RetryExcErrs, RNRRetryExcErrs uint64
	// CompleterRetries counts go-back-N retries the completer started
	// and paid for with a retry (rxe's completer_retry_err).
	CompleterRetries uint64
	// BadQKey counts datagrams dropped for a Q_Key that is not the
	// QP's (IBA 10.2.5; the port's Q_Key violation counter).
	BadQKey uint64
}

// EngineCounters are a device's counters.
type EngineCounters struct {
	Counters
	// NoQP counts packets for a QPN with no QP; BadPacket those that do
	// not decode or are not RC; BadPKey those with a P_Key mismatch.
	NoQP, BadPacket, BadPKey uint64
	// NoBuffer counts packets not built for lack of a transmit buffer.
	NoBuffer uint64
	// TxErrors counts packets the port did not send.
	TxErrors uint64
	// CNPsRcvd counts CNPs received for an existing QP, whatever its
	// algorithm did with them.
	CNPsRcvd uint64
	// LinkDowned counts the times the port's interface went down (rxe's
	// link_downed). The engine never moves it: the device that follows
	// the interface fills it in.
	LinkDowned uint64
	// CC sums the QPs' congestion control counters (mlx5's
	// np_ecn_marked_roce_packets, np_cnp_sent, rp_cnp_handled,
	// rp_cnp_ignored).
	CC cc.Counters
}
