package qp

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/pkg/link"
	"github.com/uroce/uroce/pkg/link/pipe"
	"github.com/uroce/uroce/pkg/netem"
)

// ucEnd is one end of a UC test: an engine with one UC QP and a region.
type ucEnd struct {
	port     *fakePort
	e        *Engine
	qp       *QP
	scq, rcq *CQ
	mem      []byte
	mr       *MR
	addr     netip.Addr
}

// ucPair joins two UC QPs through fakePorts: the test moves each packet
// A sends to B itself (deliver), so it can drop or repeat any of them.
type ucPair struct {
	t    *testing.T
	now  time.Time
	a, b *ucEnd
}

const ucMTU = 1024

var ucAddrA, ucAddrB = netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")

func newUCEnd(t testing.TB, port Port, addr netip.Addr, recvWR int) *ucEnd {
	t.Helper()
	s := &ucEnd{e: NewEngine(port), scq: NewCQ(1024), rcq: NewCQ(1024), addr: addr}
	if fp, ok := port.(*fakePort); ok {
		s.port = fp
	}
	var err error
	s.qp, err = s.e.CreateQP(QPConfig{Type: QPTypeUC, PD: 1, SendCQ: s.scq, RecvCQ: s.rcq, MaxSendWR: 256,
		MaxRecvWR: recvWR, MaxSendSGE: 2, MaxRecvSGE: 2, MaxInline: 64})
	if err != nil {
		t.Fatal(err)
	}
	s.mem = make([]byte, 1<<20)
	if s.mr, err = s.e.MRs.Register(1, s.mem, memBase, accessAll); err != nil {
		t.Fatal(err)
	}
	return s
}

// connectUC takes s to RTS toward peer with the attributes
// ibv_uc_pingpong gives: no timeout, retry counts or READ credits.
func connectUC(t testing.TB, s, peer *ucEnd, sq, rq uint32, access Access) {
	t.Helper()
	steps := []struct {
		a Attr
		m AttrMask
	}{
		{Attr{State: StateInit, AccessFlags: access}, AttrState | AttrAccessFlags | AttrPKeyIndex | AttrPort},
		{Attr{State: StateRTR, DestAddr: peer.addr, PathMTU: ucMTU, DestQPN: peer.qp.QPN(), RQPSN: rq},
			AttrState | AttrAV | AttrPathMTU | AttrDestQPN | AttrRQPSN},
		{Attr{State: StateRTS, SQPSN: sq}, AttrState | AttrSQPSN},
	}
	for _, st := range steps {
		if err := s.qp.Modify(&st.a, st.m); err != nil {
			t.Fatal(err)
		}
	}
}

func newUCPair(t *testing.T, access Access) *ucPair {
	p := &ucPair{t: t, now: time.Unix(1e6, 0)}
	p.a = newUCEnd(t, &fakePort{free: -1, size: 4200}, ucAddrA, 64)
	p.b = newUCEnd(t, &fakePort{free: -1, size: 4200}, ucAddrB, 64)
	// PSNs near the wrap, so messages cross it.
	connectUC(t, p.a, p.b, 0xfffffe, 0x500, access)
	connectUC(t, p.b, p.a, 0x500, 0xfffffe, access)
	return p
}

// sent runs A's engine and returns the packets it sent, taken off its
// port.
func (p *ucPair) sent() []*link.Packet {
	p.a.e.Process(p.now)
	out := p.a.port.sent
	p.a.port.sent = nil
	return out
}

// deliver hands B the packets, as received from A.
func (p *ucPair) deliver(pkts ...*link.Packet) {
	in := make([]*link.Packet, len(pkts))
	for i, lp := range pkts {
		in[i] = &link.Packet{Buf: lp.Buf, Off: lp.Off, Len: lp.Len, Remote: ucAddrA, Local: ucAddrB}
	}
	p.b.e.Receive(p.now, in)
	p.b.e.Process(p.now)
}

func (s *ucEnd) sge(off, n int) SGE {
	return SGE{Addr: memBase + uint64(off), Length: uint32(n), LKey: s.mr.LKey}
}

func (s *ucEnd) poll(c *CQ) []Completion {
	var wc [64]Completion
	n := c.Poll(wc[:])
	return append([]Completion(nil), wc[:n]...)
}

