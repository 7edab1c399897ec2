package mad

import "fmt"

// Which message an MRA acknowledges or a REJ rejects (IBA 12.6.6 Table
// 107, 12.6.7 Table 108).
type MsgKind uint8

// Message kinds.
const (
	MsgREQ   MsgKind = 0
	MsgREP   MsgKind = 1
	MsgOther MsgKind = 2 // LAP for an MRA; anything else for a REJ
)

func (k MsgKind) String() string {
	switch k {
	case MsgREQ:
		return "REQ"
	case MsgREP:
		return "REP"
	case MsgOther:
		return "other"
	}
	return fmt.Sprintf("MsgKind(%d)", uint8(k))
}

// Every CM message but REQ and SIDR begins with the two communication IDs.
const (
	msgLocalCommID  = 0
	msgRemoteCommID = 4
)

// MRA is a view of a Message Receipt Acknowledgement (IBA 12.6.6, Table
// 107): "I have your REQ/REP/LAP, give me longer to answer".
//
//	0   Local Communication ID
//	4   Remote Communication ID
//	8   Message MRAed(2) reserved(6)
//	9   Service Timeout(5) reserved(3)
//	10  private data (222 bytes)
type MRA []byte

// MRAFields holds every field of an MRA.
type MRAFields struct {
	LocalCommID, RemoteCommID uint32
	MessageMRAed              MsgKind
	ServiceTimeout            uint8 // 5 bits, 4.096 µs × 2^n
	PrivateData               []byte
}

const (
	mraMessage     = 8
	mraTimeout     = 9
	mraPrivateData = 10
)

func (b MRA) LocalCommID() uint32   { return u32(b, msgLocalCommID) }
func (b MRA) RemoteCommID() uint32  { return u32(b, msgRemoteCommID) }
func (b MRA) MessageMRAed() MsgKind { return MsgKind(getBits(b, mraMessage, 6, 2)) }
func (b MRA) ServiceTimeout() uint8 { return getBits(b, mraTimeout, 3, 5) }
func (b MRA) PrivateData() []byte   { return b[mraPrivateData : mraPrivateData+MRAPrivateDataLen] }

// Fields returns every field; PrivateData is a view into b.
func (b MRA) Fields() MRAFields {
	return MRAFields{b.LocalCommID(), b.RemoteCommID(), b.MessageMRAed(), b.ServiceTimeout(), b.PrivateData()}
}

// Encode writes the message, zeroing reserved bits.
func (b MRA) Encode(f *MRAFields) {
	_ = b[DataLen-1]
	clear(b[:DataLen])
	put32(b, msgLocalCommID, f.LocalCommID)
	put32(b, msgRemoteCommID, f.RemoteCommID)
	putBits(b, mraMessage, 6, 2, uint8(f.MessageMRAed))
	putBits(b, mraTimeout, 3, 5, f.ServiceTimeout)
	putData(b, mraPrivateData, MRAPrivateDataLen, f.PrivateData)
}

// REJ is a view of a Reject (IBA 12.6.7, Table 108).
//
//	0   Local Communication ID (0 when the sender has none yet)
//	4   Remote Communication ID
//	8   Message Rejected(2) reserved(6)
//	9   Reject Info Length(7) reserved(1)
//	10  Reason (16)
//	12  Additional Rejection Information (72 bytes)
//	84  private data (148 bytes)
type REJ []byte

// REJFields holds every field of a REJ. ARI is a view of the 72 bytes when
// read; ARILength says how many of them mean something.
type REJFields struct {
	LocalCommID, RemoteCommID uint32
	MessageRejected           MsgKind
	ARILength                 uint8 // 7 bits
	Reason                    RejectReason
	ARI                       []byte
	PrivateData               []byte
}

const (
	rejMessage     = 8
	rejARILen      = 9
	rejReason      = 10
	rejARI         = 12
	rejPrivateData = 84
)

