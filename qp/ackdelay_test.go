package qp

import (
	"testing"
	"time"
)

// deliver receives what reached s and processes it, returning how many
// packets came in one burst.
func (p *pair) deliver(s *side) int {
	p.a.l.Advance(p.now)
	p.b.l.Advance(p.now)
	n, _ := s.l.Recv(s.rx[:])
	if n > 0 {
		s.e.Receive(p.now, s.rx[:n])
		s.l.Release(s.rx[:n])
	}
	s.e.Process(p.now)
	return n
}

// TestAckDelay checks QPConfig.AckDelay on a request and its answer: the
// ACK of a SEND or WRITE with immediate waits for the answer and leaves in
// the same burst; without an answer it leaves when the delay runs out and
// the next ackSkip are sent at once; an RDMA WRITE's ACK is never held.
func TestAckDelay(t *testing.T) {
	const delay = 20 * time.Microsecond
	for _, c := range []struct {
		name   string
		op     WROpcode
		answer bool // b answers with a SEND at once
		held   bool // b holds a's ACK
	}{
		{"send answered", WRSend, true, true},
		{"write with immediate answered", WRWriteWithImm, true, true},
		{"send unanswered", WRSend, false, true},
		{"write", WRWrite, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newPair(t, pairConfig{mtu: 1024, retry: 7, rnrRetry: 7, ackDelay: delay})
			for _, s := range []*side{p.a, p.b} {
				if err := s.qp.PostRecv(&RecvWR{ID: 1, SGL: []SGE{s.sge(0, 64)}}); err != nil {
					t.Fatal(err)
				}
			}
			wr := SendWR{ID: 7, Opcode: c.op, Flags: FlagSignaled, SGL: []SGE{p.a.sge(128, 32)}, RemoteAddr: memBase + 256, RKey: p.b.mr.RKey, Imm: 9}
			if err := p.a.qp.PostSend(p.now, &wr); err != nil {
				t.Fatal(err)
			}
			p.a.e.Process(p.now)
			if n := p.deliver(p.b); n != 1 {
				t.Fatalf("b received %d packets, want the request", n)
			}
			bSent := p.b.l.Stats().TxPackets
			if held := bSent == 0; held != c.held {
				t.Fatalf("b sent %d packets after the request: held %v, want %v", bSent, held, c.held)
			}
			if !c.held {
				if n := p.deliver(p.a); n != 1 || p.a.scq.Len() != 1 {
					t.Fatalf("a received %d packets, %d completions; want the ACK and one", n, p.a.scq.Len())
				}
				return
			}
			if c.answer {
				p.now = p.now.Add(delay / 2)
				reply := SendWR{ID: 8, Opcode: WRSend, Flags: FlagSignaled, SGL: []SGE{p.b.sge(512, 16)}}
				if err := p.b.qp.PostSend(p.now, &reply); err != nil {
					t.Fatal(err)
				}
				p.b.e.Process(p.now)
				if got := p.b.l.Stats().TxPackets; got != 2 {
					t.Fatalf("b sent %d packets with its answer, want the ACK and the SEND", got)
				}
				if n := p.deliver(p.a); n != 2 {
					t.Fatalf("a received %d packets in one burst, want 2", n)
				}
				if p.a.scq.Len() != 1 || p.a.rcq.Len() != 1 {
					t.Fatalf("a has %d send and %d receive completions, want 1 and 1", p.a.scq.Len(), p.a.rcq.Len())
				}
				if p.b.qp.ack&ackHeld != 0 || p.b.qp.ackTimer.idx >= 0 {
					t.Fatal("b still holds an ACK or its timer after the answer took it")
				}
				return
			}
			// Unanswered: nothing before the delay, the ACK at it.
			p.now = p.now.Add(delay - time.Nanosecond)
			p.b.e.Process(p.now)
			if got := p.b.l.Stats().TxPackets; got != 0 {
				t.Fatalf("b sent %d packets before the delay ran out", got)
			}
			if d, ok := p.b.e.NextDeadline(); !ok || !d.Equal(p.now.Add(time.Nanosecond)) {
				t.Fatalf("b's next deadline %v %v, want the held ACK's", d, ok)
			}
			p.now = p.now.Add(time.Nanosecond)
			p.b.e.Process(p.now)
			if n := p.deliver(p.a); n != 1 || p.a.scq.Len() != 1 {
				t.Fatalf("a received %d packets, %d completions once the delay ran out; want the ACK and one", n, p.a.scq.Len())
			}
			// The next ackSkip SENDs are acknowledged at once, the one
			// after them is held again.
			for i := 0; i <= ackSkip; i++ {
				if err := p.b.qp.PostRecv(&RecvWR{ID: 1, SGL: []SGE{p.b.sge(0, 64)}}); err != nil {
					t.Fatal(err)
				}
				if err := p.a.qp.PostSend(p.now, &wr); err != nil {
					t.Fatal(err)
				}
				p.a.e.Process(p.now)
				before := p.b.l.Stats().TxPackets
				p.deliver(p.b)
				sent := p.b.l.Stats().TxPackets - before
				if want := uint64(1); i == ackSkip {
					want = 0
					if sent != want {
						t.Fatalf("SEND %d after the delay ran out: b sent %d, want it held", i, sent)
					}
				} else if sent != want {
					t.Fatalf("SEND %d after the delay ran out: b sent %d, want its ACK at once", i, sent)
				}
				p.deliver(p.a)
			}
		})
	}
}

