package qp

import (
	"bytes"
	"testing"
)

// TestOneSGEWQEReuse: on a QP of one SGE and two WQE slots, WRITEs of
// inline data and of one SGE take turns in the same slots; each lands
// with its own bytes, never a slot's earlier SGE or inline data.
func TestOneSGEWQEReuse(t *testing.T) {
	p := newPair(t, pairConfig{mtu: 1024, retry: 7, rnrRetry: 7})
	x, _ := p.extraQP(2, 64)
	inline := []bool{false, true, true, false, false, true, false, true}
	for i, in := range inline {
		src := 4096 + 64*i
		for j := range 40 {
			p.a.mem[src+j] = byte(i*40 + j + 1)
		}
		wr := SendWR{ID: uint64(i), Opcode: WRWrite, Flags: FlagSignaled, RemoteAddr: memBase + 65536 + uint64(64*i), RKey: p.b.mr.RKey}
		if in {
			wr.Flags |= FlagInline
			wr.InlineData = p.a.mem[src : src+40]
		} else {
			wr.SGL = []SGE{p.a.sge(src, 40)}
		}
		if err := x.PostSend(p.now, &wr); err != nil {
			t.Fatal(err)
		}
		p.run(func() bool { return x.sq.head == x.sq.tail })
		var wc [1]Completion
		if n := p.a.scq.Poll(wc[:]); n != 1 || wc[0].Status != WCSuccess || wc[0].ByteLen != 40 {
			t.Fatalf("WRITE %d (inline %v): %d completions, %+v", i, in, n, wc[0])
		}
		if got, want := p.b.mem[65536+64*i:][:40], p.a.mem[src:][:40]; !bytes.Equal(got, want) {
			t.Fatalf("WRITE %d (inline %v) landed % x, want % x", i, in, got, want)
		}
	}
}
