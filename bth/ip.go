package bth

import (
	"encoding/binary"
	"math/bits"
	"net/netip"
)

// Lengths of the lower headers.
const (
	EthernetLen = 14
	VLANLen     = 4
	IPv4MinLen  = 20
	IPv6Len     = 40
	UDPLen      = 8
	// GRHLen is the Global Route Header at the front of every UD
	// receive buffer (IBA 11.4.1.2). RoCEv2 fills it with the IP header
	// the datagram came in: IPv6 whole, IPv4 in its last 20 bytes.
	GRHLen = 40
)

// EtherTypes and IP protocol numbers RoCEv2 frames use.
const (
	EtherTypeIPv4 = 0x0800
	EtherTypeIPv6 = 0x86dd
	EtherTypeVLAN = 0x8100
	EtherTypeARP  = 0x0806
	ProtocolUDP   = 17
)

// Field offsets of the lower headers.
const (
	ethDst  = 0
	ethSrc  = 6
	ethType = 12

	vlanTCI  = 0
	vlanType = 2

	ipv4VerIHL    = 0
	ipv4TOS       = 1
	ipv4TotalLen  = 2
	ipv4ID        = 4
	ipv4FlagsFrag = 6
	ipv4TTL       = 8
	ipv4Protocol  = 9
	ipv4Checksum  = 10
	ipv4Src       = 12
	ipv4Dst       = 16

	ipv6VerTCFlow  = 0
	ipv6PayloadLen = 4
	ipv6NextHeader = 6
	ipv6HopLimit   = 7
	ipv6Src        = 8
	ipv6Dst        = 24

	udpSrcPort  = 0
	udpDstPort  = 2
	udpLength   = 4
	udpChecksum = 6
)

// Ethernet is a view of an Ethernet II header.
type Ethernet []byte

// EthernetFields holds the fields of an Ethernet header.
type EthernetFields struct {
	Dst, Src  [6]byte
	EtherType uint16
}

func (b Ethernet) Dst() (m [6]byte)  { copy(m[:], b[ethDst:ethDst+6]); return }
func (b Ethernet) Src() (m [6]byte)  { copy(m[:], b[ethSrc:ethSrc+6]); return }
func (b Ethernet) EtherType() uint16 { return binary.BigEndian.Uint16(b[ethType:]) }

// Encode writes the header.
func (b Ethernet) Encode(f *EthernetFields) {
	_ = b[EthernetLen-1]
	copy(b[ethDst:ethDst+6], f.Dst[:])
	copy(b[ethSrc:ethSrc+6], f.Src[:])
	binary.BigEndian.PutUint16(b[ethType:], f.EtherType)
}

// VLAN is a view of an 802.1Q tag's last four bytes: the tag control
// information and the inner EtherType (the TPID 0x8100 is the outer
// EtherType).
type VLAN []byte

func (b VLAN) PCP() uint8        { return b[vlanTCI] >> 5 }
func (b VLAN) ID() uint16        { return binary.BigEndian.Uint16(b[vlanTCI:]) & 0x0fff }
func (b VLAN) EtherType() uint16 { return binary.BigEndian.Uint16(b[vlanType:]) }
func (b VLAN) Encode(pcp uint8, id, etherType uint16) {
	binary.BigEndian.PutUint16(b[vlanTCI:], uint16(pcp&7)<<13|id&0x0fff)
	binary.BigEndian.PutUint16(b[vlanType:], etherType)
}

// IPv4 is a view of an IPv4 header.
type IPv4 []byte

// IPv4Fields holds the fields of an IPv4 header without options. Encode
// computes the header checksum.
type IPv4Fields struct {
	TOS         uint8
	TotalLength uint16
	ID          uint16
	Flags       uint8 // the top three bits of byte 6: DF is 2, MF is 1
	FragOff     uint16
	TTL         uint8
	Protocol    uint8
	Src, Dst    netip.Addr
}

// IPv4 flags.
const (
	IPv4DontFragment  = 2
	IPv4MoreFragments = 1
)

