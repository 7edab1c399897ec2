package mad

import (
	"encoding/binary"
	"fmt"
)

// Sizes (IBA 13.4.1, 13.4.2).
const (
	// Size is the length of every MAD on QP0/QP1.
	Size = 256
	// HeaderLen is the length of the common MAD header.
	HeaderLen = 24
	// DataLen is what follows the header: a CM message and its private
	// data.
	DataLen = Size - HeaderLen
)

// QP1 addressing (IBA 13.5.2, 13.5.3).
const (
	// GSIQPN is the QP number of the general services interface: every
	// CM MAD goes to QP1 and comes from QP1.
	GSIQPN = 1
	// GSIQKey is the well-known Q_Key of QP1 (IBA 13.5.3.3: "0x80010000").
	GSIQKey = 0x80010000
)

// BaseVersion is the only MAD base version (IBA 13.4.2).
const BaseVersion = 1

// Class is a management class (IBA 13.4.4, Table 147).
type Class uint8

// Management classes this package names. Only ClassCM has messages here.
const (
	ClassSubnLID    Class = 0x01
	ClassSubnAdm    Class = 0x03
	ClassPerf       Class = 0x04
	ClassBM         Class = 0x05
	ClassDevMgt     Class = 0x06
	ClassCM         Class = 0x07
	ClassSNMP       Class = 0x08
	ClassSubnDirect Class = 0x81
	CMClassVersion        = 2 // IBA 12.11, ib_cm's IB_CM_CLASS_VERSION
)

// Method is a MAD method (IBA 13.4.5, Table 148). The top bit marks a
// response.
type Method uint8

// Methods.
const (
	MethodGet         Method = 0x01
	MethodSet         Method = 0x02
	MethodSend        Method = 0x03
	MethodTrap        Method = 0x05
	MethodReport      Method = 0x06
	MethodTrapRepress Method = 0x07
	MethodGetResp     Method = 0x81
	MethodReportResp  Method = 0x86

	// MethodResponse is the R bit (IBA 13.4.5).
	MethodResponse Method = 0x80
)

func (m Method) String() string {
	switch m {
	case MethodGet:
		return "Get"
	case MethodSet:
		return "Set"
	case MethodSend:
		return "Send"
	case MethodTrap:
		return "Trap"
	case MethodReport:
		return "Report"
	case MethodTrapRepress:
		return "TrapRepress"
	case MethodGetResp:
		return "GetResp"
	case MethodReportResp:
		return "ReportResp"
	}
	return fmt.Sprintf("Method(%#02x)", uint8(m))
}

// AttrID is an attribute ID; for the CM class it names the message
// (IBA 12.6.1, Table 104... and ib_cm's CM_*_ATTR_ID).
type AttrID uint16

// CM class attributes.
const (
	AttrClassPortInfo AttrID = 0x0001
	AttrREQ           AttrID = 0x0010
	AttrMRA           AttrID = 0x0011
	AttrREJ           AttrID = 0x0012
	AttrREP           AttrID = 0x0013
	AttrRTU           AttrID = 0x0014
	AttrDREQ          AttrID = 0x0015
	AttrDREP          AttrID = 0x0016
	AttrSIDRREQ       AttrID = 0x0017
	AttrSIDRREP       AttrID = 0x0018
	AttrLAP           AttrID = 0x0019
	AttrAPR           AttrID = 0x001a
)

var attrNames = map[AttrID]string{
	AttrClassPortInfo: "ClassPortInfo",
	AttrREQ:           "REQ",
	AttrMRA:           "MRA",
	AttrREJ:           "REJ",
	AttrREP:           "REP",
	AttrRTU:           "RTU",
	AttrDREQ:          "DREQ",
	AttrDREP:          "DREP",
	AttrSIDRREQ:       "SIDR_REQ",
	AttrSIDRREP:       "SIDR_REP",
	AttrLAP:           "LAP",
	AttrAPR:           "APR",
}

func (a AttrID) String() string {
	if s, ok := attrNames[a]; ok {
		return s
	}
	return fmt.Sprintf("Attr(%#04x)", uint16(a))
}

