package bth

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestEncodeMsgHeaders holds EncodeHeaders' path for SEND and WRITE
// packets to the bytes the opcode table gives, for every opcode and
// random fields.
func TestEncodeMsgHeaders(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for o := 0; o < 256; o++ {
		op := Opcode(o)
		if op.Info() == nil {
			continue
		}
		for i := 0; i < 50; i++ {
			bf := BTHFields{
				Opcode: op, SE: rng.IntN(2) == 0, M: rng.IntN(2) == 0,
				PadCnt: uint8(rng.IntN(4)), TVer: uint8(rng.IntN(16)),
				PKey: uint16(rng.Uint32()), FECN: rng.IntN(2) == 0, BECN: rng.IntN(2) == 0,
				DestQP: rng.Uint32(), AckReq: rng.IntN(2) == 0,
				Placeable: rng.IntN(2) == 0, Placed: rng.IntN(2) == 0,
				PSN: PSN(rng.Uint32()),
			}
			f := PacketFields{
				RETH:  RETHFields{VA: rng.Uint64(), RKey: rng.Uint32(), DMALen: rng.Uint32()},
				ImmDt: rng.Uint32(),
			}
			want := bytes.Repeat([]byte{0xa5}, 64)
			got := bytes.Repeat([]byte{0xa5}, 64)
			wn := f.encodeTable(want, &bf)
			gn := f.EncodeHeaders(got, &bf)
			if gn != wn || !bytes.Equal(got, want) {
				t.Fatalf("%v %+v:\n got %d % x\nwant %d % x", op, bf, gn, got[:gn], wn, want[:wn])
			}
		}
	}
}
