package bth

import (
	"encoding/binary"
	"fmt"
)

// Packet is a decoded view of one RoCE packet: the UDP payload, from the
// BTH through the ICRC. Decode checks every length, so the header
// accessors that follow cannot go out of bounds. A Packet holds only
// offsets into the caller's bytes; decoding copies nothing.
type Packet struct {
	b    []byte
	info *OpcodeInfo
	pay  int // payload length without pad
	cut  int // payload bytes taken off its front (CutFront)
}

// Decode parses b as a RoCE packet. It checks, in order: the BTH is
// present, TVer is 0, the opcode is known, the extension headers and ICRC
// are present, and the payload and pad are consistent with the opcode.
// It does not check the ICRC, which covers the IP header too (see
// VerifyICRC and Frame.VerifyICRC).
func (p *Packet) Decode(b []byte) error {
	if len(b) < BTHLen+ICRCLen {
		return p.invalid(fmt.Errorf("bth: %w: %d bytes, a BTH and ICRC need %d", ErrTruncated, len(b), BTHLen+ICRCLen))
	}
	h := BTH(b)
	if v := h.TVer(); v != 0 {
		return p.invalid(fmt.Errorf("bth: %w: TVer %d", ErrBadVersion, v))
	}
	info := h.Opcode().Info()
	if info == nil {
		return p.invalid(fmt.Errorf("bth: %w: 0x%02x", ErrUnknownOpcode, uint8(h.Opcode())))
	}
	if len(b) < info.Length+ICRCLen {
		return p.invalid(fmt.Errorf("bth: %w: %s has %d bytes, needs %d", ErrTruncated, info.Name, len(b), info.Length+ICRCLen))
	}
	body := len(b) - info.Length - ICRCLen // payload and pad
	pad := h.PadCnt()
	if info.Mask&HasPayload == 0 {
		if body != 0 || pad != 0 {
			return p.invalid(fmt.Errorf("bth: %w: %s carries no payload, found %d bytes and pad %d", ErrBadLength, info.Name, body, pad))
		}
	} else if body%4 != 0 || pad > body {
		return p.invalid(fmt.Errorf("bth: %w: pad %d with %d bytes of payload and pad", ErrBadPad, pad, body))
	}
	p.b, p.info, p.pay, p.cut = b, info, body-pad, 0
	return nil
}

// invalid empties p, which Decode could not decode, and returns err.
func (p *Packet) invalid(err error) error {
	*p = Packet{}
	return err
}

// Bytes returns the whole packet, BTH through ICRC.
func (p *Packet) Bytes() []byte { return p.b }

// Info returns the opcode's table entry.
func (p *Packet) Info() *OpcodeInfo { return p.info }

// BTH returns the base transport header.
func (p *Packet) BTH() BTH { return BTH(p.b[:BTHLen]) }

// Opcode returns the packet's opcode.
func (p *Packet) Opcode() Opcode { return Opcode(p.b[0]) }

// Has reports whether the packet's opcode has every property in m.
func (p *Packet) Has(m Mask) bool { return p.info.Mask&m == m }

func (p *Packet) hdr(h Header) []byte {
	if p.info.Mask&(HasRDETH<<h) == 0 {
		return nil
	}
	o := int(p.info.Offset[h])
	return p.b[o : o+h.Len()]
}

// The extension header accessors return nil when the opcode does not carry
// that header.
func (p *Packet) RETH() RETH                 { return RETH(p.hdr(HdrRETH)) }
func (p *Packet) AETH() AETH                 { return AETH(p.hdr(HdrAETH)) }
func (p *Packet) AtomicETH() AtomicETH       { return AtomicETH(p.hdr(HdrAtomicETH)) }
func (p *Packet) AtomicAckETH() AtomicAckETH { return AtomicAckETH(p.hdr(HdrAtomicAckETH)) }
func (p *Packet) ImmDt() ImmDt               { return ImmDt(p.hdr(HdrImmDt)) }
func (p *Packet) IETH() IETH                 { return IETH(p.hdr(HdrIETH)) }
func (p *Packet) DETH() DETH                 { return DETH(p.hdr(HdrDETH)) }
func (p *Packet) RDETH() RDETH               { return RDETH(p.hdr(HdrRDETH)) }
func (p *Packet) FETH() FETH                 { return FETH(p.hdr(HdrFETH)) }