// IsCMMessage reports whether the attribute is one of the CM messages
// (REQ through APR), which travel with method Send.
func (a AttrID) IsCMMessage() bool { return a >= AttrREQ && a <= AttrAPR }

// Header is a view of the common MAD header (IBA 13.4.2, Figure 148).
//
//	byte 0      BaseVersion
//	byte 1      MgmtClass
//	byte 2      ClassVersion
//	byte 3      R(7) Method(6:0)
//	bytes 4-5   Status
//	bytes 6-7   ClassSpecific
//	bytes 8-15  TransactionID
//	bytes 16-17 AttributeID
//	bytes 18-19 reserved
//	bytes 20-23 AttributeModifier
type Header []byte

const (
	hdrBaseVersion   = 0
	hdrClass         = 1
	hdrClassVersion  = 2
	hdrMethod        = 3
	hdrStatus        = 4
	hdrClassSpecific = 6
	hdrTID           = 8
	hdrAttrID        = 16
	hdrReserved      = 18
	hdrAttrMod       = 20
)

// HeaderFields holds every field of a Header. Method includes the R bit.
type HeaderFields struct {
	BaseVersion   uint8
	Class         Class
	ClassVersion  uint8
	Method        Method
	Status        uint16
	ClassSpecific uint16
	TID           uint64
	AttrID        AttrID
	AttrMod       uint32
}

func (b Header) BaseVersion() uint8    { return b[hdrBaseVersion] }
func (b Header) Class() Class          { return Class(b[hdrClass]) }
func (b Header) ClassVersion() uint8   { return b[hdrClassVersion] }
func (b Header) Method() Method        { return Method(b[hdrMethod]) }
func (b Header) Status() uint16        { return binary.BigEndian.Uint16(b[hdrStatus:]) }
func (b Header) ClassSpecific() uint16 { return binary.BigEndian.Uint16(b[hdrClassSpecific:]) }
func (b Header) TID() uint64           { return binary.BigEndian.Uint64(b[hdrTID:]) }
func (b Header) AttrID() AttrID        { return AttrID(binary.BigEndian.Uint16(b[hdrAttrID:])) }
func (b Header) AttrMod() uint32       { return binary.BigEndian.Uint32(b[hdrAttrMod:]) }
func (b Header) SetTID(tid uint64)     { binary.BigEndian.PutUint64(b[hdrTID:], tid) }
func (b Header) SetStatus(s uint16)    { binary.BigEndian.PutUint16(b[hdrStatus:], s) }
func (b Header) SetMethod(m Method)    { b[hdrMethod] = uint8(m) }
func (b Header) SetAttrID(a AttrID)    { binary.BigEndian.PutUint16(b[hdrAttrID:], uint16(a)) }
func (b Header) SetAttrMod(v uint32)   { binary.BigEndian.PutUint32(b[hdrAttrMod:], v) }
func (b Header) SetClassSpecific(v uint16) {
	binary.BigEndian.PutUint16(b[hdrClassSpecific:], v)
}

// Fields returns every field of the header.
func (b Header) Fields() HeaderFields {
	return HeaderFields{
		BaseVersion:   b.BaseVersion(),
		Class:         b.Class(),
		ClassVersion:  b.ClassVersion(),
		Method:        b.Method(),
		Status:        b.Status(),
		ClassSpecific: b.ClassSpecific(),
		TID:           b.TID(),
		AttrID:        b.AttrID(),
		AttrMod:       b.AttrMod(),
	}
}

// Encode writes every field, zeroing the reserved bytes.
func (b Header) Encode(f *HeaderFields) {
	_ = b[HeaderLen-1]
	b[hdrBaseVersion] = f.BaseVersion
	b[hdrClass] = uint8(f.Class)
	b[hdrClassVersion] = f.ClassVersion
	b[hdrMethod] = uint8(f.Method)
	binary.BigEndian.PutUint16(b[hdrStatus:], f.Status)
	binary.BigEndian.PutUint16(b[hdrClassSpecific:], f.ClassSpecific)
	binary.BigEndian.PutUint64(b[hdrTID:], f.TID)
	binary.BigEndian.PutUint16(b[hdrAttrID:], uint16(f.AttrID))
	b[hdrReserved], b[hdrReserved+1] = 0, 0
	binary.BigEndian.PutUint32(b[hdrAttrMod:], f.AttrMod)
}

