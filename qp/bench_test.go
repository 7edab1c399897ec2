package qp

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// pump runs both sides until a's send CQ holds want completions, without
// allocating: the benchmarks' event loop.
func (p *pair) pump(cq *CQ, want int) {
	for cq.Len() < want {
		if !p.step() && !p.advance() {
			p.t.Fatal("quiet")
		}
	}
}

// BenchmarkRoundTrip: one signaled WR at a time, posted and completed over
// the pipe (both engines in this goroutine): the transport's cost per
// message, not a network's.
func BenchmarkRoundTrip(b *testing.B) {
	for _, op := range []WROpcode{WRWrite, WRRead, WRSend} {
		for _, size := range []int{8, 4096, 65536} {
			b.Run(fmt.Sprintf("%v/%d", op, size), func(b *testing.B) {
				p := newPair(b, pairConfig{mtu: 4096, retry: 7, rnrRetry: 7, mem: 1 << 17})
				wr := SendWR{Opcode: op, Flags: FlagSignaled, SGL: []SGE{p.a.sge(0, size)}, RemoteAddr: memBase + 65536, RKey: p.b.mr.RKey}
				rwr := RecvWR{SGL: []SGE{p.b.sge(65536, size)}}
				b.SetBytes(int64(size))
				b.ReportAllocs()
				for b.Loop() {
					if op == WRSend {
						if err := p.b.qp.PostRecv(&rwr); err != nil {
							b.Fatal(err)
						}
					}
					if err := p.a.qp.PostSend(p.now, &wr); err != nil {
						b.Fatal(err)
					}
					p.pump(p.a.scq, 1)
					p.a.scq.Poll(p.a.wc[:])
					p.b.rcq.Poll(p.b.wc[:])
				}
			})
		}
	}
}

// BenchmarkBandwidth keeps 32 WRs in flight, one completion per WR.
func BenchmarkBandwidth(b *testing.B) {
	for _, op := range []WROpcode{WRWrite, WRRead} {
		for _, size := range []int{64, 4096, 65536} {
			b.Run(fmt.Sprintf("%v/%d", op, size), func(b *testing.B) {
				p := newPair(b, pairConfig{mtu: 4096, retry: 7, rnrRetry: 7, mem: 1 << 17})
				wr := SendWR{Opcode: op, Flags: FlagSignaled, SGL: []SGE{p.a.sge(0, size)}, RemoteAddr: memBase + 65536, RKey: p.b.mr.RKey}
				b.SetBytes(int64(size))
				benchFlight(b, p, &wr, 32)
			})
		}
	}
}

// benchFlight posts wr once per iteration with at most depth in flight,
// one completion each, and reports allocations.
func benchFlight(b *testing.B, p *pair, wr *SendWR, depth int) {
	b.ReportAllocs()
	inflight := 0
	for b.Loop() {
		for inflight >= depth {
			if !p.step() && !p.advance() {
				b.Fatal("quiet")
			}
			inflight -= p.a.scq.Poll(p.a.wc[:])
		}
		if err := p.a.qp.PostSend(p.now, wr); err != nil {
			b.Fatal(err)
		}
		inflight++
	}
}

// BenchmarkManyQPs: a 64-byte WRITE round trip on each of n connected QP
// pairs in turn; the cost per message should not grow with n.
func BenchmarkManyQPs(b *testing.B) { benchManyQPs(b, manyQPCounts, nil, nil) }

var manyQPCounts = []int{10, 1000, 10000}

// BenchmarkQPCountCurve: BenchmarkManyQPs at more counts of QP pairs,
// from 10 to 20 000, to show where the lines a message touches leave the
// cache the host gives (verbs/BENCHMARKS.md).
func BenchmarkQPCountCurve(b *testing.B) {
	benchManyQPs(b, []int{10, 1000, 2500, 5000, 10000, 20000}, nil, nil)
}

