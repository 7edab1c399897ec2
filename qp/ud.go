package qp

import (
	"net/netip"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/pkg/link"
)

// QPType is a QP's transport service (ibv_qp_type).
type QPType uint8

// QP types, with rdma-core's values where it has them (IBV_QPT_RC = 2,
// IBV_QPT_UC = 3, IBV_QPT_UD = 4) and the kernel's IB_QPT_GSI = 1. A
// zero QPType in a QPConfig means RC, so configurations written before
// UD existed keep their meaning.
const (
	QPTypeGSI QPType = 1
	QPTypeRC  QPType = 2
	QPTypeUC  QPType = 3
	QPTypeUD  QPType = 4
)

func (t QPType) String() string {
	switch t {
	case 0, QPTypeRC:
		return "RC"
	case QPTypeUC:
		return "UC"
	case QPTypeUD:
		return "UD"
	case QPTypeGSI:
		return "GSI"
	}
	return "QPType(?)"
}

// GSIQKey is QP1's Q_Key (IBA 13.5.3.2; mad.GSIQKey): a GSI QP sends and
// accepts only datagrams with it.
const GSIQKey = 0x80010000

// GSIQPN is the GSI QP's number: CM MADs are addressed to QP1.
const GSIQPN = 1

// GRHLen is the size of the GRH area at the front of every UD receive
// buffer (IBA 11.4.1.2): a datagram of n bytes needs a receive WQE of
// GRHLen+n bytes and completes with ByteLen GRHLen+n.
const GRHLen = bth.GRHLen

// controlledQKey is the high bit of a WR's Q_Key: set, the QP's own Q_Key
// is sent instead (IBA 10.2.5, C10-15).
const controlledQKey = 0x80000000

// gsiHopLimit is the TTL/hop limit written into a received datagram's GRH.
// The links do not report the received packet's TTL, and RoCEv2 senders
// (rxe, ConnectX) use 64 unless told otherwise.
const gsiHopLimit = 64

// AH is an address handle (ibv_ah): where a UD send goes. DGID is the
// peer's IP address (its RoCEv2 GID; IPv4 in either form); SGID, when
// valid, is the local address to send from, else the port's own.
// TrafficClass is sent as the IP TOS byte. HopLimit and FlowLabel are
// kept for the caller's bookkeeping: the links send with the kernel's TTL
// and no flow label, and rxe takes a UD QP's UDP source port from its QPN,
// not from the flow label.
type AH struct {
	DGID         netip.Addr
	SGID         netip.Addr
	TrafficClass uint8
	HopLimit     uint8
	FlowLabel    uint32
}

// runUDRequester sends q's datagrams, at most budget of them, and
// completes each WQE as its packet is built: UD has no ACKs and no
// retransmission (IBA 9.8.3, rxe's requester for IB_QPT_UD). It reports
// whether it stopped with work left.
func (e *Engine) runUDRequester(q *QP, budget int) bool {
	for q.sq.next != q.sq.tail {
		// IBA 10.3.1: in SQD no new WQE starts; a UD WQE is one packet.
		if q.state == StateSQD {
			return false
		}
		if budget == 0 {
			return true
		}
		w := q.sq.at(q.sq.next)
		if !w.validated {
			if st := e.validateSendWQE(q, w); st != WCSuccess {
				q.fail(w, st)
				return false
			}
			w.validated = true
		}
		if w.length > uint32(q.mtu) {
			// Larger than one MTU: IBA C10-93.1.1 lets the CI drop
			// it silently, as rxe does (and completes it as a
			// success); a local length error tells the application
			// why nothing arrived. The QP stays usable.
			w.status = WCLocLenErr
			q.completeSend(w)
			continue
		}
		if !e.sendDatagram(q, w) {
			return true // no buffer: try again next turn
		}
		budget--
		q.completeSend(w)
	}
	return false
}

// sendDatagram builds the SEND Only packet of a UD WQE (BTH, DETH,
// ImmDt). It reports false when no buffer was free.
func (e *Engine) sendDatagram(q *QP, w *sendWQE) bool {
	bf := bth.BTHFields{Opcode: bth.UDSendOnly, PSN: q.req.psn, DestQP: w.remoteQPN,
		SE: w.wr.Flags&FlagSolicited != 0}
	if w.wr.Opcode == WRSendWithImm {
		bf.Opcode = bth.UDSendOnlyImm
		e.pf.ImmDt = w.imm
	}
	qkey := w.remoteQKey
	if q.typ == QPTypeGSI {
		// rxe sends GSI_QKEY from QP1 whatever the WR says, and sets
		// AckReq on its last packet, as for every type but UD and UC
		// (rping.pcap: CM MADs carry AckReq, ibv_ud_pingpong's do not).
		qkey = GSIQKey
		bf.AckReq = true
	} else if qkey&controlledQKey != 0 {
		qkey = q.attr.QKey
	}
	e.pf.DETH = bth.DETHFields{QKey: qkey, SrcQP: q.qpn}
	lp, dst := e.newPacket(q, &bf, int(w.length), false)
	if lp == nil {
		return false
	}
	if w.length > 0 {
		gather(dst, w, 0)
	}
	lp.Remote = w.ah.DGID.Unmap()
	lp.Local = w.ah.SGID.Unmap()
	if e.ChooseTOS == nil {
		lp.TOS = w.ah.TrafficClass
	}
	q.req.psn = q.req.psn.Next()
	w.state = wqePending
	return true
}