// TestAckDelayError checks that a later burst's WRITE, which is
// acknowledged at once, takes a held ACK with it. A QP that stops
// answering with an ACK held is TestAckDelayStop's.
func TestAckDelayError(t *testing.T) {
	const delay = 20 * time.Microsecond
	p := newPair(t, pairConfig{mtu: 1024, retry: 7, rnrRetry: 7, ackDelay: delay})
	if err := p.b.qp.PostRecv(&RecvWR{ID: 1, SGL: []SGE{p.b.sge(0, 64)}}); err != nil {
		t.Fatal(err)
	}
	send := SendWR{ID: 7, Opcode: WRSend, Flags: FlagSignaled, SGL: []SGE{p.a.sge(128, 32)}}
	write := SendWR{ID: 8, Opcode: WRWrite, Flags: FlagSignaled, SGL: []SGE{p.a.sge(128, 32)}, RemoteAddr: memBase + 256, RKey: p.b.mr.RKey}
	for _, wr := range []*SendWR{&send, &write} {
		if err := p.a.qp.PostSend(p.now, wr); err != nil {
			t.Fatal(err)
		}
		p.a.e.Process(p.now)
		p.deliver(p.b)
		p.now = p.now.Add(time.Microsecond)
	}
	if got := p.b.l.Stats().TxPackets; got != 1 {
		t.Fatalf("b sent %d packets, want one ACK for both", got)
	}
	if n := p.deliver(p.a); n != 1 || p.a.scq.Len() != 2 {
		t.Fatalf("a received %d packets, %d completions; want one ACK completing both", n, p.a.scq.Len())
	}
}

// sendToB posts a signaled 32-byte SEND, WR 7, on a and has b receive
// it.
func (p *pair) sendToB(t *testing.T) {
	t.Helper()
	send := SendWR{ID: 7, Opcode: WRSend, Flags: FlagSignaled, SGL: []SGE{p.a.sge(128, 32)}}
	if err := p.a.qp.PostSend(p.now, &send); err != nil {
		t.Fatal(err)
	}
	p.a.e.Process(p.now)
	p.deliver(p.b)
}