func (b REJ) LocalCommID() uint32      { return u32(b, msgLocalCommID) }
func (b REJ) RemoteCommID() uint32     { return u32(b, msgRemoteCommID) }
func (b REJ) MessageRejected() MsgKind { return MsgKind(getBits(b, rejMessage, 6, 2)) }
func (b REJ) ARILength() uint8         { return getBits(b, rejARILen, 1, 7) }
func (b REJ) Reason() RejectReason     { return RejectReason(u16(b, rejReason)) }
func (b REJ) ARI() []byte              { return b[rejARI : rejARI+REJARILen] }
func (b REJ) PrivateData() []byte      { return b[rejPrivateData : rejPrivateData+REJPrivateDataLen] }

// Fields returns every field; ARI and PrivateData are views into b.
func (b REJ) Fields() REJFields {
	return REJFields{b.LocalCommID(), b.RemoteCommID(), b.MessageRejected(), b.ARILength(), b.Reason(), b.ARI(), b.PrivateData()}
}

// Encode writes the message, zeroing reserved bits.
func (b REJ) Encode(f *REJFields) {
	_ = b[DataLen-1]
	clear(b[:DataLen])
	put32(b, msgLocalCommID, f.LocalCommID)
	put32(b, msgRemoteCommID, f.RemoteCommID)
	putBits(b, rejMessage, 6, 2, uint8(f.MessageRejected))
	putBits(b, rejARILen, 1, 7, f.ARILength)
	put16(b, rejReason, uint16(f.Reason))
	putData(b, rejARI, REJARILen, f.ARI)
	putData(b, rejPrivateData, REJPrivateDataLen, f.PrivateData)
}

// REP is a view of a Reply to Request for Communication (IBA 12.6.8,
// Table 110): the passive side's acceptance.
//
//	0   Local Communication ID
//	4   Remote Communication ID
//	8   Local Q_Key
//	12  Local QPN(24) Vendor ID high(8)
//	16  Local EE Context Number(24) Vendor ID middle(8)
//	20  Starting PSN(24) Vendor ID low(8)
//	24  Responder Resources
//	25  Initiator Depth
//	26  Target ACK Delay(5) Failover Accepted(2) End-to-End Flow Control(1)
//	27  RNR Retry Count(3) SRQ(1) reserved(4): uroce's Caps, see Caps
//	28  Local CA GUID
//	36  private data (196 bytes)
type REP []byte

// REPFields holds every field of a REP.
type REPFields struct {
	LocalCommID, RemoteCommID uint32
	LocalQKey                 uint32
	LocalQPN                  uint32
	LocalEECN                 uint32
	StartingPSN               uint32
	VendorID                  uint32 // 24 bits split over bytes 15, 19, 23 (IBA Comment 9434)
	ResponderResources        uint8
	InitiatorDepth            uint8
	TargetACKDelay            uint8 // 5 bits
	FailoverAccepted          uint8 // 2 bits
	EndToEndFlowControl       bool
	RNRRetryCount             uint8 // 3 bits, for the REQ sender's QP
	SRQ                       bool
	LocalCAGUID               uint64
	PrivateData               []byte
	// UroceCaps is what the passive side took of the REQ's UroceCaps,
	// in reserved bits (4 of them); 0 leaves them zero, as ib_cm.
	UroceCaps Caps
}

const (
	repLocalQKey     = 8
	repLocalQPN      = 12
	repVendorH       = 15
	repLocalEECN     = 16
	repVendorM       = 19
	repStartingPSN   = 20
	repVendorL       = 23
	repRespResources = 24
	repInitDepth     = 25
	repByte26        = 26
	repByte27        = 27
	repLocalCAGUID   = 28
	repPrivateData   = 36
)

