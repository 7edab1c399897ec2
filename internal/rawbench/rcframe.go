package rawbench

import (
	"fmt"
	"net/netip"

	"github.com/uroce/uroce/bth"
)

// Path is where a floor's frames go: Ethernet and IPv4 source and
// destination.
type Path struct {
	SrcMAC, DstMAC [6]byte
	Src, Dst       netip.Addr
}

// The RC floor's frames are Ethernet/IPv4 (no options)/UDP 4791/BTH and
// its extension headers/payload/ICRC, so the BTH and the IP datagram sit at
// fixed offsets.
const (
	rcIPOff  = bth.EthernetLen
	rcBTHOff = bth.EthernetLen + bth.IPv4MinLen + bth.UDPLen
	// rcQPN is the destination QP the floor's frames carry.
	rcQPN = 0x11
)

// rcFrame builds one whole RoCEv2 frame: the packet f with payload
// bytes of zeros, behind Ethernet, IPv4 and UDP headers, with its ICRC.
func rcFrame(p Path, f *bth.PacketFields, payload int) ([]byte, error) {
	n := bth.PacketLen(f.BTH.Opcode, payload)
	b := make([]byte, rcBTHOff+n)
	if _, err := f.Encode(b[rcBTHOff:], make([]byte, payload)); err != nil {
		return nil, err
	}
	bth.Ethernet(b).Encode(&bth.EthernetFields{Dst: p.DstMAC, Src: p.SrcMAC, EtherType: bth.EtherTypeIPv4})
	ip := b[rcIPOff:]
	bth.IPv4(ip).Encode(&bth.IPv4Fields{TotalLength: uint16(len(ip)), Flags: bth.IPv4DontFragment, TTL: 64,
		Protocol: bth.ProtocolUDP, Src: p.Src, Dst: p.Dst})
	bth.UDP(ip[bth.IPv4MinLen:]).Encode(&bth.UDPFields{SrcPort: bth.SrcPortForQPN(rcQPN), DstPort: bth.RoCEPort,
		Length: uint16(len(ip) - bth.IPv4MinLen)})
	if err := bth.PutICRC(ip); err != nil {
		return nil, err
	}
	return b, nil
}

// RCMessage builds the frames of one RC message of size bytes as uroce
// sends it with path MTU pmtu (IBA 9.7.6.1.1: the payload split into
// pmtu-sized packets): an RDMA WRITE (First with the RETH, Middle, Last;
// or Only) when write is set, else a SEND, starting at PSN psn. The last
// packet asks for an ACK. Send re-stamps them with later PSNs.
func RCMessage(p Path, write bool, size, pmtu int, psn bth.PSN) ([][]byte, error) {
	if pmtu <= 0 {
		return nil, fmt.Errorf("rawbench: path MTU %d", pmtu)
	}
	first, middle, last, only := bth.RCSendFirst, bth.RCSendMiddle, bth.RCSendLast, bth.RCSendOnly
	if write {
		first, middle, last, only = bth.RCWriteFirst, bth.RCWriteMiddle, bth.RCWriteLast, bth.RCWriteOnly
	}
	n := max(1, (size+pmtu-1)/pmtu)
	frames := make([][]byte, 0, n)
	for i := range n {
		f := bth.PacketFields{BTH: bth.BTHFields{PKey: 0xffff, DestQP: rcQPN, PSN: psn.Add(i)}}
		switch {
		case n == 1:
			f.BTH.Opcode = only
		case i == 0:
			f.BTH.Opcode = first
		case i == n-1:
			f.BTH.Opcode = last
		default:
			f.BTH.Opcode = middle
		}
		f.BTH.AckReq = i == n-1
		f.RETH = bth.RETHFields{VA: 0x1000, RKey: 0x1234, DMALen: uint32(size)}
		fr, err := rcFrame(p, &f, min(pmtu, size-i*pmtu))
		if err != nil {
			return nil, err
		}
		frames = append(frames, fr)
	}
	return frames, nil
}

// RCAck builds an RC Acknowledge frame (BTH and AETH) for PSN psn.
func RCAck(p Path, psn bth.PSN) ([]byte, error) {
	f := bth.PacketFields{BTH: bth.BTHFields{Opcode: bth.RCAcknowledge, PKey: 0xffff, DestQP: rcQPN, PSN: psn}}
	f.AETH.Syndrome = bth.ACK(0x1f)
	return rcFrame(p, &f, 0)
}

// Stamp gives an RC floor frame (from RCMessage or RCAck) a new PSN and,
// for an ACK, a new MSN, and recomputes its ICRC, as a sender does for
// every packet.
func Stamp(frame []byte, psn bth.PSN, msn uint32) error {
	if len(frame) < rcBTHOff+bth.BTHLen+bth.ICRCLen {
		return fmt.Errorf("rawbench: stamp: %w: %d bytes", bth.ErrTruncated, len(frame))
	}
	h := bth.BTH(frame[rcBTHOff:])
	h.SetPSN(psn)
	if h.Opcode() == bth.RCAcknowledge {
		a := bth.AETH(frame[rcBTHOff+bth.BTHLen:])
		a.Encode(a.Syndrome(), msn)
	}
	return bth.PutICRC(frame[rcIPOff:])
}

// Check decodes a received frame into f and verifies its ICRC, as a
// receiver does before it trusts any field.
func Check(f *bth.Frame, frame []byte) error {
	if err := f.Decode(frame); err != nil {
		return err
	}
	return f.VerifyICRC()
}