func (p *ucPair) post(wr *SendWR) {
	p.t.Helper()
	if err := p.a.qp.PostSend(p.now, wr); err != nil {
		p.t.Fatal(err)
	}
}

func (p *ucPair) postRecv(id uint64, off, n int) {
	p.t.Helper()
	if err := p.b.qp.PostRecv(&RecvWR{ID: id, SGL: []SGE{p.b.sge(off, n)}}); err != nil {
		p.t.Fatal(err)
	}
}

// TestUCOps sends each UC operation and checks the packets, the data and
// both sides' completions: the sender completes at once, with no ACK; the
// receiver completes what consumes a receive WQE.
func TestUCOps(t *testing.T) {
	for _, c := range []struct {
		name    string
		op      WROpcode
		n       int
		opcodes []bth.Opcode
		recv    bool // completes a receive
	}{
		{"send only", WRSend, 100, []bth.Opcode{bth.UCSendOnly}, true},
		{"send empty", WRSend, 0, []bth.Opcode{bth.UCSendOnly}, true},
		{"send three", WRSend, 2*ucMTU + 5, []bth.Opcode{bth.UCSendFirst, bth.UCSendMiddle, bth.UCSendLast}, true},
		{"send imm", WRSendWithImm, 10, []bth.Opcode{bth.UCSendOnlyImm}, true},
		{"send imm two", WRSendWithImm, ucMTU + 1, []bth.Opcode{bth.UCSendFirst, bth.UCSendLastImm}, true},
		{"write only", WRWrite, 64, []bth.Opcode{bth.UCWriteOnly}, false},
		{"write three", WRWrite, 3 * ucMTU, []bth.Opcode{bth.UCWriteFirst, bth.UCWriteMiddle, bth.UCWriteLast}, false},
		{"write imm", WRWriteWithImm, 7, []bth.Opcode{bth.UCWriteOnlyImm}, true},
		{"write imm two", WRWriteWithImm, 2 * ucMTU, []bth.Opcode{bth.UCWriteFirst, bth.UCWriteLastImm}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newUCPair(t, accessAll)
			fill(p.a.mem[:c.n], 7)
			p.postRecv(42, 0x40000, 4*ucMTU)
			p.post(&SendWR{ID: 1, Opcode: c.op, Flags: FlagSignaled | FlagSolicited, SGL: []SGE{p.a.sge(0, c.n)},
				Imm: 0xabcd, RemoteAddr: memBase + 0x10000, RKey: p.b.mr.RKey})
			pkts := p.sent()
			if len(pkts) != len(c.opcodes) {
				t.Fatalf("sent %d packets, want %d", len(pkts), len(c.opcodes))
			}
			var pk bth.Packet
			for i, lp := range pkts {
				if err := pk.Decode(lp.RoCE()); err != nil {
					t.Fatal(err)
				}
				h := pk.BTH()
				if pk.Opcode() != c.opcodes[i] || h.AckReq() || h.DestQP() != p.b.qp.QPN() || h.PSN() != bth.PSN(0xfffffe).Add(i) {
					t.Errorf("packet %d: %v psn %#x ackreq %v dest %#x", i, pk.Opcode(), h.PSN(), h.AckReq(), h.DestQP())
				}
				if last := i == len(pkts)-1; h.SE() != last {
					t.Errorf("packet %d: SE %v", i, h.SE())
				}
			}
			// Complete before anything comes back: UC has no ACK.
			if wc := p.a.poll(p.a.scq); len(wc) != 1 || wc[0].Status != WCSuccess || wc[0].WRID != 1 ||
				wc[0].ByteLen != uint32(c.n) || wc[0].Opcode != wcOpcodeOf[c.op] {
				t.Fatalf("send completions %+v", wc)
			}
			p.deliver(pkts...)
			if n := len(p.b.port.sent); n != 0 {
				t.Fatalf("responder sent %d packets", n)
			}
			dst := p.b.mem[0x40000:]
			if c.op.isWrite() {
				dst = p.b.mem[0x10000:]
			}
			if !bytes.Equal(dst[:c.n], p.a.mem[:c.n]) {
				t.Error("data differs")
			}
			wc := p.b.poll(p.b.rcq)
			if !c.recv {
				if len(wc) != 0 {
					t.Fatalf("receive completions %+v", wc)
				}
				return
			}
			want := Completion{WRID: 42, Opcode: WCRecv, ByteLen: uint32(c.n), QPN: p.b.qp.QPN(), SrcQP: p.a.qp.QPN()}
			if c.op.hasImm() {
				want.Imm, want.Flags = 0xabcd, WCWithImm
			}
			if c.op == WRWriteWithImm {
				want.Opcode = WCRecvRDMAWithImm
			}
			if len(wc) != 1 || wc[0] != want {
				t.Fatalf("receive completions %+v, want %+v", wc, want)
			}
		})
	}
}