func (b REP) LocalCommID() uint32       { return u32(b, msgLocalCommID) }
func (b REP) RemoteCommID() uint32      { return u32(b, msgRemoteCommID) }
func (b REP) LocalQKey() uint32         { return u32(b, repLocalQKey) }
func (b REP) LocalQPN() uint32          { return get24(b, repLocalQPN) }
func (b REP) LocalEECN() uint32         { return get24(b, repLocalEECN) }
func (b REP) StartingPSN() uint32       { return get24(b, repStartingPSN) }
func (b REP) ResponderResources() uint8 { return b[repRespResources] }
func (b REP) InitiatorDepth() uint8     { return b[repInitDepth] }
func (b REP) TargetACKDelay() uint8     { return getBits(b, repByte26, 3, 5) }
func (b REP) FailoverAccepted() uint8   { return getBits(b, repByte26, 1, 2) }
func (b REP) EndToEndFlowControl() bool { return getBool(b, repByte26, 0) }
func (b REP) RNRRetryCount() uint8      { return getBits(b, repByte27, 5, 3) }
func (b REP) SRQ() bool                 { return getBool(b, repByte27, 4) }
func (b REP) LocalCAGUID() uint64       { return u64(b, repLocalCAGUID) }
func (b REP) PrivateData() []byte       { return b[repPrivateData : repPrivateData+REPPrivateDataLen] }
func (b REP) VendorID() uint32 {
	return uint32(b[repVendorH])<<16 | uint32(b[repVendorM])<<8 | uint32(b[repVendorL])
}

// Fields returns every field; PrivateData is a view into b.
func (b REP) Fields() REPFields {
	return REPFields{
		LocalCommID:         b.LocalCommID(),
		RemoteCommID:        b.RemoteCommID(),
		LocalQKey:           b.LocalQKey(),
		LocalQPN:            b.LocalQPN(),
		LocalEECN:           b.LocalEECN(),
		StartingPSN:         b.StartingPSN(),
		VendorID:            b.VendorID(),
		ResponderResources:  b.ResponderResources(),
		InitiatorDepth:      b.InitiatorDepth(),
		TargetACKDelay:      b.TargetACKDelay(),
		FailoverAccepted:    b.FailoverAccepted(),
		EndToEndFlowControl: b.EndToEndFlowControl(),
		RNRRetryCount:       b.RNRRetryCount(),
		SRQ:                 b.SRQ(),
		LocalCAGUID:         b.LocalCAGUID(),
		PrivateData:         b.PrivateData(),
		UroceCaps:           b.UroceCaps(),
	}
}

// Encode writes the message, zeroing reserved bits.
func (b REP) Encode(f *REPFields) {
	_ = b[DataLen-1]
	clear(b[:DataLen])
	put32(b, msgLocalCommID, f.LocalCommID)
	put32(b, msgRemoteCommID, f.RemoteCommID)
	put32(b, repLocalQKey, f.LocalQKey)
	put24(b, repLocalQPN, f.LocalQPN)
	put24(b, repLocalEECN, f.LocalEECN)
	put24(b, repStartingPSN, f.StartingPSN)
	b[repVendorH], b[repVendorM], b[repVendorL] = byte(f.VendorID>>16), byte(f.VendorID>>8), byte(f.VendorID)
	b[repRespResources] = f.ResponderResources
	b[repInitDepth] = f.InitiatorDepth
	putBits(b, repByte26, 3, 5, f.TargetACKDelay)
	putBits(b, repByte26, 1, 2, f.FailoverAccepted)
	putBool(b, repByte26, 0, f.EndToEndFlowControl)
	putBits(b, repByte27, 5, 3, f.RNRRetryCount)
	putBool(b, repByte27, 4, f.SRQ)
	putBits(b, repByte27, 0, 4, uint8(f.UroceCaps&capsREP))
	put64(b, repLocalCAGUID, f.LocalCAGUID)
	putData(b, repPrivateData, REPPrivateDataLen, f.PrivateData)
}