// TestAckDelayStop: a QP that stops answering with an ACK held sends it
// first, whether it is moved to ERR or RESET or destroyed, and arms no
// timer for it.
func TestAckDelayStop(t *testing.T) {
	const delay = 20 * time.Microsecond
	for _, c := range []struct {
		name string
		stop func(q *QP) error
	}{
		{"error", func(q *QP) error { return q.Modify(&Attr{State: StateErr}, AttrState) }},
		{"reset", func(q *QP) error { return q.Modify(&Attr{State: StateReset}, AttrState) }},
		{"destroy", func(q *QP) error { return q.e.DestroyQP(q) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newPair(t, pairConfig{mtu: 1024, retry: 7, rnrRetry: 7, ackDelay: delay})
			if err := p.b.qp.PostRecv(&RecvWR{ID: 1, SGL: []SGE{p.b.sge(0, 64)}}); err != nil {
				t.Fatal(err)
			}
			p.sendToB(t)
			if p.b.qp.ack&ackHeld == 0 || p.b.l.Stats().TxPackets != 0 {
				t.Fatal("b does not hold the SEND's ACK")
			}
			if err := c.stop(p.b.qp); err != nil {
				t.Fatal(err)
			}
			p.b.e.Process(p.now)
			if got := p.b.l.Stats().TxPackets; got != 1 {
				t.Fatalf("b sent %d packets as it stopped, want the held ACK", got)
			}
			if _, ok := p.b.e.NextDeadline(); ok {
				t.Fatal("b still has a timer armed")
			}
			if n := p.deliver(p.a); n != 1 || p.a.scq.Len() != 1 {
				t.Fatalf("a received %d packets, %d completions; want the ACK and one", n, p.a.scq.Len())
			}
			var wc [1]Completion
			if p.a.scq.Poll(wc[:]); wc[0].WRID != 7 || wc[0].Status != WCSuccess {
				t.Fatalf("a's completion: %+v, want WR 7 done", wc[0])
			}
			p.now = p.now.Add(2 * delay)
			p.b.e.Process(p.now)
			if got := p.b.l.Stats().TxPackets; got != 1 {
				t.Fatalf("b sent %d packets in all once the delay ran out, want only the ACK", got)
			}
		})
	}
}

// TestAckDelayLateAnswer: after a held ACK ran out, a QP that then sends
// a request (its application answers, late) holds the next ACK again
// instead of sending ackSkip of them at once.
func TestAckDelayLateAnswer(t *testing.T) {
	const delay = 20 * time.Microsecond
	p := newPair(t, pairConfig{mtu: 1024, retry: 7, rnrRetry: 7, ackDelay: delay})
	for i := 0; i < 2; i++ {
		if err := p.b.qp.PostRecv(&RecvWR{ID: 1, SGL: []SGE{p.b.sge(0, 64)}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.a.qp.PostRecv(&RecvWR{ID: 1, SGL: []SGE{p.a.sge(0, 64)}}); err != nil {
		t.Fatal(err)
	}
	p.sendToB(t)
	p.now = p.now.Add(delay)
	p.b.e.Process(p.now) // the held ACK runs out and goes alone
	if got := p.b.l.Stats().TxPackets; got != 1 || p.b.qp.ackSkip == 0 {
		t.Fatalf("b sent %d packets, skip %d, when the delay ran out; want the ACK and a skip", got, p.b.qp.ackSkip)
	}
	p.deliver(p.a)
	// The late answer.
	reply := SendWR{ID: 8, Opcode: WRSend, Flags: FlagSignaled, SGL: []SGE{p.b.sge(512, 16)}}
	if err := p.b.qp.PostSend(p.now, &reply); err != nil {
		t.Fatal(err)
	}
	p.b.e.Process(p.now)
	p.deliver(p.a)
	p.a.e.Process(p.now)
	// a's next SEND: b holds its ACK again.
	p.sendToB(t)
	if p.b.qp.ack&ackHeld == 0 {
		t.Fatal("b, which answered after its held ACK ran out, does not hold the next one")
	}
}
