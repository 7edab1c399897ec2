package lab_test

import (
	"path/filepath"
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
}
