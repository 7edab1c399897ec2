package qp

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/uroce/uroce/pkg/netem"
)

var faultCases = []struct {
	name string
	f    netem.Faults
}{
	{"loss1", netem.Faults{Drop: 0.01}},
	{"loss10", netem.Faults{Drop: 0.10}},
	{"duplicate", netem.Faults{Duplicate: 0.10}},
	{"reorder", netem.Faults{Reorder: 0.10, Delay: 10 * time.Microsecond, Jitter: 30 * time.Microsecond}},
	{"corrupt", netem.Faults{Corrupt: 0.05}},
	{"longdelay", netem.Faults{Delay: 30 * time.Millisecond, Jitter: 40 * time.Millisecond}},
	{"everything", netem.Faults{Drop: 0.05, Duplicate: 0.05, Reorder: 0.05, Corrupt: 0.02, Delay: 5 * time.Microsecond, Jitter: 50 * time.Microsecond}},
}

// plannedWR is one random work request and what it should do.
type plannedWR struct {
	wr       SendWR
	size     int
	slot     int
	recvLen  int
	atomicNo int // which FA or CS of the run this is
}

// TestFaultProperties posts random WR sequences over a faulty pipe and
// checks: every signaled WR completes exactly once, in order, with
// success; every byte lands; no atomic executes twice; no receive buffer
// is written beyond the message.
func TestFaultProperties(t *testing.T) { runFaultCases(t, 0, 0) }

// TestFaultPropertiesSelective holds selective repeat (sr.go) to the same
// properties over the same faults: packets placed ahead of a gap must
// land once, where they belong, and complete in order.
func TestFaultPropertiesSelective(t *testing.T) { runFaultCases(t, RetransSelective, 0) }

// TestFaultPropertiesAckDelay holds QPs that hold the ACKs of SENDs and
// WRITEs with immediate (QPConfig.AckDelay) to the same properties, with
// go-back-N and with selective repeat: a held ACK that is lost,
// duplicated or overtaken, or that times out, must not lose or repeat a
// completion.
func TestFaultPropertiesAckDelay(t *testing.T) {
	t.Run("gobackn", func(t *testing.T) { runFaultCases(t, 0, 30*time.Microsecond) })
	t.Run("selective", func(t *testing.T) { runFaultCases(t, RetransSelective, 30*time.Microsecond) })
}

// runFaultCases runs random WR sequences over each fault case with the
// QPs' retransmission flags and ACK delay, each mode on its own seeds.
func runFaultCases(t *testing.T, retrans RetransFlags, ackDelay time.Duration) {
	runs := 300
	if ackDelay > 0 {
		runs = 100 // beside the runs without it
	}
	if testing.Short() {
		runs = 30
	}
	for ci, fc := range faultCases {
		t.Run(fc.name, func(t *testing.T) {
			t.Parallel()
			for i := range runs {
				seed := uint64(ci)<<32 | uint64(i) | uint64(retrans)<<48
				if ackDelay > 0 {
					seed |= 1 << 56
				}
				runRandomSequence(t, fc.f, seed, retrans, ackDelay)
				if t.Failed() {
					t.Fatalf("seed %#x", seed)
				}
			}
		})
	}
}

