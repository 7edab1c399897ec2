package qp

// Counters count a QP's traffic and transport events; the engine keeps the
// same set summed over all QPs, plus what it could not deliver to a QP.
type Counters struct {
	TxPackets, RxPackets uint64
	TxBytes, RxBytes     uint64
	PostedSends          uint64
	CompletedSends       uint64
	CompletedRecvs       uint64
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
}
