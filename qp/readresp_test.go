package qp

import (
	"bytes"
	"testing"
	"time"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/cc"
	"github.com/uroce/uroce/pkg/netem"
)

// respPkt is one packet the responder sent and when.
type respPkt struct {
	at   time.Time
	op   bth.Opcode
	psn  bth.PSN
	data []byte
	wire int // IP datagram bytes, as the pacer counts them
	syn  bth.Syndrome
}

// collectPaced runs the engine's timers until n packets are out, calling
// during(i) once the i-th has been read so a test can deliver requests
// mid-response.
func (c *Context) collectPaced(n int, during func(i int)) []respPkt {
	c.t.Helper()
	var got []respPkt
	for steps := 0; len(got) < n; steps++ {
		if steps > 100_000 {
			c.t.Fatalf("%d of %d packets", len(got), n)
		}
		for len(c.Port.sent) > 0 && len(got) < n {
			wire := c.Port.sent[0].Len + ipUDPLen
			p := c.GetPacket()
			rp := respPkt{at: c.Now, op: p.Opcode(), psn: p.BTH().PSN(), data: bytes.Clone(p.Payload()), wire: wire}
			if a := p.AETH(); a != nil {
				rp.syn = a.Syndrome()
			}
			got = append(got, rp)
			if during != nil {
				during(len(got))
			}
		}
		if len(got) == n {
			break
		}
		when, ok := c.E.NextDeadline()
		if !ok {
			c.t.Fatalf("nothing armed with %d of %d packets out", len(got), n)
		}
		c.Now = when
		c.E.Process(c.Now)
	}
	return got
}

// TestReadResponsePaced: a READ response goes out at the responder QP's
// rate, a burst at most ahead of it and never stalled; requests that
// arrive meanwhile are answered in PSN order behind it, and a duplicate
// READ restarts it from the PSN it names.
func TestReadResponsePaced(t *testing.T) {
	const (
		rate  = 100 * cc.Mbps
		burst = 2048
		npkts = 16
	)
	type want struct {
		op  bth.Opcode
		psn int // offset from the READ's first PSN
	}
	// readWants are the packets [from, to) of the READ's response.
	readWants := func(from, to int) []want {
		var w []want
		for i := from; i < to; i++ {
			op := bth.RCReadResponseMiddle
			switch {
			case i == 0:
				op = bth.RCReadResponseFirst
			case i == npkts-1:
				op = bth.RCReadResponseLast
			}
			w = append(w, want{op, i})
		}
		return w
	}
	tests := []struct {
		name string
		// during delivers requests after the i-th packet (c.PeerPSN is
		// past the READ); rpsn is the READ's first PSN.
		during func(c *Context, rpsn bth.PSN, i int)
		want   []want
	}{
		{name: "alone", want: readWants(0, npkts)},
		{
			// A SEND's ACK, a second READ's response and an
			// atomic's ACK wait behind the first READ's, in PSN order.
			name: "queued",
			during: func(c *Context, rpsn bth.PSN, i int) {
				if i != 2 {
					return
				}
				c.SendRequest(bth.RCSendOnly, nil, []byte("x"), true)
				c.SendRequest(bth.RCReadRequest, &bth.PacketFields{RETH: bth.RETHFields{VA: ctxMemBase + 8, RKey: c.MR.RKey, DMALen: 100}}, nil, true)
				c.SendRequest(bth.RCFetchAdd, &bth.PacketFields{AtomicETH: bth.AtomicETHFields{VA: ctxMemBase + 0x9000, RKey: c.MR.RKey, SwapAdd: 1}}, nil, true)
			},
			want: append(readWants(0, npkts), want{bth.RCAcknowledge, npkts}, want{bth.RCReadResponseOnly, npkts + 1},
				want{bth.RCAtomicAcknowledge, npkts + 2}),
		},
		{
			// The requester lost packets 2 and on and asks again from
			// 2: the response restarts there with MIDDLE.
			name: "duplicate",
			during: func(c *Context, rpsn bth.PSN, i int) {
				if i != 5 {
					return
				}
				save := c.PeerPSN
				c.PeerPSN = rpsn.Add(2)
				c.SendRequest(bth.RCReadRequest, &bth.PacketFields{RETH: bth.RETHFields{VA: ctxMemBase + 2*ctxMTU, RKey: c.MR.RKey, DMALen: (npkts - 2) * ctxMTU}}, nil, true)
				c.PeerPSN = save
			},
			want: append(readWants(0, 5), readWants(2, npkts)...),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := New(t)
			defer c.Cleanup()
			for i := range c.Mem {
				c.Mem[i] = byte(i*7 + i>>10)
			}
			c.E.PacerBurst = burst
			cfg := cc.DefaultConfig(cc.KindDCQCN, rate)
			if err := c.QP.SetCC(&cfg); err != nil {
				t.Fatal(err)
			}
			t0 := c.Now
			rpsn := c.PeerPSN
			c.SendRequest(bth.RCReadRequest, &bth.PacketFields{RETH: bth.RETHFields{VA: ctxMemBase, RKey: c.MR.RKey, DMALen: npkts * ctxMTU}}, nil, true)
			c.PeerPSN = rpsn.Add(npkts)
			var during func(int)
			if tc.during != nil {
				during = func(i int) { tc.during(c, rpsn, i) }
			}
			got := c.collectPaced(len(tc.want), during)
			wire := 0
			var dataWire int
			for i, p := range got {
				w := tc.want[i]
				if p.op != w.op || p.psn != rpsn.Add(w.psn) {
					t.Fatalf("packet %d: %v PSN %#x, want %v PSN %#x (%v)", i, p.op, p.psn, w.op, rpsn.Add(w.psn), p.syn)
				}
				if p.op.Has(bth.Read) && p.op != bth.RCReadResponseOnly {
					off := w.psn * ctxMTU
					if !bytes.Equal(p.data, c.Mem[off:off+ctxMTU]) {
						t.Fatalf("packet %d (PSN +%d): data differs", i, w.psn)
					}
				}
				if p.op != bth.RCAcknowledge {
					// READ responses take tokens; an ACK does not.
					wire += p.wire
					dataWire = wire
				}
				// Never ahead of rate × time plus the bucket.
				if allowed := burst + int(uint64(rate)*uint64(p.at.Sub(t0))/8/uint64(time.Second)); wire > allowed {
					t.Fatalf("packet %d at %v: %d bytes out, the pacer allows %d", i, p.at.Sub(t0), wire, allowed)
				}
			}
			// Spread in time at the rate, not held back below it: the
			// QP wakes once paceQuantum bytes beyond the next packet
			// are there.
			el := got[len(got)-1].at.Sub(t0)
			lo := rate.TxTime(dataWire - burst)
			hi := rate.TxTime(dataWire + paceQuantum)
			if el < lo || el > hi {
				t.Errorf("%d bytes took %v, want between %v and %v", dataWire, el, lo, hi)
			}
			c.CheckNoPacket()
			if _, ok := c.E.NextDeadline(); ok {
				t.Error("a timer still armed after the responses")
			}
		})
	}
}