// TestUCLoss checks IBA 9.8.2's sequence rule as rxe applies it: a
// message that lost a packet, or got one twice, is dropped whole and its
// receive WQE takes the next message; a FIRST or ONLY packet resumes.
func TestUCLoss(t *testing.T) {
	const n = 3 * ucMTU // three packets
	for _, c := range []struct {
		name string
		op   WROpcode
		// keep picks, from the first message's three packets, what B
		// gets, in order.
		keep []int
		// whole: the first message still arrives (a repeated FIRST
		// starts it again).
		whole bool
	}{
		{"middle lost", WRSend, []int{0, 2}, false},
		{"last lost", WRSend, []int{0, 1}, false},
		{"first lost", WRSend, []int{1, 2}, false},
		{"middle twice", WRSend, []int{0, 1, 1, 2}, false},
		{"first twice", WRSend, []int{0, 0, 1, 2}, true},
		{"write middle lost", WRWriteWithImm, []int{0, 2}, false},
		{"write last lost", WRWriteWithImm, []int{0, 1}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newUCPair(t, accessAll)
			fill(p.a.mem[:2*n], 3)
			p.postRecv(1, 0x40000, 4*ucMTU)
			p.postRecv(2, 0x48000, 4*ucMTU)
			for i := range 2 {
				p.post(&SendWR{ID: uint64(i), Opcode: c.op, SGL: []SGE{p.a.sge(i*n, n)}, Imm: uint32(i),
					RemoteAddr: memBase + 0x10000 + uint64(i*n), RKey: p.b.mr.RKey})
			}
			pkts := p.sent()
			if len(pkts) != 6 {
				t.Fatalf("sent %d packets", len(pkts))
			}
			var first []*link.Packet
			for _, i := range c.keep {
				first = append(first, pkts[i])
			}
			p.deliver(first...)
			wc := p.b.poll(p.b.rcq)
			if c.whole != (len(wc) == 1) {
				t.Fatalf("first message's completions %+v", wc)
			}
			p.deliver(pkts[3:]...)
			wc = append(wc, p.b.poll(p.b.rcq)...)
			// The second message lands in the receive WQE the first
			// was filling, from its start.
			last := &wc[len(wc)-1]
			if len(wc) != 1+btoi(c.whole) || last.Status != WCSuccess || last.WRID != uint64(1+btoi(c.whole)) || last.ByteLen != n ||
				c.op.hasImm() && last.Imm != 1 {
				t.Fatalf("completions %+v", wc)
			}
			got, want := p.b.mem[0x40000+0x8000*btoi(c.whole):][:n], p.a.mem[n:2*n]
			if c.op.isWrite() {
				got = p.b.mem[0x10000+n : 0x10000+2*n]
			}
			if !bytes.Equal(got, want) {
				t.Error("second message's data differs")
			}
			if len(p.b.port.sent) != 0 || p.b.qp.State() != StateRTS {
				t.Fatalf("responder sent %d packets, state %s", len(p.b.port.sent), p.b.qp.State())
			}
		})
	}
}

// TestUCDuplicateOnly checks that a repeated ONLY packet is taken as a new
// message, as rxe's check_psn takes every FIRST or ONLY packet: UC does
// not detect duplicates (IBA 9.8.2), and it has no retransmissions that
// would make one.
func TestUCDuplicateOnly(t *testing.T) {
	p := newUCPair(t, accessAll)
	p.postRecv(1, 0x40000, 64)
	p.postRecv(2, 0x41000, 64)
	p.post(&SendWR{ID: 1, Opcode: WRSend, SGL: []SGE{p.a.sge(0, 8)}})
	pkts := p.sent()
	p.deliver(pkts[0], pkts[0])
	if wc := p.b.poll(p.b.rcq); len(wc) != 2 || wc[0].WRID != 1 || wc[1].WRID != 2 {
		t.Fatalf("completions %+v", wc)
	}
}

