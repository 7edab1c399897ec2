package rc_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/uroce/uroce/internal/netns"
	"github.com/uroce/uroce/verbs"
)

// side is one namespace's device with one QP, its CQ and a region.
type side struct {
	d  *verbs.Device
	q  *verbs.QueuePair
	cq *verbs.CQ
	mr *verbs.MR
}

const regionSize = 2*65536 + 4096 // source, destination, a guard past it

func open(t testing.TB, ns *netns.NS, addr netip.Addr) *side {
	t.Helper()
	s := &side{}
	// The socket belongs to the namespace it was opened in.
	if err := ns.Do(func() (err error) { s.d, err = verbs.OpenAddr(addr, verbs.Inline()); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.d.Close() })
	pd := s.d.AllocPD()
	s.cq = s.d.CreateCQ(64)
	var err error
	if s.q, err = pd.CreateQP(&verbs.QPInit{SendCQ: s.cq, RecvCQ: s.cq, Cap: verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16}}); err != nil {
		t.Fatal(err)
	}
	access := verbs.AccessLocalWrite | verbs.AccessRemoteWrite | verbs.AccessRemoteRead | verbs.AccessRemoteAtomic
	if s.mr, err = pd.RegMR(make([]byte, regionSize), access); err != nil {
		t.Fatal(err)
	}
	return s
}

// sync makes this goroutine's accesses to the side's memory and its
// engine's ordered (Go's memory model, which the race detector checks):
// a call through the device's owner is a synchronisation with it. The
// test learns that a peer's engine touched memory from the other device's
// completions, which travel through kernel sockets, and those carry no
// happens-before edge; an application learns it from its own device's
// completions, which do.
func (s *side) sync() { s.d.Counters() }

// snapshot copies the side's region between two syncs: the engine's
// writes before it happen before the copy, and its writes after it (a
// packet the kernel delivers later, which the race detector cannot see
// as ordered) happen after.
func (s *side) snapshot() []byte {
	s.sync()
	b := bytes.Clone(s.mr.Buf())
	s.sync()
	return b
}

// next waits for the side's next completion and checks its status.
func (s *side) next(ctx context.Context, t *testing.T, what string) verbs.WC {
	t.Helper()
	var wc [1]verbs.WC
	if _, err := s.cq.Wait(ctx, wc[:]); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if wc[0].Status != verbs.WCSuccess {
		t.Fatalf("%s: completion %+v", what, wc[0])
	}
	return wc[0]
}

// fill writes a pattern no other (op, size) uses.
func fill(b []byte, seed int) {
	for i := range b {
		b[i] = byte(seed*31 + i*7 + i>>8)
	}
}

func sgl(mr *verbs.MR, off, n int) []verbs.SGE {
	if n == 0 {
		return nil // a zero-length message has no SGE, as ibv allows
	}
	return []verbs.SGE{mr.SGE(off, n)}
}

// TestVeth runs every RC operation between two namespaces, over IPv4 and
// IPv6 and at two link MTUs (path MTU 1024 and 4096).
func TestVeth(t *testing.T) {
	netns.RequireRoot(t)
	for _, mtu := range []int{1500, 9000} {
		for _, fam := range []int{4, 6} {
			t.Run(fmt.Sprintf("mtu%d/ipv%d", mtu, fam), func(t *testing.T) { veth(t, mtu, fam) })
		}
	}
}