// readFlows turns the run's flows into READs of the peer's area: the
// pattern moves to b, a's area starts zeroed, and drain checks a's copy.
func (r *flowRun) readFlows() {
	p := r.p
	for i := range r.wr {
		a, b := p.a.mem[i*flowArea:(i+1)*flowArea], p.b.mem[i*flowArea:(i+1)*flowArea]
		copy(b, a)
		clear(a)
		r.wr[i].Opcode = WRRead
	}
}

// TestCCReadFlowsConverge: two READ-heavy flows share a 1 Gb/s bottleneck
// on the responders' side that marks with RED. The requesters see the CE
// marks on the READ responses and send CNPs to the responders' QPs, whose
// pacers hold the responses to DCQCN's rate: the flows converge to fair
// shares that fill the bottleneck, the queue stays near RED's thresholds,
// far below what the same READs build without congestion control, and every
// byte read arrives intact.
func TestCCReadFlowsConverge(t *testing.T) {
	const bottleneck = 1e9 / 8 // bytes/s
	faults := netem.Faults{Rate: bottleneck, QueueLimit: 512 << 10, Delay: 5 * time.Microsecond,
		ECN: &netem.RED{Kmin: 5 << 10, Kmax: 20 << 10, Pmax: 0.1}}
	type result struct {
		goodput, fairness float64
		queue             float64 // bytes
		marked, cnpsSent  uint64
		handled, qdrops   uint64
		rate              cc.Rate
	}
	measure := func(kind cc.Kind) result {
		cfg := cc.DefaultConfig(kind, 10*cc.Gbps)
		// As TestCCTwoFlowsConverge: the paper's DCQCN with increase
		// steps for a 1 Gb/s bottleneck.
		cfg.NP, cfg.DCQCN = cc.PaperNP(), cc.PaperDCQCN()
		cfg.DCQCN.AIRate, cfg.DCQCN.HAIRate = 5*cc.Mbps, 50*cc.Mbps
		r := newFlowRun(t, 2, faults, &cfg, 11)
		r.readFlows()
		// The bytes b sent that a has not received are the
		// bottleneck's queue (and 5 µs of wire), averaged over time.
		var qsum float64
		var qlast float64
		var tlast time.Time
		r.sample = func() {
			if !tlast.IsZero() {
				qsum += qlast * r.p.now.Sub(tlast).Seconds()
			}
			qlast, tlast = float64(r.p.b.l.Stats().TxBytes-r.p.a.l.Stats().RxBytes), r.p.now
		}
		start := r.p.now
		warm, end := start.Add(40*time.Millisecond), start.Add(100*time.Millisecond)
		r.run(t, warm, end)
		r.drain(t)
		var res result
		var sum int64
		for _, b := range r.bytes {
			sum += b
		}
		res.goodput = float64(sum) / end.Sub(warm).Seconds() / bottleneck
		res.fairness = jain(r.bytes)
		res.queue = qsum / end.Sub(warm).Seconds()
		a, b := r.p.a.e.Stats(), r.p.b.e.Stats()
		// The data crosses b → a: a is the notification point, b's
		// QPs the reaction points.
		res.marked, res.cnpsSent, res.handled = a.CC.NPECNMarkedRoCEPackets, a.CC.NPCNPSent, b.CC.RPCNPHandled
		res.qdrops = r.p.b.l.FaultStats().QueueDropped
		for _, q := range r.p.b.e.AppendQPs(nil) {
			res.rate += q.CCStats(r.p.now).Rate
		}
		t.Logf("%-6v flows %v goodput %.3f of the bottleneck, Jain %.3f, mean queue %.0f bytes, queue drops %d, CE marked %d, CNPs sent %d, handled by the responders %d, responders' rates summed %v",
			kind, r.bytes, res.goodput, res.fairness, res.queue, res.qdrops, res.marked, res.cnpsSent, res.handled, res.rate)
		return res
	}
	off, on := measure(cc.KindNone), measure(cc.KindDCQCN)
	if off.marked != 0 {
		t.Errorf("cc off: %d packets marked", off.marked)
	}
	if on.marked == 0 || on.cnpsSent == 0 || on.handled != on.cnpsSent {
		t.Errorf("DCQCN: %d marked, %d CNPs sent, %d handled by the responders", on.marked, on.cnpsSent, on.handled)
	}
	if on.goodput < 0.85 || on.fairness < 0.95 {
		t.Errorf("DCQCN: goodput %.3f, fairness %.3f; want ≥ 0.85 and ≥ 0.95", on.goodput, on.fairness)
	}
	// The queue measure counts dropped bytes as queued: there must be
	// none (the READs' PSN windows fit the queue).
	if on.qdrops != 0 || off.qdrops != 0 {
		t.Errorf("queue drops: DCQCN %d, cc off %d", on.qdrops, off.qdrops)
	}
	// The responders' pacers, not the requesters', hold the queue down.
	if on.queue*3 > off.queue {
		t.Errorf("DCQCN mean queue %.0f bytes, not a third of cc off's %.0f", on.queue, off.queue)
	}
	if on.rate >= 2*10*cc.Gbps {
		t.Errorf("the responders run at %v: DCQCN never limited them", on.rate)
	}
}

