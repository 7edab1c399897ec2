package udp

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/uroce/uroce/bth"
)

// TestIDSolve checks the solver against bth.ICRC: for random datagrams
// sent with random IDs, the ID is found from the ICRC computed with ID 0,
// and a corrupted datagram is refused unless its damage happens to fall in
// L's span (probability 2^-16).
func TestIDSolve(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	s := newIDSolver(9000)
	wrong := 0
	const trials = 3000
	for range trials {
		n := 24 + r.IntN(4000)
		buf := make([]byte, 28+n)
		for i := 28; i < len(buf); i++ {
			buf[i] = byte(r.Uint32())
		}
		id := uint16(r.Uint32())
		h := bth.DatagramFields{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"),
			SrcPort: 0xc123, DstPort: 4791, ID: id, DF: true, TTL: 64}
		bth.PutDatagramHeaders(buf, 28, n, &h)
		bth.PutICRC(buf)
		got := binary.LittleEndian.Uint32(buf[len(buf)-4:])
		bth.IPv4(buf).SetID(0)
		c0, _ := bth.ICRC(buf)
		sid, ok := s.solve(len(buf)-4-6, got^c0)
		if !ok || sid != id {
			t.Fatalf("len %d: solved %#x %v, want %#x", n, sid, ok, id)
		}
		// Flip one payload bit (past the masked fields): explained by
		// an ID only with probability about 2^-16.
		bit := 8*(28+12) + r.IntN(8*(len(buf)-4-40))
		buf[bit/8] ^= 1 << (bit % 8)
		c1, _ := bth.ICRC(buf)
		if _, ok := s.solve(len(buf)-4-6, got^c1); ok {
			wrong++
		}
		// Random damage to the whole payload passes about 2^-16 of the time.
		for i := 28 + 12; i < len(buf)-4; i++ {
			buf[i] = byte(r.Uint32())
		}
		c2, _ := bth.ICRC(buf)
		if _, ok := s.solve(len(buf)-4-6, got^c2); ok {
			wrong++
		}
	}
	if wrong > 3 {
		t.Fatalf("%d of %d random corruptions accepted", wrong, trials)
	}
}

func BenchmarkIDSolve(b *testing.B) {
	s := newIDSolver(9000)
	b.ReportAllocs()
	for b.Loop() {
		s.solve(1024, 0x12345678)
	}
}
