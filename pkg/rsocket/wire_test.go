package rsocket

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"testing"
)

func TestMsg(t *testing.T) {
	for _, tc := range []struct {
		m     Msg
		imm   uint32 // as it travels (host order in verbs)
		op    Op
		data  uint32
		str   string
		valid bool
	}{
		{MakeMsg(OpData, 1), 0x00000001, OpData, 1, "data(1)", true},
		{MakeMsg(OpData, 65536), 0x00010000, OpData, 65536, "data(65536)", true},
		{MakeMsg(OpData, dataMask), 0x1fffffff, OpData, dataMask, "data(536870911)", true},
		{MakeMsg(OpSGL, 384), 0x80000180, OpSGL, 384, "sgl(credits to 384)", true},
		{MakeMsg(OpSGL, 0xffff+384), 0x8001017f, OpSGL, 0x1017f, "sgl(credits to 65919)", true},
		{MakeMsg(OpIOMapSGL, 3), 0xc0000003, OpIOMapSGL, 3, "iomap(3)", true},
		{MakeMsg(OpCtrl, uint32(CtrlDisconnect)), 0xe0000000, OpCtrl, 0, "disconnect", true},
		{MakeMsg(OpCtrl, uint32(CtrlKeepalive)), 0xe0000001, OpCtrl, 1, "keepalive", true},
		{MakeMsg(OpCtrl, uint32(CtrlShutdown)), 0xe0000002, OpCtrl, 2, "shutdown", true},
		{MakeMsg(OpCtrl, 9), 0xe0000009, OpCtrl, 9, "ctrl(9)", false},
		{Msg(0x20000010), 0x20000010, 1, 16, "op1(16)", false}, // RS_OP_RSVD_DATA_MORE
		{Msg(0xa0000000), 0xa0000000, 5, 0, "op5(0)", false},   // RS_OP_RSVD
		// Bits above 29 in the data are dropped, not carried into the op.
		{MakeMsg(OpData, 1<<29|5), 5, OpData, 5, "data(5)", true},
	} {
		if uint32(tc.m) != tc.imm || tc.m.Op() != tc.op || tc.m.Data() != tc.data ||
			tc.m.String() != tc.str || tc.m.Valid() != tc.valid {
			t.Errorf("%#x: imm %#x op %d data %d %q valid %v; want %#x %d %d %q %v",
				uint32(tc.m), uint32(tc.m), tc.m.Op(), tc.m.Data(), tc.m, tc.m.Valid(),
				tc.imm, tc.op, tc.data, tc.str, tc.valid)
		}
	}
}

// connReq is a connect message as rsocket.c on x86 formats it: version
// 1, RS_CONN_FLAG_IOMAP, 384 credits, no iomap, a 2-entry target SGL and
// the first 64 KiB half of a 128 KiB ring.
var connReq = mustHex("01020180000000" + "00" +
	"00007f1234560000" + "00001234" + "00000002" +
	"00007f1234570000" + "00005678" + "00010000")

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

func TestConnData(t *testing.T) {
	want := ConnData{
		Version: 1, Flags: FlagIOMap, Credits: 384,
		TargetSGL: SGE{Addr: 0x7f1234560000, Key: 0x1234, Length: 2},
		DataBuf:   SGE{Addr: 0x7f1234570000, Key: 0x5678, Length: 0x10000},
	}
	got, err := ParseConnData(connReq)
	if err != nil || got != want {
		t.Fatalf("parse: %+v, %v; want %+v", got, err, want)
	}
	b := make([]byte, ConnDataLen)
	want.Encode(b)
	if !bytes.Equal(b, connReq) {
		t.Errorf("encode:\n%x\nwant\n%x", b, connReq)
	}
	// The CM zero-pads private data: trailing bytes are ignored.
	padded := append(append([]byte{}, connReq...), make([]byte, 16)...)
	if got, err := ParseConnData(padded); err != nil || got != want {
		t.Errorf("padded: %+v, %v", got, err)
	}
}

