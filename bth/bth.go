package bth

import "encoding/binary"

// BTH is a view of the 12-byte Base Transport Header (IBA 9.2).
//
//	byte 0     opcode
//	byte 1     SE(7) M(6) PadCnt(5:4) TVer(3:0)
//	bytes 2-3  P_Key
//	byte 4     FECN(7) BECN(6) reserved(5:0)  -- "resv8a", masked by the ICRC
//	bytes 5-7  DestQP
//	byte 8     AckReq(7) reserved(6:0)  -- bits 6, 5: uroce's Placeable, Placed (sr.go)
//	bytes 9-11 PSN
//
// The caller checks the length first (Packet.Decode does).
type BTH []byte

const (
	bthOpcode = 0
	bthFlags  = 1
	bthPKey   = 2
	bthResv8a = 4
	bthDestQP = 4 // 32-bit word whose low 24 bits are the QPN
	bthAckReq = 8
	bthPSN    = 8 // 32-bit word whose low 24 bits are the PSN

	flagSE     = 0x80
	flagM      = 0x40
	padMask    = 0x30
	padShift   = 4
	tverMask   = 0x0f
	flagFECN   = 0x80
	flagBECN   = 0x40
	flagAckReq = 0x80

	// QPNMask keeps the 24 bits of a queue pair number.
	QPNMask = 0x00ffffff
)

// BTHFields holds every field of a BTH, for Encode.
type BTHFields struct {
	Opcode Opcode
	SE     bool // solicited event
	M      bool // migration state
	PadCnt uint8
	TVer   uint8
	PKey   uint16
	FECN   bool
	BECN   bool
	DestQP uint32
	AckReq bool
	// Placeable and Placed are selective repeat's bits, reserved in
	// IBA (sr.go).
	Placeable, Placed bool
	PSN               PSN
}

func (b BTH) Opcode() Opcode { return Opcode(b[bthOpcode]) }
func (b BTH) SE() bool       { return b[bthFlags]&flagSE != 0 }
func (b BTH) M() bool        { return b[bthFlags]&flagM != 0 }

// PadCnt is how many pad bytes follow the payload to fill its last word.
func (b BTH) PadCnt() int    { return int(b[bthFlags]&padMask) >> padShift }
func (b BTH) TVer() uint8    { return b[bthFlags] & tverMask }
func (b BTH) PKey() uint16   { return binary.BigEndian.Uint16(b[bthPKey:]) }
func (b BTH) FECN() bool     { return b[bthResv8a]&flagFECN != 0 }
func (b BTH) BECN() bool     { return b[bthResv8a]&flagBECN != 0 }
func (b BTH) DestQP() uint32 { return binary.BigEndian.Uint32(b[bthDestQP:]) & QPNMask }
func (b BTH) AckReq() bool   { return b[bthAckReq]&flagAckReq != 0 }
func (b BTH) PSN() PSN       { return PSN(binary.BigEndian.Uint32(b[bthPSN:]) & psnMask) }

// Fields returns every field of the header.
func (b BTH) Fields() BTHFields {
	return BTHFields{
		Opcode: b.Opcode(), SE: b.SE(), M: b.M(), PadCnt: uint8(b.PadCnt()), TVer: b.TVer(),
		PKey: b.PKey(), FECN: b.FECN(), BECN: b.BECN(), DestQP: b.DestQP(),
		AckReq: b.AckReq(), Placeable: b.Placeable(), Placed: b.Placed(), PSN: b.PSN(),
	}
}

// Encode writes every field, zeroing the reserved bits (but for
// selective repeat's, when set).
func (b BTH) Encode(f *BTHFields) {
	_ = b[BTHLen-1]
	b[bthOpcode] = byte(f.Opcode)
	flags := f.PadCnt<<padShift&padMask | f.TVer&tverMask
	if f.SE {
		flags |= flagSE
	}
	if f.M {
		flags |= flagM
	}
	b[bthFlags] = flags
	binary.BigEndian.PutUint16(b[bthPKey:], f.PKey)
	binary.BigEndian.PutUint32(b[bthDestQP:], f.DestQP&QPNMask)
	var r byte
	if f.FECN {
		r |= flagFECN
	}
	if f.BECN {
		r |= flagBECN
	}
	b[bthResv8a] = r
	binary.BigEndian.PutUint32(b[bthPSN:], uint32(f.PSN)&psnMask)
	if f.AckReq {
		b[bthAckReq] = flagAckReq
	}
	if f.Placeable {
		b[bthAckReq] |= flagPlaceable
	}
	if f.Placed {
		b[bthAckReq] |= flagPlaced
	}
}

// SetOpcode, SetPSN, SetAckReq, SetPadCnt, SetFECN and SetBECN change one
// field in place, for the transport's fast path and for retransmission.
func (b BTH) SetOpcode(o Opcode) { b[bthOpcode] = byte(o) }
func (b BTH) SetPSN(p PSN) {
	binary.BigEndian.PutUint32(b[bthPSN:], uint32(b[bthAckReq]&(flagAckReq|flagPlaceable|flagPlaced))<<24|uint32(p)&psnMask)
}
func (b BTH) SetAckReq(v bool) { setBit(&b[bthAckReq], flagAckReq, v) }
func (b BTH) SetPadCnt(n int)  { b[bthFlags] = b[bthFlags]&^padMask | byte(n<<padShift)&padMask }
func (b BTH) SetFECN(v bool)   { setBit(&b[bthResv8a], flagFECN, v) }
func (b BTH) SetBECN(v bool)   { setBit(&b[bthResv8a], flagBECN, v) }
func (b BTH) SetDestQP(qpn uint32) {
	binary.BigEndian.PutUint32(b[bthDestQP:], uint32(b[bthResv8a])<<24|qpn&QPNMask)
}

func setBit(p *byte, bit byte, v bool) {
	if v {
		*p |= bit
	} else {
		*p &^= bit
	}
}
