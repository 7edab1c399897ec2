package bth_test

import (
	"bytes"
	"testing"

	"github.com/uroce/uroce/bth"
)

// reservedMask clears the bits Encode writes as zero (reserved fields),
// so a decoded packet re-encodes to the same bytes modulo those.
func reservedMask(p *bth.Packet, b []byte) {
	b[4] &= 0xc0 // BTH resv6
	b[8] &= 0x80 // BTH resv7
	info := p.Info()
	if info.Has(bth.HasDETH) {
		b[info.Offset[bth.HdrDETH]+4] = 0
	}
	if info.Has(bth.HasRDETH) {
		b[info.Offset[bth.HdrRDETH]] = 0
	}
	if info.Has(bth.HasFETH) {
		o := info.Offset[bth.HdrFETH]
		b[o], b[o+1], b[o+2], b[o+3] = 0, 0, 0, b[o+3]&0x3f
	}
	if info.Has(bth.HasCNP) {
		clear(b[info.Offset[bth.HdrCNP]:info.Length])
	}
	// Pad bytes and the ICRC are not fields either.
	n := len(b) - bth.ICRCLen
	clear(b[n-p.PadCnt():])
}

func seedCaptures(f *testing.F, roce bool) {
	for _, frames := range captures(f) {
		for _, b := range frames {
			if roce {
				var fr bth.Frame
				if fr.Decode(b) == nil {
					f.Add(fr.Packet.Bytes())
				}
				continue
			}
			f.Add(b)
		}
	}
}

func FuzzPacketDecode(f *testing.F) {
	seedCaptures(f, true)
	for o := range 256 {
		if !bth.Opcode(o).Valid() {
			continue
		}
		pf := bth.PacketFields{BTH: bth.BTHFields{Opcode: bth.Opcode(o), PKey: 0xffff, DestQP: 0x11, PSN: 1}}
		var pay []byte
		if bth.Opcode(o).Has(bth.HasPayload) {
			pay = []byte("abcde")
		}
		b := make([]byte, 128)
		n, err := pf.Encode(b, pay)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b[:n])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var p bth.Packet
		if p.Decode(b) != nil {
			return
		}
		// Every accessor stays in bounds.
		_ = p.BTH().Fields()
		_ = p.Payload()
		_ = p.ICRC()
		_ = p.Fields()
		pf := p.Fields()
		out := make([]byte, len(b))
		n, err := pf.Encode(out, p.Payload())
		if err != nil || n != len(b) {
			t.Fatalf("re-encode: %d bytes, %v; decoded %d", n, err, len(b))
		}
		want := bytes.Clone(b)
		reservedMask(&p, want)
		reservedMask(&p, out)
		if !bytes.Equal(out[:n-bth.ICRCLen], want[:n-bth.ICRCLen]) {
			t.Fatalf("re-encode differs:\n got % x\nwant % x", out, want)
		}
	})
}

func FuzzFrameDecode(f *testing.F) {
	seedCaptures(f, false)
	f.Fuzz(func(t *testing.T, b []byte) {
		var fr bth.Frame
		if fr.Decode(b) != nil {
			return
		}
		_ = fr.Verify()
		_ = fr.Ethernet()
		_ = fr.VLAN()
		_ = fr.UDP().Fields()
		if h := fr.IPv4(); h != nil {
			_ = h.Fields()
		} else {
			_ = fr.IPv6().Fields()
		}
		// Writing a fresh ICRC makes any decodable frame verify.
		d := bytes.Clone(fr.Datagram())
		if err := bth.PutICRC(d); err != nil {
			t.Fatalf("PutICRC on a decoded datagram: %v", err)
		}
		if err := bth.VerifyICRC(d); err != nil {
			t.Fatalf("VerifyICRC after PutICRC: %v", err)
		}
	})
}

func FuzzICRC(f *testing.F) {
	seedCaptures(f, false)
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = bth.ICRC(b)
		_ = bth.VerifyICRC(b)
		var fr bth.Frame
		_ = fr.DecodeIP(b)
	})
}
