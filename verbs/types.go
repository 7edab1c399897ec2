package verbs

import "github.com/uroce/uroce/qp"

// The work request, completion and attribute types are the engine's
// (package qp), so that a WR crosses the API without a copy or conversion.
// Each one's doc comment below shows its fields, and its constants are
// declared here with its type, so that go doc ./verbs shows them all.

// SGE is one scatter/gather element (ibv_sge), a struct of package qp, the
// engine, so that a WR crosses the API without a copy; MR.SGE makes one. Its
// fields:
//
//	struct {
//		Addr   uint64
//		Length uint32
//		LKey   uint32
//	}
type SGE = qp.SGE

// SendWR is a send work request (ibv_send_wr) for QueuePair.PostSend, the
// engine's own struct (package qp), so that a WR crosses the API without a
// copy. Opcode is one of the WR constants (WRSend, WRWrite, ...), Flags a
// set of Send flags (SendSignaled, ...). Its fields:
//
//	struct {
//		ID         uint64
//		Opcode     WROpcode
//		Flags      SendFlags
//		SGL        []SGE
//		Imm        uint32
//		RemoteAddr uint64
//		RKey       uint32
//		CompareAdd uint64
//		Swap       uint64
//		// FlushType, FlushLevel and FlushLen describe a WRFlush at
//		// RemoteAddr under RKey (ibv_wr_flush's type, level and len).
//		FlushType  FlushType
//		FlushLevel FlushLevel
//		FlushLen   uint32
//		// InlineData, when SendInline is set, is the payload itself (the
//		// Go form of inline SGEs); it is copied at post time.
//		InlineData []byte
//		// InvalidateRKey is the key a WRSendWithInv asks the peer to
//		// invalidate, or a WRLocalInv invalidates (ibv_send_wr's
//		// invalidate_rkey).
//		InvalidateRKey uint32
//		// Bind is a WRBindMW's window, region, range, access and new key.
//		Bind MWBind
//		// Reg is a WRRegMR's region, new key and access.
//		Reg MRReg
//		// AH, RemoteQPN and RemoteQKey address a UD or GSI QP's datagram
//		// (rdma-core's wr.ud); the AH is copied at post time. A RemoteQKey
//		// with its high bit set means the sending QP's own Q_Key (IBA 10.2.5,
//		// the controlled Q_Key rule). RC QPs ignore them.
//		AH         *AH
//		RemoteQPN  uint32
//		RemoteQKey uint32
//	}
//
// For atomics CompareAdd is the compare value of a compare-and-swap or the
// addend of a fetch-and-add, and the SGL names one 8-byte buffer for the
// original value. An ATOMIC WRITE (WRAtomicWrite) stores the 8 bytes its
// SGL or InlineData hold at RemoteAddr, which must be 8-byte aligned, in
// one access; a FLUSH (WRFlush) carries no data. Both are RC only, as are
// the memory window and invalidation opcodes (WRSendWithInv, WRLocalInv,
// WRBindMW, WRRegMR; see MW and PD.AllocFastMR).
type SendWR = qp.SendWR

// MWBind is a WRBindMW's part (ibv_mw_bind_info with bind_mw's rkey): the
// window named by its current key MWKey (MW.RKey) takes the new key RKey
// (MW.NextRKey) and lets a peer reach [Addr, Addr+Length) of the region
// whose local key is MRKey, registered with AccessMWBind, with the remote
// Access flags. A type 1 window with Length 0 is unbound. QueuePair.BindMW
// fills it in. Its fields:
//
//	struct {
//		MWKey  uint32
//		RKey   uint32
//		MRKey  uint32
//		Addr   uint64
//		Length uint64
//		Access Access
//	}
type MWBind = qp.MWBind