func (b IPv4) Version() uint8      { return b[ipv4VerIHL] >> 4 }
func (b IPv4) HeaderLen() int      { return int(b[ipv4VerIHL]&0x0f) * 4 }
func (b IPv4) TOS() uint8          { return b[ipv4TOS] }
func (b IPv4) TotalLength() uint16 { return binary.BigEndian.Uint16(b[ipv4TotalLen:]) }
func (b IPv4) ID() uint16          { return binary.BigEndian.Uint16(b[ipv4ID:]) }
func (b IPv4) Flags() uint8        { return b[ipv4FlagsFrag] >> 5 }
func (b IPv4) FragOff() uint16     { return binary.BigEndian.Uint16(b[ipv4FlagsFrag:]) & 0x1fff }
func (b IPv4) TTL() uint8          { return b[ipv4TTL] }
func (b IPv4) Protocol() uint8     { return b[ipv4Protocol] }
func (b IPv4) Checksum() uint16    { return binary.BigEndian.Uint16(b[ipv4Checksum:]) }
func (b IPv4) Src() netip.Addr     { return netip.AddrFrom4([4]byte(b[ipv4Src : ipv4Src+4])) }
func (b IPv4) Dst() netip.Addr     { return netip.AddrFrom4([4]byte(b[ipv4Dst : ipv4Dst+4])) }
func (b IPv4) SetTOS(tos uint8)    { b[ipv4TOS] = tos; b.SetChecksum() }
func (b IPv4) SetID(id uint16)     { binary.BigEndian.PutUint16(b[ipv4ID:], id) }

// Fields returns the header's fields (options are not included).
func (b IPv4) Fields() IPv4Fields {
	return IPv4Fields{
		TOS: b.TOS(), TotalLength: b.TotalLength(), ID: b.ID(), Flags: b.Flags(),
		FragOff: b.FragOff(), TTL: b.TTL(), Protocol: b.Protocol(), Src: b.Src(), Dst: b.Dst(),
	}
}

// Encode writes a 20-byte header and its checksum. Src and Dst must be
// IPv4 (or IPv4-mapped) addresses.
//
// The header is built in three registers and its checksum summed there:
// reading back bytes just stored one field at a time, as SetChecksum
// does, stalls each 8-byte load on the narrower stores it spans (no store
// forwarding), which cost more than the sum on every packet sent.
func (b IPv4) Encode(f *IPv4Fields) {
	_ = b[IPv4MinLen-1]
	src, dst := f.Src.Unmap().As4(), f.Dst.Unmap().As4()
	w0 := uint64(4<<4|IPv4MinLen/4)<<56 | uint64(f.TOS)<<48 | uint64(f.TotalLength)<<32 |
		uint64(f.ID)<<16 | uint64(uint16(f.Flags&7)<<13|f.FragOff&0x1fff)
	w1 := uint64(f.TTL)<<56 | uint64(f.Protocol)<<48 | uint64(binary.BigEndian.Uint32(src[:]))
	w2 := binary.BigEndian.Uint32(dst[:])
	s, c := bits.Add64(w0, w1, 0)
	s, c = bits.Add64(s, uint64(w2), c)
	w1 |= uint64(^fold(s, c)) << 32
	binary.BigEndian.PutUint64(b[0:], w0)
	binary.BigEndian.PutUint64(b[8:], w1)
	binary.BigEndian.PutUint32(b[16:], w2)
}

// SetChecksum computes and writes the header checksum.
func (b IPv4) SetChecksum() {
	binary.BigEndian.PutUint16(b[ipv4Checksum:], 0)
	binary.BigEndian.PutUint16(b[ipv4Checksum:], ^checksum(b[:b.HeaderLen()], 0))
}

// ChecksumValid reports whether the header checksum is right.
func (b IPv4) ChecksumValid() bool { return checksum(b[:b.HeaderLen()], 0) == 0xffff }

// IPv6 is a view of an IPv6 header.
type IPv6 []byte

// IPv6Fields holds the fields of an IPv6 header.
type IPv6Fields struct {
	TrafficClass  uint8
	FlowLabel     uint32
	PayloadLength uint16
	NextHeader    uint8
	HopLimit      uint8
	Src, Dst      netip.Addr
}

func (b IPv6) Version() uint8        { return b[ipv6VerTCFlow] >> 4 }
func (b IPv6) TrafficClass() uint8   { return uint8(binary.BigEndian.Uint16(b[ipv6VerTCFlow:]) >> 4) }
func (b IPv6) FlowLabel() uint32     { return binary.BigEndian.Uint32(b[ipv6VerTCFlow:]) & 0x000fffff }
func (b IPv6) PayloadLength() uint16 { return binary.BigEndian.Uint16(b[ipv6PayloadLen:]) }
func (b IPv6) NextHeader() uint8     { return b[ipv6NextHeader] }
func (b IPv6) HopLimit() uint8       { return b[ipv6HopLimit] }
func (b IPv6) Src() netip.Addr       { return netip.AddrFrom16([16]byte(b[ipv6Src : ipv6Src+16])) }
func (b IPv6) Dst() netip.Addr       { return netip.AddrFrom16([16]byte(b[ipv6Dst : ipv6Dst+16])) }

