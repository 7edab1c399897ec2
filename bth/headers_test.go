package bth

import (
	"net/netip"
	"testing"
)

func TestBTHRoundTrip(t *testing.T) {
	tests := []BTHFields{
		{},
		{Opcode: RCWriteOnly, PKey: 0xffff, DestQP: 0x11, AckReq: true, PSN: 0xb1b46d},
		{Opcode: RCSendLast, SE: true, M: true, PadCnt: 3, TVer: 0, PKey: 0x8001, FECN: true, BECN: true, DestQP: QPNMask, AckReq: true, PSN: MaxPSN},
		{Opcode: CNP, PKey: 0xffff, BECN: true, DestQP: 0xabc},
	}
	for _, f := range tests {
		b := make(BTH, BTHLen)
		for i := range b {
			b[i] = 0xa5 // Encode must overwrite everything, reserved bits included
		}
		b.Encode(&f)
		if got := b.Fields(); got != f {
			t.Errorf("round trip: got %+v, want %+v", got, f)
		}
		if b[4]&0x3f != 0 || b[8]&0x7f != 0 {
			t.Errorf("reserved bits not zeroed: % x", b)
		}
	}
}

func TestBTHSetters(t *testing.T) {
	b := make(BTH, BTHLen)
	f := BTHFields{Opcode: RCSendFirst, PKey: 0xffff, DestQP: 0x123456, PSN: 7, AckReq: true}
	b.Encode(&f)
	b.SetPSN(MaxPSN)
	b.SetOpcode(RCSendLast)
	b.SetPadCnt(2)
	b.SetFECN(true)
	b.SetBECN(true)
	b.SetDestQP(0x654321)
	b.SetAckReq(false)
	want := BTHFields{Opcode: RCSendLast, PadCnt: 2, PKey: 0xffff, FECN: true, BECN: true, DestQP: 0x654321, PSN: MaxPSN}
	if got := b.Fields(); got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	b.SetAckReq(true)
	b.SetPSN(1)
	if !b.AckReq() || b.PSN() != 1 {
		t.Errorf("SetPSN lost AckReq or PSN: %+v", b.Fields())
	}
}

func TestExtensionHeaders(t *testing.T) {
	r := make(RETH, RETHLen)
	rf := RETHFields{VA: 0x0000561170c4f000, RKey: 0x2cb, DMALen: 1 << 20}
	r.Encode(&rf)
	if r.Fields() != rf {
		t.Errorf("RETH: %+v", r.Fields())
	}
	a := make(AtomicETH, AtomicETHLen)
	af := AtomicETHFields{VA: 1 << 63, RKey: 0xdeadbeef, SwapAdd: 1, Compare: ^uint64(0)}
	a.Encode(&af)
	if a.Fields() != af {
		t.Errorf("AtomicETH: %+v", a.Fields())
	}
	d := make(DETH, DETHLen)
	df := DETHFields{QKey: 0x80010000, SrcQP: 1}
	d.Encode(&df)
	if d.Fields() != df || d[4] != 0 {
		t.Errorf("DETH: %+v % x", d.Fields(), d)
	}
	ack := make(AtomicAckETH, AtomicAckETHLen)
	ack.Encode(0x0102030405060708)
	if ack.OrigData() != 0x0102030405060708 || ack[0] != 1 {
		t.Errorf("AtomicAckETH big-endian: % x", ack)
	}
	imm := make(ImmDt, ImmDtLen)
	imm.Encode(0xcafe)
	ie := make(IETH, IETHLen)
	ie.Encode(0x1234)
	rd := make(RDETH, RDETHLen)
	rd.Encode(0xffabcdef)
	fe := make(FETH, FETHLen)
	fe.Encode(1, 2)
	if imm.Imm() != 0xcafe || ie.RKey() != 0x1234 || rd.EECnxt() != 0xabcdef || fe.PlacementType() != 1 || fe.Selectivity() != 2 {
		t.Errorf("ImmDt %x IETH %x RDETH %x FETH %d/%d", imm.Imm(), ie.RKey(), rd.EECnxt(), fe.PlacementType(), fe.Selectivity())
	}
}

