package qp

import "net/netip"

// SGE is one scatter/gather element (ibv_sge): Length bytes at virtual
// address Addr of the region whose local key is LKey.
type SGE struct {
	Addr   uint64
	Length uint32
	LKey   uint32
}

// WROpcode is the operation of a send work request (ibv_wr_opcode).
type WROpcode uint8

// Send work request opcodes.
const (
	WRSend WROpcode = iota
	WRSendWithImm
	WRWrite
	WRWriteWithImm
	WRRead
	WRCompareSwap
	WRFetchAdd
	// WRFlush is an RDMA FLUSH (IBA 1.5, rdma-core's ibv_wr_flush): it
	// makes the earlier writes to a remote range or region globally
	// visible, or persistent, as FlushType asks.
	WRFlush
	// WRAtomicWrite is an ATOMIC WRITE (IBA 1.5, ibv_wr_atomic_write):
	// 8 bytes from the SGL or InlineData, stored at an 8-byte aligned
	// remote address in one access.
	WRAtomicWrite
	// WRSendWithInv is a SEND whose last packet asks the responder to
	// invalidate InvalidateRKey (IBA 9.4.4.1, IETH): a type 2 window
	// bound to the peer QP, or a fast-registration region.
	WRSendWithInv
	// WRLocalInv invalidates InvalidateRKey locally (LOCAL_INV), in
	// send queue order.
	WRLocalInv
	// WRBindMW binds a memory window as Bind says (BIND_MW).
	WRBindMW
	// WRRegMR makes a fast-registration region valid as Reg says
	// (REG_MR).
	WRRegMR
)

var wrOpcodeNames = [...]string{"SEND", "SEND_WITH_IMM", "RDMA_WRITE", "RDMA_WRITE_WITH_IMM", "RDMA_READ", "ATOMIC_CMP_AND_SWP", "ATOMIC_FETCH_AND_ADD", "FLUSH", "ATOMIC_WRITE",
	"SEND_WITH_INV", "LOCAL_INV", "BIND_MW", "REG_MR"}

func (o WROpcode) String() string {
	if int(o) < len(wrOpcodeNames) {
		return wrOpcodeNames[o]
	}
	return "WR_UNKNOWN"
}

func (o WROpcode) valid() bool        { return o <= WRRegMR }
func (o WROpcode) isReadAtomic() bool { return o >= WRRead && o <= WRFetchAdd }
func (o WROpcode) isAtomic() bool     { return o == WRCompareSwap || o == WRFetchAdd }
func (o WROpcode) hasImm() bool       { return o == WRSendWithImm || o == WRWriteWithImm }
func (o WROpcode) isWrite() bool      { return o == WRWrite || o == WRWriteWithImm }
func (o WROpcode) isSend() bool       { return o == WRSend || o == WRSendWithImm || o == WRSendWithInv }

// isLocal reports whether o runs on the local send queue alone and sends
// nothing (rxe's WR_LOCAL_OP_MASK).
func (o WROpcode) isLocal() bool { return o >= WRLocalInv }

// SendFlags modify a send work request (ibv_send_flags).
type SendFlags uint8

// Send flags.
const (
	// Fence: do not start this WR until every earlier one has completed
	// (rxe waits for all, which covers IBA's READ/atomic fence).
	FlagFence SendFlags = 1 << iota
	// Signaled: write a completion on success (errors always complete).
	FlagSignaled
	// Solicited: set the solicited event bit on the last packet.
	FlagSolicited
	// Inline: copy the data at post time; the SGEs need no LKey.
	FlagInline
)

// SendWR is a send work request (ibv_send_wr). For atomics CompareAdd is
// the compare value of a compare-and-swap or the addend of a fetch-and-add,
// and the SGL names one 8-byte buffer for the original value.
type SendWR struct {
	ID         uint64
	Opcode     WROpcode
	Flags      SendFlags
	SGL        []SGE
	Imm        uint32
	RemoteAddr uint64
	RKey       uint32
	CompareAdd uint64
	Swap       uint64
	// FlushType, FlushLevel and FlushLen describe a WRFlush at
	// RemoteAddr under RKey (ibv_wr_flush's type, level and len).
	FlushType  FlushType
	FlushLevel FlushLevel
	FlushLen   uint32
	// InlineData, when FlagInline is set, is the payload itself (the
	// Go form of inline SGEs); it is copied at post time.
	InlineData []byte
	// InvalidateRKey is the key a WRSendWithInv asks the peer to
	// invalidate, or a WRLocalInv invalidates (ibv_send_wr's
	// invalidate_rkey).
	InvalidateRKey uint32
	// Bind is a WRBindMW's window, region, range, access and new key.
	Bind MWBind
	// Reg is a WRRegMR's region, new key and access.
	Reg MRReg
	// AH, RemoteQPN and RemoteQKey address a UD or GSI QP's datagram
	// (rdma-core's wr.ud); the AH is copied at post time. A RemoteQKey
	// with its high bit set means the sending QP's own Q_Key (IBA 10.2.5,
	// the controlled Q_Key rule). RC QPs ignore them.
	AH         *AH
	RemoteQPN  uint32
	RemoteQKey uint32
}

// RecvWR is a receive work request (ibv_recv_wr).
type RecvWR struct {
	ID  uint64
	SGL []SGE
}

