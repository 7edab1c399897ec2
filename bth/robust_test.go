package bth_test

import (
	"errors"
	"testing"

	"github.com/uroce/uroce/bth"
)

// TestTruncatedPrefixes feeds every proper prefix of every captured frame
// to each decoder (Frame, ParseDatagram, ICRC, Packet): each must return an error (never panic, never succeed).
func TestTruncatedPrefixes(t *testing.T) {
	for name, frames := range captures(t) {
		for i, b := range frames {
			var f bth.Frame
			if err := f.Decode(b); err != nil {
				t.Fatal(err)
			}
			roce := f.Packet.Bytes()
			ip := f.Datagram()
			for n := range len(b) {
				var g bth.Frame
				if err := g.Decode(b[:n]); err == nil {
					t.Fatalf("%s #%d: Ethernet prefix of %d/%d bytes decoded", name, i, n, len(b))
				}
			}
			for n := range len(ip) {
				var g bth.Frame
				if err := g.DecodeIP(ip[:n]); err == nil {
					t.Fatalf("%s #%d: IP prefix of %d/%d bytes decoded", name, i, n, len(ip))
				}
				if _, err := bth.ICRC(ip[:n]); err == nil && n < len(ip)-len(roce)+bth.BTHLen+bth.ICRCLen {
					t.Fatalf("%s #%d: ICRC of a %d-byte prefix", name, i, n)
				}
				var d bth.Datagram
				if err := bth.ParseDatagram(ip[:n], &d); err == nil {
					t.Fatalf("%s #%d: ParseDatagram took an IP prefix of %d/%d bytes", name, i, n, len(ip))
				}
			}
			for n := range len(roce) {
				var p bth.Packet
				err := p.Decode(roce[:n])
				// A prefix that cuts whole payload words can still be a
				// well-formed packet of the same opcode; every other
				// prefix must fail.
				if err == nil && (n < bth.PacketLen(p.Opcode(), 0) || (len(roce)-n)%4 != 0) {
					t.Fatalf("%s #%d: RoCE prefix of %d/%d bytes decoded", name, i, n, len(roce))
				}
			}
		}
	}
}

// TestBitFlips flips every bit of the IP datagram of one packet of each
// opcode in the captures. Every flip must be caught, by the IP header
// checksum, the decoder or the ICRC, except those in the BTH's FECN, BECN
// and reserved bits, which the ICRC leaves out on purpose (IBA A17.4.1.2)
// and which must not break it.
func TestBitFlips(t *testing.T) {
	seen := map[bth.Opcode]bool{}
	for name, frames := range captures(t) {
		for i, b := range frames {
			var f bth.Frame
			if err := f.Decode(b); err != nil {
				t.Fatal(err)
			}
			if seen[f.Opcode()] {
				continue
			}
			seen[f.Opcode()] = true
			ipOff := len(b) - len(f.Datagram())
			resv8a := len(b) - len(f.Packet.Bytes()) + 4
			c := make([]byte, len(b))
			for bit := ipOff * 8; bit < len(b)*8; bit++ {
				copy(c, b)
				c[bit/8] ^= 1 << (bit % 8)
				var g bth.Frame
				err := g.Decode(c)
				if err == nil {
					err = g.Verify()
				}
				if bit/8 == resv8a {
					if err != nil {
						t.Errorf("%s #%d: flipping BTH byte 4 bit %d broke verification: %v", name, i, bit%8, err)
					}
					continue
				}
				if err == nil {
					t.Errorf("%s #%d (%v): flip of byte %d bit %d not caught", name, i, f.Opcode(), bit/8, bit%8)
				}
			}
		}
	}
	if len(seen) < 15 {
		t.Errorf("only %d opcodes in the captures", len(seen))
	}
}

// TestDecodeErrors checks that each kind of damage is named by its sentinel.
func TestDecodeErrors(t *testing.T) {
	good := func() []byte {
		pf := bth.PacketFields{BTH: bth.BTHFields{Opcode: bth.RCSendLast, PKey: 0xffff, DestQP: 1}}
		b := make([]byte, 64)
		n, err := pf.Encode(b, []byte{1, 2, 3, 4, 5})
		if err != nil {
			t.Fatal(err)
		}
		return b[:n]
	}
	tests := []struct {
		name string
		mod  func([]byte) []byte
		want error
	}{
		{"ok", func(b []byte) []byte { return b }, nil},
		{"short", func(b []byte) []byte { return b[:15] }, bth.ErrTruncated},
		{"version", func(b []byte) []byte { b[1] |= 1; return b }, bth.ErrBadVersion},
		{"opcode", func(b []byte) []byte { b[0] = 0x1f; return b }, bth.ErrUnknownOpcode},
		{"pad beyond payload", func(b []byte) []byte {
			pf := bth.PacketFields{BTH: bth.BTHFields{Opcode: bth.RCSendLast}}
			n, _ := pf.Encode(b, nil)
			b = b[:n]
			bth.BTH(b).SetPadCnt(1)
			return b
		}, bth.ErrBadPad},
		{"unaligned payload", func(b []byte) []byte { return append(b[:len(b)-4], 0, 0, 0, 0, 0) }, bth.ErrBadPad},
		{"payload on ACK", func(b []byte) []byte {
			pf := bth.PacketFields{BTH: bth.BTHFields{Opcode: bth.RCAcknowledge}}
			n, _ := pf.Encode(b[:cap(b)], nil)
			return b[:n+4]
		}, bth.ErrBadLength},
		{"headers cut", func(b []byte) []byte { b[0] = byte(bth.RCCompareSwap); return b }, bth.ErrTruncated},
	}
	for _, tt := range tests {
		var p bth.Packet
		err := p.Decode(tt.mod(good()))
		if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
			t.Errorf("%s: got %v, want %v", tt.name, err, tt.want)
		}
	}
	var p bth.Packet
	if err := p.Decode(good()); err != nil || string(p.Payload()) != "\x01\x02\x03\x04\x05" || p.PadCnt() != 3 {
		t.Errorf("good packet: %v payload % x pad %d", err, p.Payload(), p.PadCnt())
	}
	pf := bth.PacketFields{BTH: bth.BTHFields{Opcode: bth.RCAcknowledge}}
	if _, err := pf.Encode(make([]byte, 64), []byte{1}); !errors.Is(err, bth.ErrBadLength) {
		t.Errorf("encode payload on ACK: %v", err)
	}
	if _, err := pf.Encode(make([]byte, 8), nil); !errors.Is(err, bth.ErrTruncated) {
		t.Errorf("encode into short buffer: %v", err)
	}
}
