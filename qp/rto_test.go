package qp

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/uroce/uroce/pkg/netem"
)

const us = time.Microsecond

// TestRTOEstimator feeds RTT samples to a QP's estimator and checks
// RFC 6298's SRTT, RTTVAR and RTO after each, with the floor and the IBA
// ceiling.
func TestRTOEstimator(t *testing.T) {
	ceil := 67108864 * time.Nanosecond // Timeout 14
	cases := []struct {
		name    string
		samples []time.Duration
		srtt    time.Duration
		rttvar  time.Duration
		rto     time.Duration
	}{
		// First sample: SRTT = R, RTTVAR = R/2 (2.2); RTO under the
		// floor is the floor.
		{"first", []time.Duration{20 * us}, 20 * us, 10 * us, minRTO},
		{"first large", []time.Duration{1000 * us}, 1000 * us, 500 * us, 3000 * us},
		// Second: RTTVAR = 3/4·10 + 1/4·|20-60| = 17.5, SRTT = 7/8·20
		// + 1/8·60 = 25 (2.3).
		{"second", []time.Duration{20 * us, 60 * us}, 25 * us, 17500 * time.Nanosecond, minRTO},
		{"steady", []time.Duration{400 * us, 400 * us, 400 * us, 400 * us}, 400 * us, 84375 * time.Nanosecond, 737500 * time.Nanosecond},
		// Never above the IBA timeout.
		{"ceiling", []time.Duration{50 * time.Millisecond}, 50 * time.Millisecond, 25 * time.Millisecond, ceil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newPair(t, pairConfig{mtu: 1024, retry: 7})
			q := p.a.qp
			for _, r := range c.samples {
				q.rto.timing, q.rto.timedPSN, q.rto.timedAt = true, q.comp.psn.Add(-1), q.e.nowNS-int64(r)
				q.rto.backoff = 3
				q.rtoAcked()
				if q.rto.timing || q.rto.backoff != 0 {
					t.Fatalf("sample %v: timing %v, backoff %d after it", r, q.rto.timing, q.rto.backoff)
				}
			}
			s := q.rto
			if s.srtt != c.srtt || s.rttvar != c.rttvar || s.rto != c.rto {
				t.Errorf("SRTT %v RTTVAR %v RTO %v, want %v %v %v", s.srtt, s.rttvar, s.rto, c.srtt, c.rttvar, c.rto)
			}
		})
	}
	t.Run("unanswered", func(t *testing.T) {
		p := newPair(t, pairConfig{mtu: 1024, retry: 7})
		q := p.a.qp
		q.rto.timing, q.rto.timedPSN, q.rto.timedAt = true, q.comp.psn, q.e.nowNS-int64(us)
		q.rtoAcked()
		if !q.rto.timing || q.rto.srtt != 0 {
			t.Errorf("an ACK before the timed PSN gave a sample: SRTT %v", q.rto.srtt)
		}
	})
}

// TestRTOBackoff: consecutive timeouts double the RTO up to the IBA
// timeout (RFC 6298 5.5); before any sample the RTO is the IBA timeout.
func TestRTOBackoff(t *testing.T) {
	ceil := 4 * time.Millisecond
	cases := []struct {
		rto     time.Duration
		backoff uint8
		want    time.Duration
	}{
		{0, 0, ceil},
		{0, 5, ceil},
		{300 * us, 0, 300 * us},
		{300 * us, 1, 600 * us},
		{300 * us, 3, 2400 * us},
		{300 * us, 4, ceil},
		{300 * us, 31, ceil},
		{ceil, 0, ceil},
	}
	for _, c := range cases {
		s := rtoState{rto: c.rto, backoff: c.backoff}
		if got := s.rtoCur(ceil); got != c.want {
			t.Errorf("RTO %v backoff %d: %v, want %v", c.rto, c.backoff, got, c.want)
		}
	}
}

// warmUp runs a few WRITEs over a clean pair so the requester has RTT
// samples and a small RTO.
func warmUp(t *testing.T, p *pair, n int) {
	t.Helper()
	for i := range n {
		wr := SendWR{ID: uint64(1000 + i), Opcode: WRWrite, SGL: []SGE{p.a.sge(0, 64)}, RemoteAddr: memBase, RKey: p.b.mr.RKey}
		if err := p.a.qp.PostSend(p.now, &wr); err != nil {
			t.Fatal(err)
		}
		p.run(func() bool { return p.a.qp.sq.head == p.a.qp.sq.tail })
	}
}

