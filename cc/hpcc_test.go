package cc_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/uroce/uroce/cc"
)

// intAck is one ACK of a single-hop (or, with hop2, two-hop) path: the
// time it arrives, its RTT sample and the hop's stamp.
type intAck struct {
	at, rtt     time.Duration
	q           uint32 // bytes
	tx          uint64 // the port's byte counter
	ts          uint64 // ns
	hop2        bool
	q2          uint32
	tx2, ts2    uint64
	noINT, skip bool
}

func (a intAck) path(line cc.Rate) cc.INTPath {
	p := cc.INTPath{N: 1}
	p.Hops[0] = cc.INTHop{QLen: a.q, TxBytes: a.tx, Rate: line, TS: a.ts}
	if a.hop2 {
		p.N = 2
		p.Hops[1] = cc.INTHop{QLen: a.q2, TxBytes: a.tx2, Rate: line, TS: a.ts2}
	}
	return p
}

// TestHPCCUpdate checks Algorithm 1 of the HPCC paper (Li et al.,
// SIGCOMM 2019) against values worked by hand at B = 40 Gb/s, T = 8 µs:
// W_init = B·T = 40 000 bytes, W_AI = W_init·(1−0.95)/125 = 16 bytes.
// A hop's u = min(q, q_prev)/(B·T) + txRate/B; U ← (1−τ/T)·U + τ/T·u;
// W = Wc/(U/η) + W_AI if U ≥ η or incStage ≥ maxStage, else Wc + W_AI.
// The first ACK only records the stamps; Wc moves on ACKs for data sent
// after its last move.
func TestHPCCUpdate(t *testing.T) {
	const line = 40 * cc.Gbps
	for _, tt := range []struct {
		name     string
		ns3      bool // NS3HPCC: maxStage 0
		acks     []intAck
		w, wc, u float64 // after the last ACK
		updates  uint64
	}{
		{
			name: "first ACK records only",
			acks: []intAck{{at: 10 * us, rtt: 9 * us, q: 5000, tx: 1 << 20, ts: 777}},
			w:    40000, wc: 40000, u: 0,
		},
		{
			// τ = T: U = u = 40 000 B/8 µs / 5 GB/s + min(20 000, 0)/40 000 = 1.
			// W = 40 000·0.95/1 + 16.
			name: "over eta: multiplicative decrease to eta",
			acks: []intAck{
				{at: 2 * us, rtt: 1 * us},
				{at: 10 * us, rtt: 8 * us, q: 20000, tx: 40000, ts: 8000},
			},
			w: 38016, wc: 38016, u: 1, updates: 1,
		},
		{
			// Then, for data sent before that update (at 2 µs < 10 µs):
			// u = 1 + min(20 000, 20 000)/40 000 = 1.5; W = 38 016·0.95/1.5 + 16
			// = 24 092.8 from the same Wc, which stays.
			name: "per-ACK reaction keeps the reference window",
			acks: []intAck{
				{at: 2 * us, rtt: 1 * us},
				{at: 10 * us, rtt: 8 * us, q: 20000, tx: 40000, ts: 8000},
				{at: 11 * us, rtt: 9 * us, q: 20000, tx: 80000, ts: 16000},
			},
			w: 24092.8, wc: 38016, u: 1.5, updates: 1,
		},
		{
			// Data sent at 11 µs ≥ the update at 10 µs: a full update. Half
			// the line rate and the queue gone: u = 0.5 < η, stage 0 < 5,
			// W = Wc + W_AI = 38 032.
			name: "under eta: additive increase",
			acks: []intAck{
				{at: 2 * us, rtt: 1 * us},
				{at: 10 * us, rtt: 8 * us, q: 20000, tx: 40000, ts: 8000},
				{at: 20 * us, rtt: 9 * us, q: 0, tx: 60000, ts: 16000},
			},
			w: 38032, wc: 38032, u: 0.5, updates: 2,
		},
		{
			// maxStage 0: every update is multiplicative, here an increase:
			// W = 38 016·0.95/0.5 + 16 = 72 246.4, clamped to W_init.
			name: "maxStage 0: multiplicative increase, clamped to line rate",
			ns3:  true,
			acks: []intAck{
				{at: 2 * us, rtt: 1 * us},
				{at: 10 * us, rtt: 8 * us, q: 20000, tx: 40000, ts: 8000},
				{at: 20 * us, rtt: 9 * us, q: 0, tx: 60000, ts: 16000},
			},
			w: 40000, wc: 40000, u: 0.5, updates: 2,
		},
		{
			name: "after maxStage additive steps, a multiplicative one",
			acks: append([]intAck{
				{at: 2 * us, rtt: 1 * us},
				{at: 10 * us, rtt: 8 * us, q: 20000, tx: 40000, ts: 8000},
			}, stepsAt(0.9, 6)...),
			// U = 0.9 each time (τ = T). Stages 1..5: Wc = 38 016 + 5·16 =
			// 38 096; sixth: W = 38 096·0.95/0.9 + 16 = 40 228.4, clamped.
			w: 40000, wc: 40000, u: 0.9, updates: 7,
		},
		{
			// As above with five steps only: still additive.
			name: "maxStage additive steps",
			acks: append([]intAck{
				{at: 2 * us, rtt: 1 * us},
				{at: 10 * us, rtt: 8 * us, q: 20000, tx: 40000, ts: 8000},
			}, stepsAt(0.9, 5)...),
			w: 38096, wc: 38096, u: 0.9, updates: 6,
		},
		{
			// Two hops: hop 0 u = 0.8 over τ = 8 µs, hop 1 u = 2.4 over
			// τ = 4 µs. The most loaded hop counts, with its own τ:
			// U = (1−4/8)·0 + 4/8·2.4 = 1.2; W = 40 000·0.95/1.2 + 16.
			name: "most loaded hop, weighted by its interval",
			acks: []intAck{
				{at: 2 * us, rtt: 1 * us, hop2: true, ts2: 100},
				{at: 10 * us, rtt: 8 * us, tx: 32000, ts: 8000, hop2: true, tx2: 48000, ts2: 4100},
			},
			w: 40000*0.95/1.2 + 16, wc: 40000*0.95/1.2 + 16, u: 1.2, updates: 1,
		},
		{
			// The counters wrap: the same stamps as "over eta" shifted
			// to straddle 2^64 give the same answer.
			name: "counters wrap",
			acks: []intAck{
				{at: 2 * us, rtt: 1 * us, tx: math.MaxUint64 - 9999, ts: math.MaxUint64 - 3999},
				{at: 10 * us, rtt: 8 * us, q: 20000, tx: 30000, ts: 4000},
			},
			w: 38016, wc: 38016, u: 1, updates: 1,
		},
		{
			// Half the interval: U = 1/2·0 + 1/2·1 = 0.5 → additive, from
			// W_init, clamped.
			name: "moving average over T",
			acks: []intAck{
				{at: 2 * us, rtt: 1 * us},
				{at: 10 * us, rtt: 8 * us, tx: 20000, ts: 4000},
			},
			w: 40000, wc: 40000, u: 0.5, updates: 1,
		},
		{
			// A retransmitted packet's ACK (rtt 0) reacts but never moves Wc.
			name: "no RTT sample: per-ACK reaction only",
			acks: []intAck{
				{at: 2 * us, rtt: 1 * us},
				{at: 10 * us, rtt: 0, q: 20000, tx: 40000, ts: 8000},
			},
			w: 38016, wc: 40000, u: 1, updates: 0,
		},
		{
			// Stamps with no time between them give no sample; an ACK
			// without INT changes nothing.
			name: "no sample",
			acks: []intAck{
				{at: 2 * us, rtt: 1 * us, ts: 500},
				{at: 10 * us, rtt: 8 * us, q: 20000, tx: 40000, ts: 500},
				{at: 11 * us, rtt: 8 * us, noINT: true},
			},
			w: 40000, wc: 40000, u: 0, updates: 0,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := cc.PaperHPCC()
			if tt.ns3 {
				p = cc.NS3HPCC()
			}
			h, err := cc.NewHPCC(p, cc.FirmwareNP(), line)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range tt.acks {
				if a.noINT {
					h.OnAck(at(a.at), 1024, a.rtt)
					continue
				}
				path := a.path(line)
				h.OnINT(at(a.at), 1024, a.rtt, &path)
			}
			const eps = 1e-6
			if math.Abs(h.U()-tt.u) > eps || math.Abs(h.RefWindow()-tt.wc) > 1e-3 || h.Window() != int(tt.w) {
				t.Errorf("U %v Wc %v W %d; want U %v Wc %v W %d", h.U(), h.RefWindow(), h.Window(), tt.u, tt.wc, int(tt.w))
			}
			// R = W/T.
			if want := cc.Rate(min(tt.w*8/8e-6, 40e9)); absDiff(h.Rate(), want) > 2 {
				t.Errorf("rate %v, want W/T = %v", h.Rate(), want)
			}
			st := h.Stats(at(time.Second))
			if st.HPCCWindowUpdates != tt.updates || st.Kind != cc.KindHPCC || st.Rate != h.Rate() {
				t.Errorf("stats %+v: want %d window updates", st, tt.updates)
			}
		})
	}
}