// SetTrafficClass changes the traffic class (DSCP and ECN) in place.
func (b IPv6) SetTrafficClass(tc uint8) {
	v := binary.BigEndian.Uint32(b[ipv6VerTCFlow:])
	binary.BigEndian.PutUint32(b[ipv6VerTCFlow:], v&^0x0ff00000|uint32(tc)<<20)
}

// Fields returns the header's fields.
func (b IPv6) Fields() IPv6Fields {
	return IPv6Fields{
		TrafficClass: b.TrafficClass(), FlowLabel: b.FlowLabel(), PayloadLength: b.PayloadLength(),
		NextHeader: b.NextHeader(), HopLimit: b.HopLimit(), Src: b.Src(), Dst: b.Dst(),
	}
}

// Encode writes the header.
func (b IPv6) Encode(f *IPv6Fields) {
	_ = b[IPv6Len-1]
	binary.BigEndian.PutUint32(b[ipv6VerTCFlow:], 6<<28|uint32(f.TrafficClass)<<20|f.FlowLabel&0x000fffff)
	binary.BigEndian.PutUint16(b[ipv6PayloadLen:], f.PayloadLength)
	b[ipv6NextHeader] = f.NextHeader
	b[ipv6HopLimit] = f.HopLimit
	src, dst := f.Src.As16(), f.Dst.As16()
	copy(b[ipv6Src:ipv6Src+16], src[:])
	copy(b[ipv6Dst:ipv6Dst+16], dst[:])
}

// UDP is a view of a UDP header.
type UDP []byte

// UDPFields holds the fields of a UDP header.
type UDPFields struct {
	SrcPort, DstPort uint16
	Length           uint16
	Checksum         uint16
}

func (b UDP) SrcPort() uint16  { return binary.BigEndian.Uint16(b[udpSrcPort:]) }
func (b UDP) DstPort() uint16  { return binary.BigEndian.Uint16(b[udpDstPort:]) }
func (b UDP) Length() uint16   { return binary.BigEndian.Uint16(b[udpLength:]) }
func (b UDP) Checksum() uint16 { return binary.BigEndian.Uint16(b[udpChecksum:]) }

// Fields returns the header's fields.
func (b UDP) Fields() UDPFields {
	return UDPFields{b.SrcPort(), b.DstPort(), b.Length(), b.Checksum()}
}

// Encode writes the header. RoCEv2 senders such as rxe leave the checksum
// 0 (IBA A17.4.1.2: the ICRC protects the packet).
func (b UDP) Encode(f *UDPFields) {
	_ = b[UDPLen-1]
	binary.BigEndian.PutUint16(b[udpSrcPort:], f.SrcPort)
	binary.BigEndian.PutUint16(b[udpDstPort:], f.DstPort)
	binary.BigEndian.PutUint16(b[udpLength:], f.Length)
	binary.BigEndian.PutUint16(b[udpChecksum:], f.Checksum)
}

// RoCEPort is the IANA UDP destination port of RoCEv2 (IBA A17.2.2).
const RoCEPort = 4791

// FlowLabel returns the flow label the kernel computes for a connection
// when the application sets none (rdma_calc_flow_label in ib_verbs.h): a
// hash of the two QP numbers.
func FlowLabel(lqpn, rqpn uint32) uint32 {
	v := uint64(lqpn) * uint64(rqpn)
	v ^= v >> 20
	v ^= v >> 40
	return uint32(v) & 0x000fffff
}

// SrcPortForFlow returns the UDP source port for a flow label, folded into
// 0xC000-0xFFFF (rdma_flow_label_to_udp_sport). rxe uses it for connected
// QPs, with FlowLabel(lqpn, rqpn) when the path has no flow label.
func SrcPortForFlow(flowLabel uint32) uint16 {
	low := flowLabel & 0x3fff
	low ^= (flowLabel & 0xfc000) >> 14
	return 0xc000 | uint16(low)
}

// SrcPortForQPN returns the UDP source port rxe gives a QP before it has a
// path, and keeps for UD QPs: hash_32(qpn, 14) folded into 0xC000-0xFFFF
// (rxe_qp_init_req).
func SrcPortForQPN(qpn uint32) uint16 {
	return 0xc000 | uint16((qpn*0x61c88647)>>(32-14))
}