// MRReg is a WRRegMR's part (ib_reg_wr): the fast-registration region
// named by its current key MRKey (MR.LKey), mapped by FastMR.Map and
// free, becomes valid under Key (FastMR.NextKey) with the Access flags.
// Its fields:
//
//	struct {
//		MRKey  uint32
//		Key    uint32
//		Access Access
//	}
type MRReg = qp.MRReg

// MWType is a memory window's type (ibv_mw_type): MWType1, reached by any
// QP of its PD and unbound by binding it again with length 0, or MWType2
// (IBA's type 2B), reached only through the QP that bound it and taken
// back by WRLocalInv or the peer's WRSendWithInv.
type MWType = qp.MWType

// Memory window types, rdma-core's values.
const (
	MWType1 MWType = qp.MWType1
	MWType2 MWType = qp.MWType2
)

// RecvWR is a receive work request (ibv_recv_wr) for QueuePair.PostRecv and
// SRQ.PostRecv, the engine's own struct (package qp). Its fields:
//
//	struct {
//		ID  uint64
//		SGL []SGE
//	}
type RecvWR = qp.RecvWR

// WC is a work completion (ibv_wc), as CQ.Poll and CQ.Wait return them: the
// engine's own struct (package qp's Completion). Status is one of the WC
// status constants (WCSuccess, ...), Opcode one of WCSend, WCWrite, ...,
// Flags a set of WCWithImm, WCWithInv and WCGRH. Its fields:
//
//	struct {
//		WRID    uint64
//		Status  WCStatus
//		Opcode  WCOpcode
//		Flags   WCFlags
//		ByteLen uint32
//		Imm     uint32
//		QPN     uint32
//		SrcQP   uint32
//		SrcGID  netip.Addr
//	}
//
// Imm is in host order as the sender posted it. SrcQP is the sending QP: the
// peer of an RC QP, the DETH's source QP of a datagram. SrcGID is set on UD
// and GSI receives only: the sender's IP address (its RoCEv2 GID; IPv4 in
// its 4-byte form), ready to be an AH's DGID for an answer; the GRH at the
// front of the buffer carries the same.
type WC = qp.Completion

// QPAttr holds QP attributes (ibv_qp_attr with the address vector folded in)
// for QueuePair.Modify, with an AttrMask (AttrState, ...) naming the fields
// that count: the engine's own struct (package qp's Attr). Its fields:
//
//	struct {
//		State       QPState
//		AccessFlags Access // remote access the responder allows
//		PKey        uint16 // 0 means the default 0xffff
//		// Address vector: the peer's IP (its GID), hop limit, traffic class.
//		DestAddr     netip.Addr
//		HopLimit     uint8
//		TrafficClass uint8
//		// PathMTU in bytes: 256, 512, 1024, 2048 or 4096.
//		PathMTU int
//		DestQPN uint32
//		RQPSN   uint32
//		SQPSN   uint32
//		// Timeout is the local ACK timeout exponent: 4.096 µs × 2^Timeout, 0
//		// meaning infinite (IBA 11.2.4.2).
//		Timeout uint8
//		// RetryCnt counts the transport retries after local ACK timeouts
//		// and NAKs: 7 is seven retries, then the WR completes with
//		// WCRetryExcErr and the QP moves to ERR (IBA 9.7.6.1.3, C9-140;
//		// ConnectX). rxe treats 7 as forever; Retrans's RetransRetry7Forever
//		// asks for that. RNRRetry counts retries after RNR NAKs, and 7 does
//		// mean forever (IBA 9.7.5.2.8).
//		RetryCnt uint8
//		RNRRetry uint8
//		// Retrans selects adaptive retransmission (the zero value) or the
//		// fixed IBA timer, and rxe's infinite RetryCnt 7 (AttrRetrans).
//		Retrans RetransFlags
//		// MinRNRTimer is the 5-bit code of IBA Table 45 the responder puts in
//		// its RNR NAKs.
//		MinRNRTimer     uint8
//		MaxRdAtomic     uint8 // outstanding READ/atomic this QP sends
//		MaxDestRdAtomic uint8 // outstanding READ/atomic this QP answers
//		// QKey is a UD QP's Q_Key: received datagrams must carry it (IBA
//		// 10.2.5), and a send WR whose RemoteQKey has the high bit set sends
//		// it instead. A GSI QP's is always GSIQKey.
//		QKey uint32
//	}
type QPAttr = qp.Attr