// Payload returns the payload without its pad.
func (p *Packet) Payload() []byte {
	o := p.info.Length + p.cut
	return p.b[o : o+p.pay]
}

// PayloadLen returns len(p.Payload()) without making the slice.
func (p *Packet) PayloadLen() int { return p.pay }

// CutFront takes the first n bytes off the payload and returns them, or
// nil when the payload is shorter: a header that travels in the payload,
// as selective repeat's placement header does (sr.go).
func (p *Packet) CutFront(n int) []byte {
	if n > p.pay {
		return nil
	}
	h := p.Payload()[:n]
	p.cut += n
	p.pay -= n
	return h
}

// PadCnt returns the number of pad bytes after the payload.
func (p *Packet) PadCnt() int { return BTH(p.b).PadCnt() }

// ICRC returns the ICRC carried in the packet's last four bytes.
func (p *Packet) ICRC() uint32 { return binary.LittleEndian.Uint32(p.b[len(p.b)-ICRCLen:]) }

// PacketFields holds everything needed to build a RoCE packet. Only the
// headers that the opcode carries are written; the others are ignored.
type PacketFields struct {
	BTH       BTHFields
	RDETH     uint32
	DETH      DETHFields
	RETH      RETHFields
	AtomicETH AtomicETHFields
	FETH      struct{ PlacementType, Selectivity uint8 }
	ImmDt     uint32
	IETH      uint32
	AETH      struct {
		Syndrome Syndrome
		MSN      uint32
	}
	AtomicAckETH uint64
}

// Fields returns the fields of a decoded packet, for re-encoding.
func (p *Packet) Fields() PacketFields {
	var f PacketFields
	f.BTH = p.BTH().Fields()
	if h := p.RDETH(); h != nil {
		f.RDETH = h.EECnxt()
	}
	if h := p.DETH(); h != nil {
		f.DETH = h.Fields()
	}
	if h := p.RETH(); h != nil {
		f.RETH = h.Fields()
	}
	if h := p.AtomicETH(); h != nil {
		f.AtomicETH = h.Fields()
	}
	if h := p.FETH(); h != nil {
		f.FETH.PlacementType, f.FETH.Selectivity = h.PlacementType(), h.Selectivity()
	}
	if h := p.ImmDt(); h != nil {
		f.ImmDt = h.Imm()
	}
	if h := p.IETH(); h != nil {
		f.IETH = h.RKey()
	}
	if h := p.AETH(); h != nil {
		f.AETH.Syndrome, f.AETH.MSN = h.Syndrome(), h.MSN()
	}
	if h := p.AtomicAckETH(); h != nil {
		f.AtomicAckETH = h.OrigData()
	}
	return f
}

// PacketLen returns the length of a packet with this opcode and payload
// length: headers, payload, pad and ICRC.
func PacketLen(o Opcode, payload int) int {
	return o.HeaderLen() + payload + padFor(payload) + ICRCLen
}

func padFor(n int) int { return -n & 3 }

// Encode writes a packet into b: the BTH (with the pad count for payload,
// overriding f.BTH.PadCnt), the opcode's extension headers, the payload,
// zero pad bytes and a zero ICRC for PutICRC to fill once the lower headers
// are in place. It returns the packet's length.
func (f *PacketFields) Encode(b []byte, payload []byte) (int, error) {
	info := f.BTH.Opcode.Info()
	if info == nil {
		return 0, fmt.Errorf("bth: encode: %w: 0x%02x", ErrUnknownOpcode, uint8(f.BTH.Opcode))
	}
	if len(payload) > 0 && info.Mask&HasPayload == 0 {
		return 0, fmt.Errorf("bth: encode: %w: %s carries no payload", ErrBadLength, info.Name)
	}
	n := PacketLen(f.BTH.Opcode, len(payload))
	if len(b) < n {
		return 0, fmt.Errorf("bth: encode: %w: buffer of %d bytes, packet needs %d", ErrTruncated, len(b), n)
	}
	bf := f.BTH
	bf.PadCnt = uint8(padFor(len(payload)))
	n = f.EncodeHeaders(b, &bf)
	n += copy(b[n:], payload)
	for range bf.PadCnt {
		b[n] = 0
		n++
	}
	binary.LittleEndian.PutUint32(b[n:], 0)
	return n + ICRCLen, nil
}

