package mad

// REQ is a view of a ConnectRequest (IBA 12.6.5, Table 106): the active
// side's offer of a connection. Byte offsets are from the start of the MAD
// data, as in the table.
//
//	0    Local Communication ID
//	4    reserved(8) Vendor ID(24)  (IBA Comment 9434, the kernel's ECE)
//	8    Service ID
//	16   Local CA GUID
//	24   reserved (uroce's Caps, behind a magic: see Caps)
//	28   Local Q_Key
//	32   Local QPN(24) Responder Resources(8)
//	36   Local EECN(24) Initiator Depth(8)
//	40   Remote EECN(24) Remote CM Response Timeout(5) Transport
//	     Service Type(2) End-to-End Flow Control(1)
//	44   Starting PSN(24) Local CM Response Timeout(5) Retry Count(3)
//	48   Partition Key(16) Path MTU(4) RDC Exists(1) RNR Retry Count(3)
//	     Max CM Retries(4) SRQ(1) Extended Transport Type(3)
//	52   primary path (44 bytes, see Path)
//	96   alternate path (44 bytes; SAP Supported in its last byte)
//	140  private data (92 bytes)
type REQ []byte

const (
	reqLocalCommID   = 0
	reqVendorID      = 4 // low 24 bits of the word
	reqServiceID     = 8
	reqLocalCAGUID   = 16
	reqLocalQKey     = 28
	reqLocalQPN      = 32
	reqRespResources = 35
	reqLocalEECN     = 36
	reqInitDepth     = 39
	reqRemoteEECN    = 40
	reqByte43        = 43 // remote CM response timeout, transport service, flow control
	reqStartingPSN   = 44
	reqByte47        = 47 // local CM response timeout, retry count
	reqPKey          = 48
	reqByte50        = 50 // path MTU, RDC exists, RNR retry count
	reqByte51        = 51 // max CM retries, SRQ, extended transport type
	reqPrimaryPath   = 52
	reqAltPath       = 96
	reqSAPByte       = 139
	reqPrivateData   = 140
)

// Path holds one path of a REQ (IBA 12.6.5, Table 106, bytes 52-139):
// "local" is the REQ sender's side. On RoCE the LIDs are the permissive
// LID 0xffff and the GIDs are the ports' IP addresses.
type Path struct {
	LocalLID, RemoteLID uint16
	LocalGID, RemoteGID GID
	FlowLabel           uint32 // 20 bits
	PacketRate          uint8  // 6 bits, IBA 9.11 rate code; 0 on rxe
	TrafficClass        uint8
	HopLimit            uint8
	SL                  uint8 // 4 bits
	SubnetLocal         bool
	LocalACKTimeout     uint8 // 5 bits, 4.096 µs × 2^n
}

// Offsets within a REQ path.
const (
	pathLocalLID   = 0
	pathRemoteLID  = 2
	pathLocalGID   = 4
	pathRemoteGID  = 20
	pathFlowLabel  = 36 // top 20 bits of the word; rate in the low 6
	pathRate       = 39
	pathTClass     = 40
	pathHopLimit   = 41
	pathSL         = 42 // SL(4) SubnetLocal(1) reserved(3)
	pathACKTimeout = 43 // LocalACKTimeout(5), then reserved (or SAP)
	pathLen        = 44
)

func readPath(b []byte) Path {
	return Path{
		LocalLID:        u16(b, pathLocalLID),
		RemoteLID:       u16(b, pathRemoteLID),
		LocalGID:        gid(b, pathLocalGID),
		RemoteGID:       gid(b, pathRemoteGID),
		FlowLabel:       u32(b, pathFlowLabel) >> 12,
		PacketRate:      getBits(b, pathRate, 0, 6),
		TrafficClass:    b[pathTClass],
		HopLimit:        b[pathHopLimit],
		SL:              getBits(b, pathSL, 4, 4),
		SubnetLocal:     getBool(b, pathSL, 3),
		LocalACKTimeout: getBits(b, pathACKTimeout, 3, 5),
	}
}

