package qp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/pkg/netem"
)

// srqPair is two engines over a seeded pipe with n RC QP pairs; b's QPs
// take their receives from one SRQ.
type srqPair struct {
	p      *pair
	srq    *SRQ
	aqps   []*QP
	bqps   []*QP
	events []AsyncEvent
}

func newSRQPair(t *testing.T, n, srqWR, limit int, cfg pairConfig) *srqPair {
	t.Helper()
	cfg.rnrRetry, cfg.retry = 7, 7
	// newPair's defaults, for the QPs connected here.
	cfg.timeout, cfg.rdAtomic = 14, 16
	if cfg.rnrTimer == 0 {
		cfg.rnrTimer = 1 // 0.01 ms
	}
	p := newPair(t, cfg)
	sp := &srqPair{p: p}
	b := p.b
	b.e.OnAsyncEvent = func(ev AsyncEvent) { sp.events = append(sp.events, ev) }
	var err error
	if sp.srq, err = b.e.CreateSRQ(SRQConfig{PD: 1, MaxWR: srqWR, MaxSGE: 2, Limit: limit}); err != nil {
		t.Fatal(err)
	}
	for range n {
		qa, err := p.a.e.CreateQP(QPConfig{PD: 1, SendCQ: p.a.scq, RecvCQ: p.a.rcq, MaxSendWR: 64, MaxRecvWR: 1, MaxSendSGE: 2})
		if err != nil {
			t.Fatal(err)
		}
		qb, err := b.e.CreateQP(QPConfig{PD: 1, SendCQ: b.scq, RecvCQ: b.rcq, MaxSendWR: 1, SRQ: sp.srq})
		if err != nil {
			t.Fatal(err)
		}
		sa, sb := *p.a, *b
		sa.qp, sb.qp = qa, qb
		p.connect(&sa, &sb, cfg, 0x100)
		p.connect(&sb, &sa, cfg, 0x200)
		sp.aqps, sp.bqps = append(sp.aqps, qa), append(sp.bqps, qb)
	}
	return sp
}

// postSRQ posts receives with IDs from..to-1 into slots of 256 bytes.
func (sp *srqPair) postSRQ(t *testing.T, from, to int) {
	t.Helper()
	for id := from; id < to; id++ {
		off := 1<<19 + id%1024*256
		// Two SGEs, to scatter across.
		wr := RecvWR{ID: uint64(id), SGL: []SGE{sp.p.b.sge(off, 100), sp.p.b.sge(off+100, 156)}}
		if err := sp.srq.PostRecv(&wr); err != nil {
			t.Fatal(err)
		}
	}
}

func payloadOf(qi, seq, n int) []byte {
	b := make([]byte, n)
	binary.BigEndian.PutUint32(b, uint32(qi)<<16|uint32(seq))
	for i := 4; i < n; i++ {
		b[i] = byte(qi*31 + seq*7 + i)
	}
	return b
}

// TestSRQManyQPs: eight RC QPs share one SRQ; every message lands in
// exactly one SRQ WQE, byte for byte, whatever the loss and reordering,
// and the completions name the QP that received it.
func TestSRQManyQPs(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			const nqp, per = 8, 40
			f := netem.Faults{Drop: 0.02, Duplicate: 0.02, Reorder: 0.02}
			sp := newSRQPair(t, nqp, 512, 0, pairConfig{mtu: 1024, seed: seed, faults: f})
			p := sp.p
			sp.postSRQ(t, 0, nqp*per)
			rng := rand.New(rand.NewPCG(seed, 7))
			sent := map[uint32][]byte{}
			for seq := range per {
				for qi, q := range sp.aqps {
					n := 4 + rng.IntN(252)
					msg := payloadOf(qi, seq, n)
					off := (qi*per + seq) * 256
					copy(p.a.mem[off:], msg)
					wr := SendWR{ID: uint64(off), Opcode: WRSend, Flags: FlagSignaled, SGL: []SGE{p.a.sge(off, n)}}
					if err := q.PostSend(p.now, &wr); err != nil {
						t.Fatal(err)
					}
					sent[binary.BigEndian.Uint32(msg)] = msg
				}
			}
			var got []Completion
			p.run(func() bool {
				got = append(got, drain(p.b.rcq)...)
				return len(got) == nqp*per
			})
			seen := map[uint64]bool{}
			qpOf := map[uint32]int{}
			for i, q := range sp.bqps {
				qpOf[q.QPN()] = i
			}
			for _, wc := range got {
				if wc.Status != WCSuccess || seen[wc.WRID] {
					t.Fatalf("completion %+v (seen %v)", wc, seen[wc.WRID])
				}
				seen[wc.WRID] = true
				off := 1<<19 + int(wc.WRID)%1024*256
				data := p.b.mem[off : off+int(wc.ByteLen)]
				key := binary.BigEndian.Uint32(data)
				if !bytes.Equal(sent[key], data) {
					t.Fatalf("WR %d: data of %d bytes does not match message %#x", wc.WRID, len(data), key)
				}
				if qi, ok := qpOf[wc.QPN]; !ok || int(key>>16) != qi {
					t.Fatalf("message %#x completed on QP %d", key, wc.QPN)
				}
				delete(sent, key)
			}
			if len(sent) != 0 || sp.srq.Len() != 0 || sp.srq.Counters.Taken != nqp*per {
				t.Fatalf("%d messages missing, %d WQEs left, %d taken", len(sent), sp.srq.Len(), sp.srq.Counters.Taken)
			}
		})
	}
}