func runRandomSequence(t *testing.T, f netem.Faults, seed uint64, retrans RetransFlags, ackDelay time.Duration) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	mtus := []int{256, 512, 1024, 2048, 4096}
	mtu := mtus[rng.IntN(len(mtus))]
	n := 10 + rng.IntN(40)
	slot := 3*mtu + 128
	const atomicArea = 0
	mem := 64 + n*slot
	p := newPair(t, pairConfig{mtu: mtu, faults: f, seed: seed, mem: mem, retry: 7, rnrRetry: 7, sendWR: 64, recvWR: 64, retrans: retrans, ackDelay: ackDelay})
	defer p.close()
	a, b := p.a, p.b
	fill(a.mem, int(seed))
	fill(b.mem, int(seed)+1)
	// B's memory is a canary pattern except where data should land.
	canary := func(i int) byte { return byte(0xa5 ^ i) }
	for i := 64; i < len(b.mem); i++ {
		b.mem[i] = canary(i)
	}
	binary.NativeEndian.PutUint64(b.mem[atomicArea:], 0)
	binary.NativeEndian.PutUint64(b.mem[atomicArea+8:], 0)
	var plan []plannedWR
	fas, css := 0, 0
	for i := range n {
		pw := plannedWR{slot: 64 + i*slot}
		w := &pw.wr
		w.ID = uint64(i)
		w.Opcode = WROpcode(rng.IntN(int(WRFetchAdd) + 1))
		if rng.IntN(10) < 7 || i == n-1 {
			w.Flags |= FlagSignaled
		}
		if rng.IntN(10) == 0 {
			w.Flags |= FlagFence
		}
		switch rng.IntN(4) {
		case 0:
			pw.size = rng.IntN(2)
		case 1:
			pw.size = mtu - 1 + rng.IntN(3)
		default:
			pw.size = rng.IntN(3*mtu + 1)
		}
		off := pw.slot
		w.RemoteAddr, w.RKey = memBase+uint64(off), b.mr.RKey
		switch {
		case w.Opcode.isAtomic():
			pw.size = 8
			w.SGL = []SGE{a.sge(off, 8)}
			if w.Opcode == WRFetchAdd {
				w.RemoteAddr, w.CompareAdd = memBase+atomicArea, 1
				pw.atomicNo = fas
				fas++
			} else {
				w.RemoteAddr, w.CompareAdd, w.Swap = memBase+atomicArea+8, uint64(css), uint64(css+1)
				pw.atomicNo = css
				css++
			}
		case pw.size <= 64 && w.Opcode != WRRead && rng.IntN(3) == 0:
			w.Flags |= FlagInline
			w.InlineData = a.mem[off : off+pw.size]
		case pw.size > 2 && rng.IntN(3) == 0:
			// Two SGEs.
			h := pw.size / 2
			w.SGL = []SGE{a.sge(off, h), a.sge(off+h, pw.size-h)}
		default:
			w.SGL = []SGE{a.sge(off, pw.size)}
		}
		if w.Opcode.hasImm() {
			w.Imm = uint32(seed) + uint32(i)
		}
		if w.Opcode.isSend() || w.Opcode == WRWriteWithImm {
			pw.recvLen = pw.size + rng.IntN(16)
			recvAt := off
			if w.Opcode == WRWriteWithImm {
				recvAt = 64 + (n-1)*slot + 3*mtu // a spare corner; must stay untouched
			}
			if err := b.qp.PostRecv(&RecvWR{ID: uint64(i), SGL: []SGE{b.sge(recvAt, pw.recvLen)}}); err != nil {
				t.Fatal(err)
			}
		}
		plan = append(plan, pw)
	}
	// Expected READ sources: B's slot as it is now.
	readWant := map[int][]byte{}
	for _, pw := range plan {
		if pw.wr.Opcode == WRRead {
			readWant[pw.slot] = append([]byte(nil), b.mem[pw.slot:pw.slot+pw.size]...)
		}
	}
	posted := 0
	var sendWCs, recvWCs []Completion
	p.run(func() bool {
		for posted < len(plan) {
			if err := a.qp.PostSend(p.now, &plan[posted].wr); err != nil {
				break // queue full: post the rest as completions drain it
			}
			posted++
		}
		k := a.scq.Poll(a.wc[:])
		sendWCs = append(sendWCs, a.wc[:k]...)
		k = b.rcq.Poll(b.wc[:])
		recvWCs = append(recvWCs, b.wc[:k]...)
		return posted == len(plan) && a.qp.sq.head == a.qp.sq.tail && b.rcq.Len() == 0 && b.qp.rq.head == b.qp.rq.tail
	})
	// Send completions: the signaled WRs, once each, in order.
	var want []int
	for i, pw := range plan {
		if pw.wr.Flags&FlagSignaled != 0 {
			want = append(want, i)
		}
	}
	if len(sendWCs) != len(want) {
		t.Fatalf("%d send completions, want %d: %+v", len(sendWCs), len(want), sendWCs)
	}
	for k, wc := range sendWCs {
		pw := plan[want[k]]
		if wc.WRID != uint64(want[k]) || wc.Status != WCSuccess || wc.Opcode != wcOpcodeOf[pw.wr.Opcode] || wc.ByteLen != uint32(pw.size) {
			t.Fatalf("send completion %d: %+v, want WR %d %v", k, wc, want[k], pw.wr.Opcode)
		}
	}
	// Receive completions, in order, and the data.
	k := 0
	touched := map[int]bool{}
	for i, pw := range plan {
		src := a.mem[pw.slot : pw.slot+pw.size]
		switch op := pw.wr.Opcode; {
		case op.isSend() || op == WRWriteWithImm:
			if k >= len(recvWCs) {
				t.Fatalf("missing receive completion for WR %d", i)
			}
			wc := recvWCs[k]
			k++
			if wc.WRID != uint64(i) || wc.Status != WCSuccess || wc.ByteLen != uint32(pw.size) || (op.hasImm() && (wc.Imm != pw.wr.Imm || wc.Flags&WCWithImm == 0)) {
				t.Fatalf("receive completion for WR %d: %+v", i, wc)
			}
			if op.isSend() {
				if !bytes.Equal(b.mem[pw.slot:pw.slot+pw.size], src) {
					t.Fatalf("WR %d: SEND data differs", i)
				}
				markTouched(touched, pw.slot, pw.size)
			} else {
				if !bytes.Equal(b.mem[pw.slot:pw.slot+pw.size], src) {
					t.Fatalf("WR %d: WRITE data differs", i)
				}
				markTouched(touched, pw.slot, pw.size)
			}
		case op.isWrite():
			if !bytes.Equal(b.mem[pw.slot:pw.slot+pw.size], src) {
				t.Fatalf("WR %d: WRITE data differs", i)
			}
			markTouched(touched, pw.slot, pw.size)
		case op == WRRead:
			if !bytes.Equal(src, readWant[pw.slot]) {
				t.Fatalf("WR %d: READ data differs", i)
			}
		case op == WRFetchAdd, op == WRCompareSwap:
			if got := binary.NativeEndian.Uint64(src); got != uint64(pw.atomicNo) {
				t.Fatalf("WR %d: atomic %v #%d returned %d", i, op, pw.atomicNo, got)
			}
		}
	}
	if k != len(recvWCs) {
		t.Fatalf("%d extra receive completions", len(recvWCs)-k)
	}
	if got := binary.NativeEndian.Uint64(b.mem[atomicArea:]); got != uint64(fas) {
		t.Fatalf("counter %d after %d fetch-and-adds: an atomic ran twice or not at all", got, fas)
	}
	if got := binary.NativeEndian.Uint64(b.mem[atomicArea+8:]); got != uint64(css) {
		t.Fatalf("swap word %d after %d compare-and-swaps", got, css)
	}
	for i := 64; i < len(b.mem); i++ {
		if !touched[i] && b.mem[i] != canary(i) {
			t.Fatalf("byte %d of the responder's memory written outside any message", i)
		}
	}
	if t.Failed() {
		t.Log(fmt.Sprintf("mtu %d, %d WRs", mtu, n))
	}
}

func markTouched(m map[int]bool, off, n int) {
	for i := off; i < off+n; i++ {
		m[i] = true
	}
}