// writePath writes p over 44 zeroed bytes.
func writePath(b []byte, p *Path) {
	put16(b, pathLocalLID, p.LocalLID)
	put16(b, pathRemoteLID, p.RemoteLID)
	putGID(b, pathLocalGID, p.LocalGID)
	putGID(b, pathRemoteGID, p.RemoteGID)
	put32(b, pathFlowLabel, (p.FlowLabel&0xfffff)<<12|uint32(p.PacketRate&0x3f))
	b[pathTClass] = p.TrafficClass
	b[pathHopLimit] = p.HopLimit
	putBits(b, pathSL, 4, 4, p.SL)
	putBool(b, pathSL, 3, p.SubnetLocal)
	putBits(b, pathACKTimeout, 3, 5, p.LocalACKTimeout)
}

// REQFields holds every field of a REQ.
type REQFields struct {
	LocalCommID             uint32
	VendorID                uint32 // 24 bits; 0 unless both sides do ECE
	ServiceID               uint64
	LocalCAGUID             uint64
	LocalQKey               uint32 // UD/RD only; 0 for RC
	LocalQPN                uint32
	ResponderResources      uint8 // RDMA READ/atomic the sender will answer
	LocalEECN               uint32
	InitiatorDepth          uint8 // RDMA READ/atomic the sender will issue
	RemoteEECN              uint32
	RemoteCMResponseTimeout uint8 // 5 bits: how long the REQ's receiver may take to answer
	TransportService        TransportService
	EndToEndFlowControl     bool
	StartingPSN             uint32
	LocalCMResponseTimeout  uint8 // 5 bits: how long the sender takes to answer
	RetryCount              uint8 // 3 bits
	PKey                    uint16
	PathMTU                 MTU
	RDCExists               bool
	RNRRetryCount           uint8 // 3 bits, for the REQ receiver's QP
	MaxCMRetries            uint8 // 4 bits
	SRQ                     bool
	ExtendedTransport       uint8 // 3 bits; 0, or XRC (IBA 14.6.3.1 in the XRC annex)
	Primary, Alternate      Path
	SAPSupported            bool
	PrivateData             []byte // a view of the 92 bytes when read
	// UroceCaps is uroce's offer, in reserved bits; 0 leaves them zero,
	// as ib_cm sends them.
	UroceCaps Caps
}

func (b REQ) LocalCommID() uint32       { return u32(b, reqLocalCommID) }
func (b REQ) VendorID() uint32          { return u32(b, reqVendorID) & 0xffffff }
func (b REQ) ServiceID() uint64         { return u64(b, reqServiceID) }
func (b REQ) LocalCAGUID() uint64       { return u64(b, reqLocalCAGUID) }
func (b REQ) LocalQKey() uint32         { return u32(b, reqLocalQKey) }
func (b REQ) LocalQPN() uint32          { return get24(b, reqLocalQPN) }
func (b REQ) ResponderResources() uint8 { return b[reqRespResources] }
func (b REQ) LocalEECN() uint32         { return get24(b, reqLocalEECN) }
func (b REQ) InitiatorDepth() uint8     { return b[reqInitDepth] }
func (b REQ) RemoteEECN() uint32        { return get24(b, reqRemoteEECN) }
func (b REQ) RemoteCMResponseTimeout() uint8 {
	return getBits(b, reqByte43, 3, 5)
}
func (b REQ) TransportService() TransportService {
	return TransportService(getBits(b, reqByte43, 1, 2))
}
func (b REQ) EndToEndFlowControl() bool     { return getBool(b, reqByte43, 0) }
func (b REQ) StartingPSN() uint32           { return get24(b, reqStartingPSN) }
func (b REQ) LocalCMResponseTimeout() uint8 { return getBits(b, reqByte47, 3, 5) }
func (b REQ) RetryCount() uint8             { return getBits(b, reqByte47, 0, 3) }
func (b REQ) PKey() uint16                  { return u16(b, reqPKey) }
func (b REQ) PathMTU() MTU                  { return MTU(getBits(b, reqByte50, 4, 4)) }
func (b REQ) RDCExists() bool               { return getBool(b, reqByte50, 3) }
func (b REQ) RNRRetryCount() uint8          { return getBits(b, reqByte50, 0, 3) }
func (b REQ) MaxCMRetries() uint8           { return getBits(b, reqByte51, 4, 4) }
func (b REQ) SRQ() bool                     { return getBool(b, reqByte51, 3) }
func (b REQ) ExtendedTransport() uint8      { return getBits(b, reqByte51, 0, 3) }
func (b REQ) Primary() Path                 { return readPath(b[reqPrimaryPath : reqPrimaryPath+pathLen]) }
func (b REQ) Alternate() Path               { return readPath(b[reqAltPath : reqAltPath+pathLen]) }
func (b REQ) SAPSupported() bool            { return getBool(b, reqSAPByte, 2) }
func (b REQ) PrivateData() []byte {
	return b[reqPrivateData : reqPrivateData+REQPrivateDataLen]
}