func TestConnDataErrors(t *testing.T) {
	// Every truncated prefix is short.
	for n := range ConnDataLen {
		if _, err := ParseConnData(connReq[:n]); !errors.Is(err, ErrShort) {
			t.Errorf("%d bytes: %v, want ErrShort", n, err)
		}
	}
	for name, mut := range map[string]func(b []byte){
		"version 0":  func(b []byte) { b[0] = 0 },
		"version 2":  func(b []byte) { b[0] = 2 },
		"no credits": func(b []byte) { b[2], b[3] = 0, 0 },
		"no SGL":     func(b []byte) { clear(b[20:24]) },
		"no buffer":  func(b []byte) { clear(b[36:40]) },
	} {
		b := append([]byte{}, connReq...)
		mut(b)
		if _, err := ParseConnData(b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := ParseConnData(append([]byte{2}, connReq[1:]...)); !errors.Is(err, ErrVersion) {
		t.Errorf("version 2: %v, want ErrVersion", err)
	}
}

func TestSGE(t *testing.T) {
	s := SGE{Addr: 0x0102030405060708, Key: 0x0a0b0c0d, Length: 0x8000}
	for _, tc := range []struct {
		flags uint8
		wire  string
	}{
		// A little-endian peer (no RS_CONN_FLAG_NET) gets host order
		// from another little-endian host...
		{0, "0807060504030201" + "0d0c0b0a" + "00800000"},
		// ...and a big-endian one gets it swapped (RS_OPT_SWAP_SGL).
		{FlagNet, "0102030405060708" + "0a0b0c0d" + "00008000"},
	} {
		order := sgeOrder(tc.flags)
		b := make([]byte, SGELen)
		s.Encode(b, order)
		if hex.EncodeToString(b) != tc.wire {
			t.Errorf("flags %#x: %x, want %s", tc.flags, b, tc.wire)
		}
		if got := DecodeSGE(b, order); got != s {
			t.Errorf("flags %#x: decoded %+v", tc.flags, got)
		}
	}
}

// FuzzParseConnData checks that the parser never panics and that what it
// accepts encodes back to the same 40 bytes, reserved bytes aside.
func FuzzParseConnData(f *testing.F) {
	f.Add(connReq)
	f.Add(connReq[:39])
	f.Add(append(append([]byte{}, connReq...), make([]byte, 196-ConnDataLen)...))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseConnData(b)
		if err != nil {
			return
		}
		out := make([]byte, ConnDataLen)
		c.Encode(out)
		in := append([]byte{}, b[:ConnDataLen]...)
		clear(in[4:7])
		if !bytes.Equal(out, in) {
			t.Fatalf("re-encoded\n%x\nfrom\n%x", out, in)
		}
	})
}

// FuzzMsg checks that an immediate splits into op and data that build
// it again, and that only the ops a stream knows are valid.
func FuzzMsg(f *testing.F) {
	for _, m := range []uint32{0x00000040, 0x80000180, 0xe0000000, 0xe0000002, 0xc0000001, 0xa0000000} {
		f.Add(m)
	}
	f.Fuzz(func(t *testing.T, imm uint32) {
		m := Msg(imm)
		if MakeMsg(m.Op(), m.Data()) != m {
			t.Fatalf("%#x: rebuilt %#x", imm, uint32(MakeMsg(m.Op(), m.Data())))
		}
		_ = m.String()
		if m.Valid() && (m.Op() == 1 || m.Op() == 2 || m.Op() == 3 || m.Op() == 5) {
			t.Fatalf("%v valid", m)
		}
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], imm)
		if Msg(binary.BigEndian.Uint32(b[:])) != m {
			t.Fatal("round trip")
		}
	})
}

func TestIOMapEncoding(t *testing.T) {
	m := IOMap{Offset: 0x1000, SGE: SGE{Addr: 0x7f0000001000, Key: 0x42, Length: 4096}}
	b := make([]byte, IOMapLen)
	m.Encode(b, binary.LittleEndian)
	if want := "0010000000000000" + "00100000007f0000" + "42000000" + "00100000"; hex.EncodeToString(b) != want {
		t.Errorf("%x, want %s", b, want)
	}
	if got := DecodeIOMap(b, binary.LittleEndian); got != m {
		t.Errorf("decoded %+v", got)
	}
	for _, tc := range []struct {
		value int
		scale uint8
	}{{0, 0}, {1, 1}, {8, 8}, {128, 128}, {256, 0x81}, {512, 0x82}, {0x7f00, 0xff}} {
		if got := valueToScale(tc.value); got != tc.scale {
			t.Errorf("valueToScale(%d) = %#x, want %#x", tc.value, got, tc.scale)
		}
		if got := scaleToValue(tc.scale); got != tc.value {
			t.Errorf("scaleToValue(%#x) = %d, want %d", tc.scale, got, tc.value)
		}
	}
}