// TestDeadPeer: a peer that stops answering ends the WR in
// WCRetryExcErr, the QP in ERR and the WR behind it flushed, RetryCnt+1
// IBA timeouts after the send, in both modes: the adaptive RTO's early
// retransmissions spend no retry, so they make it neither sooner nor
// later. A RetryCnt of 7 is seven retries unless rxe's forever is asked
// for.
func TestDeadPeer(t *testing.T) {
	const timeout = 12 // 16.8 ms
	for _, mode := range []RetransFlags{RetransFixed, 0} {
		for _, retry := range []uint8{0, 3, 7} {
			name := fmt.Sprintf("fixed=%v/retry=%d", mode != 0, retry)
			t.Run(name, func(t *testing.T) {
				p := newPair(t, pairConfig{mtu: 1024, faults: netem.Faults{Delay: 10 * us}, seed: 1, retry: retry, timeout: timeout, retrans: mode})
				warmUp(t, p, 20)
				a := p.a.qp
				if mode == 0 && (a.rto.rto == 0 || a.rto.rto > 2*minRTO) {
					t.Fatalf("RTO %v after the warm-up, want about the floor", a.rto.rto)
				}
				// The peer's QP goes away: its engine drops what comes.
				if err := p.b.qp.Modify(&Attr{State: StateReset}, AttrState); err != nil {
					t.Fatal(err)
				}
				c0 := a.Counters()
				sent := p.now
				for i := range 2 {
					wr := SendWR{ID: uint64(i), Opcode: WRWrite, Flags: FlagSignaled, SGL: []SGE{p.a.sge(0, 100)}, RemoteAddr: memBase, RKey: p.b.mr.RKey}
					if err := a.PostSend(p.now, &wr); err != nil {
						t.Fatal(err)
					}
				}
				var wcs []Completion
				var at time.Time
				p.run(func() bool {
					if n := p.a.scq.Poll(p.a.wc[:]); n > 0 {
						if wcs == nil {
							at = p.now
						}
						wcs = append(wcs, p.a.wc[:n]...)
					}
					return len(wcs) == 2
				})
				if wcs[0].Status != WCRetryExcErr || wcs[0].WRID != 0 || wcs[1].Status != WCWRFlushErr || a.State() != StateErr {
					t.Fatalf("completions %v %v, state %v; want RETRY_EXC_ERR, then a flush, and ERR", wcs[0].Status, wcs[1].Status, a.State())
				}
				T := a.timeoutDur()
				want := sent.Add(time.Duration(retry+1) * T)
				// The wheel fires a timer at its deadline or after, by
				// less than a tick; a budget counts from the last send.
				if d := at.Sub(want); d < 0 || d > 2*(1<<tickShift) {
					t.Errorf("RETRY_EXC_ERR %v after the send, want %d × %v = %v", at.Sub(sent), retry+1, T, want.Sub(sent))
				}
				got := a.Counters()
				early := got.EarlyRetransTimeouts - c0.EarlyRetransTimeouts
				if n := got.Timeouts - c0.Timeouts - early; n != uint64(retry)+1 {
					t.Errorf("%d IBA timeouts, want %d", n, retry+1)
				}
				if mode == 0 && early == 0 {
					t.Error("no early retransmission in adaptive mode")
				}
				if mode != 0 && early != 0 {
					t.Errorf("%d early retransmissions with the fixed timer", early)
				}
				t.Logf("failed after %v, %d retransmissions, %d early timeouts", at.Sub(sent), got.Retransmits-c0.Retransmits, early)
			})
		}
	}
}