// Fields returns every field; PrivateData is a view into b.
func (b REQ) Fields() REQFields {
	return REQFields{
		LocalCommID:             b.LocalCommID(),
		VendorID:                b.VendorID(),
		ServiceID:               b.ServiceID(),
		LocalCAGUID:             b.LocalCAGUID(),
		LocalQKey:               b.LocalQKey(),
		LocalQPN:                b.LocalQPN(),
		ResponderResources:      b.ResponderResources(),
		LocalEECN:               b.LocalEECN(),
		InitiatorDepth:          b.InitiatorDepth(),
		RemoteEECN:              b.RemoteEECN(),
		RemoteCMResponseTimeout: b.RemoteCMResponseTimeout(),
		TransportService:        b.TransportService(),
		EndToEndFlowControl:     b.EndToEndFlowControl(),
		StartingPSN:             b.StartingPSN(),
		LocalCMResponseTimeout:  b.LocalCMResponseTimeout(),
		RetryCount:              b.RetryCount(),
		PKey:                    b.PKey(),
		PathMTU:                 b.PathMTU(),
		RDCExists:               b.RDCExists(),
		RNRRetryCount:           b.RNRRetryCount(),
		MaxCMRetries:            b.MaxCMRetries(),
		SRQ:                     b.SRQ(),
		ExtendedTransport:       b.ExtendedTransport(),
		Primary:                 b.Primary(),
		Alternate:               b.Alternate(),
		SAPSupported:            b.SAPSupported(),
		PrivateData:             b.PrivateData(),
		UroceCaps:               b.UroceCaps(),
	}
}

// Encode writes every field over the whole message, zeroing reserved bits
// and filling the private data with f.PrivateData (truncated to 92 bytes,
// zero-padded).
func (b REQ) Encode(f *REQFields) {
	_ = b[DataLen-1]
	clear(b[:DataLen])
	put32(b, reqLocalCommID, f.LocalCommID)
	put32(b, reqVendorID, f.VendorID&0xffffff)
	put64(b, reqServiceID, f.ServiceID)
	put64(b, reqLocalCAGUID, f.LocalCAGUID)
	put32(b, reqLocalQKey, f.LocalQKey)
	put24(b, reqLocalQPN, f.LocalQPN)
	b[reqRespResources] = f.ResponderResources
	put24(b, reqLocalEECN, f.LocalEECN)
	b[reqInitDepth] = f.InitiatorDepth
	put24(b, reqRemoteEECN, f.RemoteEECN)
	putBits(b, reqByte43, 3, 5, f.RemoteCMResponseTimeout)
	putBits(b, reqByte43, 1, 2, uint8(f.TransportService))
	putBool(b, reqByte43, 0, f.EndToEndFlowControl)
	put24(b, reqStartingPSN, f.StartingPSN)
	putBits(b, reqByte47, 3, 5, f.LocalCMResponseTimeout)
	putBits(b, reqByte47, 0, 3, f.RetryCount)
	put16(b, reqPKey, f.PKey)
	putBits(b, reqByte50, 4, 4, uint8(f.PathMTU))
	putBool(b, reqByte50, 3, f.RDCExists)
	putBits(b, reqByte50, 0, 3, f.RNRRetryCount)
	putBits(b, reqByte51, 4, 4, f.MaxCMRetries)
	putBool(b, reqByte51, 3, f.SRQ)
	putBits(b, reqByte51, 0, 3, f.ExtendedTransport)
	writePath(b[reqPrimaryPath:reqPrimaryPath+pathLen], &f.Primary)
	writePath(b[reqAltPath:reqAltPath+pathLen], &f.Alternate)
	putBool(b, reqSAPByte, 2, f.SAPSupported)
	putData(b, reqPrivateData, REQPrivateDataLen, f.PrivateData)
	if f.UroceCaps != 0 {
		put16(b, reqCapsMagicOff, reqCapsMagic)
		b[reqCaps] = byte(f.UroceCaps)
	}
}