// AH is an address handle (ibv_ah): made by PD.CreateAH, named by a UD
// SendWR's AH. The engine's own struct (package qp). Its fields:
//
//	struct {
//		DGID         netip.Addr
//		SGID         netip.Addr
//		TrafficClass uint8
//		HopLimit     uint8
//		FlowLabel    uint32
//	}
//
// DGID is the peer's IP address (its RoCEv2 GID; IPv4 in either form); SGID,
// when valid, is the local address to send from, else the port's own.
// TrafficClass is sent as the IP TOS byte. HopLimit and FlowLabel are kept
// for the caller's bookkeeping: the links send with the kernel's TTL and no
// flow label, and rxe takes a UD QP's UDP source port from its QPN, not from
// the flow label.
type AH = qp.AH

// QPCounters are a QP's counters (QueuePair.Counters), under rxe's
// hw_counters meanings: the engine's own struct (package qp's Counters). Its
// fields:
//
//	struct {
//		TxPackets, RxPackets uint64
//		TxBytes, RxBytes     uint64
//		PostedSends          uint64
//		CompletedSends       uint64
//		// RDMASends counts SEND and SEND with immediate WRs completed
//		// successfully, RC or UD (rxe's rdma_sends, counted in its
//		// completer's do_complete); CompletedRecvs is rxe's rdma_recvs.
//		RDMASends      uint64
//		CompletedRecvs uint64
//		// Retransmits counts request packets sent again (go-back-N, or
//		// selective repeat's SelectiveResends).
//		Retransmits uint64
//		// Timeouts counts ACK timeouts that started a retry: the IBA local
//		// ACK timeout's and the adaptive RTO's.
//		Timeouts uint64
//		// EarlyRetransTimeouts counts the Timeouts of the adaptive RTO
//		// before the IBA local ACK timeout: each started a go-back-N that
//		// spent no retry.
//		EarlyRetransTimeouts uint64
//		// SpuriousRetrans counts early retransmissions found needless: the
//		// answer came sooner after the retransmission than any round trip
//		// this QP has seen, so it answered the original.
//		SpuriousRetrans uint64
//		// SeqNAKsRcvd counts NAK PSN sequence errors received; SeqNAKsSent
//		// those sent (rxe's out_of_seq_request).
//		SeqNAKsRcvd, SeqNAKsSent uint64
//		// RNRNAKsRcvd and RNRNAKsSent count receiver-not-ready NAKs.
//		RNRNAKsRcvd, RNRNAKsSent uint64
//		// ImplicitNAKs counts retries started by a response after a gap.
//		ImplicitNAKs uint64
//		// DupRequests counts duplicate requests answered or dropped.
//		DupRequests uint64
//		// ErrNAKsSent counts NAKs for invalid requests and access errors.
//		ErrNAKsSent uint64
//		// RemAccessErrs counts the requests among them NAKed with a
//		// remote access error: a bad R_Key, range or permission (mlx5's
//		// resp_remote_access_errors).
//		RemAccessErrs uint64
//		// TooManyRdAtomic counts READ and atomic requests NAKed for
//		// finding every responder resource (max_dest_rd_atomic) still
//		// unanswered (rxe's RESPST_ERR_TOO_MANY_RDMA_ATM_REQ).
//		TooManyRdAtomic uint64
//		// Dropped counts packets the QP ignored (stale responses, bad
//		// sequence, wrong state).
//		Dropped uint64
//		// RetryExcErrs and RNRRetryExcErrs count WRs failed for running out
//		// of retries or RNR retries (rxe's retry_exceeded_err and
//		// retry_rnr_exceeded_err).
//		RetryExcErrs, RNRRetryExcErrs uint64
//		// CompleterRetries counts go-back-N retries the completer started
//		// and paid for with a retry (rxe's completer_retry_err).
//		CompleterRetries uint64
//		// BadQKey counts datagrams dropped for a Q_Key that is not the
//		// QP's (IBA 10.2.5; the port's Q_Key violation counter).
//		BadQKey uint64
//		// BadAddr counts packets for a connected QP dropped because their
//		// IP source is not the QP's peer or their destination not this
//		// port (rxe's check_addr).
//		BadAddr uint64
//		// Selective repeat (RetransSelective, between uroce peers):
//		// SelectiveResends counts the Retransmits that resent one lost
//		// packet; PlacedAhead the WRITE packets the responder placed ahead
//		// of a gap; SACKsSent and SACKsRcvd the selective ACKs.
//		SelectiveResends, PlacedAhead uint64
//		SACKsSent, SACKsRcvd          uint64
//	}
//
// Counters count a QP's traffic and transport events; the engine keeps the
// same set summed over all QPs, plus what it could not deliver to a QP.
type QPCounters = qp.Counters