// BenchmarkPacedRead: 64 KiB READs whose responses the responder's DCQCN
// pacer spreads at 1 Gb/s from an 8 KiB bucket, so every response waits on
// the timer wheel several times: the paced path allocates nothing.
func BenchmarkPacedRead(b *testing.B) {
	const size = 64 << 10
	p := newPair(b, pairConfig{mtu: 4096, retry: 7, rnrRetry: 7, mem: 1 << 17})
	p.b.e.PacerBurst = 8 << 10
	cfg := cc.DefaultConfig(cc.KindDCQCN, cc.Gbps)
	if err := p.b.qp.SetCC(&cfg); err != nil {
		b.Fatal(err)
	}
	wr := SendWR{Opcode: WRRead, Flags: FlagSignaled, SGL: []SGE{p.a.sge(0, size)}, RemoteAddr: memBase + size, RKey: p.b.mr.RKey}
	b.SetBytes(size)
	b.ReportAllocs()
	start := p.now
	for b.Loop() {
		if err := p.a.qp.PostSend(p.now, &wr); err != nil {
			b.Fatal(err)
		}
		p.pump(p.a.scq, 1)
		p.a.scq.Poll(p.a.wc[:])
	}
	// The pair's clock, not the machine's: the responses took at least
	// the rate's time.
	if el, min := p.now.Sub(start), cc.Gbps.TxTime(b.N*size-8<<10); el < min {
		b.Fatalf("%d READs of %d bytes in %v of pipe time, faster than 1 Gb/s allows (%v)", b.N, size, el, min)
	}
}