func veth(t *testing.T, mtu, fam int) {
	p := netns.NewPair(t, netns.PairConfig{MTU: mtu, StaticNeighbors: true})
	addrA, addrB := p.Addr(fam)
	a, b := open(t, p.A.NS, addrA), open(t, p.B.NS, addrB)
	// A runs inline (its Waits drive it); B has its own goroutine, as a
	// server that never polls would.
	b.d.Start()
	if err := a.q.Connect(b.q.Endpoint(500), verbs.ConnectOptions{PSN: 9000}); err != nil {
		t.Fatal(err)
	}
	if err := b.q.Connect(a.q.Endpoint(9000), verbs.ConnectOptions{PSN: 500}); err != nil {
		t.Fatal(err)
	}
	pmtu := a.d.MaxPathMTU()
	if want := map[int]int{1500: 1024, 9000: 4096}[mtu]; pmtu != want {
		t.Fatalf("path MTU %d, want %d", pmtu, want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	seed := 0
	for _, size := range []int{0, 1, pmtu - 1, pmtu, pmtu + 1, 65536} {
		for _, op := range []verbs.WROpcode{verbs.WRSend, verbs.WRSendWithImm, verbs.WRWrite, verbs.WRWriteWithImm, verbs.WRRead} {
			seed++
			name := fmt.Sprintf("%v/%d", op, size)
			src, dst := a.mr.Buf()[:size], b.mr.Buf()[65536:][:size]
			if op == verbs.WRRead {
				src, dst = b.mr.Buf()[65536:][:size], a.mr.Buf()[:size]
			}
			fill(src, seed)
			clear(dst)
			// The far side's region past the message must stay untouched.
			fill(b.mr.Buf()[65536+size:][:256], -seed)
			guard := bytes.Clone(b.mr.Buf()[65536+size:][:256])
			b.sync()
			imm := uint32(0xc0de0000 + seed)
			recv := op == verbs.WRSend || op == verbs.WRSendWithImm || op == verbs.WRWriteWithImm
			if recv {
				// A WRITE with immediate consumes a receive too (IBA
				// 9.4.3); its buffer is not written.
				n := size + 256
				if op == verbs.WRWriteWithImm {
					n = 0
				}
				if err := b.q.PostRecv(&verbs.RecvWR{ID: uint64(seed), SGL: sgl(b.mr, 65536, n)}); err != nil {
					t.Fatalf("%s: post recv: %v", name, err)
				}
			}
			wr := verbs.SendWR{ID: uint64(seed), Opcode: op, Flags: verbs.SendSignaled, SGL: sgl(a.mr, 0, size),
				Imm: imm, RemoteAddr: b.mr.Addr() + 65536, RKey: b.mr.RKey()}
			if err := a.q.PostSend(&wr); err != nil {
				t.Fatalf("%s: post send: %v", name, err)
			}
			wc := a.next(ctx, t, name)
			wantOp := map[verbs.WROpcode]verbs.WCOpcode{verbs.WRSend: verbs.WCSend, verbs.WRSendWithImm: verbs.WCSend,
				verbs.WRWrite: verbs.WCWrite, verbs.WRWriteWithImm: verbs.WCWrite, verbs.WRRead: verbs.WCRead}[op]
			if wc.WRID != uint64(seed) || wc.Opcode != wantOp {
				t.Fatalf("%s: send completion %+v", name, wc)
			}
			if op == verbs.WRRead && wc.ByteLen != uint32(size) {
				t.Fatalf("%s: READ completion of %d bytes", name, wc.ByteLen)
			}
			if recv {
				rc := b.next(ctx, t, name+" receive")
				wantRecv := verbs.WCRecv
				if op == verbs.WRWriteWithImm {
					wantRecv = verbs.WCRecvRDMAWithImm
				}
				if rc.WRID != uint64(seed) || rc.Opcode != wantRecv || rc.ByteLen != uint32(size) || rc.QPN != b.q.QPN() {
					t.Fatalf("%s: receive completion %+v", name, rc)
				}
				hasImm := rc.Flags&verbs.WCWithImm != 0
				if withImm := op != verbs.WRSend; hasImm != withImm || withImm && rc.Imm != imm {
					t.Fatalf("%s: receive completion %+v, want immediate %#x", name, rc, imm)
				}
			}
			b.sync()
			if !bytes.Equal(dst, src) {
				t.Fatalf("%s: data differs", name)
			}
			if op != verbs.WRRead && !bytes.Equal(b.mr.Buf()[65536+size:][:256], guard) {
				t.Fatalf("%s: bytes past the message were written", name)
			}
		}
	}

	// Atomics on an 8-byte word of B's region; the original value lands
	// in A's region.
	word := b.mr.Buf()[1024:1032]
	orig := a.mr.Buf()[2048:2056]
	atomic := func(name string, wr verbs.SendWR, wantOrig, wantWord uint64) {
		t.Helper()
		wr.Flags, wr.SGL, wr.RemoteAddr, wr.RKey = verbs.SendSignaled, []verbs.SGE{a.mr.SGE(2048, 8)}, b.mr.Addr()+1024, b.mr.RKey()
		clear(orig)
		b.sync()
		if err := a.q.PostSend(&wr); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if wc := a.next(ctx, t, name); wc.WRID != wr.ID || wc.ByteLen != 8 {
			t.Fatalf("%s: completion %+v", name, wc)
		}
		if got := binary.LittleEndian.Uint64(orig); got != wantOrig {
			t.Fatalf("%s: original %#x, want %#x", name, got, wantOrig)
		}
		b.sync()
		if got := binary.LittleEndian.Uint64(word); got != wantWord {
			t.Fatalf("%s: remote word %#x, want %#x", name, got, wantWord)
		}
	}
	binary.LittleEndian.PutUint64(word, 0x1122334455667788)
	atomic("fetch-add", verbs.SendWR{ID: 1001, Opcode: verbs.WRFetchAdd, CompareAdd: 0x10}, 0x1122334455667788, 0x1122334455667798)
	atomic("compare-swap hit", verbs.SendWR{ID: 1002, Opcode: verbs.WRCompareSwap, CompareAdd: 0x1122334455667798, Swap: 42}, 0x1122334455667798, 42)
	atomic("compare-swap miss", verbs.SendWR{ID: 1003, Opcode: verbs.WRCompareSwap, CompareAdd: 7, Swap: 99}, 42, 42)
	atomic("fetch-add wraps", verbs.SendWR{ID: 1004, Opcode: verbs.WRFetchAdd, CompareAdd: ^uint64(0) - 41}, 42, 0)

	if c := a.d.Counters(); c.Retransmits != 0 || c.TxErrors != 0 {
		t.Logf("device A: %d retransmits, %d transmit errors", c.Retransmits, c.TxErrors)
	}
}