// Counters are a device's counters (Device.Counters), summed over its QPs:
// the engine's own struct (package qp's EngineCounters). Its fields:
//
//	struct {
//		Counters
//		// NoQP counts packets for a QPN with no QP; BadPacket those that do
//		// not decode or are not RC; BadPKey those with a P_Key mismatch.
//		NoQP, BadPacket, BadPKey uint64
//		// NoBuffer counts packets not built for lack of a transmit buffer.
//		NoBuffer uint64
//		// TxErrors counts packets the port did not send.
//		TxErrors uint64
//		// CNPsRcvd counts CNPs received for an existing QP, whatever its
//		// algorithm did with them.
//		CNPsRcvd uint64
//		// LinkDowned counts the times the port's interface went down (rxe's
//		// link_downed). The engine never moves it: the device that follows
//		// the interface fills it in.
//		LinkDowned uint64
//		// CC sums the QPs' congestion control counters (mlx5's
//		// np_ecn_marked_roce_packets, np_cnp_sent, rp_cnp_handled,
//		// rp_cnp_ignored).
//		CC cc.Counters
//	}
type Counters = qp.EngineCounters

// WROpcode is a send WR's operation (ibv_wr_opcode): WRSend,
// WRSendWithImm, WRWrite, WRWriteWithImm, WRRead, WRCompareSwap,
// WRFetchAdd, WRFlush, WRAtomicWrite, WRSendWithInv, WRLocalInv, WRBindMW,
// WRRegMR. WRFlush and WRAtomicWrite are IBA
// 1.5's RDMA FLUSH and ATOMIC WRITE (rdma-core's ibv_wr_flush and
// ibv_wr_atomic_write; rxe has them since Linux 6.2).
type WROpcode = qp.WROpcode

// Send WR opcodes, named as in rdma-core.
const (
	WRSend         WROpcode = qp.WRSend
	WRSendWithImm  WROpcode = qp.WRSendWithImm
	WRWrite        WROpcode = qp.WRWrite
	WRWriteWithImm WROpcode = qp.WRWriteWithImm
	WRRead         WROpcode = qp.WRRead
	WRCompareSwap  WROpcode = qp.WRCompareSwap
	WRFetchAdd     WROpcode = qp.WRFetchAdd
	WRFlush        WROpcode = qp.WRFlush
	WRAtomicWrite  WROpcode = qp.WRAtomicWrite
	// WRSendWithInv is a SEND that asks the peer to invalidate
	// InvalidateRKey (a type 2 window bound to the peer QP, or a
	// fast-registration region) when it lands.
	WRSendWithInv WROpcode = qp.WRSendWithInv
	// WRLocalInv invalidates InvalidateRKey here, in send queue order.
	WRLocalInv WROpcode = qp.WRLocalInv
	// WRBindMW binds a memory window as Bind says.
	WRBindMW WROpcode = qp.WRBindMW
	// WRRegMR makes a fast-registration region valid as Reg says.
	WRRegMR WROpcode = qp.WRRegMR
)