func TestAETHSyndromes(t *testing.T) {
	tests := []struct {
		s       Syndrome
		kind    AckKind
		str     string
		code    NAKCode
		timer   uint8
		credits uint8
		wire    byte
	}{
		{ACK(CreditsInvalid), KindACK, "ACK", 0, 0, 0x1f, 0x1f},
		{ACK(0), KindACK, "ACK", 0, 0, 0, 0x00},
		{RNRNAK(14), KindRNRNAK, "RNR NAK", 0, 14, 0, 0x2e},
		{NAK(NAKPSNSequenceError), KindNAK, "NAK PSN sequence error", NAKPSNSequenceError, 0, 0, 0x60},
		{NAK(NAKInvalidRequest), KindNAK, "NAK invalid request", NAKInvalidRequest, 0, 0, 0x61},
		{NAK(NAKRemoteAccessError), KindNAK, "NAK remote access error", NAKRemoteAccessError, 0, 0, 0x62},
		{NAK(NAKRemoteOperationalError), KindNAK, "NAK remote operational error", NAKRemoteOperationalError, 0, 0, 0x63},
		{NAK(NAKInvalidRDRequest), KindNAK, "NAK invalid RD request", NAKInvalidRDRequest, 0, 0, 0x64},
		{Syndrome(0x40), KindReserved, "reserved syndrome", 0, 0, 0, 0x40},
	}
	for _, tt := range tests {
		b := make(AETH, AETHLen)
		b.Encode(tt.s, 0xabcdef)
		if b[0] != tt.wire || b.Syndrome() != tt.s || b.MSN() != 0xabcdef {
			t.Errorf("%v: wire % x", tt.s, b)
		}
		s := b.Syndrome()
		if s.Kind() != tt.kind || s.String() != tt.str {
			t.Errorf("%#x: kind %v %q, want %v %q", uint8(s), s.Kind(), s.String(), tt.kind, tt.str)
		}
		switch tt.kind {
		case KindNAK:
			if s.NAKCode() != tt.code {
				t.Errorf("%v: code %v", s, s.NAKCode())
			}
		case KindRNRNAK:
			if s.RNRTimer() != tt.timer {
				t.Errorf("%v: timer %d", s, s.RNRTimer())
			}
		case KindACK:
			if s.Credits() != tt.credits {
				t.Errorf("%v: credits %d", s, s.Credits())
			}
		}
	}
	// IBA Table 45 end points and a middle value.
	for code, us := range map[uint8]float64{0: 655360, 1: 10, 14: 1280, 31: 491520} {
		if RNRTimeout(code) != us {
			t.Errorf("RNRTimeout(%d) = %v µs, want %v", code, RNRTimeout(code), us)
		}
	}
}

func TestIPHeaders(t *testing.T) {
	b := make(IPv4, IPv4MinLen)
	f := IPv4Fields{TOS: 0x02, TotalLength: 104, ID: 0, Flags: IPv4DontFragment, TTL: 64, Protocol: ProtocolUDP,
		Src: netip.MustParseAddr("10.77.0.11"), Dst: netip.MustParseAddr("::ffff:10.77.0.12")}
	b.Encode(&f)
	f.Dst = f.Dst.Unmap()
	if b.Fields() != f || !b.ChecksumValid() || b.HeaderLen() != 20 || b.Version() != 4 {
		t.Errorf("IPv4: %+v checksum ok %v", b.Fields(), b.ChecksumValid())
	}
	b.SetTOS(0x03)
	if b.TOS() != 3 || !b.ChecksumValid() {
		t.Errorf("SetTOS: tos %d checksum ok %v", b.TOS(), b.ChecksumValid())
	}
	v6 := make(IPv6, IPv6Len)
	f6 := IPv6Fields{TrafficClass: 0xb9, FlowLabel: 0xfffff, PayloadLength: 100, NextHeader: ProtocolUDP, HopLimit: 64,
		Src: netip.MustParseAddr("fd00::1"), Dst: netip.MustParseAddr("fd00::2")}
	v6.Encode(&f6)
	if v6.Fields() != f6 || v6.Version() != 6 {
		t.Errorf("IPv6: %+v", v6.Fields())
	}
	v6.SetTrafficClass(0x03)
	if v6.TrafficClass() != 3 || v6.FlowLabel() != 0xfffff {
		t.Errorf("SetTrafficClass: %+v", v6.Fields())
	}
	u := make(UDP, UDPLen)
	uf := UDPFields{SrcPort: 49441, DstPort: RoCEPort, Length: 84}
	u.Encode(&uf)
	if u.Fields() != uf {
		t.Errorf("UDP: %+v", u.Fields())
	}
}

// TestUDPSourcePorts checks the source ports rxe chose in the captures.
func TestUDPSourcePorts(t *testing.T) {
	for _, tt := range []struct {
		l, r uint32
		port uint16
	}{
		{0x11, 0x11, 49441}, {0x12, 0x12, 49476}, {0x13, 0x13, 49513}, {0x14, 0x14, 49552},
		{0x1e, 0xabc, 49677}, {0x19, 0x19, 49777},
	} {
		if got := SrcPortForFlow(FlowLabel(tt.l, tt.r)); got != tt.port {
			t.Errorf("QPs 0x%x/0x%x: port %d, rxe used %d", tt.l, tt.r, got, tt.port)
		}
	}
	if got := SrcPortForQPN(0x1a); got != 64407 {
		t.Errorf("UD QP 0x1a: port %d, rxe used 64407", got)
	}
}