// TestUCDrops checks the errors RC answers with a NAK drop the message
// silently on UC (class D) and leave the QP in RTS.
func TestUCDrops(t *testing.T) {
	t.Run("no receive WQE", func(t *testing.T) {
		p := newUCPair(t, accessAll)
		p.post(&SendWR{ID: 1, Opcode: WRSend, SGL: []SGE{p.a.sge(0, 3*ucMTU)}})
		p.deliver(p.sent()...)
		p.postRecv(1, 0x40000, 64)
		p.post(&SendWR{ID: 2, Opcode: WRSend, SGL: []SGE{p.a.sge(0, 8)}})
		p.deliver(p.sent()...)
		if wc := p.b.poll(p.b.rcq); len(wc) != 1 || wc[0].ByteLen != 8 {
			t.Fatalf("completions %+v", wc)
		}
	})
	t.Run("bad rkey", func(t *testing.T) {
		p := newUCPair(t, accessAll)
		p.post(&SendWR{ID: 1, Opcode: WRWrite, SGL: []SGE{p.a.sge(0, 8)}, RemoteAddr: memBase, RKey: p.b.mr.RKey + 1})
		p.deliver(p.sent()...)
		if p.b.qp.Counters().Dropped != 1 {
			t.Errorf("dropped %d", p.b.qp.Counters().Dropped)
		}
	})
	t.Run("no remote write", func(t *testing.T) {
		p := newUCPair(t, AccessLocalWrite)
		p.post(&SendWR{ID: 1, Opcode: WRWrite, SGL: []SGE{p.a.sge(0, 8)}, RemoteAddr: memBase, RKey: p.b.mr.RKey})
		p.a.mem[0] = 1
		p.deliver(p.sent()...)
		if p.b.mem[0] != 0 || p.b.qp.Counters().Dropped != 1 {
			t.Errorf("written %d, dropped %d", p.b.mem[0], p.b.qp.Counters().Dropped)
		}
	})
	t.Run("too long", func(t *testing.T) {
		p := newUCPair(t, accessAll)
		p.postRecv(1, 0x40000, 16)
		p.post(&SendWR{ID: 1, Opcode: WRSend, SGL: []SGE{p.a.sge(0, 32)}})
		p.post(&SendWR{ID: 2, Opcode: WRSend, SGL: []SGE{p.a.sge(0, 16)}})
		p.deliver(p.sent()...)
		if wc := p.b.poll(p.b.rcq); len(wc) != 1 || wc[0].ByteLen != 16 || wc[0].Status != WCSuccess {
			t.Fatalf("completions %+v", wc)
		}
	})
}

// TestUCRefusesReadAtomic checks READ and atomics fail at post time with
// ErrBadWR (rxe: EINVAL from ibv_post_send), and nothing is queued.
func TestUCRefusesReadAtomic(t *testing.T) {
	p := newUCPair(t, accessAll)
	for _, op := range []WROpcode{WRRead, WRCompareSwap, WRFetchAdd} {
		err := p.a.qp.PostSend(p.now, &SendWR{ID: 1, Opcode: op, SGL: []SGE{p.a.sge(0, 8)}, RemoteAddr: memBase, RKey: p.b.mr.RKey})
		if !errors.Is(err, ErrBadWR) {
			t.Errorf("%s: %v", op, err)
		}
	}
	if pk := p.sent(); len(pk) != 0 || p.a.qp.Counters().PostedSends != 0 {
		t.Errorf("sent %d, posted %d", len(pk), p.a.qp.Counters().PostedSends)
	}
}

