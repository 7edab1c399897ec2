package bth_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/internal/pcapfile"
)

// captures returns every RoCE frame of every reference capture, by file.
func captures(t testing.TB) map[string][][]byte {
	t.Helper()
	files, err := filepath.Glob("../testdata/rxe-captures/*.pcap")
	if err != nil || len(files) == 0 {
		t.Fatalf("no captures: %v", err)
	}
	out := map[string][][]byte{}
	for _, name := range files {
		f, err := pcapfile.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range f.Records {
			var fr bth.Frame
			err := fr.Decode(r.Data)
			if errors.Is(err, bth.ErrNotRoCE) {
				continue
			}
			if err != nil {
				t.Fatalf("%s: frame at %v: %v", filepath.Base(name), r.Time, err)
			}
			out[filepath.Base(name)] = append(out[filepath.Base(name)], r.Data)
		}
	}
	return out
}

// TestCapturesDecodeVerifyReencode is the golden test: every RoCE packet
// rxe sent decodes, its ICRC verifies, and encoding its decoded fields
// again gives the same bytes.
func TestCapturesDecodeVerifyReencode(t *testing.T) {
	total := 0
	for name, frames := range captures(t) {
		for i, b := range frames {
			var f bth.Frame
			if err := f.Decode(b); err != nil {
				t.Fatalf("%s #%d: %v", name, i, err)
			}
			if err := f.VerifyICRC(); err != nil {
				t.Errorf("%s #%d (%v): %v", name, i, f.Opcode(), err)
			}
			if got := reencode(t, &f); !slices.Equal(got, b[:len(got)]) || len(got) != len(f.Bytes()) {
				t.Errorf("%s #%d (%v): re-encoded frame differs\n got %x\nwant %x", name, i, f.Opcode(), got, b)
			}
			total++
		}
	}
	if total != 1143 {
		t.Errorf("decoded %d RoCE packets, the captures' README counts 1143", total)
	}
}

// reencode builds a frame from the decoded fields of f alone.
func reencode(t *testing.T, f *bth.Frame) []byte {
	t.Helper()
	buf := make([]byte, len(f.Bytes()))
	off := 0
	if e := f.Ethernet(); e != nil {
		ef := bth.EthernetFields{Dst: e.Dst(), Src: e.Src(), EtherType: e.EtherType()}
		bth.Ethernet(buf).Encode(&ef)
		off = bth.EthernetLen
		if v := f.VLAN(); v != nil {
			bth.VLAN(buf[off:]).Encode(v.PCP(), v.ID(), v.EtherType())
			off += bth.VLANLen
		}
	}
	ipStart := off
	if h := f.IPv4(); h != nil {
		if h.HeaderLen() != bth.IPv4MinLen {
			t.Fatalf("IPv4 options in a capture")
		}
		fields := h.Fields()
		bth.IPv4(buf[off:]).Encode(&fields)
		off += bth.IPv4MinLen
	} else {
		fields := f.IPv6().Fields()
		bth.IPv6(buf[off:]).Encode(&fields)
		off += bth.IPv6Len
	}
	uf := f.UDP().Fields()
	bth.UDP(buf[off:]).Encode(&uf)
	off += bth.UDPLen
	pf := f.Packet.Fields()
	n, err := pf.Encode(buf[off:], f.Payload())
	if err != nil {
		t.Fatal(err)
	}
	off += n
	if err := bth.PutICRC(buf[ipStart:off]); err != nil {
		t.Fatal(err)
	}
	return buf[:off]
}

func ExampleFrame_Decode() {
	f, _ := pcapfile.ReadFile("../testdata/rxe-captures/ib_write_lat.pcap")
	for _, r := range f.Records {
		var fr bth.Frame
		if fr.Decode(r.Data) != nil {
			continue // ARP, the TCP exchange
		}
		b := fr.BTH()
		fmt.Println(fr.Opcode(), b.DestQP(), b.PSN(), fr.RETH().DMALen(), fr.VerifyICRC())
		break
	}
	// Output: RC_RDMA_WRITE_ONLY 17 11646317 64 <nil>
}
