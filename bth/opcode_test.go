package bth

import (
	"strings"
	"testing"
)

// TestOpcodeTableLengths checks each entry's length against the sum of the
// headers its mask names, and that the headers sit back to back in IBA order.
func TestOpcodeTableLengths(t *testing.T) {
	n := 0
	for i := range opcodes {
		info := &opcodes[i]
		if info.Name == "" {
			continue
		}
		n++
		want, next := BTHLen, BTHLen
		for h := HdrRDETH; h < numHeaders; h++ {
			if info.Mask&(HasRDETH<<h) == 0 {
				continue
			}
			want += h.Len()
			if int(info.Offset[h]) != next {
				t.Errorf("%s: %v at offset %d, want %d", info.Name, h, info.Offset[h], next)
			}
			next += h.Len()
		}
		if info.Length != want {
			t.Errorf("%s: length %d, headers add up to %d", info.Name, info.Length, want)
		}
		if got := Opcode(i).String(); got != info.Name {
			t.Errorf("Opcode(0x%02x).String() = %q, table says %q", i, got, info.Name)
		}
		if info.Mask&(Request|Response) == 0 && Opcode(i) != CNP {
			t.Errorf("%s: neither request nor response", info.Name)
		}
		if info.Mask&(First|Middle|Last) == 0 {
			t.Errorf("%s: no place in a message", info.Name)
		}
		svc := strings.SplitN(info.Name, "_", 2)[0]
		if svc != Opcode(i).Service().String() {
			t.Errorf("%s: service %v", info.Name, Opcode(i).Service())
		}
	}
	// RC 23 (21 common + 2 invalidate) + FLUSH + ATOMIC_WRITE, UC 12,
	// RD 22, UD 2, CNP 1, and uroce's selective ACK.
	if want := 23 + 2 + 12 + 22 + 2 + 1 + 1; n != want {
		t.Errorf("table has %d opcodes, want %d", n, want)
	}
}

// TestOpcodeEntries spot-checks entries against IBA Table 35 and rxe.
func TestOpcodeEntries(t *testing.T) {
	tests := []struct {
		op     Opcode
		name   string
		length int
		hdrs   map[Header]int
		has    Mask
		hasNot Mask
	}{
		{RCSendFirst, "RC_SEND_FIRST", 12, nil, Request | Send | First | HasPayload | ConsumesRecv, Last | Completes},
		{RCSendOnlyImm, "RC_SEND_ONLY_WITH_IMMEDIATE", 16, map[Header]int{HdrImmDt: 12}, First | Last | Completes, 0},
		{RCWriteFirst, "RC_RDMA_WRITE_FIRST", 28, map[Header]int{HdrRETH: 12}, Write | First, ConsumesRecv},
		{RCWriteLastImm, "RC_RDMA_WRITE_LAST_WITH_IMMEDIATE", 16, map[Header]int{HdrImmDt: 12}, Write | Last | ConsumesRecv, First},
		{RCWriteOnlyImm, "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", 32, map[Header]int{HdrRETH: 12, HdrImmDt: 28}, Write | ConsumesRecv, 0},
		{RCReadRequest, "RC_RDMA_READ_REQUEST", 28, map[Header]int{HdrRETH: 12}, Request | Read, HasPayload},
		{RCReadResponseFirst, "RC_RDMA_READ_RESPONSE_FIRST", 16, map[Header]int{HdrAETH: 12}, Response | First | HasPayload, Last},
		{RCReadResponseMiddle, "RC_RDMA_READ_RESPONSE_MIDDLE", 12, nil, Response | Middle, HasAETH},
		{RCAcknowledge, "RC_ACKNOWLEDGE", 16, map[Header]int{HdrAETH: 12}, Response, HasPayload},
		{RCAtomicAcknowledge, "RC_ATOMIC_ACKNOWLEDGE", 24, map[Header]int{HdrAETH: 12, HdrAtomicAckETH: 16}, Response | Atomic, 0},
		{RCCompareSwap, "RC_COMPARE_SWAP", 40, map[Header]int{HdrAtomicETH: 12}, Request | Atomic, HasPayload},
		{RCFetchAdd, "RC_FETCH_ADD", 40, map[Header]int{HdrAtomicETH: 12}, Request | Atomic, 0},
		{RCSendOnlyInvalidate, "RC_SEND_ONLY_WITH_INVALIDATE", 16, map[Header]int{HdrIETH: 12}, Send | Completes, 0},
		{RCFlush, "RC_FLUSH", 32, map[Header]int{HdrFETH: 12, HdrRETH: 16}, Request | Flush, HasPayload},
		{RCAtomicWrite, "RC_ATOMIC_WRITE", 28, map[Header]int{HdrRETH: 12}, Request | AtomicWrite | HasPayload, 0},
		{UCSendOnly, "UC_SEND_ONLY", 12, nil, Send, 0},
		{UCWriteOnlyImm, "UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", 32, map[Header]int{HdrRETH: 12, HdrImmDt: 28}, Write, 0},
		{RDSendMiddle, "RD_SEND_MIDDLE", 24, map[Header]int{HdrRDETH: 12, HdrDETH: 16}, Send | Middle, 0},
		{RDReadResponseOnly, "RD_RDMA_READ_RESPONSE_ONLY", 20, map[Header]int{HdrRDETH: 12, HdrAETH: 16}, Response, HasDETH},
		{RDFetchAdd, "RD_FETCH_ADD", 52, map[Header]int{HdrRDETH: 12, HdrDETH: 16, HdrAtomicETH: 24}, Atomic, 0},
		{UDSendOnly, "UD_SEND_ONLY", 20, map[Header]int{HdrDETH: 12}, Send | First | Last, 0},
		{UDSendOnlyImm, "UD_SEND_ONLY_WITH_IMMEDIATE", 24, map[Header]int{HdrDETH: 12, HdrImmDt: 20}, Send, 0},
		{CNP, "CNP", 28, map[Header]int{HdrCNP: 12}, 0, HasPayload | Request | Response},
	}
	for _, tt := range tests {
		info := tt.op.Info()
		if info == nil {
			t.Errorf("0x%02x: not in the table", uint8(tt.op))
			continue
		}
		if info.Name != tt.name || info.Length != tt.length || tt.op.HeaderLen() != tt.length {
			t.Errorf("0x%02x: %s length %d, want %s length %d", uint8(tt.op), info.Name, info.Length, tt.name, tt.length)
		}
		for h, off := range tt.hdrs {
			if !info.Has(HasRDETH<<h) || int(info.Offset[h]) != off {
				t.Errorf("%s: %v at %d (present %v), want %d", tt.name, h, info.Offset[h], info.Has(HasRDETH<<h), off)
			}
		}
		if !tt.op.Has(tt.has) {
			t.Errorf("%s: lacks properties %b", tt.name, tt.has&^info.Mask)
		}
		if tt.hasNot != 0 && info.Mask&tt.hasNot != 0 {
			t.Errorf("%s: has properties %b it must not", tt.name, info.Mask&tt.hasNot)
		}
	}
}

