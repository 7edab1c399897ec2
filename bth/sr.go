package bth

import "encoding/binary"

// Selective repeat between uroce peers (qp.RetransSelective) puts three
// things on the wire that standard RC does not have. Each is used only on
// a connection both ends negotiated it for, so an rxe or ConnectX peer
// never sees one:
//
//   - the Placeable bit, bit 6 of BTH byte 8 (reserved, 0 in IBA 9.2 and
//     covered by the ICRC): the requester allows the responder to place
//     this RDMA WRITE packet before the PSNs ahead of it arrive, since no
//     atomic whose result it could change is outstanding before it;
//   - a placement header (SRPlace) at the front of the payload of every
//     RDMA WRITE MIDDLE and LAST packet, so that each packet says where it
//     lands, as a FIRST's RETH does (IRN, SIGCOMM 2018, adds a RETH to
//     every WRITE packet for the same reason), and the Placed bit, bit 5
//     of BTH byte 8, that says the header is there: a responder that
//     does not expect one, or expects one and finds none, knows the two
//     ends disagree instead of taking data for an address;
//   - the selective acknowledgement (SelectiveAck), an opcode of IBA's
//     manufacturer-specific range (Table 35: 110xxxxx): an ACKNOWLEDGE
//     whose payload is a bitmap of the PSNs received beyond the first
//     missing one.

// SelectiveAck is uroce's selective acknowledgement: BTH, AETH and an
// SACKLen-byte bitmap (SACK). Its BTH PSN and AETH are those of an
// ACKNOWLEDGE for the last PSN received in order.
const SelectiveAck Opcode = 0xc0

const (
	flagPlaceable = 0x40
	flagPlaced    = 0x20

	// SRPlaceLen is the length of the placement header.
	SRPlaceLen = 20
	// SACKLen is the length of a selective acknowledgement's bitmap:
	// SACKWindow bits.
	SACKLen = SACKWindow / 8
	// SACKWindow is how many PSNs after the first missing one a
	// selective acknowledgement reports, and so how far past a gap a
	// selective-repeat requester may send: eight times rxe's 128
	// unacknowledged PSNs (RXE_MAX_UNACKED_PSNS), which still bounds
	// what is in flight, so that the flight goes on for a few round
	// trips while a lost packet is found and resent.
	SACKWindow = 1024
)

// Placeable reports the selective-repeat Placeable bit.
func (b BTH) Placeable() bool { return b[bthAckReq]&flagPlaceable != 0 }

// SetPlaceable sets or clears the Placeable bit.
func (b BTH) SetPlaceable(v bool) { setBit(&b[bthAckReq], flagPlaceable, v) }

// Placed reports the selective-repeat Placed bit: a placement header
// leads the payload.
func (b BTH) Placed() bool { return b[bthAckReq]&flagPlaced != 0 }

// SRPlace is a view of the placement header: the RETH of the whole
// message (its start, R_Key and length) and the offset in it of the
// packet's first payload byte.
//
//	bytes 0-15  VA, R_Key, DMA length, as a RETH (IBA 9.3.3)
//	bytes 16-19 offset of this packet's data in the message
type SRPlace []byte

// SRPlaceFields holds the fields of a placement header.
type SRPlaceFields struct {
	RETH   RETHFields
	Offset uint32
}

// RETH returns the message's RETH.
func (b SRPlace) RETH() RETH { return RETH(b[:RETHLen]) }

// Offset returns where the packet's data starts in the message.
func (b SRPlace) Offset() uint32 { return binary.BigEndian.Uint32(b[RETHLen:]) }

// Fields returns the header's fields.
func (b SRPlace) Fields() SRPlaceFields {
	return SRPlaceFields{RETH: b.RETH().Fields(), Offset: b.Offset()}
}

// Encode writes the header.
func (b SRPlace) Encode(f *SRPlaceFields) {
	_ = b[SRPlaceLen-1]
	b.RETH().Encode(&f.RETH)
	binary.BigEndian.PutUint32(b[RETHLen:], f.Offset)
}

// SACK is a view of a selective acknowledgement's bitmap. Bit k (byte
// k/8, from the most significant bit down) says PSN first+1+k arrived,
// where first is the first missing PSN, one after the PSN acknowledged.
type SACK []byte

// Has reports whether the bitmap has bit k.
func (b SACK) Has(k int) bool { return b[k>>3]&(0x80>>(k&7)) != 0 }

// Set sets bit k.
func (b SACK) Set(k int) { b[k>>3] |= 0x80 >> (k & 7) }
