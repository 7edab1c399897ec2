package qp

import (
	"bytes"
	"testing"
	"unsafe"
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

// TestSendRingRestarts: a send ring that empties starts again at slot 0,
// the slot PostSend loads ahead in a small ring (warmRequester), which
// lies at its fixed place in the QP's block. Every WR completes, in
// order, in small rings and large.
func TestSendRingRestarts(t *testing.T) {
	for _, c := range []struct {
		sendWR int
		small  bool
	}{{1, true}, {4, true}, {5, false}, {16, false}} {
		p := newPair(t, pairConfig{mtu: 1024, retry: 7, rnrRetry: 7})
		x, _ := p.extraQP(c.sendWR, 0)
		if small := x.sq.mask < smallRing; small != c.small {
			t.Fatalf("MaxSendWR %d: small ring %v, want %v", c.sendWR, small, c.small)
		}
		if c.small && &(*qpBlockSmall)(unsafe.Pointer(x)).sq[0] != &x.sq.wqes[0] {
			t.Fatalf("MaxSendWR %d: the ring's slot 0 is not the block's", c.sendWR)
		}
		id := uint64(0)
		for _, burst := range []int{1, 1, min(c.sendWR, 3), 1, c.sendWR} {
			for range burst {
				wr := SendWR{ID: id, Opcode: WRWrite, Flags: FlagSignaled, SGL: []SGE{p.a.sge(0, 64)}, RemoteAddr: memBase + 1024, RKey: p.b.mr.RKey}
				if err := x.PostSend(p.now, &wr); err != nil {
					t.Fatal(err)
				}
				id++
			}
			if c.sendWR > 1 && burst > 1 && x.sq.tail != uint32(burst) {
				t.Fatalf("MaxSendWR %d: %d posted to an empty ring end at slot %d", c.sendWR, burst, x.sq.tail)
			}
			p.run(func() bool { return x.sq.head == x.sq.tail })
			if x.sq.head != 0 || x.sq.next != 0 || x.sq.tail != 0 {
				t.Fatalf("MaxSendWR %d: emptied ring at head %d, next %d, tail %d; want 0", c.sendWR, x.sq.head, x.sq.next, x.sq.tail)
			}
			wc := make([]Completion, burst)
			if n := p.a.scq.Poll(wc); n != burst {
				t.Fatalf("MaxSendWR %d: %d completions, want %d", c.sendWR, n, burst)
			}
			for i, w := range wc {
				if want := id - uint64(burst-i); w.WRID != want || w.Status != WCSuccess {
					t.Fatalf("MaxSendWR %d: completion %d: %+v, want WR %d done", c.sendWR, i, w, want)
				}
			}
		}
	}
}
