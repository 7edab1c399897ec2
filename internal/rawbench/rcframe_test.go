package rawbench

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/uroce/uroce/bth"
)

var testPath = Path{
	SrcMAC: [6]byte{2, 0, 0, 0, 0, 1}, DstMAC: [6]byte{2, 0, 0, 0, 0, 2},
	Src: netip.MustParseAddr("10.99.0.1"), Dst: netip.MustParseAddr("10.99.0.2"),
}

// TestRCMessage: a message is split into path-MTU packets with the
// opcodes, PSNs, payload lengths, RETH and AckReq uroce gives them, and
// every frame decodes with a valid ICRC.
func TestRCMessage(t *testing.T) {
	tests := []struct {
		write      bool
		size, pmtu int
		ops        []bth.Opcode
		lens       []int
	}{
		{true, 2, 1024, []bth.Opcode{bth.RCWriteOnly}, []int{2}},
		{true, 64, 1024, []bth.Opcode{bth.RCWriteOnly}, []int{64}},
		{true, 4096, 1024, []bth.Opcode{bth.RCWriteFirst, bth.RCWriteMiddle, bth.RCWriteMiddle, bth.RCWriteLast}, []int{1024, 1024, 1024, 1024}},
		{true, 4096, 4096, []bth.Opcode{bth.RCWriteOnly}, []int{4096}},
		{true, 1500, 1024, []bth.Opcode{bth.RCWriteFirst, bth.RCWriteLast}, []int{1024, 476}},
		{false, 64, 1024, []bth.Opcode{bth.RCSendOnly}, []int{64}},
		{false, 3000, 1024, []bth.Opcode{bth.RCSendFirst, bth.RCSendMiddle, bth.RCSendLast}, []int{1024, 1024, 952}},
	}
	for _, tc := range tests {
		psn := bth.PSN(0xfffffe) // the message's PSNs wrap
		frames, err := RCMessage(testPath, tc.write, tc.size, tc.pmtu, psn)
		if err != nil {
			t.Fatal(err)
		}
		if len(frames) != len(tc.ops) {
			t.Fatalf("write %v %d B / %d: %d frames, want %d", tc.write, tc.size, tc.pmtu, len(frames), len(tc.ops))
		}
		for i, fr := range frames {
			var f bth.Frame
			if err := Check(&f, fr); err != nil {
				t.Fatalf("write %v %d B frame %d: %v", tc.write, tc.size, i, err)
			}
			h := f.BTH()
			if h.Opcode() != tc.ops[i] || h.PSN() != psn.Add(i) || len(f.Payload()) != tc.lens[i] ||
				h.AckReq() != (i == len(frames)-1) || h.DestQP() != rcQPN {
				t.Errorf("write %v %d B frame %d: %v PSN %d payload %d AckReq %v QP %#x; want %v PSN %d payload %d",
					tc.write, tc.size, i, h.Opcode(), h.PSN(), len(f.Payload()), h.AckReq(), h.DestQP(), tc.ops[i], psn.Add(i), tc.lens[i])
			}
			if f.Has(bth.HasRETH) && f.RETH().DMALen() != uint32(tc.size) {
				t.Errorf("frame %d: RETH DMA length %d, want %d", i, f.RETH().DMALen(), tc.size)
			}
			if got, want := f.IPv4().Src(), testPath.Src; got != want {
				t.Errorf("frame %d: source %v, want %v", i, got, want)
			}
		}
	}
}

// TestStamp: a re-stamped frame carries the new PSN (and an ACK its new
// MSN) under a recomputed, valid ICRC.
func TestStamp(t *testing.T) {
	msg, err := RCMessage(testPath, true, 64, 1024, 0)
	if err != nil {
		t.Fatal(err)
	}
	ack, err := RCAck(testPath, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, fr := range [][]byte{msg[0], ack} {
		if err := Stamp(fr, 0x654321, 77); err != nil {
			t.Fatal(err)
		}
		var f bth.Frame
		if err := Check(&f, fr); err != nil {
			t.Fatalf("%v after Stamp: %v", f.Opcode(), err)
		}
		if f.BTH().PSN() != 0x654321 {
			t.Errorf("%v: PSN %d after Stamp", f.Opcode(), f.BTH().PSN())
		}
		if a := f.AETH(); a != nil && (a.MSN() != 77 || a.Syndrome() != bth.ACK(0x1f)) {
			t.Errorf("ACK: MSN %d syndrome %v after Stamp", a.MSN(), a.Syndrome())
		}
	}
	if err := Stamp(msg[0][:rcBTHOff], 1, 0); !errors.Is(err, bth.ErrTruncated) {
		t.Errorf("Stamp of a headers-only frame: %v, want ErrTruncated", err)
	}
}

// TestCheckCorrupt: a bit flipped anywhere the ICRC covers (payload, BTH,
// invariant IP and UDP fields) or in the ICRC itself is caught; one in
// the variant TTL is not the ICRC's to catch but the IPv4 checksum's.
func TestCheckCorrupt(t *testing.T) {
	msg, err := RCMessage(testPath, true, 64, 1024, 5)
	if err != nil {
		t.Fatal(err)
	}
	good := msg[0]
	for _, at := range []struct {
		name string
		off  int
		want error
	}{
		{"payload", len(good) - bth.ICRCLen - 1, bth.ErrBadICRC},
		{"BTH PSN", rcBTHOff + 11, bth.ErrBadICRC},
		{"RETH rkey", rcBTHOff + bth.BTHLen + 8, bth.ErrBadICRC},
		{"UDP source port", rcIPOff + bth.IPv4MinLen, bth.ErrBadICRC},
		{"ICRC", len(good) - 1, bth.ErrBadICRC},
		{"IPv4 TTL", rcIPOff + 8, bth.ErrBadIPHeader},
	} {
		fr := append([]byte(nil), good...)
		fr[at.off] ^= 0x10
		var f bth.Frame
		if err := Check(&f, fr); !errors.Is(err, at.want) {
			t.Errorf("%s corrupted: Check = %v, want %v", at.name, err, at.want)
		}
	}
}

// TestStampAllocs: the per-packet work allocates nothing.
func TestStampAllocs(t *testing.T) {
	msg, err := RCMessage(testPath, true, 1024, 1024, 0)
	if err != nil {
		t.Fatal(err)
	}
	var f bth.Frame
	psn := bth.PSN(0)
	if n := testing.AllocsPerRun(100, func() {
		psn = psn.Next()
		Stamp(msg[0], psn, 0)
		if err := Check(&f, msg[0]); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("Stamp and Check: %v allocations", n)
	}
}
