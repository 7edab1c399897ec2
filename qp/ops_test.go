package qp

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"
)

func fill(b []byte, seed int) {
	for i := range b {
		b[i] = byte(seed*131 + i*7 + i>>8)
	}
}

// TestEveryOpEverySize runs each operation at sizes 0, 1, MTU-1, MTU,
// MTU+1 and 1 MiB for every path MTU over a perfect pipe, and checks the
// data byte for byte and the completions' fields.
func TestEveryOpEverySize(t *testing.T) {
	for _, mtu := range []int{256, 512, 1024, 2048, 4096} {
		t.Run(fmt.Sprint(mtu), func(t *testing.T) {
			p := newPair(t, pairConfig{mtu: mtu, mem: 4 << 20, retry: 7, rnrRetry: 7})
			a, b := p.a, p.b
			sizes := []int{0, 1, mtu - 1, mtu, mtu + 1, 1 << 20}
			const src, dst = 0, 2 << 20 // source at a, target at b
			for _, op := range []WROpcode{WRSend, WRSendWithImm, WRWrite, WRWriteWithImm, WRRead} {
				for i, n := range sizes {
					fill(a.mem[src:src+n], i+int(op)*10)
					fill(b.mem[dst:dst+n], 1000+i)
					clear(b.mem[dst+n : dst+n+64])
					clear(a.mem[src+n : src+n+64])
					want := append([]byte(nil), a.mem[src:src+n]...)
					if op == WRRead {
						want = append([]byte(nil), b.mem[dst:dst+n]...)
					}
					consumes := op == WRSend || op == WRSendWithImm || op == WRWriteWithImm
					if consumes {
						if err := b.qp.PostRecv(&RecvWR{ID: 77, SGL: []SGE{b.sge(dst, n+64)}}); err != nil {
							t.Fatal(err)
						}
					}
					wr := &SendWR{ID: uint64(i), Opcode: op, Flags: FlagSignaled, Imm: 0x01020304 + uint32(i),
						SGL: []SGE{a.sge(src, n)}, RemoteAddr: memBase + dst, RKey: b.mr.RKey}
					if err := a.qp.PostSend(p.now, wr); err != nil {
						t.Fatal(err)
					}
					p.run(func() bool { return a.scq.Len() == 1 && (!consumes || b.rcq.Len() == 1) })
					wc := a.scq.ring[a.scq.head&a.scq.mask]
					a.scq.Poll(a.wc[:1])
					if wc.Status != WCSuccess || wc.WRID != uint64(i) || wc.Opcode != wcOpcodeOf[op] || wc.ByteLen != uint32(n) || wc.QPN != a.qp.QPN() {
						t.Fatalf("%v %d: send completion %+v", op, n, wc)
					}
					if consumes {
						b.rcq.Poll(b.wc[:1])
						rc := b.wc[0]
						wantOp, wantFlags := WCRecv, WCFlags(0)
						if op == WRWriteWithImm {
							wantOp = WCRecvRDMAWithImm
						}
						if op != WRSend {
							wantFlags = WCWithImm
						}
						if rc.Status != WCSuccess || rc.WRID != 77 || rc.Opcode != wantOp || rc.ByteLen != uint32(n) || rc.Flags != wantFlags ||
							(wantFlags != 0 && rc.Imm != 0x01020304+uint32(i)) || rc.SrcQP != a.qp.QPN() {
							t.Fatalf("%v %d: receive completion %+v", op, n, rc)
						}
					}
					got := b.mem[dst : dst+n]
					if op == WRRead {
						got = a.mem[src : src+n]
					}
					if !bytes.Equal(got, want) {
						t.Fatalf("%v %d: data differs", op, n)
					}
					if !allZero(b.mem[dst+n:dst+n+64]) || !allZero(a.mem[src+n:src+n+64]) {
						t.Fatalf("%v %d: wrote past the end", op, n)
					}
				}
			}
			// Atomics: fetch-and-add then compare-and-swap, results
			// in host order in the local buffer.
			binary.NativeEndian.PutUint64(b.mem[dst:], 1000)
			post := func(wr *SendWR) Completion {
				t.Helper()
				if err := a.qp.PostSend(p.now, wr); err != nil {
					t.Fatal(err)
				}
				p.run(func() bool { return a.scq.Len() == 1 })
				a.scq.Poll(a.wc[:1])
				return a.wc[0]
			}
			wc := post(&SendWR{ID: 1, Opcode: WRFetchAdd, Flags: FlagSignaled, SGL: []SGE{a.sge(src, 8)}, RemoteAddr: memBase + dst, RKey: b.mr.RKey, CompareAdd: 5})
			if wc.Status != WCSuccess || wc.Opcode != WCFetchAdd || wc.ByteLen != 8 || binary.NativeEndian.Uint64(a.mem[src:]) != 1000 || binary.NativeEndian.Uint64(b.mem[dst:]) != 1005 {
				t.Fatalf("fetch-and-add: %+v, local %d remote %d", wc, binary.NativeEndian.Uint64(a.mem[src:]), binary.NativeEndian.Uint64(b.mem[dst:]))
			}
			wc = post(&SendWR{ID: 2, Opcode: WRCompareSwap, Flags: FlagSignaled, SGL: []SGE{a.sge(src, 8)}, RemoteAddr: memBase + dst, RKey: b.mr.RKey, CompareAdd: 1005, Swap: 9})
			if wc.Status != WCSuccess || wc.Opcode != WCCompareSwap || binary.NativeEndian.Uint64(a.mem[src:]) != 1005 || binary.NativeEndian.Uint64(b.mem[dst:]) != 9 {
				t.Fatalf("compare-and-swap: %+v", wc)
			}
			wc = post(&SendWR{ID: 3, Opcode: WRCompareSwap, Flags: FlagSignaled, SGL: []SGE{a.sge(src, 8)}, RemoteAddr: memBase + dst, RKey: b.mr.RKey, CompareAdd: 1, Swap: 2})
			if wc.Status != WCSuccess || binary.NativeEndian.Uint64(a.mem[src:]) != 9 || binary.NativeEndian.Uint64(b.mem[dst:]) != 9 {
				t.Fatalf("failed compare-and-swap changed memory: %+v", wc)
			}
			if st := a.e.Stats(); st.Retransmits != 0 || st.Timeouts != 0 {
				t.Errorf("retransmits on a perfect wire: %+v", st)
			}
		})
	}
}

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

