package layers_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/google/gopacket"
	gplayers "github.com/google/gopacket/layers"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/bth/layers"
)

// seedFrames returns one RoCE frame per capture and opcode: every header
// layout the captures hold, without a thousand near-copies.
func seedFrames(t testing.TB) [][]byte {
	type key struct {
		file string
		op   bth.Opcode
	}
	seen := map[key]bool{}
	var out [][]byte
	for name, frames := range captures(t) {
		for _, b := range frames {
			var f bth.Frame
			if f.Decode(b) != nil {
				continue
			}
			if k := (key{name, f.Opcode()}); !seen[k] {
				seen[k] = true
				out = append(out, b)
			}
		}
	}
	return out
}

// FuzzRoCE decodes arbitrary UDP payloads: a packet decodes or fails with
// a bth sentinel, and one that decodes serializes back to the same fields.
func FuzzRoCE(f *testing.F) {
	for _, b := range seedFrames(f) {
		var fr bth.Frame
		if err := fr.Decode(b); err != nil {
			f.Fatal(err)
		}
		f.Add(fr.Packet.Bytes())
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var r layers.RoCE
		if err := r.DecodeFromBytes(data, gopacket.NilDecodeFeedback); err != nil {
			for _, s := range []error{bth.ErrTruncated, bth.ErrBadVersion, bth.ErrUnknownOpcode, bth.ErrBadPad, bth.ErrBadLength} {
				if errors.Is(err, s) {
					return
				}
			}
			t.Fatalf("error without a bth sentinel: %v", err)
		}
		if len(r.Contents)+len(r.Payload)+int(r.BTH.PadCnt)+bth.ICRCLen != len(data) {
			t.Fatalf("layer accounts for %d+%d+%d+4 of %d bytes", len(r.Contents), len(r.Payload), r.BTH.PadCnt, len(data))
		}
		buf := gopacket.NewSerializeBuffer()
		if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{}, &r, gopacket.Payload(r.Payload)); err != nil {
			t.Fatalf("serialize: %v", err)
		}
		var again layers.RoCE
		if err := again.DecodeFromBytes(buf.Bytes(), gopacket.NilDecodeFeedback); err != nil {
			t.Fatalf("serialized packet does not decode: %v\n in %x\nout %x", err, data, buf.Bytes())
		}
		// Encoding zeroes reserved bits; every field survives.
		if again.PacketFields != r.PacketFields || !bytes.Equal(again.Payload, r.Payload) || again.ICRC != r.ICRC {
			t.Fatalf("round trip changed the packet:\n got %+v\nwant %+v", again.PacketFields, r.PacketFields)
		}
	})
}

// FuzzFrame decodes arbitrary Ethernet frames with DecodingLayerParser and
// with NewPacket: the two agree on whether there is a RoCE packet, its
// fields and its ICRC status. The parser lets panics through; NewPacket
// recovers them, because gopacket v1.1.19's own decoders panic on some
// inputs (IPsec ESP behind an IPv6 routing header, in the corpus), so for
// it the test only checks that no recovered panic came from this module.
func FuzzFrame(f *testing.F) {
	for _, b := range seedFrames(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p := newRoCEParser()
		p.p.IgnorePanic = true
		p.p.IgnoreUnsupported = true
		roce, err, _ := p.decodeICRC(data)
		ok := roce && err == nil

		pk := gopacket.NewPacket(data, gplayers.LayerTypeEthernet, gopacket.Default)
		if df, isDF := pk.ErrorLayer().(*gopacket.DecodeFailure); isDF && inStack(df.Dump(), "github.com/uroce/uroce/bth.", "github.com/uroce/uroce/bth/layers.") {
			t.Fatalf("panic in this module: %v\n%s", df.Error(), df.Dump())
		}
		l, _ := pk.Layer(layers.LayerTypeRoCE).(*layers.RoCE)
		if ok != (l != nil) {
			t.Fatalf("parser RoCE %v (%v), NewPacket RoCE %v", ok, err, l != nil)
		}
		if !ok {
			return
		}
		if l.PacketFields != p.roce.PacketFields || !bytes.Equal(l.Payload, p.roce.Payload) {
			t.Fatalf("decoders disagree:\n%+v\n%+v", l.PacketFields, p.roce.PacketFields)
		}
		if l.ICRCStatus != p.roce.ICRCStatus {
			t.Fatalf("ICRC: NewPacket %v, parser %v", l.ICRCStatus, p.roce.ICRCStatus)
		}
	})
}

// inStack reports whether a recovered panic's stack passes through one of
// the packages named (by their "path." prefix; the _test package does not
// match).
func inStack(stack string, pkgs ...string) bool {
	for _, p := range pkgs {
		if strings.Contains(stack, p) {
			return true
		}
	}
	return false
}