// MAD is a view of a whole 256-byte management datagram.
type MAD []byte

// Header returns the common header.
func (m MAD) Header() Header { return Header(m[:HeaderLen]) }

// Data returns the 232 bytes after the header, where the CM message is.
func (m MAD) Data() []byte { return m[HeaderLen:Size] }

// EncodeHeader writes the header; the data is left as it is.
func (m MAD) EncodeHeader(f *HeaderFields) { m.Header().Encode(f) }

// NewCM writes the header of a CM message into b (at least Size bytes),
// zeroes the data and returns the MAD. The message view (e.g.
// MAD.REQ().Encode) fills the rest.
func NewCM(b []byte, attr AttrID, tid uint64) MAD {
	m := MAD(b[:Size])
	m.EncodeHeader(&HeaderFields{
		BaseVersion:  BaseVersion,
		Class:        ClassCM,
		ClassVersion: CMClassVersion,
		Method:       MethodSend,
		TID:          tid,
		AttrID:       attr,
	})
	clear(m.Data())
	return m
}

// Decode checks that b is one whole MAD with base version 1 and returns
// it as a view. It returns an error wrapping ErrTruncated, ErrBadLength or
// ErrBadBaseVersion.
func Decode(b []byte) (MAD, error) {
	if len(b) < Size {
		return nil, fmt.Errorf("decode MAD: %d of %d bytes: %w", len(b), Size, ErrTruncated)
	}
	if len(b) > Size {
		return nil, fmt.Errorf("decode MAD: %d bytes: %w", len(b), ErrBadLength)
	}
	if v := b[hdrBaseVersion]; v != BaseVersion {
		return nil, fmt.Errorf("decode MAD: base version %d: %w", v, ErrBadBaseVersion)
	}
	return MAD(b), nil
}

// DecodeCM is Decode followed by CheckCM: after it succeeds, the view of
// the message its attribute names is safe to read.
func DecodeCM(b []byte) (MAD, error) {
	m, err := Decode(b)
	if err != nil {
		return nil, err
	}
	if err := m.CheckCM(); err != nil {
		return nil, err
	}
	return m, nil
}

// CheckCM checks that a decoded MAD is a CM message this package reads:
// class CM, class version 2, method Send, attribute REQ through APR. It
// returns an error wrapping ErrNotCM, ErrBadClassVersion, ErrBadMethod or
// ErrUnknownAttr.
func (m MAD) CheckCM() error {
	h := m.Header()
	if h.Class() != ClassCM {
		return fmt.Errorf("check CM: class %#02x: %w", uint8(h.Class()), ErrNotCM)
	}
	if v := h.ClassVersion(); v != CMClassVersion {
		return fmt.Errorf("check CM: class version %d: %w", v, ErrBadClassVersion)
	}
	if !h.AttrID().IsCMMessage() {
		return fmt.Errorf("check CM: %v: %w", h.AttrID(), ErrUnknownAttr)
	}
	if h.Method() != MethodSend {
		return fmt.Errorf("check CM: %v with %v: %w", h.AttrID(), h.Method(), ErrBadMethod)
	}
	return nil
}

// Views of the CM message in the data. The caller has checked the MAD
// (DecodeCM) and its attribute ID.

func (m MAD) REQ() REQ         { return REQ(m.Data()) }
func (m MAD) MRA() MRA         { return MRA(m.Data()) }
func (m MAD) REJ() REJ         { return REJ(m.Data()) }
func (m MAD) REP() REP         { return REP(m.Data()) }
func (m MAD) RTU() RTU         { return RTU(m.Data()) }
func (m MAD) DREQ() DREQ       { return DREQ(m.Data()) }
func (m MAD) DREP() DREP       { return DREP(m.Data()) }
func (m MAD) LAP() LAP         { return LAP(m.Data()) }
func (m MAD) APR() APR         { return APR(m.Data()) }
func (m MAD) SIDRREQ() SIDRREQ { return SIDRREQ(m.Data()) }
func (m MAD) SIDRREP() SIDRREP { return SIDRREP(m.Data()) }