// TestUCModify checks the UC transitions: RC's path and PSNs, none of the
// ACK and READ attributes (IBA 11.2.4.2, rdma-core's qp_state_table).
func TestUCModify(t *testing.T) {
	e := NewEngine(&fakePort{free: -1, size: 4200})
	cq := NewCQ(4)
	q, err := e.CreateQP(QPConfig{Type: QPTypeUC, SendCQ: cq, RecvCQ: cq, MaxSendWR: 1, MaxRecvWR: 1})
	if err != nil {
		t.Fatal(err)
	}
	if q.Config().Type.String() != "UC" {
		t.Errorf("type %s", q.Config().Type)
	}
	must := func(a Attr, m AttrMask) {
		t.Helper()
		if err := q.Modify(&a, m); err != nil {
			t.Fatal(err)
		}
	}
	mustFail := func(a Attr, m AttrMask, want error) {
		t.Helper()
		if err := q.Modify(&a, m); !errors.Is(err, want) {
			t.Fatalf("%v, want %v", err, want)
		}
	}
	must(Attr{State: StateInit}, AttrState|AttrAccessFlags)
	rtr := Attr{State: StateRTR, DestAddr: ucAddrB, PathMTU: 1024, DestQPN: 0x20, RQPSN: 5}
	mustFail(rtr, AttrState|AttrAV|AttrPathMTU|AttrDestQPN|AttrRQPSN|AttrMaxDestRdAtomic, ErrBadAttr)
	mustFail(rtr, AttrState|AttrAV|AttrPathMTU|AttrDestQPN|AttrMinRNRTimer, ErrMissingAttr)
	must(rtr, AttrState|AttrAV|AttrPathMTU|AttrDestQPN|AttrRQPSN)
	mustFail(Attr{State: StateRTS, SQPSN: 1}, AttrState|AttrSQPSN|AttrTimeout, ErrBadAttr)
	mustFail(Attr{State: StateRTS, SQPSN: 1}, AttrState|AttrSQPSN|AttrRetryCnt|AttrRNRRetry|AttrMaxQPRdAtomic, ErrBadAttr)
	mustFail(Attr{State: StateRTS}, AttrState, ErrMissingAttr)
	must(Attr{State: StateRTS, SQPSN: 1}, AttrState|AttrSQPSN)
	must(Attr{State: StateRTS, AccessFlags: AccessRemoteWrite}, AttrState|AttrAccessFlags)
	must(Attr{State: StateSQD}, AttrState)
	must(Attr{State: StateRTS}, AttrState)
}

// TestUCWrongService checks a UC QP takes only UC opcodes, and an RC QP
// none (rxe's check_type_state).
func TestUCWrongService(t *testing.T) {
	p := newUCPair(t, accessAll)
	p.postRecv(1, 0x40000, 64)
	p.post(&SendWR{ID: 1, Opcode: WRSend, SGL: []SGE{p.a.sge(0, 8)}})
	pkts := p.sent()
	b := pkts[0].RoCE()
	b[0] = byte(bth.RCSendOnly)
	p.deliver(pkts...)
	if wc := p.b.poll(p.b.rcq); len(wc) != 0 || p.b.qp.Counters().Dropped != 1 {
		t.Fatalf("completions %+v, dropped %d", wc, p.b.qp.Counters().Dropped)
	}
}

// TestUCLossyPipe is the property over a lossy, duplicating, reordering
// pipe: every message B completes is byte-exact, none is partly
// delivered, and every WR A posts completes successfully, without a
// single ACK.
func TestUCLossyPipe(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 4} {
		t.Run("", func(t *testing.T) { runUCLossy(t, seed) })
	}
}

