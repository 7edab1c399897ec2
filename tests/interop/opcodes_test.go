package interop_test

import (
	"testing"

	"github.com/uroce/uroce/internal/pcapfile"
	"github.com/uroce/uroce/tests/interop/lab"
)

// TestWantOpcodesReference checks the matrix's expectations (wantOpcodes
// and the largest payload) against rxe's own runs of the same tests in
// the reference captures, at IB MTU 1024: what the matrix demands of
// uroce is what rxe puts on the wire facing rxe.
func TestWantOpcodesReference(t *testing.T) {
	for _, c := range []struct {
		file, test string
		size       int
	}{
		{"ib_write_lat.pcap", "write_lat", 64},
		{"ib_read_lat.pcap", "read_lat", 64},
		{"ib_send_lat.pcap", "send_lat", 64},
		{"ib_atomic_lat.pcap", "atomic_lat", 8},
		{"ib_write_bw.pcap", "write_bw", 4096},
		{"ib_read_bw.pcap", "read_bw", 3000},
		{"ib_send_bw.pcap", "send_bw", 2050},
	} {
		t.Run(c.test, func(t *testing.T) {
			f, err := pcapfile.ReadFile("../../testdata/rxe-captures/" + c.file)
			if err != nil {
				t.Fatal(err)
			}
			s := lab.VerifyRoCE(f.Records)
			if err := s.Err(); err != nil {
				t.Fatal(err)
			}
			for _, op := range wantOpcodes(c.test, c.size, 1024) {
				if s.Opcodes[op] == 0 {
					t.Errorf("%s has no %v: %v", c.file, op, s)
				}
			}
			if c.test != "atomic_lat" && s.MaxPayload != min(c.size, 1024) {
				t.Errorf("%s: largest payload %d, want %d", c.file, s.MaxPayload, min(c.size, 1024))
			}
		})
	}
}