// stepsAt returns n ACKs, each for data sent after the previous one (a
// full update), each reading u at the one hop over τ = T, following the
// "over eta" pair whose last stamp is tx 40 000 at 8000 ns.
func stepsAt(u float64, n int) []intAck {
	var as []intAck
	tx, ts := uint64(40000), uint64(8000)
	for i := range n {
		tx += uint64(u * 40000)
		ts += 8000
		as = append(as, intAck{at: time.Duration(20+10*i) * us, rtt: 9 * us, tx: tx, ts: ts})
	}
	return as
}

func absDiff(a, b cc.Rate) cc.Rate {
	if a > b {
		return a - b
	}
	return b - a
}

// A real QP's ACKs carry no INT, so New refuses HPCC with ErrNoINT rather
// than run it blind; bad parameters still say so first.
func TestHPCCNeedsINT(t *testing.T) {
	k, err := cc.ParseKind("hpcc")
	if err != nil || k != cc.KindHPCC || k.String() != "hpcc" {
		t.Fatalf("ParseKind(hpcc) = %v, %v", k, err)
	}
	cfg := cc.DefaultConfig(cc.KindHPCC, 40*cc.Gbps)
	if a, err := cc.New(&cfg); !errors.Is(err, cc.ErrNoINT) || a != nil {
		t.Fatalf("New(hpcc) = %v, %v; want ErrNoINT", a, err)
	}
	cfg.HPCC.Eta = 0
	if _, err := cc.New(&cfg); !errors.Is(err, cc.ErrBadParams) {
		t.Fatalf("New(hpcc, eta 0) = %v; want ErrBadParams", err)
	}
	h, err := cc.NewHPCC(cc.PaperHPCC(), cc.FirmwareNP(), 40*cc.Gbps)
	if err != nil {
		t.Fatal(err)
	}
	// Without telemetry it stays at line rate and says why in a counter.
	for i := range 100 {
		h.OnAck(at(time.Duration(i)*us), 1024, 10*us)
	}
	h.OnINT(at(time.Millisecond), 1024, 10*us, nil)
	if st := h.Stats(t0); st.Rate != 40*cc.Gbps || st.HPCCAcksWithoutINT != 101 || st.HPCCINTAcks != 0 {
		t.Fatalf("stats after ACKs without INT: %+v", st)
	}
}