// FlushType is a FLUSH's placement type (ibv_placement_type), a set of
// FlushGlobal (visible to every observer of the memory) and
// FlushPersistent (in persistent memory). Each needs the matching access
// flag on the remote QP and region: AccessFlushGlobal,
// AccessFlushPersistent. A uroce region cannot have the latter (Go memory
// is not persistent memory; rxe likewise refuses it over ordinary pages),
// so a persistent FLUSH to uroce fails with WCRemAccessErr or, when the
// QP does not allow it either, WCRemInvReqErr.
type FlushType = qp.FlushType

// Placement types (ibv_placement_type, rdma-core's values).
const (
	FlushGlobal     FlushType = qp.FlushGlobal
	FlushPersistent FlushType = qp.FlushPersistent
)

// FlushLevel is a FLUSH's selectivity level (ibv_selectivity_level):
// FlushRange, the FlushLen bytes at RemoteAddr, or FlushMR, the whole
// region RKey names.
type FlushLevel = qp.FlushLevel

// Selectivity levels (ibv_selectivity_level, rdma-core's values).
const (
	FlushRange FlushLevel = qp.FlushRange
	FlushMR    FlushLevel = qp.FlushMR
)

// SendFlags are a send WR's flags (ibv_send_flags): SendFence,
// SendSignaled (the WR completes into the send CQ), SendSolicited,
// SendInline (the payload is SendWR.InlineData).
type SendFlags = qp.SendFlags

// Send WR flags, named as in rdma-core.
const (
	SendFence     SendFlags = qp.FlagFence
	SendSignaled  SendFlags = qp.FlagSignaled
	SendSolicited SendFlags = qp.FlagSolicited
	SendInline    SendFlags = qp.FlagInline
)

// Access is a set of memory region and QP access flags
// (ibv_access_flags): AccessLocalWrite, AccessRemoteWrite,
// AccessRemoteRead, AccessRemoteAtomic, AccessFlushGlobal,
// AccessFlushPersistent, AccessMWBind. An ATOMIC WRITE needs
// AccessRemoteWrite, a FLUSH the flush flag of each placement type it asks
// for, on both the QP and the region; AccessFlushPersistent is for QPs
// only (see FlushType). AccessMWBind lets memory windows be bound to a
// region (see MW).
type Access = qp.Access

// Access flags, named as in rdma-core.
const (
	AccessLocalWrite   Access = qp.AccessLocalWrite
	AccessRemoteWrite  Access = qp.AccessRemoteWrite
	AccessRemoteRead   Access = qp.AccessRemoteRead
	AccessRemoteAtomic Access = qp.AccessRemoteAtomic

	AccessFlushGlobal     Access = qp.AccessFlushGlobal
	AccessFlushPersistent Access = qp.AccessFlushPersistent

	// AccessMWBind lets memory windows be bound to a region.
	AccessMWBind Access = qp.AccessMWBind
)

// WCStatus is a completion's status (ibv_wc_status, rdma-core's values):
// WCSuccess, or an error: WCLocLenErr, WCLocQPOpErr, WCLocProtErr,
// WCWRFlushErr, WCMWBindErr, WCBadRespErr, WCLocAccessErr, WCRemInvReqErr,
// WCRemAccessErr, WCRemOpErr, WCRetryExcErr, WCRNRRetryExcErr, WCFatalErr,
// WCGeneralErr.
type WCStatus = qp.WCStatus

