package mad

// SIDRREQ is a view of a Service ID Resolution Request (IBA 12.11.1,
// Table 119): how an active side finds the UD QP behind a service ID
// (rdma_cm's UDP port space on IB transports).
//
//	0   Request ID
//	4   Partition Key(16) reserved(16)
//	8   Service ID
//	16  private data (216 bytes)
type SIDRREQ []byte

// SIDRREQFields holds every field of a SIDR_REQ.
type SIDRREQFields struct {
	RequestID   uint32
	PKey        uint16
	ServiceID   uint64
	PrivateData []byte
}

const (
	sidrReqPKey        = 4
	sidrReqServiceID   = 8
	sidrReqPrivateData = 16
)

func (b SIDRREQ) RequestID() uint32 { return u32(b, 0) }
func (b SIDRREQ) PKey() uint16      { return u16(b, sidrReqPKey) }
func (b SIDRREQ) ServiceID() uint64 { return u64(b, sidrReqServiceID) }
func (b SIDRREQ) PrivateData() []byte {
	return b[sidrReqPrivateData : sidrReqPrivateData+SIDRREQPrivateDataLen]
}

// Fields returns every field; PrivateData is a view into b.
func (b SIDRREQ) Fields() SIDRREQFields {
	return SIDRREQFields{b.RequestID(), b.PKey(), b.ServiceID(), b.PrivateData()}
}

// Encode writes the message, zeroing reserved bits.
func (b SIDRREQ) Encode(f *SIDRREQFields) {
	_ = b[DataLen-1]
	clear(b[:DataLen])
	put32(b, 0, f.RequestID)
	put16(b, sidrReqPKey, f.PKey)
	put64(b, sidrReqServiceID, f.ServiceID)
	putData(b, sidrReqPrivateData, SIDRREQPrivateDataLen, f.PrivateData)
}

// SIDRREP is a view of a Service ID Resolution Response (IBA 12.11.2,
// Table 120).
//
//	0   Request ID
//	4   Status, 5 Additional Info Length, 6 reserved(16)
//	8   QPN(24) reserved(8)
//	12  Service ID
//	20  Q_Key
//	24  ClassPortInfo / additional information (72 bytes)
//	96  private data (136 bytes)
type SIDRREP []byte

// SIDRREPFields holds every field of a SIDR_REP.
type SIDRREPFields struct {
	RequestID   uint32
	Status      SIDRStatus
	InfoLength  uint8
	QPN         uint32
	ServiceID   uint64
	QKey        uint32
	Info        []byte
	PrivateData []byte
}

const (
	sidrRepStatus      = 4
	sidrRepInfoLen     = 5
	sidrRepQPN         = 8
	sidrRepServiceID   = 12
	sidrRepQKey        = 20
	sidrRepInfo        = 24
	sidrRepPrivateData = 96
)

func (b SIDRREP) RequestID() uint32  { return u32(b, 0) }
func (b SIDRREP) Status() SIDRStatus { return SIDRStatus(b[sidrRepStatus]) }
func (b SIDRREP) InfoLength() uint8  { return b[sidrRepInfoLen] }
func (b SIDRREP) QPN() uint32        { return get24(b, sidrRepQPN) }
func (b SIDRREP) ServiceID() uint64  { return u64(b, sidrRepServiceID) }
func (b SIDRREP) QKey() uint32       { return u32(b, sidrRepQKey) }
func (b SIDRREP) Info() []byte       { return b[sidrRepInfo : sidrRepInfo+SIDRREPInfoLen] }
func (b SIDRREP) PrivateData() []byte {
	return b[sidrRepPrivateData : sidrRepPrivateData+SIDRREPPrivateDataLen]
}

// Fields returns every field; Info and PrivateData are views into b.
func (b SIDRREP) Fields() SIDRREPFields {
	return SIDRREPFields{b.RequestID(), b.Status(), b.InfoLength(), b.QPN(), b.ServiceID(), b.QKey(), b.Info(), b.PrivateData()}
}

// Encode writes the message, zeroing reserved bits.
func (b SIDRREP) Encode(f *SIDRREPFields) {
	_ = b[DataLen-1]
	clear(b[:DataLen])
	put32(b, 0, f.RequestID)
	b[sidrRepStatus] = uint8(f.Status)
	b[sidrRepInfoLen] = f.InfoLength
	put24(b, sidrRepQPN, f.QPN)
	put64(b, sidrRepServiceID, f.ServiceID)
	put32(b, sidrRepQKey, f.QKey)
	putData(b, sidrRepInfo, SIDRREPInfoLen, f.Info)
	putData(b, sidrRepPrivateData, SIDRREPPrivateDataLen, f.PrivateData)
}