// RTU is a view of a Ready To Use (IBA 12.6.9, Table 111).
//
//	0  Local Communication ID
//	4  Remote Communication ID
//	8  private data (224 bytes)
type RTU []byte

// DREP is a view of a Reply to Request for Communication Release (IBA
// 12.6.11, Table 113); it has the layout of an RTU.
type DREP []byte

// CommIDsFields holds the fields of the messages that are two
// communication IDs and private data: RTU and DREP.
type CommIDsFields struct {
	LocalCommID, RemoteCommID uint32
	PrivateData               []byte
}

const idsPrivateData = 8

func (b RTU) LocalCommID() uint32  { return u32(b, msgLocalCommID) }
func (b RTU) RemoteCommID() uint32 { return u32(b, msgRemoteCommID) }
func (b RTU) PrivateData() []byte  { return b[idsPrivateData : idsPrivateData+RTUPrivateDataLen] }

// Fields returns every field; PrivateData is a view into b.
func (b RTU) Fields() CommIDsFields {
	return CommIDsFields{b.LocalCommID(), b.RemoteCommID(), b.PrivateData()}
}

// Encode writes the message.
func (b RTU) Encode(f *CommIDsFields) { encodeIDs(b, f, RTUPrivateDataLen) }

func (b DREP) LocalCommID() uint32  { return u32(b, msgLocalCommID) }
func (b DREP) RemoteCommID() uint32 { return u32(b, msgRemoteCommID) }
func (b DREP) PrivateData() []byte  { return b[idsPrivateData : idsPrivateData+DREPPrivateDataLen] }

// Fields returns every field; PrivateData is a view into b.
func (b DREP) Fields() CommIDsFields {
	return CommIDsFields{b.LocalCommID(), b.RemoteCommID(), b.PrivateData()}
}

// Encode writes the message.
func (b DREP) Encode(f *CommIDsFields) { encodeIDs(b, f, DREPPrivateDataLen) }

func encodeIDs(b []byte, f *CommIDsFields, n int) {
	_ = b[DataLen-1]
	clear(b[:DataLen])
	put32(b, msgLocalCommID, f.LocalCommID)
	put32(b, msgRemoteCommID, f.RemoteCommID)
	putData(b, idsPrivateData, n, f.PrivateData)
}

// DREQ is a view of a Request for Communication Release (IBA 12.6.10,
// Table 112).
//
//	0   Local Communication ID
//	4   Remote Communication ID
//	8   Remote QPN/EECN(24) reserved(8)
//	12  private data (220 bytes)
type DREQ []byte

// DREQFields holds every field of a DREQ.
type DREQFields struct {
	LocalCommID, RemoteCommID uint32
	RemoteQPN                 uint32 // the receiver's QPN, which it checks
	PrivateData               []byte
}

const (
	dreqRemoteQPN   = 8
	dreqPrivateData = 12
)

func (b DREQ) LocalCommID() uint32  { return u32(b, msgLocalCommID) }
func (b DREQ) RemoteCommID() uint32 { return u32(b, msgRemoteCommID) }
func (b DREQ) RemoteQPN() uint32    { return get24(b, dreqRemoteQPN) }
func (b DREQ) PrivateData() []byte  { return b[dreqPrivateData : dreqPrivateData+DREQPrivateDataLen] }

// Fields returns every field; PrivateData is a view into b.
func (b DREQ) Fields() DREQFields {
	return DREQFields{b.LocalCommID(), b.RemoteCommID(), b.RemoteQPN(), b.PrivateData()}
}

// Encode writes the message, zeroing reserved bits.
func (b DREQ) Encode(f *DREQFields) {
	_ = b[DataLen-1]
	clear(b[:DataLen])
	put32(b, msgLocalCommID, f.LocalCommID)
	put32(b, msgRemoteCommID, f.RemoteCommID)
	put24(b, dreqRemoteQPN, f.RemoteQPN)
	putData(b, dreqPrivateData, DREQPrivateDataLen, f.PrivateData)
}