func TestReservedOpcodes(t *testing.T) {
	for _, o := range []Opcode{0x15, 0x18, 0x1b, 0x1e, 0x1f, 0x2c, 0x3f, 0x56, 0x60, 0x63, 0x66, 0x80, 0x82, 0xff} {
		if o.Valid() || o.Info() != nil || o.Has(0) || o.HeaderLen() != 0 {
			t.Errorf("0x%02x: reserved opcode looks valid", uint8(o))
		}
		if got, want := o.String(), "Opcode(0x"; !strings.HasPrefix(got, want) {
			t.Errorf("0x%02x: String() = %q", uint8(o), got)
		}
	}
}

// TestHeaderMaskOrder pins the Has bits to the Header values, which the
// table and the accessors rely on (HasRDETH << h).
func TestHeaderMaskOrder(t *testing.T) {
	pairs := map[Header]Mask{
		HdrRDETH: HasRDETH, HdrDETH: HasDETH, HdrFETH: HasFETH, HdrRETH: HasRETH, HdrAtomicETH: HasAtomicETH,
		HdrImmDt: HasImmDt, HdrIETH: HasIETH, HdrAETH: HasAETH, HdrAtomicAckETH: HasAtomicAckETH, HdrCNP: HasCNP,
	}
	for h, m := range pairs {
		if HasRDETH<<h != m {
			t.Errorf("%v: HasRDETH<<%d = %b, want %b", h, h, HasRDETH<<h, m)
		}
	}
}

// TestSelectiveRepeatWire pins selective repeat's additions: the
// Placeable bit survives Encode, Fields and SetPSN, and the selective
// ACK decodes as an RC response with a bitmap for payload.
func TestSelectiveRepeatWire(t *testing.T) {
	b := make(BTH, BTHLen)
	f := BTHFields{Opcode: RCWriteMiddle, AckReq: true, Placeable: true, Placed: true, PSN: 0x123456}
	b.Encode(&f)
	if b[8] != flagAckReq|flagPlaceable|flagPlaced || b.Fields() != f {
		t.Fatalf("encoded % x, fields %+v", []byte(b), b.Fields())
	}
	b.SetPSN(7)
	if !b.Placeable() || !b.Placed() || !b.AckReq() || b.PSN() != 7 {
		t.Errorf("SetPSN lost a flag: % x", []byte(b))
	}
	if SelectiveAck.Service() != ServiceRC || !SelectiveAck.Has(Response|HasAETH|HasPayload) {
		t.Errorf("selective ACK: service %v, info %+v", SelectiveAck.Service(), SelectiveAck.Info())
	}
	var pf PacketFields
	pf.BTH = BTHFields{Opcode: SelectiveAck, PSN: 9}
	pf.AETH.MSN = 3
	sack := make(SACK, SACKLen)
	sack.Set(0)
	sack.Set(SACKWindow - 1)
	buf := make([]byte, 256)
	n, err := pf.Encode(buf, sack)
	if err != nil {
		t.Fatal(err)
	}
	var p Packet
	if err := p.Decode(buf[:n]); err != nil {
		t.Fatal(err)
	}
	got := SACK(p.Payload())
	if len(got) != SACKLen || !got.Has(0) || !got.Has(SACKWindow-1) || got.Has(1) || p.AETH().MSN() != 3 {
		t.Errorf("decoded payload % x, MSN %d", p.Payload(), p.AETH().MSN())
	}
	pl := make(SRPlace, SRPlaceLen)
	pf2 := SRPlaceFields{RETH: RETHFields{VA: 1 << 40, RKey: 0x1234, DMALen: 9000}, Offset: 4096}
	pl.Encode(&pf2)
	if pl.Fields() != pf2 {
		t.Errorf("placement header: %+v", pl.Fields())
	}
}