// Completion statuses (ibv_wc_status, rdma-core's values).
const (
	WCSuccess        WCStatus = qp.WCSuccess
	WCLocLenErr      WCStatus = qp.WCLocLenErr
	WCLocQPOpErr     WCStatus = qp.WCLocQPOpErr
	WCLocProtErr     WCStatus = qp.WCLocProtErr
	WCWRFlushErr     WCStatus = qp.WCWRFlushErr
	WCMWBindErr      WCStatus = qp.WCMWBindErr
	WCBadRespErr     WCStatus = qp.WCBadRespErr
	WCLocAccessErr   WCStatus = qp.WCLocAccessErr
	WCRemInvReqErr   WCStatus = qp.WCRemInvReqErr
	WCRemAccessErr   WCStatus = qp.WCRemAccessErr
	WCRemOpErr       WCStatus = qp.WCRemOpErr
	WCRetryExcErr    WCStatus = qp.WCRetryExcErr
	WCRNRRetryExcErr WCStatus = qp.WCRNRRetryExcErr
	WCFatalErr       WCStatus = qp.WCFatalErr
	WCGeneralErr     WCStatus = qp.WCGeneralErr
)

// WCOpcode is what a completion completed (ibv_wc_opcode): WCSend,
// WCWrite, WCRead, WCCompareSwap, WCFetchAdd, WCBindMW, WCLocalInv,
// WCFlush, WCAtomicWrite, WCRegMR, WCRecv, WCRecvRDMAWithImm.
type WCOpcode = qp.WCOpcode

// Completion opcodes (ibv_wc_opcode).
const (
	WCSend            WCOpcode = qp.WCSend
	WCWrite           WCOpcode = qp.WCWrite
	WCRead            WCOpcode = qp.WCRead
	WCCompareSwap     WCOpcode = qp.WCCompareSwap
	WCFetchAdd        WCOpcode = qp.WCFetchAdd
	WCBindMW          WCOpcode = qp.WCBindMW
	WCLocalInv        WCOpcode = qp.WCLocalInv
	WCRegMR           WCOpcode = qp.WCRegMR
	WCFlush           WCOpcode = qp.WCFlush
	WCAtomicWrite     WCOpcode = qp.WCAtomicWrite
	WCRecv            WCOpcode = qp.WCRecv
	WCRecvRDMAWithImm WCOpcode = qp.WCRecvRDMAWithImm
)

// WCFlags are a completion's flags (ibv_wc_flags): WCWithImm (WC.Imm is
// valid), WCWithInv (a SEND with invalidate invalidated the key in WC.Imm)
// and WCGRH (the first GRHLen bytes of a UD receive buffer hold
// the GRH).
type WCFlags = qp.WCFlags

// Completion flags (ibv_wc_flags).
const (
	WCWithImm WCFlags = qp.WCWithImm
	WCWithInv WCFlags = qp.WCWithInv
	WCGRH     WCFlags = qp.WCGRH
)

// QPType is a QP's transport (ibv_qp_type): QPTypeRC, QPTypeUC, QPTypeUD,
// QPTypeGSI.
type QPType = qp.QPType

// QP types (ibv_qp_type); a zero QPInit.Type means RC.
const (
	QPTypeRC  QPType = qp.QPTypeRC
	QPTypeUC  QPType = qp.QPTypeUC
	QPTypeUD  QPType = qp.QPTypeUD
	QPTypeGSI QPType = qp.QPTypeGSI
)

// QPState is a QP's state (ibv_qp_state): StateReset, StateInit,
// StateRTR, StateRTS, StateSQD, StateErr.
type QPState = qp.QPState

// QP states (ibv_qp_state).
const (
	StateReset QPState = qp.StateReset
	StateInit  QPState = qp.StateInit
	StateRTR   QPState = qp.StateRTR
	StateRTS   QPState = qp.StateRTS
	StateSQD   QPState = qp.StateSQD
	StateErr   QPState = qp.StateErr
)

