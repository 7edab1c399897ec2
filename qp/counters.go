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
	// Retransmits counts request packets sent again (go-back-N, or
	// selective repeat's SelectiveResends).
	Retransmits uint64
	// Timeouts counts ACK timeouts that started a retry: the IBA local
	// ACK timeout's and the adaptive RTO's.
	Timeouts uint64
	// EarlyRetransTimeouts counts the Timeouts of the adaptive RTO
	// before the IBA local ACK timeout: each started a go-back-N that
	// spent no retry.
	EarlyRetransTimeouts uint64
	// SpuriousRetrans counts early retransmissions found needless: the
	// answer came sooner after the retransmission than any round trip
	// this QP has seen, so it answered the original.
	SpuriousRetrans uint64
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
	// RemAccessErrs counts the requests among them NAKed with a
	// remote access error: a bad R_Key, range or permission (mlx5's
	// resp_remote_access_errors).
	RemAccessErrs uint64
	// TooManyRdAtomic counts READ and atomic requests NAKed for
	// finding every responder resource (max_dest_rd_atomic) still
	// unanswered (rxe's RESPST_ERR_TOO_MANY_RDMA_ATM_REQ).
	TooManyRdAtomic uint64
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
	// BadAddr counts packets for a connected QP dropped because their
	// IP source is not the QP's peer or their destination not this
	// port (rxe's check_addr).
	BadAddr uint64
	// Selective repeat (RetransSelective, between uroce peers):
	// SelectiveResends counts the Retransmits that resent one lost
	// packet; PlacedAhead the WRITE packets the responder placed ahead
	// of a gap; SACKsSent and SACKsRcvd the selective ACKs.
	SelectiveResends, PlacedAhead uint64
	SACKsSent, SACKsRcvd          uint64
}

// pktCounts are what one side of a QP, its requester or its responder,
// counts for every packet: narrow, so that each side's fit in a line it
// touches anyway (requester, responder), and a request or a WRITE
// received moves no line of Counters. tx and rx each hold a packet count
// in their top 16 bits and the packets' payload bytes below, so a packet
// is one add and one compare: the bytes of 2^16 packets, each under 4
// GiB, cannot reach the count. When the count wraps, both carry into
// the QP's Counters; QP.Counters adds both sides', so the sums stay
// exact.
type pktCounts struct {
	tx, rx uint64
}

const (
	pktShift = 48
	pktBytes = 1<<pktShift - 1
)

// sent counts a packet of n payload bytes sent, carrying into c.
func (p *pktCounts) sent(n int, c *Counters) {
	p.tx = countPacket(p.tx, n, &c.TxPackets, &c.TxBytes)
}

// rcvd counts a packet of n payload bytes received, carrying into c.
func (p *pktCounts) rcvd(n int, c *Counters) {
	p.rx = countPacket(p.rx, n, &c.RxPackets, &c.RxBytes)
}

// countPacket adds a packet of n bytes to v, or when its packet count
// wraps carries v into the wide counts and returns 0.
func countPacket(v uint64, n int, pkts, bytes *uint64) uint64 {
	w := v + (1<<pktShift | uint64(uint32(n)))
	if w < v {
		*pkts += 1 << (64 - pktShift)
		*bytes += w & pktBytes
		return 0
	}
	return w
}

// count16 adds one to a 16-bit count, carrying into c when it wraps.
func count16(n *uint16, c *uint64) {
	if *n++; *n == 0 {
		*c += 1 << 16
	}
}

// addTo adds the packet and byte counts to c.
func (p *pktCounts) addTo(c *Counters) {
	c.TxPackets += p.tx >> pktShift
	c.TxBytes += p.tx & pktBytes
	c.RxPackets += p.rx >> pktShift
	c.RxBytes += p.rx & pktBytes
}