func TestHPCCParamsCheck(t *testing.T) {
	for _, tt := range []struct {
		name string
		mod  func(p *cc.HPCCParams)
	}{
		{"zero T", func(p *cc.HPCCParams) { p.BaseRTT = 0 }},
		{"eta 0", func(p *cc.HPCCParams) { p.Eta = 0 }},
		{"eta over 1", func(p *cc.HPCCParams) { p.Eta = 1.01 }},
		{"eta NaN", func(p *cc.HPCCParams) { p.Eta = math.NaN() }},
		{"negative max stage", func(p *cc.HPCCParams) { p.MaxStage = -1 }},
		{"no AI flows", func(p *cc.HPCCParams) { p.AIFlows = 0 }},
		{"negative W_AI", func(p *cc.HPCCParams) { p.WAI = -1 }},
		{"W_AI NaN", func(p *cc.HPCCParams) { p.WAI = math.NaN() }},
		{"W_AI of a whole BDP", func(p *cc.HPCCParams) { p.WAI = 40000 }},
		{"zero MSS", func(p *cc.HPCCParams) { p.MSS = 0 }},
		{"zero min rate", func(p *cc.HPCCParams) { p.MinRate = 0 }},
		{"min rate over line", func(p *cc.HPCCParams) { p.MinRate = 41 * cc.Gbps }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := cc.PaperHPCC()
			tt.mod(&p)
			if _, err := cc.NewHPCC(p, cc.FirmwareNP(), 40*cc.Gbps); !errors.Is(err, cc.ErrBadParams) {
				t.Fatalf("NewHPCC = %v, want ErrBadParams", err)
			}
		})
	}
	if _, err := cc.NewHPCC(cc.PaperHPCC(), cc.FirmwareNP(), 0); !errors.Is(err, cc.ErrBadParams) {
		t.Fatalf("zero line rate: %v", err)
	}
	p := cc.PaperHPCC()
	p.AIFlows, p.WAI = 0, 100 // W_AI given directly needs no N
	if _, err := cc.NewHPCC(p, cc.FirmwareNP(), 40*cc.Gbps); err != nil {
		t.Fatal(err)
	}
}

