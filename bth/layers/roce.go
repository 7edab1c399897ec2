package layers

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/google/gopacket"
	gplayers "github.com/google/gopacket/layers"

	"github.com/uroce/uroce/bth"
)

// LayerTypeRoCENumber is the gopacket layer type number of LayerTypeRoCE,
// the first of the 1000-1999 range gopacket leaves to applications.
const LayerTypeRoCENumber = 1000

// LayerTypeRoCE is the layer type of a RoCEv2 packet: the UDP payload from
// the BTH through the ICRC.
var LayerTypeRoCE = gopacket.RegisterLayerType(LayerTypeRoCENumber, gopacket.LayerTypeMetadata{
	Name:    "RoCE",
	Decoder: gopacket.DecodeFunc(decodeRoCE),
})

func init() {
	gplayers.RegisterUDPPortLayerType(bth.RoCEPort, LayerTypeRoCE)
}

// Errors of this package; bth's sentinels come through unchanged.
var (
	// ErrNotCarried means CheckICRC was given an IP layer that is not the
	// one that carried the packet, or one it cannot check (IPv6 with
	// extension headers, bytes not contiguous).
	ErrNotCarried = errors.New("packet not carried by this IP layer")
)

// errNotCarried is built once: CheckICRC may run on every packet.
var errNotCarried = fmt.Errorf("roce: icrc: %w", ErrNotCarried)

// ICRCStatus says whether a decoded packet's ICRC has been checked and
// with what result.
type ICRCStatus uint8

// ICRC states.
const (
	ICRCUnchecked ICRCStatus = iota // no IP header to check it against yet
	ICRCOK
	ICRCBad
)

func (s ICRCStatus) String() string {
	switch s {
	case ICRCOK:
		return "ok"
	case ICRCBad:
		return "BAD"
	}
	return "unchecked"
}

// RoCE is a RoCEv2 packet as a gopacket layer. The embedded PacketFields
// hold every header field (r.BTH.DestQP, r.RETH.VA, r.AETH.Syndrome, ...);
// only the headers r.BTH.Opcode carries are meaningful, the rest are
// zero. Packet gives the same packet as a bth view, without copying.
type RoCE struct {
	gplayers.BaseLayer // Contents: BTH and extension headers; Payload: payload without pad
	bth.PacketFields

	// ICRC is the ICRC the packet carries (decoding) or is to carry
	// (SerializeTo; SerializeLayers overwrites it with the right one).
	ICRC uint32
	// ICRCStatus is the outcome of the last ICRC check.
	ICRCStatus ICRCStatus

	pkt bth.Packet
}

var (
	_ gopacket.DecodingLayer     = (*RoCE)(nil)
	_ gopacket.SerializableLayer = (*RoCE)(nil)
)

// LayerType returns LayerTypeRoCE.
func (r *RoCE) LayerType() gopacket.LayerType { return LayerTypeRoCE }

// CanDecode returns LayerTypeRoCE.
func (r *RoCE) CanDecode() gopacket.LayerClass { return LayerTypeRoCE }

// NextLayerType returns gopacket.LayerTypePayload when the packet carries
// payload, and gopacket.LayerTypeZero when it does not.
func (r *RoCE) NextLayerType() gopacket.LayerType {
	if len(r.Payload) == 0 {
		return gopacket.LayerTypeZero
	}
	return gopacket.LayerTypePayload
}

// Packet returns the decoded packet as a bth view over the bytes decoded
// (BTH through ICRC). It is valid until the next DecodeFromBytes and empty
// after a failed one.
func (r *RoCE) Packet() *bth.Packet { return &r.pkt }

// DecodeFromBytes decodes a RoCE packet (a UDP payload) in place, without
// allocating. Errors are bth's, testable with errors.Is against
// bth.ErrTruncated, bth.ErrBadVersion, bth.ErrUnknownOpcode, bth.ErrBadPad
// and bth.ErrBadLength; on a truncated packet it also calls
// df.SetTruncated. It leaves ICRCStatus ICRCUnchecked (see CheckICRC).
func (r *RoCE) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if err := r.pkt.Decode(data); err != nil {
		*r = RoCE{}
		if errors.Is(err, bth.ErrTruncated) {
			df.SetTruncated()
		}
		return err
	}
	r.PacketFields = r.pkt.Fields()
	r.Contents = data[:r.pkt.Info().Length]
	r.Payload = r.pkt.Payload()
	r.ICRC = r.pkt.ICRC()
	r.ICRCStatus = ICRCUnchecked
	return nil
}