// AttrMask names the QPAttr fields a QueuePair.Modify sets
// (ibv_qp_attr_mask): AttrState for State, AttrAccessFlags for
// AccessFlags, AttrAV for the address vector (DestAddr, HopLimit,
// TrafficClass), AttrPathMTU, AttrTimeout, AttrRetryCnt, AttrRNRRetry,
// AttrRQPSN, AttrSQPSN, AttrDestQPN, AttrMinRNRTimer, AttrMaxQPRdAtomic
// (MaxRdAtomic), AttrMaxDestRdAtomic, AttrPKeyIndex, AttrPort, AttrQKey,
// and uroce's own AttrRetrans.
type AttrMask = qp.AttrMask

// Attribute mask bits (ibv_qp_attr_mask).
const (
	AttrState           AttrMask = qp.AttrState
	AttrAccessFlags     AttrMask = qp.AttrAccessFlags
	AttrPKeyIndex       AttrMask = qp.AttrPKeyIndex
	AttrPort            AttrMask = qp.AttrPort
	AttrQKey            AttrMask = qp.AttrQKey
	AttrAV              AttrMask = qp.AttrAV
	AttrPathMTU         AttrMask = qp.AttrPathMTU
	AttrTimeout         AttrMask = qp.AttrTimeout
	AttrRetryCnt        AttrMask = qp.AttrRetryCnt
	AttrRNRRetry        AttrMask = qp.AttrRNRRetry
	AttrRQPSN           AttrMask = qp.AttrRQPSN
	AttrMaxQPRdAtomic   AttrMask = qp.AttrMaxQPRdAtomic
	AttrMinRNRTimer     AttrMask = qp.AttrMinRNRTimer
	AttrSQPSN           AttrMask = qp.AttrSQPSN
	AttrMaxDestRdAtomic AttrMask = qp.AttrMaxDestRdAtomic
	AttrDestQPN         AttrMask = qp.AttrDestQPN
	// AttrRetrans is uroce's own: QPAttr.Retrans.
	AttrRetrans AttrMask = qp.AttrRetrans
)

// RetransFlags choose adaptive or fixed retransmission and rxe's
// infinite RetryCnt 7 (QPAttr.Retrans, ConnectOptions.Retrans):
// RetransFixed, RetransRetry7Forever, and selective repeat between uroce
// peers, RetransSelective.
type RetransFlags = qp.RetransFlags

// Retransmission flags.
const (
	// RetransFixed keeps to the IBA local ACK timer (rxe's behaviour);
	// without it the QP retransmits adaptively, never later than it.
	RetransFixed RetransFlags = qp.RetransFixed
	// RetransRetry7Forever makes a RetryCnt of 7 retry forever, as rxe
	// does; IBA and ConnectX fail the WR after seven retries.
	RetransRetry7Forever RetransFlags = qp.RetransRetry7Forever
	// RetransSelective is selective repeat between uroce peers: both
	// sides must set it (rdmacm and uroce-perf negotiate it); rxe and
	// ConnectX peers never see it.
	RetransSelective RetransFlags = qp.RetransSelective
)

// SRQ attribute mask bits (ibv_srq_attr_mask): which SRQAttr fields
// SRQ.Modify sets.
const (
	SRQMaxWR SRQAttrMask = qp.SRQMaxWR
	SRQLimit SRQAttrMask = qp.SRQLimit
)

// Asynchronous events (ibv_event_type): an SRQ's limit
// (IBV_EVENT_SRQ_LIMIT_REACHED) and the port's (IBV_EVENT_PORT_ERR,
// IBV_EVENT_PORT_ACTIVE; see Device.QueryPort).
const (
	EventSRQLimitReached AsyncEventType = qp.EventSRQLimitReached
	EventPortErr         AsyncEventType = qp.EventPortErr
	EventPortActive      AsyncEventType = qp.EventPortActive
)

const (
	// GRHLen is the GRH area at the front of every UD receive buffer.
	GRHLen = qp.GRHLen
	// GSIQKey is QP1's Q_Key.
	GSIQKey = qp.GSIQKey
)