func drain(c *CQ) []Completion {
	var out []Completion
	var buf [64]Completion
	for n := c.Poll(buf[:]); n > 0; n = c.Poll(buf[:]) {
		out = append(out, buf[:n]...)
	}
	return out
}

// TestSRQLimitAndRNR: the armed limit raises one event when fewer than it
// remain, then stays quiet until armed again; an empty SRQ makes the
// responder answer RNR NAKs, and posting to it lets the sender finish.
func TestSRQLimitAndRNR(t *testing.T) {
	sp := newSRQPair(t, 2, 16, 0, pairConfig{mtu: 1024, seed: 1})
	p := sp.p
	sp.postSRQ(t, 0, 10)
	if err := sp.srq.Modify(&SRQAttr{Limit: 4}, SRQLimit); err != nil {
		t.Fatal(err)
	}
	send := func(k int) {
		t.Helper()
		for i := range k {
			q := sp.aqps[i%2]
			wr := SendWR{ID: uint64(i), Opcode: WRSend, Flags: FlagSignaled, SGL: []SGE{p.a.sge(0, 64)}}
			if err := q.PostSend(p.now, &wr); err != nil {
				t.Fatal(err)
			}
		}
	}
	wait := func(n int) {
		t.Helper()
		got := 0
		p.run(func() bool { got += len(drain(p.b.rcq)); return got >= n })
		drain(p.a.scq)
	}
	send(6) // 10 → 4 left: not below the limit
	wait(6)
	if len(sp.events) != 0 || sp.srq.Attr().Limit != 4 {
		t.Fatalf("events %v at 4 left, limit %d", sp.events, sp.srq.Attr().Limit)
	}
	send(1) // 3 left: below 4, one event, disarmed
	wait(1)
	if len(sp.events) != 1 || sp.events[0].Type != EventSRQLimitReached || sp.events[0].SRQ != sp.srq || sp.srq.Attr().Limit != 0 {
		t.Fatalf("events %v, limit %d", sp.events, sp.srq.Attr().Limit)
	}
	send(3) // empties it: no event while disarmed
	wait(3)
	if len(sp.events) != 1 || sp.srq.Len() != 0 {
		t.Fatalf("events %v after emptying", sp.events)
	}
	// Empty: the next SENDs get RNR NAKs until receives are posted.
	send(2)
	deadline := p.now.Add(50 * time.Millisecond)
	for p.now.Before(deadline) && (p.step() || p.advance()) {
	}
	rnr := sp.bqps[0].Counters().RNRNAKsSent + sp.bqps[1].Counters().RNRNAKsSent
	if rnr == 0 || len(drain(p.b.rcq)) != 0 {
		t.Fatalf("no RNR NAK from an empty SRQ (%d)", rnr)
	}
	if err := sp.srq.Modify(&SRQAttr{Limit: 1}, SRQLimit); err != nil {
		t.Fatal(err)
	}
	sp.postSRQ(t, 100, 102)
	wait(2)
	for _, wc := range drain(p.a.scq) {
		if wc.Status != WCSuccess {
			t.Fatalf("send after RNR: %+v", wc)
		}
	}
	if len(sp.events) != 2 {
		t.Fatalf("re-armed limit: %d events", len(sp.events))
	}
}

