package bth

import "encoding/binary"

// RETH is a view of the RDMA Extended Transport Header (IBA 9.3.3): the
// remote virtual address, R_Key and DMA length of an RDMA WRITE or READ.
type RETH []byte

// RETHFields holds the fields of a RETH.
type RETHFields struct {
	VA     uint64
	RKey   uint32
	DMALen uint32
}

func (b RETH) VA() uint64     { return binary.BigEndian.Uint64(b[0:]) }
func (b RETH) RKey() uint32   { return binary.BigEndian.Uint32(b[8:]) }
func (b RETH) DMALen() uint32 { return binary.BigEndian.Uint32(b[12:]) }

// Fields returns the header's fields.
func (b RETH) Fields() RETHFields { return RETHFields{b.VA(), b.RKey(), b.DMALen()} }

// Encode writes the header.
func (b RETH) Encode(f *RETHFields) {
	_ = b[RETHLen-1]
	binary.BigEndian.PutUint64(b[0:], f.VA)
	binary.BigEndian.PutUint32(b[8:], f.RKey)
	binary.BigEndian.PutUint32(b[12:], f.DMALen)
}

// AtomicETH is a view of the Atomic Extended Transport Header (IBA 9.3.4).
type AtomicETH []byte

// AtomicETHFields holds the fields of an AtomicETH. SwapAdd is the swap
// value of a COMPARE_SWAP or the addend of a FETCH_ADD.
type AtomicETHFields struct {
	VA      uint64
	RKey    uint32
	SwapAdd uint64
	Compare uint64
}

func (b AtomicETH) VA() uint64      { return binary.BigEndian.Uint64(b[0:]) }
func (b AtomicETH) RKey() uint32    { return binary.BigEndian.Uint32(b[8:]) }
func (b AtomicETH) SwapAdd() uint64 { return binary.BigEndian.Uint64(b[12:]) }
func (b AtomicETH) Compare() uint64 { return binary.BigEndian.Uint64(b[20:]) }

// Fields returns the header's fields.
func (b AtomicETH) Fields() AtomicETHFields {
	return AtomicETHFields{b.VA(), b.RKey(), b.SwapAdd(), b.Compare()}
}

// Encode writes the header.
func (b AtomicETH) Encode(f *AtomicETHFields) {
	_ = b[AtomicETHLen-1]
	binary.BigEndian.PutUint64(b[0:], f.VA)
	binary.BigEndian.PutUint32(b[8:], f.RKey)
	binary.BigEndian.PutUint64(b[12:], f.SwapAdd)
	binary.BigEndian.PutUint64(b[20:], f.Compare)
}

// AtomicAckETH is a view of the Atomic Acknowledge Extended Transport
// Header (IBA 9.5.3): the original value at the target address.
type AtomicAckETH []byte

func (b AtomicAckETH) OrigData() uint64     { return binary.BigEndian.Uint64(b) }
func (b AtomicAckETH) SetOrigData(v uint64) { binary.BigEndian.PutUint64(b, v) }
func (b AtomicAckETH) Encode(orig uint64)   { b.SetOrigData(orig) }

// ImmDt is a view of the Immediate Data header (IBA 9.3.5). The value is
// opaque to the transport and delivered in network order, as verbs does.
type ImmDt []byte

func (b ImmDt) Imm() uint32       { return binary.BigEndian.Uint32(b) }
func (b ImmDt) Encode(imm uint32) { binary.BigEndian.PutUint32(b, imm) }

// IETH is a view of the Invalidate Extended Transport Header (IBA 9.3.6):
// the R_Key a SEND with invalidate asks the responder to invalidate.
type IETH []byte

func (b IETH) RKey() uint32       { return binary.BigEndian.Uint32(b) }
func (b IETH) Encode(rkey uint32) { binary.BigEndian.PutUint32(b, rkey) }

// DETH is a view of the Datagram Extended Transport Header (IBA 9.3.2).
type DETH []byte

// DETHFields holds the fields of a DETH.
type DETHFields struct {
	QKey  uint32
	SrcQP uint32
}

func (b DETH) QKey() uint32  { return binary.BigEndian.Uint32(b[0:]) }
func (b DETH) SrcQP() uint32 { return binary.BigEndian.Uint32(b[4:]) & QPNMask }

// Fields returns the header's fields.
func (b DETH) Fields() DETHFields { return DETHFields{b.QKey(), b.SrcQP()} }

// Encode writes the header, zeroing the reserved byte.
func (b DETH) Encode(f *DETHFields) {
	_ = b[DETHLen-1]
	binary.BigEndian.PutUint32(b[0:], f.QKey)
	binary.BigEndian.PutUint32(b[4:], f.SrcQP&QPNMask)
}

// RDETH is a view of the Reliable Datagram Extended Transport Header
// (IBA 9.3.1): the end-to-end context.
type RDETH []byte

func (b RDETH) EECnxt() uint32   { return binary.BigEndian.Uint32(b) & QPNMask }
func (b RDETH) Encode(ee uint32) { binary.BigEndian.PutUint32(b, ee&QPNMask) }

// FETH is a view of the Flush Extended Transport Header (IBA 1.5, 9.3.7):
// the placement type and selectivity level of an RDMA FLUSH.
type FETH []byte

func (b FETH) PlacementType() uint8 { return b[3] & 0x0f }
func (b FETH) Selectivity() uint8   { return b[3] >> 4 & 0x03 }
func (b FETH) Encode(plt, sel uint8) {
	binary.BigEndian.PutUint32(b, uint32(sel&3)<<4|uint32(plt&0x0f))
}
