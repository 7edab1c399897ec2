package lab_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/internal/pcapfile"
	"github.com/uroce/uroce/tests/interop/lab"
)

// TestVerifyRoCE runs the capture check over the reference captures,
// whose README counts 1143 RoCEv2 packets, all good, then spoils one.
func TestVerifyRoCE(t *testing.T) {
	files, err := filepath.Glob("../../../testdata/rxe-captures/*.pcap")
	if err != nil || len(files) == 0 {
		t.Fatalf("no reference captures: %v", err)
	}
	var all []pcapfile.Record
	for _, name := range files {
		f, err := pcapfile.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, f.Records...)
	}
	s := lab.VerifyRoCE(all)
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if s.Packets != 1143 || s.Opcodes[bth.RCWriteOnly] == 0 {
		t.Errorf("got %v; want 1143 good RoCEv2 packets", s)
	}

	// Flip a payload bit of the first RoCE packet: its ICRC no longer
	// matches, and only that packet is reported.
	for i, r := range all {
		var f bth.Frame
		if f.Decode(r.Data) != nil {
			continue
		}
		spoilt := append([]byte(nil), r.Data...)
		spoilt[len(spoilt)-5] ^= 1 // last payload byte before the ICRC
		all[i].Data = spoilt
		break
	}
	s = lab.VerifyRoCE(all)
	if s.Bad != 1 || s.Packets != 1143 || s.Err() == nil {
		t.Errorf("after spoiling one packet: %v, err %v; want 1 bad of 1143", s, s.Err())
	}
	if s.Dump.ICRCBad != 1 || s.DumpErr == nil {
		t.Errorf("uroce-dump after spoiling one packet: %+v, err %v; want 1 bad ICRC", s.Dump, s.DumpErr)
	}
}

// TestVerifyRoCEMalformed: a RoCEv2 packet that does not decode (its BTH
// transport version is not 0) is malformed to uroce-dump too, and the
// capture check fails on it.
func TestVerifyRoCEMalformed(t *testing.T) {
	f, err := pcapfile.ReadFile("../../../testdata/rxe-captures/ib_write_lat.pcap")
	if err != nil {
		t.Fatal(err)
	}
	recs := f.Records
	if s := lab.VerifyRoCE(recs); s.Err() != nil || s.Dump.RoCE != s.Packets || s.Dump.Malformed != 0 {
		t.Fatalf("clean capture: %v, uroce-dump %+v, err %v", s, s.Dump, s.Err())
	}
	for i, r := range recs {
		var fr bth.Frame
		if fr.Decode(r.Data) != nil {
			continue
		}
		spoilt := append([]byte(nil), r.Data...)
		// The BTH follows Ethernet, IPv4 and UDP; byte 1 of it holds
		// the transport header version in its low nibble.
		spoilt[14+20+8+1] |= 0x0f
		recs[i].Data = spoilt
		break
	}
	s := lab.VerifyRoCE(recs)
	if s.Dump.Malformed != 1 || s.DumpErr == nil || s.Err() == nil {
		t.Errorf("after breaking one BTH: %v, uroce-dump %+v, err %v; want 1 malformed", s, s.Dump, s.DumpErr)
	}
}

// TestTail: the tail of a real rxe capture names its last packets in
// order, one line each, an ACK with its syndrome.
func TestTail(t *testing.T) {
	f, err := pcapfile.ReadFile("../../../testdata/rxe-captures/ib_write_lat.pcap")
	if err != nil {
		t.Fatal(err)
	}
	var roce []bth.Frame
	for _, r := range f.Records {
		var fr bth.Frame
		if fr.Decode(r.Data) == nil {
			roce = append(roce, fr)
		}
	}
	if len(roce) < 5 {
		t.Fatalf("%d RoCE packets in the capture", len(roce))
	}
	tail := lab.Tail(f.Records, 4)
	lines := strings.Split(tail, "\n")
	if len(lines) != 4 {
		t.Fatalf("Tail(4) gave %d lines:\n%s", len(lines), tail)
	}
	acks := 0
	for i, fr := range roce[len(roce)-4:] {
		want := fmt.Sprintf("%v qp=%#x psn=%d", fr.Opcode(), fr.BTH().DestQP(), fr.BTH().PSN())
		if fr.Opcode() == bth.RCAcknowledge {
			want += fmt.Sprintf(" %v", fr.AETH().Syndrome())
			acks++
		}
		if !strings.HasSuffix(lines[i], want) {
			t.Errorf("line %d %q, want it to end %q", i, lines[i], want)
		}
	}
	if acks == 0 {
		t.Error("no ACK among the last four packets: the syndrome went unchecked")
	}
	if all := lab.Tail(f.Records, 1<<20); len(strings.Split(all, "\n")) != len(roce) {
		t.Errorf("Tail of everything gave %d lines, want %d", len(strings.Split(all, "\n")), len(roce))
	}
}