// A send completion is written into its CQ entry field by field: every
// field of a reused entry is overwritten, none left from before.
func TestSendCompletionOverwritesEntry(t *testing.T) {
	p := newPair(t, pairConfig{mtu: 1024, retry: 7, rnrRetry: 7})
	for i := range p.a.scq.ring {
		p.a.scq.ring[i] = Completion{WRID: ^uint64(0), Status: 0x7f, Opcode: 0x7f, Flags: 0x7f, ByteLen: ^uint32(0),
			Imm: ^uint32(0), QPN: ^uint32(0), SrcQP: ^uint32(0), SrcGID: netip.MustParseAddr("fd00::1")}
	}
	wr := SendWR{ID: 5, Opcode: WRWrite, Flags: FlagSignaled, SGL: []SGE{p.a.sge(0, 64)}, RemoteAddr: memBase + 128, RKey: p.b.mr.RKey}
	if err := p.a.qp.PostSend(p.now, &wr); err != nil {
		t.Fatal(err)
	}
	p.run(func() bool { return p.a.scq.Len() > 0 })
	var wc [1]Completion
	if p.a.scq.Poll(wc[:]) != 1 {
		t.Fatal("no completion")
	}
	if want := (Completion{WRID: 5, Status: WCSuccess, Opcode: WCWrite, ByteLen: 64, QPN: p.a.qp.QPN()}); wc[0] != want {
		t.Fatalf("completion %+v, want %+v", wc[0], want)
	}
}