// CheckICRC verifies the packet's ICRC against the IPv4 or IPv6 layer that
// carried it (decoded from the same bytes, as DecodingLayerParser and
// NewPacket do) and records the outcome in ICRCStatus. It returns nil, an
// error wrapping bth.ErrBadICRC, or one wrapping ErrNotCarried when ip did
// not carry this packet (the status is then ICRCUnchecked).
func (r *RoCE) CheckICRC(ip gopacket.Layer) error {
	r.ICRCStatus = ICRCUnchecked
	if ip6, ok := ip.(*gplayers.IPv6); ok && ip6.NextHeader != gplayers.IPProtocolUDP {
		return errNotCarried // the ICRC masks a fixed 40-byte IPv6 header
	}
	d := join(ip.LayerContents(), ip.LayerPayload())
	p := r.pkt.Bytes()
	if len(d) == 0 || len(p) == 0 || &d[len(d)-1] != &p[len(p)-1] {
		return errNotCarried
	}
	if err := bth.VerifyICRC(d); err != nil {
		if errors.Is(err, bth.ErrBadICRC) {
			r.ICRCStatus = ICRCBad
		}
		return err
	}
	r.ICRCStatus = ICRCOK
	return nil
}

// join returns a and b as one slice when b directly follows a in memory,
// which is how gopacket's layers slice one buffer, and nil otherwise.
func join(a, b []byte) []byte {
	if len(b) == 0 {
		return a
	}
	if len(a) == 0 || cap(a) < len(a)+len(b) || &a[:len(a)+1][len(a)] != &b[0] {
		return nil
	}
	return a[:len(a)+len(b)]
}

// decodeRoCE is the gopacket.Decoder of LayerTypeRoCE.
func decodeRoCE(data []byte, p gopacket.PacketBuilder) error {
	r := &RoCE{}
	if err := r.DecodeFromBytes(data, p); err != nil {
		return err
	}
	p.AddLayer(r)
	// The packet under construction already holds the IP layer that
	// carried this one (eager and lazy packets alike decode in order),
	// so the ICRC can be checked here.
	if pk, ok := p.(gopacket.Packet); ok {
		if nl := pk.NetworkLayer(); nl != nil {
			_ = r.CheckICRC(nl) // the outcome is in ICRCStatus
		}
	}
	return p.NextDecoder(r.NextLayerType())
}

// SerializeTo writes the BTH and extension headers in front of the bytes
// already in b (the payload), then the pad and r.ICRC after them. With
// opts.FixLengths the pad count is computed from the payload; without it
// r.BTH.PadCnt is written and that many pad bytes appended. The ICRC
// cannot be computed here, because the IP header is not there yet: use
// SerializeLayers, or bth.PutICRC on the finished datagram.
func (r *RoCE) SerializeTo(b gopacket.SerializeBuffer, opts gopacket.SerializeOptions) error {
	info := r.BTH.Opcode.Info()
	if info == nil {
		return fmt.Errorf("roce: serialize: %w: 0x%02x", bth.ErrUnknownOpcode, uint8(r.BTH.Opcode))
	}
	payload := len(b.Bytes())
	if payload > 0 && !info.Has(bth.HasPayload) {
		return fmt.Errorf("roce: serialize: %w: %s carries no payload", bth.ErrBadLength, info.Name)
	}
	bf := r.BTH
	if opts.FixLengths {
		bf.PadCnt = uint8(-payload & 3)
	}
	bf.PadCnt &= 3
	hdr, err := b.PrependBytes(info.Length)
	if err != nil {
		return err
	}
	r.EncodeHeaders(hdr, &bf)
	tail, err := b.AppendBytes(int(bf.PadCnt) + bth.ICRCLen)
	if err != nil {
		return err
	}
	clear(tail[:bf.PadCnt])
	binary.LittleEndian.PutUint32(tail[bf.PadCnt:], r.ICRC)
	return nil
}