// WCStatus is the status of a completion (ibv_wc_status), rdma-core values.
type WCStatus uint8

// Completion statuses.
const (
	WCSuccess        WCStatus = 0
	WCLocLenErr      WCStatus = 1
	WCLocQPOpErr     WCStatus = 2
	WCLocProtErr     WCStatus = 4
	WCWRFlushErr     WCStatus = 5
	WCBadRespErr     WCStatus = 7
	WCLocAccessErr   WCStatus = 8
	WCMWBindErr      WCStatus = 6
	WCRemInvReqErr   WCStatus = 9
	WCRemAccessErr   WCStatus = 10
	WCRemOpErr       WCStatus = 11
	WCRetryExcErr    WCStatus = 12
	WCRNRRetryExcErr WCStatus = 13
	WCFatalErr       WCStatus = 19
	WCGeneralErr     WCStatus = 21
)

func (s WCStatus) String() string {
	switch s {
	case WCSuccess:
		return "success"
	case WCLocLenErr:
		return "local length error"
	case WCLocQPOpErr:
		return "local QP operation error"
	case WCLocProtErr:
		return "local protection error"
	case WCWRFlushErr:
		return "WR flushed"
	case WCMWBindErr:
		return "memory window bind error"
	case WCBadRespErr:
		return "bad response"
	case WCLocAccessErr:
		return "local access error"
	case WCRemInvReqErr:
		return "remote invalid request"
	case WCRemAccessErr:
		return "remote access error"
	case WCRemOpErr:
		return "remote operation error"
	case WCRetryExcErr:
		return "transport retry counter exceeded"
	case WCRNRRetryExcErr:
		return "RNR retry counter exceeded"
	case WCFatalErr:
		return "fatal error"
	case WCGeneralErr:
		return "general error"
	}
	return "unknown status"
}

// WCOpcode is what a completion completes (ibv_wc_opcode).
type WCOpcode uint8

// Completion opcodes, rdma-core values.
const (
	WCSend        WCOpcode = 0
	WCWrite       WCOpcode = 1
	WCRead        WCOpcode = 2
	WCCompareSwap WCOpcode = 3
	WCFetchAdd    WCOpcode = 4
	WCBindMW      WCOpcode = 5
	WCLocalInv    WCOpcode = 6
	WCFlush       WCOpcode = 8
	WCAtomicWrite WCOpcode = 9
	// WCRegMR is the kernel's IB_WC_REG_MR: user verbs have no REG_MR.
	WCRegMR           WCOpcode = 10
	WCRecv            WCOpcode = 128
	WCRecvRDMAWithImm WCOpcode = 129
)

var wcOpcodeOf = [...]WCOpcode{
	WRSend: WCSend, WRSendWithImm: WCSend, WRWrite: WCWrite, WRWriteWithImm: WCWrite,
	WRRead: WCRead, WRCompareSwap: WCCompareSwap, WRFetchAdd: WCFetchAdd,
	WRFlush: WCFlush, WRAtomicWrite: WCAtomicWrite,
	WRSendWithInv: WCSend, WRLocalInv: WCLocalInv, WRBindMW: WCBindMW, WRRegMR: WCRegMR,
}

func (o WCOpcode) String() string {
	switch o {
	case WCSend:
		return "SEND"
	case WCWrite:
		return "RDMA_WRITE"
	case WCRead:
		return "RDMA_READ"
	case WCCompareSwap:
		return "COMP_SWAP"
	case WCBindMW:
		return "BIND_MW"
	case WCLocalInv:
		return "LOCAL_INV"
	case WCRegMR:
		return "REG_MR"
	case WCFetchAdd:
		return "FETCH_ADD"
	case WCFlush:
		return "FLUSH"
	case WCAtomicWrite:
		return "ATOMIC_WRITE"
	case WCRecv:
		return "RECV"
	case WCRecvRDMAWithImm:
		return "RECV_RDMA_WITH_IMM"
	}
	return "WC_UNKNOWN"
}

// WCFlags are completion flags (ibv_wc_flags).
type WCFlags uint8

// Completion flags.
const (
	// WCGRH: the first 40 bytes of the receive buffer hold the
	// datagram's GRH (UD and GSI receives, always on RoCEv2).
	WCGRH     WCFlags = 1 << 0
	WCWithImm WCFlags = 1 << 1
	// WCWithInv: a SEND with invalidate arrived and invalidated the
	// key in Imm (IBV_WC_WITH_INV, whose key ibv_wc keeps in the same
	// union as the immediate data).
	WCWithInv WCFlags = 1 << 3
)

// Completion is a work completion (ibv_wc). Imm is in host order as the
// sender posted it. SrcQP is the sending QP: the peer of an RC QP, the
// DETH's source QP of a datagram. SrcGID is set on UD and GSI receives
// only: the sender's IP address (its RoCEv2 GID; IPv4 in its 4-byte form),
// ready to be an AH's DGID for an answer; the GRH at the front of the
// buffer carries the same.
type Completion struct {
	WRID    uint64
	Status  WCStatus
	Opcode  WCOpcode
	Flags   WCFlags
	ByteLen uint32
	Imm     uint32
	QPN     uint32
	SrcQP   uint32
	SrcGID  netip.Addr
}