// TestRetry7Forever: with rxe's behaviour asked for, a RetryCnt of 7
// never runs out; the QP keeps retrying a dead peer.
func TestRetry7Forever(t *testing.T) {
	for _, mode := range []RetransFlags{RetransFixed, 0} {
		p := newPair(t, pairConfig{mtu: 1024, retry: 7, timeout: 8, retrans: mode | RetransRetry7Forever})
		warmUp(t, p, 5)
		if err := p.b.qp.Modify(&Attr{State: StateReset}, AttrState); err != nil {
			t.Fatal(err)
		}
		wr := SendWR{ID: 1, Opcode: WRWrite, Flags: FlagSignaled, SGL: []SGE{p.a.sge(0, 8)}, RemoteAddr: memBase, RKey: p.b.mr.RKey}
		if err := p.a.qp.PostSend(p.now, &wr); err != nil {
			t.Fatal(err)
		}
		end := p.now.Add(50 * p.a.qp.timeoutDur())
		for p.now.Before(end) {
			if !p.step() && !p.advance() {
				t.Fatal("pair went quiet")
			}
		}
		if n := p.a.scq.Len(); n != 0 || p.a.qp.State() != StateRTS || p.a.qp.Counters().Timeouts < 40 {
			t.Errorf("fixed=%v: %d completions, state %v, %d timeouts; want none, RTS, about 50", mode != 0, n, p.a.qp.State(), p.a.qp.Counters().Timeouts)
		}
	}
}