// Counters returns the QP's counters.
func (q *QP) Counters() Counters {
	c := q.ctr
	q.req.pkts.addTo(&c)
	q.resp.pkts.addTo(&c)
	c.PostedSends += uint64(q.req.posted)
	c.CompletedSends += uint64(q.req.done)
	c.CompletedRecvs += uint64(q.resp.done)
	return c
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

// CounterDesc describes one counter kept in a T (Counters or
// EngineCounters): the field that holds it, the name it is exported under
// and what it counts. CounterTable and EngineCounterTable are the one list
// of the counters: Engine.Stats sums by it and the metrics exporter names
// and reads the counters from it, so a counter is added by its field and
// its row here (TestCounterTables fails on a field without a row).
type CounterDesc[T any] struct {
	// Field is the name of the Go field.
	Field string
	// Name is the exported name: rxe's hw_counters name where rxe keeps
	// the counter, else uroce's own.
	Name string
	// Help says what it counts, for an exporter.
	Help string
	// Ptr returns the counter in c.
	Ptr func(c *T) *uint64
}

// CounterTable describes every field of Counters, in their order. It is
// not to be modified.
var CounterTable = []CounterDesc[Counters]{
	{"TxPackets", "sent_pkts", "RoCE packets sent (rxe sent_pkts).", func(c *Counters) *uint64 { return &c.TxPackets }},
	{"RxPackets", "rcvd_pkts", "RoCE packets received for a QP (rxe rcvd_pkts).", func(c *Counters) *uint64 { return &c.RxPackets }},
	{"TxBytes", "sent_bytes", "Payload bytes sent.", func(c *Counters) *uint64 { return &c.TxBytes }},
	{"RxBytes", "rcvd_bytes", "Payload bytes received.", func(c *Counters) *uint64 { return &c.RxBytes }},
	{"PostedSends", "posted_sends", "Send work requests posted.", func(c *Counters) *uint64 { return &c.PostedSends }},
	{"CompletedSends", "completed_sends", "Send work requests completed successfully.", func(c *Counters) *uint64 { return &c.CompletedSends }},
	{"RDMASends", "rdma_sends", "SEND work requests completed successfully (rxe rdma_sends).", func(c *Counters) *uint64 { return &c.RDMASends }},
	{"CompletedRecvs", "completed_recvs", "Receive work requests completed successfully (what rxe counts as rdma_recvs).", func(c *Counters) *uint64 { return &c.CompletedRecvs }},
	{"Retransmits", "retransmits", "Request packets sent again.", func(c *Counters) *uint64 { return &c.Retransmits }},
	{"Timeouts", "local_ack_timeouts", "ACK timeouts that started a retry, the adaptive RTO's included.", func(c *Counters) *uint64 { return &c.Timeouts }},
	{"EarlyRetransTimeouts", "adaptive_retrans_timeouts", "ACK timeouts of the adaptive RTO before the IBA local ACK timeout, which spend no retry.", func(c *Counters) *uint64 { return &c.EarlyRetransTimeouts }},
	{"SpuriousRetrans", "spurious_retrans_timeouts", "Adaptive retransmissions answered sooner than any round trip seen: the original was only late.", func(c *Counters) *uint64 { return &c.SpuriousRetrans }},
	{"SeqNAKsRcvd", "rcvd_seq_err", "PSN sequence error NAKs received (rxe rcvd_seq_err).", func(c *Counters) *uint64 { return &c.SeqNAKsRcvd }},
	{"SeqNAKsSent", "out_of_seq_request", "Requests ahead of the expected PSN, answered with a sequence NAK (rxe out_of_seq_request).", func(c *Counters) *uint64 { return &c.SeqNAKsSent }},
	{"RNRNAKsRcvd", "rcvd_rnr_err", "RNR NAKs received (rxe rcvd_rnr_err).", func(c *Counters) *uint64 { return &c.RNRNAKsRcvd }},
	{"RNRNAKsSent", "send_rnr_err", "RNR NAKs sent (rxe send_rnr_err).", func(c *Counters) *uint64 { return &c.RNRNAKsSent }},
	{"ImplicitNAKs", "implicit_naks", "Retries started by a response after a gap.", func(c *Counters) *uint64 { return &c.ImplicitNAKs }},
	{"DupRequests", "duplicate_request", "Duplicate requests answered or dropped (rxe duplicate_request).", func(c *Counters) *uint64 { return &c.DupRequests }},
	{"ErrNAKsSent", "err_naks_sent", "NAKs sent for invalid requests and access errors.", func(c *Counters) *uint64 { return &c.ErrNAKsSent }},
	{"RemAccessErrs", "resp_remote_access_errors", "Requests NAKed with a remote access error: a bad R_Key, range or permission (mlx5 resp_remote_access_errors).", func(c *Counters) *uint64 { return &c.RemAccessErrs }},
	{"TooManyRdAtomic", "too_many_rd_atomic", "READ and atomic requests NAKed as invalid for exceeding max_dest_rd_atomic unanswered ones (rxe RESPST_ERR_TOO_MANY_RDMA_ATM_REQ).", func(c *Counters) *uint64 { return &c.TooManyRdAtomic }},
	{"Dropped", "dropped", "Packets a QP ignored (stale, out of sequence, wrong state).", func(c *Counters) *uint64 { return &c.Dropped }},
	{"RetryExcErrs", "retry_exceeded_err", "Work requests failed after the retry count ran out (rxe retry_exceeded_err).", func(c *Counters) *uint64 { return &c.RetryExcErrs }},
	{"RNRRetryExcErrs", "retry_rnr_exceeded_err", "Work requests failed after the RNR retry count ran out (rxe retry_rnr_exceeded_err).", func(c *Counters) *uint64 { return &c.RNRRetryExcErrs }},
	{"CompleterRetries", "completer_retry_err", "Go-back-N retries started by the completer (rxe completer_retry_err).", func(c *Counters) *uint64 { return &c.CompleterRetries }},
	{"BadQKey", "bad_qkey", "Datagrams dropped for a Q_Key that is not the QP's (IBA 10.2.5, the port's Q_Key violations).", func(c *Counters) *uint64 { return &c.BadQKey }},
	{"BadAddr", "bad_addr", "Packets for a connected QP dropped for an IP source that is not its peer or a destination that is not this port (rxe check_addr).", func(c *Counters) *uint64 { return &c.BadAddr }},
	{"SelectiveResends", "selective_resends", "Request packets resent alone by selective repeat (among retransmits).", func(c *Counters) *uint64 { return &c.SelectiveResends }},
	{"PlacedAhead", "placed_ahead", "WRITE packets placed ahead of a gap by selective repeat.", func(c *Counters) *uint64 { return &c.PlacedAhead }},
	{"SACKsSent", "sacks_sent", "Selective ACKs sent (selective repeat).", func(c *Counters) *uint64 { return &c.SACKsSent }},
	{"SACKsRcvd", "sacks_rcvd", "Selective ACKs received (selective repeat).", func(c *Counters) *uint64 { return &c.SACKsRcvd }},
}

// EngineCounterTable describes the counters only an engine keeps: the
// fields of EngineCounters other than the summed Counters and CC (whose
// table is cc.CounterTable), in their order. It is not to be modified.
var EngineCounterTable = []CounterDesc[EngineCounters]{
	{"NoQP", "no_qp", "Packets for a QP number with no QP.", func(c *EngineCounters) *uint64 { return &c.NoQP }},
	{"BadPacket", "bad_packet", "Packets that do not decode or are not RC.", func(c *EngineCounters) *uint64 { return &c.BadPacket }},
	{"BadPKey", "bad_pkey", "Packets with a P_Key mismatch.", func(c *EngineCounters) *uint64 { return &c.BadPKey }},
	{"NoBuffer", "no_buffer", "Packets not built for lack of a transmit buffer.", func(c *EngineCounters) *uint64 { return &c.NoBuffer }},
	{"TxErrors", "send_err", "Packets the link did not send (rxe send_err).", func(c *EngineCounters) *uint64 { return &c.TxErrors }},
	{"CNPsRcvd", "cnps_rcvd", "CNPs received for an existing QP.", func(c *EngineCounters) *uint64 { return &c.CNPsRcvd }},
	{"LinkDowned", "link_downed", "Times the port's interface went down, its port from active to down (rxe link_downed).", func(c *EngineCounters) *uint64 { return &c.LinkDowned }},
}

// Add adds o's counters to c's, for an engine's totals.
func (c *Counters) Add(o *Counters) {
	for _, d := range CounterTable {
		*d.Ptr(c) += *d.Ptr(o)
	}
}