// EncodeHeaders writes the BTH from bf and the extension headers from f,
// and returns where the payload goes. b must hold bf.Opcode.HeaderLen()
// bytes; the transport uses this to build headers in front of payload it
// copies itself.
//
// A SEND or RDMA WRITE packet of the RC or UC service, the opcodes that
// carry a message's data, is written here without the opcode table:
// their headers lie at fixed places (IBA 9.2 to 9.4: the BTH, a RETH on a
// WRITE's FIRST or ONLY, the immediate data last), and the BTH's first
// eight bytes go out in one store. Any other opcode goes to encodeTable.
// TestEncodeMsgHeaders holds the two to the same bytes.
func (f *PacketFields) EncodeHeaders(b []byte, bf *BTHFields) int {
	op := bf.Opcode
	low := op &^ 0x20 // RC's opcodes are 0x00 to 0x1f, UC's 0x20 to 0x3f
	if low > RCWriteOnlyImm {
		return f.encodeTable(b, bf)
	}
	_ = b[BTHLen-1]
	flags := bf.PadCnt<<padShift&padMask | bf.TVer&tverMask
	if bf.SE {
		flags |= flagSE
	}
	if bf.M {
		flags |= flagM
	}
	var r, a uint8
	if bf.FECN {
		r |= flagFECN
	}
	if bf.BECN {
		r |= flagBECN
	}
	if bf.AckReq {
		a |= flagAckReq
	}
	if bf.Placeable {
		a |= flagPlaceable
	}
	if bf.Placed {
		a |= flagPlaced
	}
	binary.BigEndian.PutUint64(b, uint64(op)<<56|uint64(flags)<<48|uint64(bf.PKey)<<32|uint64(r)<<24|uint64(bf.DestQP&QPNMask))
	binary.BigEndian.PutUint32(b[bthPSN:], uint32(a)<<24|uint32(bf.PSN)&psnMask)
	n := BTHLen
	if low == RCWriteFirst || low == RCWriteOnly || low == RCWriteOnlyImm {
		RETH(b[n:]).Encode(&f.RETH)
		n += RETHLen
	}
	switch low {
	case RCSendLastImm, RCSendOnlyImm, RCWriteLastImm, RCWriteOnlyImm:
		ImmDt(b[n:]).Encode(f.ImmDt)
		n += ImmDtLen
	}
	return n
}

// encodeTable is EncodeHeaders for any opcode, by the opcode table.
func (f *PacketFields) encodeTable(b []byte, bf *BTHFields) int {
	info := &opcodes[bf.Opcode]
	BTH(b).Encode(bf)
	at := func(h Header) []byte {
		if info.Mask&(HasRDETH<<h) == 0 {
			return nil
		}
		return b[info.Offset[h]:]
	}
	if h := at(HdrRDETH); h != nil {
		RDETH(h).Encode(f.RDETH)
	}
	if h := at(HdrDETH); h != nil {
		DETH(h).Encode(&f.DETH)
	}
	if h := at(HdrRETH); h != nil {
		RETH(h).Encode(&f.RETH)
	}
	if h := at(HdrAtomicETH); h != nil {
		AtomicETH(h).Encode(&f.AtomicETH)
	}
	if h := at(HdrFETH); h != nil {
		FETH(h).Encode(f.FETH.PlacementType, f.FETH.Selectivity)
	}
	if h := at(HdrImmDt); h != nil {
		ImmDt(h).Encode(f.ImmDt)
	}
	if h := at(HdrIETH); h != nil {
		IETH(h).Encode(f.IETH)
	}
	if h := at(HdrAETH); h != nil {
		AETH(h).Encode(f.AETH.Syndrome, f.AETH.MSN)
	}
	if h := at(HdrAtomicAckETH); h != nil {
		AtomicAckETH(h).Encode(f.AtomicAckETH)
	}
	if h := at(HdrCNP); h != nil {
		clear(h[:CNPLen])
	}
	return info.Length
}
