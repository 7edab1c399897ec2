package verbs

import "github.com/uroce/uroce/qp"

// The work request, completion and attribute types are the engine's, so a
// WR crosses the API without a copy or conversion.
type (
	SGE        = qp.SGE
	SendWR     = qp.SendWR
	RecvWR     = qp.RecvWR
	WC         = qp.Completion
	WCStatus   = qp.WCStatus
	WCOpcode   = qp.WCOpcode
	WCFlags    = qp.WCFlags
	WROpcode   = qp.WROpcode
	SendFlags  = qp.SendFlags
	Access     = qp.Access
	QPAttr     = qp.Attr
	AttrMask   = qp.AttrMask
	QPState    = qp.QPState
	QPCounters = qp.Counters
	Counters   = qp.EngineCounters
	QPType     = qp.QPType
	// RetransFlags choose adaptive or fixed retransmission and rxe's
	// infinite RetryCnt 7 (QPAttr.Retrans, ConnectOptions.Retrans).
	RetransFlags = qp.RetransFlags
	// AH is an address handle (ibv_ah): made by PD.CreateAH, named by a
	// UD SendWR's AH.
	AH = qp.AH
)

// Re-exported constants, named as in rdma-core.
const (
	WRSend         = qp.WRSend
	WRSendWithImm  = qp.WRSendWithImm
	WRWrite        = qp.WRWrite
	WRWriteWithImm = qp.WRWriteWithImm
	WRRead         = qp.WRRead
	WRCompareSwap  = qp.WRCompareSwap
	WRFetchAdd     = qp.WRFetchAdd

	SendFence     = qp.FlagFence
	SendSignaled  = qp.FlagSignaled
	SendSolicited = qp.FlagSolicited
	SendInline    = qp.FlagInline

	AccessLocalWrite   = qp.AccessLocalWrite
	AccessRemoteWrite  = qp.AccessRemoteWrite
	AccessRemoteRead   = qp.AccessRemoteRead
	AccessRemoteAtomic = qp.AccessRemoteAtomic

	// Completion statuses (ibv_wc_status, rdma-core's values).
	WCSuccess        = qp.WCSuccess
	WCLocLenErr      = qp.WCLocLenErr
	WCLocQPOpErr     = qp.WCLocQPOpErr
	WCLocProtErr     = qp.WCLocProtErr
	WCWRFlushErr     = qp.WCWRFlushErr
	WCBadRespErr     = qp.WCBadRespErr
	WCLocAccessErr   = qp.WCLocAccessErr
	WCRemInvReqErr   = qp.WCRemInvReqErr
	WCRemAccessErr   = qp.WCRemAccessErr
	WCRemOpErr       = qp.WCRemOpErr
	WCRetryExcErr    = qp.WCRetryExcErr
	WCRNRRetryExcErr = qp.WCRNRRetryExcErr
	WCFatalErr       = qp.WCFatalErr
	WCGeneralErr     = qp.WCGeneralErr

	WCSend            = qp.WCSend
	WCWrite           = qp.WCWrite
	WCRead            = qp.WCRead
	WCCompareSwap     = qp.WCCompareSwap
	WCFetchAdd        = qp.WCFetchAdd
	WCRecv            = qp.WCRecv
	WCRecvRDMAWithImm = qp.WCRecvRDMAWithImm
	WCWithImm         = qp.WCWithImm

	WCGRH = qp.WCGRH

	// SRQ attribute mask bits (ibv_srq_attr_mask) and the asynchronous
	// event an SRQ raises (IBV_EVENT_SRQ_LIMIT_REACHED).
	SRQMaxWR             = qp.SRQMaxWR
	SRQLimit             = qp.SRQLimit
	EventSRQLimitReached = qp.EventSRQLimitReached
	// The port's events (IBV_EVENT_PORT_ERR, IBV_EVENT_PORT_ACTIVE): see
	// Device.QueryPort.
	EventPortErr    = qp.EventPortErr
	EventPortActive = qp.EventPortActive

	// QP types (ibv_qp_type); a zero QPInit.Type means RC.
	QPTypeRC  = qp.QPTypeRC
	QPTypeUD  = qp.QPTypeUD
	QPTypeGSI = qp.QPTypeGSI

	// GRHLen is the GRH area at the front of every UD receive buffer.
	GRHLen = qp.GRHLen
	// GSIQKey is QP1's Q_Key.
	GSIQKey = qp.GSIQKey

	// Attribute mask bits (ibv_qp_attr_mask).
	AttrState           = qp.AttrState
	AttrAccessFlags     = qp.AttrAccessFlags
	AttrPKeyIndex       = qp.AttrPKeyIndex
	AttrPort            = qp.AttrPort
	AttrQKey            = qp.AttrQKey
	AttrAV              = qp.AttrAV
	AttrPathMTU         = qp.AttrPathMTU
	AttrTimeout         = qp.AttrTimeout
	AttrRetryCnt        = qp.AttrRetryCnt
	AttrRNRRetry        = qp.AttrRNRRetry
	AttrRQPSN           = qp.AttrRQPSN
	AttrMaxQPRdAtomic   = qp.AttrMaxQPRdAtomic
	AttrMinRNRTimer     = qp.AttrMinRNRTimer
	AttrSQPSN           = qp.AttrSQPSN
	AttrMaxDestRdAtomic = qp.AttrMaxDestRdAtomic
	AttrDestQPN         = qp.AttrDestQPN
	// AttrRetrans is uroce's own: QPAttr.Retrans.
	AttrRetrans = qp.AttrRetrans

	// RetransFixed keeps to the IBA local ACK timer (rxe's behaviour);
	// without it the QP retransmits adaptively, never later than it.
	RetransFixed = qp.RetransFixed
	// RetransRetry7Forever makes a RetryCnt of 7 retry forever, as rxe
	// does; IBA and ConnectX fail the WR after seven retries.
	RetransRetry7Forever = qp.RetransRetry7Forever

	StateReset = qp.StateReset
	StateInit  = qp.StateInit
	StateRTR   = qp.StateRTR
	StateRTS   = qp.StateRTS
	StateSQD   = qp.StateSQD
	StateErr   = qp.StateErr
)