// benchManyQPs connects n QP pairs for each n in counts and times
// one signaled 64-byte WRITE per iteration, each pair once per round of n,
// in an order shuffled once with a fixed seed (manyQPs).
func benchManyQPs(b *testing.B, counts []int, prepare func(p *pair), setup func(p *pair, x *QP)) {
	for _, n := range counts {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			p, qa, wr := manyQPs(b, n, prepare, setup)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if err := qa[i].PostSend(p.now, &wr); err != nil {
					b.Fatal(err)
				}
				p.pump(p.a.scq, 1)
				p.a.scq.Poll(p.a.wc[:1])
				if i++; i == n {
					i = 0
				}
			}
		})
	}
}

// manyQPs connects n QP pairs and returns a's QPs in an order shuffled
// once with a fixed seed, and a signaled 64-byte WRITE to post on them:
// a service's connections do not take turns in the order they were
// created, and walking the QPs in allocation order lets the processor's
// prefetchers fetch the next QP's lines ahead, which hides the very
// misses the benchmarks are there to count. prepare runs on the pair
// before the extra QPs exist; setup on each extra QP once it is
// connected.
func manyQPs(b *testing.B, n int, prepare func(p *pair), setup func(p *pair, x *QP)) (*pair, []*QP, SendWR) {
	p := newPair(b, pairConfig{mtu: 1024, retry: 7, rnrRetry: 7, mem: 4096, sendWR: 4, recvWR: 1})
	if prepare != nil {
		prepare(p)
	}
	qa := []*QP{p.a.qp}
	for i := 1; i < n; i++ {
		x, _ := p.extraQP(4, 0)
		if setup != nil {
			setup(p, x)
		}
		qa = append(qa, x)
	}
	rand.New(rand.NewPCG(19, uint64(n))).Shuffle(n, func(i, j int) { qa[i], qa[j] = qa[j], qa[i] })
	wr := SendWR{Opcode: WRWrite, Flags: FlagSignaled, SGL: []SGE{p.a.sge(0, 64)}, RemoteAddr: memBase + 1024, RKey: p.b.mr.RKey}
	return p, qa, wr
}

// BenchmarkMessagePhases is BenchmarkManyQPs with each message's steps
// timed apart, to show where what many QPs add goes: PostSend; the
// requester's turn, which builds and sends the WRITE; the responder's
// receive, which places it and sends the ACK; the requester's receive
// of the ACK, which completes the WR; and the turns that find nothing
// more to do, with Poll. Each step is driven by hand in the order
// pump would take it, and reported as ns a message; each includes one
// reading of the clock, whose cost is the same at every count.
func BenchmarkMessagePhases(b *testing.B) {
	for _, n := range manyQPCounts {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			p, qa, wr := manyQPs(b, n, nil, nil)
			var sum [5]time.Duration
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				t0 := time.Now()
				if err := qa[i].PostSend(p.now, &wr); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				p.a.e.Process(p.now) // the WRITE goes out
				t2 := time.Now()
				p.b.receive(p.now) // placed; its ACK goes out
				t3 := time.Now()
				p.a.receive(p.now) // the ACK completes the WR
				t4 := time.Now()
				p.b.e.Process(p.now)
				p.a.e.Process(p.now)
				if p.a.scq.Poll(p.a.wc[:1]) != 1 || p.a.wc[0].Status != WCSuccess {
					b.Fatalf("message %d: no successful completion after its ACK", i)
				}
				t5 := time.Now()
				for k, d := range [...]time.Duration{t1.Sub(t0), t2.Sub(t1), t3.Sub(t2), t4.Sub(t3), t5.Sub(t4)} {
					sum[k] += d
				}
				if i++; i == n {
					i = 0
				}
			}
			for k, unit := range [...]string{"post-ns/op", "send-ns/op", "respond-ns/op", "complete-ns/op", "poll-ns/op"} {
				b.ReportMetric(float64(sum[k].Nanoseconds())/float64(b.N), unit)
			}
		})
	}
}