func runUCLossy(t *testing.T, seed uint64) {
	now := time.Unix(1e6, 0)
	f := netem.Faults{Drop: 0.03, Duplicate: 0.02, Reorder: 0.02}
	la, lb := pipe.New(pipe.Config{A: ucAddrA, B: ucAddrB, MTU: 4200, Buffers: 1024, AtoB: f, BtoA: f, Seed: seed,
		Clock: func() time.Time { return now }})
	t.Cleanup(func() { la.Close(); lb.Close() })
	const msgs, recvs = 400, 512
	a, b := newUCEnd(t, la, ucAddrA, 1), newUCEnd(t, lb, ucAddrB, recvs)
	connectUC(t, a, b, 0x10, 0x20, accessAll)
	connectUC(t, b, a, 0x20, 0x10, accessAll)
	rng := rand.New(rand.NewPCG(seed, 1))
	// Each message carries its number in its first 4 bytes and a
	// pattern of it after: any mix of two messages shows.
	const slot = 8 * ucMTU
	sizes := make([]int, msgs)
	for i := range recvs {
		if err := b.qp.PostRecv(&RecvWR{ID: uint64(i), SGL: []SGE{b.sge(i%64*slot, slot)}}); err != nil {
			t.Fatal(err)
		}
	}
	var rx [64]*link.Packet
	var wc [64]Completion
	got := 0
	sendDone := 0
	step := func() bool {
		did := false
		for _, s := range []struct {
			l *pipe.Link
			e *Engine
		}{{la, a.e}, {lb, b.e}} {
			if n, _ := s.l.Recv(rx[:]); n > 0 {
				s.e.Receive(now, rx[:n])
				s.l.Release(rx[:n])
				did = true
			}
			s.e.Process(now)
		}
		sendDone += a.scq.Poll(wc[:])
		n := b.rcq.Poll(wc[:])
		for _, c := range wc[:n] {
			if c.Status != WCSuccess {
				t.Fatalf("receive %+v", c)
			}
			buf := b.mem[int(c.WRID)%64*slot:][:c.ByteLen]
			if len(buf) < 4 {
				t.Fatalf("short message %+v", c)
			}
			id := int(buf[0]) | int(buf[1])<<8
			if id >= msgs || int(c.ByteLen) != sizes[id] {
				t.Fatalf("message %d of %d bytes, sent %d", id, c.ByteLen, sizes[min(id, msgs-1)])
			}
			want := make([]byte, sizes[id])
			fillMsg(want, id)
			if !bytes.Equal(buf, want) {
				t.Fatalf("message %d differs", id)
			}
		}
		got += n
		return did
	}
	for i := range msgs {
		sizes[i] = 4 + rng.IntN(4*ucMTU)
		off := i % 64 * slot
		fillMsg(a.mem[off:off+sizes[i]], i)
		if err := a.qp.PostSend(now, &SendWR{ID: uint64(i), Opcode: WRSend, Flags: FlagSignaled, SGL: []SGE{a.sge(off, sizes[i])}}); err != nil {
			t.Fatal(err)
		}
		// Let the send go out before its buffer is reused.
		for step() {
		}
		now = now.Add(10 * time.Microsecond)
		la.Advance(now)
		lb.Advance(now)
	}
	for range 1000 {
		now = now.Add(time.Millisecond)
		la.Advance(now)
		lb.Advance(now)
		for step() {
		}
	}
	if sendDone != msgs {
		t.Errorf("%d of %d sends completed", sendDone, msgs)
	}
	if got == 0 || got == msgs {
		t.Errorf("%d of %d messages arrived: the loss did not show", got, msgs)
	}
	if a.qp.Counters().RxPackets != 0 {
		t.Errorf("the sender received %d packets", a.qp.Counters().RxPackets)
	}
	t.Logf("%d of %d messages arrived, %d packets dropped at the responder", got, msgs, b.qp.Counters().Dropped)
}