// pingPong runs n SEND ping-pongs from a to b and back over p and returns
// each one's time, post to the answer's receive completion, in simulated
// time.
func pingPong(t *testing.T, p *pair, n int) []time.Duration {
	t.Helper()
	const size = 64
	a, b := p.a, p.b
	post := func(s *side, id uint64) {
		if err := s.qp.PostRecv(&RecvWR{ID: id, SGL: []SGE{s.sge(4096, size)}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 16 {
		post(a, uint64(i))
		post(b, uint64(i))
	}
	send := func(s *side, id uint64) {
		wr := SendWR{ID: id, Opcode: WRSend, SGL: []SGE{s.sge(0, size)}}
		if err := s.qp.PostSend(p.now, &wr); err != nil {
			t.Fatal(err)
		}
	}
	var wc [16]Completion
	lat := make([]time.Duration, 0, n)
	for i := range n {
		start := p.now
		send(a, uint64(i))
		done := false
		p.run(func() bool {
			for k := b.rcq.Poll(wc[:]); k > 0; k-- {
				post(b, 0)
				send(b, uint64(i))
			}
			for k := a.rcq.Poll(wc[:]); k > 0; k-- {
				if wc[k-1].Status != WCSuccess {
					t.Fatalf("ping %d: %v", i, wc[k-1].Status)
				}
				post(a, 0)
				done = true
			}
			// Send completions are unsignaled; errors would show.
			if k := a.scq.Poll(wc[:]) + b.scq.Poll(wc[:]); k > 0 {
				t.Fatalf("ping %d: send completion %v", i, wc[0].Status)
			}
			return done
		})
		lat = append(lat, p.now.Sub(start))
	}
	return lat
}

// TestLossTail: a SEND ping-pong over a 25 µs link dropping 1, 2 and 5 %
// of the packets each way. With the fixed timer every lost packet costs a
// 67 ms IBA timeout, a thousand times the ping's time; the adaptive RTO
// holds the slowest ping within 20 times the typical at 2 % (the target of
// issue 13). Simulated time, so the numbers are the seed's, not the
// machine's.
func TestLossTail(t *testing.T) {
	n := 3000
	if testing.Short() {
		n = 1000
	}
	for _, drop := range []float64{0.01, 0.02, 0.05} {
		ratio := map[RetransFlags]float64{}
		for _, mode := range []RetransFlags{RetransFixed, 0, RetransSelective} {
			p := newPair(t, pairConfig{mtu: 1024, faults: netem.Faults{Delay: 25 * us, Drop: drop}, seed: 13, retry: 7, timeout: 14, retrans: mode})
			lat := pingPong(t, p, n)
			slices.Sort(lat)
			typ, worst := lat[len(lat)/2], lat[len(lat)-1]
			ratio[mode] = float64(worst) / float64(typ)
			a, b := p.a.qp.Counters(), p.b.qp.Counters()
			name := "adaptive"
			switch mode {
			case RetransFixed:
				name = "fixed"
			case RetransSelective:
				name = "selective"
			}
			t.Logf("drop %2.0f %% %-8s t_typical %v t_99 %-12v t_max %-12v %5.0f×  retransmits %3d timeouts %3d (early %3d)",
				drop*100, name, typ, lat[len(lat)*99/100], worst, ratio[mode], a.Retransmits+b.Retransmits,
				a.Timeouts+b.Timeouts, a.EarlyRetransTimeouts+b.EarlyRetransTimeouts)
		}
		if drop <= 0.02 && (ratio[0] > 20 || ratio[RetransSelective] > 20) {
			t.Errorf("drop %v: t_max %.0f× t_typical adaptive, %.0f× selective, want at most 20×", drop, ratio[0], ratio[RetransSelective])
		}
		if ratio[RetransFixed] < 10*ratio[0] {
			t.Errorf("drop %v: fixed %.0f×, adaptive %.0f×: adaptive should be far below", drop, ratio[RetransFixed], ratio[0])
		}
	}
}

// TestStallingPeer: a SEND ping-pong over a 25 µs link that holds 7 % of
// the packets each way 2 ms longer, and those behind them, as a peer
// stalling one round trip in seven (rxe in a TCG guest) does, and drops
// nothing. Every retransmission is needless. RFC 6298's estimate alone
// forgets a stall within a few short round trips and resent at most
// stalls: 15 % of the pings, as 15 % of a clean send_lat's requests
// against rxe in the lab. The floor learnt from duplicate answers keeps
// it to a few. With 2 % drop as well, the loss tail stays far below the
// fixed timer's.
func TestStallingPeer(t *testing.T) {
	const n = 2000
	stall := netem.Faults{Delay: 25 * us, Stall: 2 * time.Millisecond, StallRate: 0.07}
	p := newPair(t, pairConfig{mtu: 1024, faults: stall, seed: 5, retry: 7, timeout: 14})
	lat := pingPong(t, p, n)
	a, b := p.a.qp.Counters(), p.b.qp.Counters()
	resent, spurious := a.Retransmits+b.Retransmits, a.SpuriousRetrans+b.SpuriousRetrans
	slices.Sort(lat)
	t.Logf("stalls only: t_typical %v t_max %v, %d retransmissions (%d found spurious) over %d pings, floor %v / %v",
		lat[len(lat)/2], lat[len(lat)-1], resent, spurious, n, p.a.qp.rto.floor, p.b.qp.rto.floor)
	// Without the learnt floor: 309 (15.4 %), as against rxe.
	if resent > n*4/100 {
		t.Errorf("%d needless retransmissions over %d pings (%.1f %%), want at most 4 %%", resent, n, 100*float64(resent)/n)
	}
	if spurious == 0 {
		t.Error("no retransmission found spurious: the floor never rose")
	}

	lossy := stall
	lossy.Drop = 0.02
	ratio := map[RetransFlags]float64{}
	for _, mode := range []RetransFlags{RetransFixed, 0} {
		p := newPair(t, pairConfig{mtu: 1024, faults: lossy, seed: 5, retry: 7, timeout: 14, retrans: mode})
		lat := pingPong(t, p, n)
		slices.Sort(lat)
		ratio[mode] = float64(lat[len(lat)-1]) / float64(lat[len(lat)/2])
		t.Logf("stalls and 2 %% drop, mode %d: t_typical %v t_99 %v t_max %v (%.0f×), floor %v / %v", mode, lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1], ratio[mode], p.a.qp.rto.floor, p.b.qp.rto.floor)
	}
	if ratio[RetransFixed] < 5*ratio[0] {
		t.Errorf("stalls and loss: fixed %.0f×, adaptive %.0f×: adaptive should stay far below", ratio[RetransFixed], ratio[0])
	}
}

// TestBulkLossRetries: 64 KiB WRITEs (64 packets of 1 KiB each) over a
// link dropping 5 % of the packets, with IBA's retry count of 7: every
// WRITE completes. Each go-back-N's sequence NAK costs a retry, and
// forward progress renews the count, an ACK's or a NAK's beyond the
// oldest unacknowledged PSN. Against uroce's responder, which ACKs every
// burst, ACKs alone renew it often enough; against rxe, which ACKs only
// AckReq packets, the NAKs' renewal is what keeps the lab's drop5pct
// write_bw cell (tests/interop) from RETRY_EXC_ERR.
func TestBulkLossRetries(t *testing.T) {
	const size, n = 64 << 10, 40
	p := newPair(t, pairConfig{mtu: 1024, faults: netem.Faults{Delay: 10 * us, Drop: 0.05}, seed: 9, mem: 2 * size, retry: 7, rnrRetry: 7, timeout: 14, sendWR: 32})
	a, b := p.a, p.b
	fill(a.mem, 3)
	posted, done := 0, 0
	var wc [16]Completion
	for done < n {
		for posted < n && posted-done < 20 {
			wr := SendWR{ID: uint64(posted), Opcode: WRWrite, Flags: FlagSignaled, SGL: []SGE{a.sge(0, size)}, RemoteAddr: memBase + size, RKey: b.mr.RKey}
			if err := a.qp.PostSend(p.now, &wr); err != nil {
				t.Fatal(err)
			}
			posted++
		}
		got := false
		p.run(func() bool {
			for k := a.scq.Poll(wc[:]); k > 0; k-- {
				if s := wc[k-1].Status; s != WCSuccess {
					t.Fatalf("WRITE %d of %d: %v (counters %+v)", done, n, s, a.qp.Counters())
				}
				done++
				got = true
			}
			return got
		})
	}
	c := a.qp.Counters()
	t.Logf("%d WRITEs of %d B at 5 %% drop: %d sequence NAKs, %d timeouts, %d retransmitted packets", n, size, c.SeqNAKsRcvd, c.Timeouts, c.Retransmits)
	if c.SeqNAKsRcvd < 8 {
		t.Errorf("only %d sequence NAKs: the test did not exercise the retry count", c.SeqNAKsRcvd)
	}
	if !bytes.Equal(b.mem[size:2*size], a.mem[:size]) {
		t.Error("the last WRITE's data differs")
	}
}

// TestRareStallLossTail: a SEND ping-pong over a 25 µs link dropping 5 %
// of the packets each way, whose peers stall now and then for 3 ms (a
// packet in five thousand held, and those behind it: four in the run), as
// an engine thread preempted on a loaded host does. A stall answers a
// timed-out ping late, so its retransmission was needless; but one stall
// says nothing of the next round trips. When the floor rose to twice the
// first one, every loss of the next hundred round trips waited 6 ms: t_99
// 7.4 ms and t_max 35 ms here, against 0.6 ms and 3.3 ms now (and over
// veth on a busy machine, t_99 17.6 ms at 5 % in one run, 44 ms in
// another). The floor rises only when needless retransmissions repeat
// (TestStallingPeer's stalling peer).
func TestRareStallLossTail(t *testing.T) {
	const n = 3000
	for _, mode := range []RetransFlags{0, RetransSelective} {
		f := netem.Faults{Delay: 25 * us, Drop: 0.05, Stall: 3 * time.Millisecond, StallRate: 0.0002}
		p := newPair(t, pairConfig{mtu: 1024, faults: f, seed: 1, retry: 7, timeout: 14, retrans: mode})
		lat := pingPong(t, p, n)
		slices.Sort(lat)
		a, b := p.a.qp.Counters(), p.b.qp.Counters()
		stalled := p.a.l.FaultStats().Stalled + p.b.l.FaultStats().Stalled
		t99 := lat[len(lat)*99/100]
		t.Logf("mode %#x: t_typical %v t_99 %v t_99.9 %v t_max %v, %d stalls, %d timeouts (%d found needless), floor %v / %v",
			mode, lat[len(lat)/2], t99, lat[len(lat)*999/1000], lat[len(lat)-1], stalled,
			a.Timeouts+b.Timeouts, a.SpuriousRetrans+b.SpuriousRetrans, p.a.qp.rto.floor, p.b.qp.rto.floor)
		if worst := lat[len(lat)-1]; t99 > 2*time.Millisecond || worst > 10*time.Millisecond {
			t.Errorf("mode %#x: t_99 %v, t_max %v with %d rare stalls, want at most 2 and 10 ms", mode, t99, worst, stalled)
		}
	}
}
