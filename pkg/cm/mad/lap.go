package mad

// LAP is a view of a Load Alternate Path (IBA 12.6.12, Table 115), the
// optional path migration request.
//
//	0   Local Communication ID
//	4   Remote Communication ID
//	8   reserved
//	12  Remote QPN/EECN(24) Remote CM Response Timeout(5) reserved(3)
//	16  reserved
//	20  alternate path: local LID, remote LID (16 each)
//	24  alternate local GID, 40 alternate remote GID
//	56  flow label(20) reserved(4) traffic class(8)
//	60  hop limit, 61 reserved(2) packet rate(6)
//	62  SL(4) subnet local(1) reserved(3)
//	63  local ACK timeout(5) reserved(3)
//	64  private data (168 bytes)
type LAP []byte

// LAPFields holds every field of a LAP.
type LAPFields struct {
	LocalCommID, RemoteCommID uint32
	RemoteQPN                 uint32
	RemoteCMResponseTimeout   uint8
	Alternate                 Path
	PrivateData               []byte
}

const (
	lapRemoteQPN   = 12
	lapTimeout     = 15
	lapLocalLID    = 20
	lapRemoteLID   = 22
	lapLocalGID    = 24
	lapRemoteGID   = 40
	lapFlowLabel   = 56
	lapTClass      = 59
	lapHopLimit    = 60
	lapRate        = 61
	lapSL          = 62
	lapACKTimeout  = 63
	lapPrivateData = 64
)

func (b LAP) LocalCommID() uint32            { return u32(b, msgLocalCommID) }
func (b LAP) RemoteCommID() uint32           { return u32(b, msgRemoteCommID) }
func (b LAP) RemoteQPN() uint32              { return get24(b, lapRemoteQPN) }
func (b LAP) RemoteCMResponseTimeout() uint8 { return getBits(b, lapTimeout, 3, 5) }
func (b LAP) PrivateData() []byte            { return b[lapPrivateData : lapPrivateData+LAPPrivateDataLen] }

// Alternate returns the path the sender asks to load.
func (b LAP) Alternate() Path {
	return Path{
		LocalLID:        u16(b, lapLocalLID),
		RemoteLID:       u16(b, lapRemoteLID),
		LocalGID:        gid(b, lapLocalGID),
		RemoteGID:       gid(b, lapRemoteGID),
		FlowLabel:       u32(b, lapFlowLabel) >> 12,
		TrafficClass:    b[lapTClass],
		HopLimit:        b[lapHopLimit],
		PacketRate:      getBits(b, lapRate, 0, 6),
		SL:              getBits(b, lapSL, 4, 4),
		SubnetLocal:     getBool(b, lapSL, 3),
		LocalACKTimeout: getBits(b, lapACKTimeout, 3, 5),
	}
}

// Fields returns every field; PrivateData is a view into b.
func (b LAP) Fields() LAPFields {
	return LAPFields{b.LocalCommID(), b.RemoteCommID(), b.RemoteQPN(), b.RemoteCMResponseTimeout(), b.Alternate(), b.PrivateData()}
}

// Encode writes the message, zeroing reserved bits.
func (b LAP) Encode(f *LAPFields) {
	_ = b[DataLen-1]
	clear(b[:DataLen])
	put32(b, msgLocalCommID, f.LocalCommID)
	put32(b, msgRemoteCommID, f.RemoteCommID)
	put24(b, lapRemoteQPN, f.RemoteQPN)
	putBits(b, lapTimeout, 3, 5, f.RemoteCMResponseTimeout)
	p := &f.Alternate
	put16(b, lapLocalLID, p.LocalLID)
	put16(b, lapRemoteLID, p.RemoteLID)
	putGID(b, lapLocalGID, p.LocalGID)
	putGID(b, lapRemoteGID, p.RemoteGID)
	put32(b, lapFlowLabel, (p.FlowLabel&0xfffff)<<12|uint32(p.TrafficClass))
	b[lapHopLimit] = p.HopLimit
	putBits(b, lapRate, 0, 6, p.PacketRate)
	putBits(b, lapSL, 4, 4, p.SL)
	putBool(b, lapSL, 3, p.SubnetLocal)
	putBits(b, lapACKTimeout, 3, 5, p.LocalACKTimeout)
	putData(b, lapPrivateData, LAPPrivateDataLen, f.PrivateData)
}

// APR is a view of an Alternate Path Response (IBA 12.6.13, Table 116).
//
//	0   Local Communication ID
//	4   Remote Communication ID
//	8   Additional Info Length, 9 AP Status, 10 reserved(16)
//	12  additional information (72 bytes)
//	84  private data (148 bytes)
type APR []byte

// APRFields holds every field of an APR.
type APRFields struct {
	LocalCommID, RemoteCommID uint32
	InfoLength                uint8
	Status                    APRStatus
	Info                      []byte
	PrivateData               []byte
}

const (
	aprInfoLen     = 8
	aprStatus      = 9
	aprInfo        = 12
	aprPrivateData = 84
)

func (b APR) LocalCommID() uint32  { return u32(b, msgLocalCommID) }
func (b APR) RemoteCommID() uint32 { return u32(b, msgRemoteCommID) }
func (b APR) InfoLength() uint8    { return b[aprInfoLen] }
func (b APR) Status() APRStatus    { return APRStatus(b[aprStatus]) }
func (b APR) Info() []byte         { return b[aprInfo : aprInfo+APRInfoLen] }
func (b APR) PrivateData() []byte  { return b[aprPrivateData : aprPrivateData+APRPrivateDataLen] }

// Fields returns every field; Info and PrivateData are views into b.
func (b APR) Fields() APRFields {
	return APRFields{b.LocalCommID(), b.RemoteCommID(), b.InfoLength(), b.Status(), b.Info(), b.PrivateData()}
}

// Encode writes the message, zeroing reserved bits.
func (b APR) Encode(f *APRFields) {
	_ = b[DataLen-1]
	clear(b[:DataLen])
	put32(b, msgLocalCommID, f.LocalCommID)
	put32(b, msgRemoteCommID, f.RemoteCommID)
	b[aprInfoLen] = f.InfoLength
	b[aprStatus] = uint8(f.Status)
	putData(b, aprInfo, APRInfoLen, f.Info)
	putData(b, aprPrivateData, APRPrivateDataLen, f.PrivateData)
}