func TestSRQErrors(t *testing.T) {
	e := NewEngine(nil)
	cq := NewCQ(4)
	for _, c := range []SRQConfig{{MaxWR: 0}, {MaxWR: 4, Limit: 5}, {MaxWR: 4, MaxSGE: -1}} {
		if _, err := e.CreateSRQ(c); !errors.Is(err, ErrBadAttr) {
			t.Errorf("CreateSRQ(%+v): %v", c, err)
		}
	}
	s, err := e.CreateSRQ(SRQConfig{PD: 1, MaxWR: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateQP(QPConfig{PD: 2, SendCQ: cq, RecvCQ: cq, MaxSendWR: 1, SRQ: s}); !errors.Is(err, ErrBadAttr) {
		t.Errorf("QP of another PD: %v", err)
	}
	q, err := e.CreateQP(QPConfig{PD: 1, SendCQ: cq, RecvCQ: cq, MaxSendWR: 1, SRQ: s})
	if err != nil {
		t.Fatal(err)
	}
	q.Modify(&Attr{State: StateInit}, AttrState|AttrAccessFlags|AttrPKeyIndex|AttrPort)
	if err := q.PostRecv(&RecvWR{}); !errors.Is(err, ErrHasSRQ) {
		t.Errorf("PostRecv on a QP with an SRQ: %v", err)
	}
	for range 2 {
		if err := s.PostRecv(&RecvWR{SGL: []SGE{{Length: 1}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PostRecv(&RecvWR{}); !errors.Is(err, ErrQueueFull) {
		t.Errorf("full SRQ: %v", err)
	}
	if err := s.PostRecv(&RecvWR{SGL: make([]SGE, 2)}); err == nil {
		t.Error("two SGEs on a one-SGE SRQ accepted")
	}
	if err := s.Modify(&SRQAttr{Limit: 3}, SRQLimit); !errors.Is(err, ErrBadAttr) {
		t.Errorf("limit beyond max_wr: %v", err)
	}
	if err := s.Modify(&SRQAttr{MaxWR: 8}, SRQMaxWR); !errors.Is(err, ErrBadAttr) {
		t.Errorf("resize: %v", err)
	}
	if err := e.DestroySRQ(s); !errors.Is(err, ErrBusy) {
		t.Errorf("destroy in use: %v", err)
	}
	if err := e.DestroyQP(q); err != nil {
		t.Fatal(err)
	}
	if err := e.DestroySRQ(s); err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateQP(QPConfig{PD: 1, SendCQ: cq, RecvCQ: cq, MaxSendWR: 1, SRQ: s}); !errors.Is(err, ErrBadAttr) {
		t.Errorf("QP on a destroyed SRQ: %v", err)
	}
}

// TestUDProperty: datagrams of random sizes, some with a wrong Q_Key,
// across a pipe that drops, duplicates, reorders and corrupts. UD promises
// nothing about loss or duplicates, so the property is: every delivered
// datagram is byte-exact with a correct GRH, none with a wrong Q_Key is
// delivered, each arriving packet is delivered, dropped or counted at most
// once, and the receiver's counters add up.
func TestUDProperty(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 4} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			f := netem.Faults{Drop: 0.05, Duplicate: 0.05, Reorder: 0.05, Corrupt: 0.02}
			p := newUDPair(t, udConfig{qkey: 0x1234, seed: seed, faults: f})
			a, b := p.a, p.b
			rng := rand.New(rand.NewPCG(seed, 99))
			const n = 600
			ah := &AH{DGID: b.l.Info().Addr}
			recvID := 0
			post := func() {
				for b.qp.rq.tail-b.qp.rq.head < 64 {
					off := recvID % 256 * 2048
					if err := b.qp.PostRecv(&RecvWR{ID: uint64(recvID), SGL: []SGE{b.sge(off, 2048)}}); err != nil {
						t.Fatal(err)
					}
					recvID++
				}
			}
			post()
			wrong := 0
			delivered := 0
			check := func() {
				for _, wc := range b.poll(b.rcq) {
					if wc.Status != WCSuccess || wc.Flags&WCGRH == 0 || wc.SrcQP != a.qp.QPN() {
						t.Fatalf("completion %+v", wc)
					}
					off := int(wc.WRID) % 256 * 2048
					buf := b.mem[off : off+int(wc.ByteLen)]
					roce := bth.BTHLen + bth.DETHLen + int(wc.ByteLen) - GRHLen + -(int(wc.ByteLen)-GRHLen)&3 + bth.ICRCLen
					checkGRH(t, buf[:GRHLen], a.l.Info().Addr, b.l.Info().Addr, 0, roce)
					data := buf[GRHLen:]
					seq := int(binary.BigEndian.Uint32(data))
					if !bytes.Equal(data, udPayload(seq, len(data))) || data[4] != 0 {
						t.Fatalf("datagram %d: %d bytes corrupt or with the wrong Q_Key", seq, len(data))
					}
					delivered++
				}
			}
			for i := range n {
				size := 8 + rng.IntN(1017)
				msg := udPayload(i, size)
				qk := uint32(0x1234)
				if rng.IntN(10) == 0 {
					qk, msg[4] = 0x1235, 1 // marked: must never arrive
					wrong++
				}
				off := i % 256 * 2048
				copy(a.mem[off:], msg)
				wr := SendWR{ID: uint64(i), Opcode: WRSend, SGL: []SGE{a.sge(off, size)}, AH: ah, RemoteQPN: b.qp.QPN(), RemoteQKey: qk}
				if err := a.qp.PostSend(p.now, &wr); err != nil {
					t.Fatal(err)
				}
				a.e.Process(p.now)
				if i%8 == 7 {
					p.settle()
					check()
					post()
				}
			}
			p.settle()
			check()
			c := b.qp.Counters()
			if c.RxPackets != c.CompletedRecvs+c.BadQKey+c.Dropped || uint64(delivered) != c.CompletedRecvs {
				t.Fatalf("received %d packets: %d delivered (%d seen), %d bad Q_Key, %d dropped", c.RxPackets, c.CompletedRecvs, delivered, c.BadQKey, c.Dropped)
			}
			t.Logf("%d sent (%d wrong Q_Key): %+v, pipe %+v", n, wrong, c, a.l.Stats())
			if c.BadQKey == 0 || delivered < n/2 {
				t.Fatalf("%d of %d delivered, %d of %d wrong Q_Keys seen", delivered, n, c.BadQKey, wrong)
			}
		})
	}
}

// udPayload is datagram seq's content: its number, then a pattern.
func udPayload(seq, n int) []byte {
	b := make([]byte, n)
	binary.BigEndian.PutUint32(b, uint32(seq))
	for i := 5; i < n; i++ {
		b[i] = byte(seq*13 + i*3)
	}
	return b
}

// TestUDWithSRQ: a UD QP takes its receives from an SRQ; a datagram too
// large for the SRQ's next WQE is dropped and leaves it there.
func TestUDWithSRQ(t *testing.T) {
	p := newUDPair(t, udConfig{qkey: 5})
	a, b := p.a, p.b
	srq, err := b.e.CreateSRQ(SRQConfig{PD: 1, MaxWR: 4})
	if err != nil {
		t.Fatal(err)
	}
	q, err := b.e.CreateQP(QPConfig{Type: QPTypeUD, PD: 1, SendCQ: b.scq, RecvCQ: b.rcq, MaxSendWR: 1, SRQ: srq})
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range []struct {
		a Attr
		m AttrMask
	}{{Attr{State: StateInit, QKey: 5}, AttrState | AttrQKey}, {Attr{State: StateRTR}, AttrState}} {
		if err := q.Modify(&st.a, st.m); err != nil {
			t.Fatal(err)
		}
	}
	srq.PostRecv(&RecvWR{ID: 1, SGL: []SGE{b.sge(0, GRHLen+10)}})
	srq.PostRecv(&RecvWR{ID: 2, SGL: []SGE{b.sge(4096, GRHLen+100)}})
	send := func(n int) {
		copy(a.mem, udPayload(n, n))
		wr := SendWR{Opcode: WRSend, SGL: []SGE{a.sge(0, n)}, AH: &AH{DGID: b.l.Info().Addr}, RemoteQPN: q.QPN(), RemoteQKey: 5}
		if err := a.qp.PostSend(p.now, &wr); err != nil {
			t.Fatal(err)
		}
		a.e.Process(p.now)
		p.settle()
	}
	send(50) // too large for WQE 1: dropped, WQE 1 stays
	if q.Counters().Dropped != 1 || srq.Len() != 2 {
		t.Fatalf("oversize: %+v, %d WQEs", q.Counters(), srq.Len())
	}
	send(10)
	send(100) // exactly fills WQE 2
	wcs := b.poll(b.rcq)
	if len(wcs) != 2 || wcs[0].WRID != 1 || wcs[0].ByteLen != GRHLen+10 || wcs[1].WRID != 2 || wcs[1].ByteLen != GRHLen+100 || srq.Len() != 0 {
		t.Fatalf("completions %+v, %d WQEs left", wcs, srq.Len())
	}
	if !bytes.Equal(b.mem[4096+GRHLen:4096+GRHLen+100], udPayload(100, 100)) {
		t.Fatal("payload")
	}
}