// A flow alone on a link settles at η of it with no queue, and two flows
// started apart end at equal windows: the fixed point of W = W·η/U + W_AI
// is the same for every flow (§3.3). Evening out is slow: the gap shrinks
// by η/U ≈ 1 − W_AI/W per RTT, so the second flow gets 55 ms.
func TestHPCCClosedLoop(t *testing.T) {
	const line = 40 * cc.Gbps
	p := cc.PaperHPCC()
	h := [2]*cc.HPCC{}
	for i := range h {
		var err error
		if h[i], err = cc.NewHPCC(p, cc.FirmwareNP(), line); err != nil {
			t.Fatal(err)
		}
	}
	// A fluid link: each µs it sends min(offered, B) and queues the rest.
	const bdp = 40000.0
	var q, tx float64
	ts := uint64(0)
	for step := range 60000 {
		now := time.Duration(step) * us
		offered := 0.0
		active := 1
		if step >= 5000 {
			active = 2
		}
		for i := 0; i < active; i++ {
			offered += float64(h[i].Rate()) / 8 * 1e-6
		}
		q += offered
		sent := min(q, 5000.0) // 5000 bytes per µs at 40 Gb/s
		q -= sent
		tx += sent
		ts += 1000
		path := cc.INTPath{N: 1}
		path.Hops[0] = cc.INTHop{QLen: uint32(q), TxBytes: uint64(tx), Rate: line, TS: ts}
		for i := 0; i < active; i++ {
			h[i].OnINT(at(now), 1024, 9*us, &path)
		}
		if step == 4999 {
			if u := float64(h[0].Rate()) / float64(line); u < 0.94 || u > 0.96 || q > 1500 {
				t.Fatalf("one flow: rate %.3f of line, queue %.0f B; want 0.95 and none", u, q)
			}
		}
	}
	r0, r1 := float64(h[0].Rate()), float64(h[1].Rate())
	if sum := (r0 + r1) / float64(line); sum < 0.94 || sum > 0.97 || math.Abs(r0-r1)/r0 > 0.05 || q > 0.1*bdp {
		t.Fatalf("two flows: %.2f and %.2f Gb/s (sum %.3f of line), queue %.0f B", r0/1e9, r1/1e9, sum, q)
	}
}