func fillMsg(b []byte, id int) {
	b[0], b[1] = byte(id), byte(id>>8)
	for i := 2; i < len(b); i++ {
		b[i] = byte(id*7 + i)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// FuzzUCResponder feeds a UC QP a run of arbitrary packets (each behind a
// two-byte length): the engine must never panic, never answer, never
// write outside the writable region, and never complete a receive longer
// than its WQE.
func FuzzUCResponder(f *testing.F) {
	var keys MRTable
	keys.rekey(fuzzKeys)
	// The region below takes slot 1 again, in its second generation.
	key := keys.keys.encrypt(1<<keyGenBits | 2)
	enc := func(op bth.Opcode, psn bth.PSN, pf bth.PacketFields, payload []byte) []byte {
		pf.BTH.Opcode, pf.BTH.PSN, pf.BTH.PKey = op, psn, 0xffff
		b := make([]byte, bth.PacketLen(op, len(payload)))
		if _, err := pf.Encode(b, payload); err != nil {
			f.Fatal(err)
		}
		return append([]byte{byte(len(b) >> 8), byte(len(b))}, b...)
	}
	full := make([]byte, ucMTU)
	reth := bth.PacketFields{RETH: bth.RETHFields{VA: memBase, RKey: key, DMALen: 2 * ucMTU}}
	f.Add(enc(bth.UCSendOnly, 0x20, bth.PacketFields{}, []byte("hello")))
	f.Add(append(enc(bth.UCSendFirst, 0x20, bth.PacketFields{}, full), enc(bth.UCSendLastImm, 0x21, bth.PacketFields{ImmDt: 3}, full[:9])...))
	f.Add(append(enc(bth.UCWriteFirst, 0x20, reth, full), enc(bth.UCWriteLast, 0x22, bth.PacketFields{}, full)...))
	f.Add(append(enc(bth.UCSendFirst, 0x20, bth.PacketFields{}, full), enc(bth.UCWriteOnlyImm, 0x25, reth, full[:4])...))
	f.Fuzz(func(t *testing.T, in []byte) {
		a := newUCEnd(t, &fakePort{free: 64, size: 4200}, ucAddrA, 1)
		b := newUCEnd(t, &fakePort{free: 64, size: 4200}, ucAddrB, 4)
		// One writable region of 8 KiB inside guards.
		if err := b.e.MRs.Deregister(b.mr.LKey); err != nil {
			t.Fatal(err)
		}
		b.e.MRs.rekey(fuzzKeys)
		all := make([]byte, 16384)
		for i := range all {
			all[i] = byte(i*31 + 7)
		}
		before := bytes.Clone(all)
		mr, err := b.e.MRs.Register(1, all[4096:12288], memBase, accessAll)
		if err != nil {
			t.Fatal(err)
		}
		if mr.RKey != key {
			t.Fatalf("key %#x, seeds use %#x", mr.RKey, key)
		}
		b.mr = mr
		connectUC(t, b, a, 0x10, 0x20, accessAll)
		for i := range 4 {
			if err := b.qp.PostRecv(&RecvWR{ID: uint64(i), SGL: []SGE{b.sge(i*1024, 1000)}}); err != nil {
				t.Fatal(err)
			}
		}
		for len(in) >= 2 {
			n := int(in[0])<<8 | int(in[1])
			in = in[2:]
			if n > len(in) {
				n = len(in)
			}
			pkt := bytes.Clone(in[:n])
			in = in[n:]
			if len(pkt) >= bth.BTHLen {
				bth.BTH(pkt).SetDestQP(b.qp.QPN())
			}
			buf := make([]byte, link.Headroom+len(pkt))
			copy(buf[link.Headroom:], pkt)
			b.e.Receive(time.Unix(1, 0), []*link.Packet{{Buf: buf, Off: link.Headroom, Len: len(pkt), Remote: ucAddrA, Local: ucAddrB}})
			b.e.Process(time.Unix(1, 0))
		}
		if len(b.port.sent) != 0 {
			t.Fatalf("the responder sent %d packets", len(b.port.sent))
		}
		if !bytes.Equal(all[:4096], before[:4096]) || !bytes.Equal(all[12288:], before[12288:]) {
			t.Fatal("wrote outside the writable region")
		}
		for _, c := range b.poll(b.rcq) {
			if c.Status == WCSuccess && c.Opcode == WCRecv && c.ByteLen > 1000 {
				t.Fatalf("completion %+v longer than its WQE", c)
			}
		}
	})
}

// BenchmarkUCSend: a UC SEND of 4 KiB at a time over the pipe, posted,
// sent, completed and received: no allocation, as RC's.
func BenchmarkUCSend(b *testing.B) {
	now := time.Unix(1e6, 0)
	la, lb := pipe.New(pipe.Config{A: ucAddrA, B: ucAddrB, MTU: 4200, Buffers: 1024, Clock: func() time.Time { return now }})
	b.Cleanup(func() { la.Close(); lb.Close() })
	a, r := newUCEnd(b, la, ucAddrA, 1), newUCEnd(b, lb, ucAddrB, 4)
	connectUC(b, a, r, 0x10, 0x20, accessAll)
	connectUC(b, r, a, 0x20, 0x10, accessAll)
	wr := SendWR{Opcode: WRSend, Flags: FlagSignaled, SGL: []SGE{a.sge(0, 4096)}}
	rwr := RecvWR{SGL: []SGE{r.sge(0, 4096)}}
	var rx [64]*link.Packet
	var wc [4]Completion
	b.SetBytes(4096)
	b.ReportAllocs()
	for b.Loop() {
		if err := r.qp.PostRecv(&rwr); err != nil {
			b.Fatal(err)
		}
		if err := a.qp.PostSend(now, &wr); err != nil {
			b.Fatal(err)
		}
		a.e.Process(now)
		for r.rcq.Len() == 0 {
			n, _ := lb.Recv(rx[:])
			if n == 0 {
				b.Fatal("nothing arrived")
			}
			r.e.Receive(now, rx[:n])
			lb.Release(rx[:n])
		}
		a.scq.Poll(wc[:])
		r.rcq.Poll(wc[:])
	}
}