// receiveDatagram delivers a packet addressed to a UD or GSI QP (rxe's
// responder for IB_QPT_UD/GSI): only UD SEND Only opcodes, with the QP's
// Q_Key (IBA 10.2.5, C10-16: a mismatch is dropped silently and counted),
// into the next receive WQE with the GRH in front. With no WQE posted, or
// one too small, the datagram is dropped (class D, as in rxe).
func (e *Engine) receiveDatagram(q *QP, p *bth.Packet, lp *link.Packet) {
	op := p.Opcode()
	if op != bth.UDSendOnly && op != bth.UDSendOnlyImm {
		q.ctr.Dropped++
		return
	}
	if !q.state.receives() {
		q.ctr.Dropped++
		return
	}
	d := p.DETH()
	want := q.attr.QKey
	if q.typ == QPTypeGSI {
		want = GSIQKey
	}
	if d.QKey() != want {
		q.ctr.BadQKey++
		return
	}
	w := q.peekRecv()
	if w == nil {
		q.ctr.Dropped++
		return
	}
	data := p.Payload()
	if uint64(GRHLen)+uint64(len(data)) > uint64(w.length) {
		q.ctr.Dropped++
		return
	}
	q.takeRecv()
	w = q.recvWQE()
	grh := e.grh[:]
	buildGRH(grh, lp, e.Addr, len(p.Bytes()))
	if !e.scatterRecv(q, w, 0, grh) || !e.scatterRecv(q, w, GRHLen, data) {
		// A bad local key in the receive WQE: the WQE completes in
		// error and the QP goes to ERR, as rxe's malformed-WQE path.
		q.completeDatagram(w, WCLocProtErr, 0, 0, 0, d.SrcQP(), lp)
		q.toError()
		return
	}
	flags, imm := WCGRH, uint32(0)
	if op == bth.UDSendOnlyImm {
		flags |= WCWithImm
		imm = p.ImmDt().Imm()
	}
	q.completeDatagram(w, WCSuccess, uint32(GRHLen+len(data)), imm, flags, d.SrcQP(), lp)
}

// completeDatagram retires the receive WQE in progress with a datagram's
// completion.
func (q *QP) completeDatagram(w *recvWQE, st WCStatus, byteLen, imm uint32, flags WCFlags, srcQP uint32, lp *link.Packet) {
	q.retireRecvWQE(w, st, WCRecv, byteLen, imm, flags, srcQP, lp.Remote.Unmap())
}

// buildGRH writes the 40-byte GRH of a received datagram the way rxe
// does (build_rdma_network_hdr): for IPv6 the IPv6 header; for IPv4 the
// first 20 bytes zero and the IPv4 header in the last 20, which is what
// ibv_init_ah_from_wc and librdmacm parse. roceLen is the RoCE packet's
// length (BTH through ICRC). Fields the link does not report are the ones
// RoCEv2 senders use: TTL 64, DF, IPv4 ID 0, flow label 0.
func buildGRH(b []byte, lp *link.Packet, self netip.Addr, roceLen int) {
	src, dst := lp.Remote.Unmap(), lp.Local.Unmap()
	if !dst.IsValid() {
		dst = self.Unmap()
	}
	clear(b[:GRHLen])
	if src.Is4() {
		if !dst.Is4() {
			// A link that reports no IPv4 destination: the
			// header says 0.0.0.0 rather than guess.
			dst = netip.IPv4Unspecified()
		}
		bth.IPv4(b[GRHLen-bth.IPv4MinLen:]).Encode(&bth.IPv4Fields{
			TOS: lp.TOS, TotalLength: uint16(bth.IPv4MinLen + bth.UDPLen + roceLen), Flags: bth.IPv4DontFragment,
			TTL: gsiHopLimit, Protocol: bth.ProtocolUDP, Src: src, Dst: dst,
		})
		return
	}
	bth.IPv6(b).Encode(&bth.IPv6Fields{
		TrafficClass: lp.TOS, PayloadLength: uint16(bth.UDPLen + roceLen), NextHeader: bth.ProtocolUDP,
		HopLimit: gsiHopLimit, Src: src, Dst: dst,
	})
}
