package verbs_test

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/uroce/uroce/pkg/link"
	"github.com/uroce/uroce/pkg/link/pipe"
	"github.com/uroce/uroce/pkg/link/udp"
	"github.com/uroce/uroce/verbs"
)

// The benchmarks run a perftest-like loop through verbs in inline mode:
// one goroutine posts and polls both devices (run-to-completion, no
// goroutine hand-off), over a real-time pipe and over UDP on loopback.
// Between blocks of its timed loop each one measures, on a second pair of links of
// the same kind, the raw link doing the same packet exchange with no
// transport (the packets of the message one way, its ACK or request the
// other), and reports that (link-ns/op) and verbs' time as a multiple of
// it (x-link).

// benchMTU is the IP MTU of both link kinds, so the path MTU is 4096;
// benchPort keeps the loopback links off 4791, which another stack on the
// machine may hold.
const (
	benchMTU  = 9000
	benchPort = 34791
)

// linkPair opens two connected links of a kind; n picks distinct
// addresses so the baseline's links do not meet the devices'.
func linkPair(tb testing.TB, kind string, n int) (link.Link, link.Link) {
	tb.Helper()
	switch kind {
	case "pipe":
		return pipe.New(pipe.Config{MTU: benchMTU, Buffers: 4096})
	case "udp":
		open := func(i int) link.Link {
			l, err := udp.Open(udp.Config{Addr: netip.AddrFrom4([4]byte{127, 77, byte(n), byte(i)}), Port: benchPort, MTU: benchMTU})
			if err != nil {
				tb.Fatal(err)
			}
			return l
		}
		return open(1), open(2)
	}
	panic(kind)
}

// benchPair is two inline devices with one connected QP each.
type benchPair struct {
	a, b   *verbs.Device
	qa, qb *verbs.QueuePair
	ca, cb *verbs.CQ
	ma, mb *verbs.MR
	wc     [64]verbs.WC
	bGot   int // completions taken from b's CQ while pumping
}

func newBenchPair(tb testing.TB, kind string) *benchPair {
	la, lb := linkPair(tb, kind, 1)
	p := &benchPair{a: verbs.Open(la, verbs.Inline()), b: verbs.Open(lb, verbs.Inline())}
	tb.Cleanup(func() { p.a.Close(); p.b.Close() })
	access := verbs.AccessLocalWrite | verbs.AccessRemoteWrite | verbs.AccessRemoteRead | verbs.AccessRemoteAtomic
	setup := func(d *verbs.Device) (*verbs.QueuePair, *verbs.MR, *verbs.CQ) {
		pd := d.AllocPD()
		cq := d.CreateCQ(256)
		q, err := pd.CreateQP(&verbs.QPInit{SendCQ: cq, RecvCQ: cq, Cap: verbs.QPCap{MaxSendWR: 128, MaxRecvWR: 128}})
		if err != nil {
			tb.Fatal(err)
		}
		mr, err := pd.RegMR(make([]byte, 1<<17), access)
		if err != nil {
			tb.Fatal(err)
		}
		return q, mr, cq
	}
	p.qa, p.ma, p.ca = setup(p.a)
	p.qb, p.mb, p.cb = setup(p.b)
	if err := p.qa.Connect(p.qb.Endpoint(1), verbs.ConnectOptions{PSN: 2}); err != nil {
		tb.Fatal(err)
	}
	if err := p.qb.Connect(p.qa.Endpoint(2), verbs.ConnectOptions{PSN: 1}); err != nil {
		tb.Fatal(err)
	}
	return p
}

// pump polls both devices until a's CQ gives a completion, and returns it.
func (p *benchPair) pump(tb testing.TB) verbs.WC {
	for spins := 0; ; spins++ {
		if p.ca.Poll(p.wc[:1]) == 1 {
			if p.wc[0].Status != verbs.WCSuccess {
				tb.Fatalf("completion %+v", p.wc[0])
			}
			return p.wc[0]
		}
		p.bGot += p.cb.Poll(p.wc[1:])
		if spins > 1<<26 {
			tb.Fatal("no completion")
		}
	}
}

// exchange returns the RoCE packet lengths of one message of size bytes
// at path MTU 4096: the requester's packets and the responder's.
func exchange(op verbs.WROpcode, size int) (req, resp []int) {
	const mtu, bthLen, reth, aeth, icrc = 4096, 12, 16, 4, 4
	n := max(1, (size+mtu-1)/mtu)
	data := make([]int, n)
	for i := range data {
		data[i] = min(mtu, size-i*mtu) + bthLen + icrc
	}
	switch op {
	case verbs.WRRead:
		data[0] += aeth
		data[n-1] += aeth * min(1, n-1)
		return []int{bthLen + reth + icrc}, data
	case verbs.WRWrite:
		data[0] += reth
	}
	return data, []int{bthLen + aeth + icrc}
}

// rawLink does the same packet exchange over two bare links.
type rawLink struct {
	la, lb link.Link
	pk     [64]*link.Packet
	ta, tb netip.Addr
}

func newRawLink(tb testing.TB, kind string) *rawLink {
	la, lb := linkPair(tb, kind, 2)
	tb.Cleanup(func() { la.Close(); lb.Close() })
	return &rawLink{la: la, lb: lb, ta: la.Info().Addr, tb: lb.Info().Addr}
}

// send sends packets of the given lengths from one link to the other and
// receives them there.
func (r *rawLink) send(tb testing.TB, from, to link.Link, dst netip.Addr, lens []int) {
	for off := 0; off < len(lens); {
		k := min(len(lens)-off, len(r.pk))
		if got := from.Alloc(r.pk[:k]); got != k {
			tb.Fatalf("alloc %d of %d", got, k)
		}
		for i, p := range r.pk[:k] {
			p.Len, p.Remote = lens[off+i], dst
			clear(p.Buf[p.Off : p.Off+p.Len])
		}
		if _, err := from.Send(r.pk[:k]); err != nil {
			tb.Fatal(err)
		}
		off += k
	}
	for got := 0; got < len(lens); {
		n, err := to.Recv(r.pk[:])
		if err != nil {
			tb.Fatal(err)
		}
		to.Release(r.pk[:n])
		got += n
	}
}

// baseline returns a function that does one raw link exchange: the
// request packets one way and, once per window, the response packets back.
func baseline(tb testing.TB, r *rawLink, req, resp []int, window int) func() {
	i := 0
	return func() {
		r.send(tb, r.la, r.lb, r.tb, req)
		if i++; i%window == 0 {
			r.send(tb, r.lb, r.la, r.ta, resp)
		}
	}
}

// interleave runs the baseline in blocks between blocks of the timed
// loop, with the timer stopped: the machine is shared and its load
// drifts, so verbs and the bare link must be timed side by side for their
// ratio to mean something.
type interleave struct {
	base  func()
	n     int // loop iterations since the last block
	ns    time.Duration
	count int
}

// block is how many loop iterations alternate with as many exchanges.
const block = 256

func (il *interleave) tick(b *testing.B) {
	if il.n++; il.n < block {
		return
	}
	il.n = 0
	b.StopTimer()
	il.run()
	b.StartTimer()
}

func (il *interleave) run() {
	start := time.Now()
	for range block {
		il.base()
	}
	il.ns += time.Since(start)
	il.count += block
}

// report adds the baseline and the ratio to it to b's results.
func (il *interleave) report(b *testing.B) {
	if il.count == 0 {
		il.run()
	}
	ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	link := float64(il.ns.Nanoseconds()) / float64(il.count)
	b.ReportMetric(link, "link-ns/op")
	b.ReportMetric(ns/link, "x-link")
}

// BenchmarkLatency: one signaled WR at a time, posted and completed, as
// ib_write_lat, ib_read_lat and ib_send_lat measure (a round trip each).
func BenchmarkLatency(b *testing.B) {
	for _, kind := range []string{"pipe", "udp"} {
		for _, op := range []verbs.WROpcode{verbs.WRWrite, verbs.WRRead, verbs.WRSend} {
			for _, size := range []int{8, 4096, 65536} {
				b.Run(fmt.Sprintf("%s/%v/%d", kind, op, size), func(b *testing.B) {
					p := newBenchPair(b, kind)
					req, resp := exchange(op, size)
					il := interleave{base: baseline(b, newRawLink(b, kind), req, resp, 1)}
					wr := verbs.SendWR{Opcode: op, Flags: verbs.SendSignaled, SGL: []verbs.SGE{p.ma.SGE(0, size)},
						RemoteAddr: p.mb.Addr(), RKey: p.mb.RKey()}
					rwr := verbs.RecvWR{SGL: []verbs.SGE{p.mb.SGE(0, size)}}
					b.SetBytes(int64(size))
					b.ReportAllocs()
					for b.Loop() {
						if op == verbs.WRSend {
							if err := p.qb.PostRecv(&rwr); err != nil {
								b.Fatal(err)
							}
						}
						if err := p.qa.PostSend(&wr); err != nil {
							b.Fatal(err)
						}
						p.pump(b)
						for op == verbs.WRSend && p.bGot == 0 {
							p.bGot += p.cb.Poll(p.wc[1:])
						}
						p.bGot = 0
						il.tick(b)
					}
					il.report(b)
				})
			}
		}
	}
}

// BenchmarkBandwidth keeps 32 signaled WRITEs or READs in flight, as
// ib_write_bw and ib_read_bw do; its baseline streams the same packets
// with one packet back per 32 messages.
func BenchmarkBandwidth(b *testing.B) {
	const window = 32
	for _, kind := range []string{"pipe", "udp"} {
		for _, op := range []verbs.WROpcode{verbs.WRWrite, verbs.WRRead} {
			for _, size := range []int{64, 4096, 65536} {
				b.Run(fmt.Sprintf("%s/%v/%d", kind, op, size), func(b *testing.B) {
					p := newBenchPair(b, kind)
					req, resp := exchange(op, size)
					if op == verbs.WRRead {
						req, resp = resp, req // the data flows back
					}
					il := interleave{base: baseline(b, newRawLink(b, kind), req, resp[:1], window)}
					wr := verbs.SendWR{Opcode: op, Flags: verbs.SendSignaled, SGL: []verbs.SGE{p.ma.SGE(0, size)},
						RemoteAddr: p.mb.Addr(), RKey: p.mb.RKey()}
					b.SetBytes(int64(size))
					b.ReportAllocs()
					inflight := 0
					for b.Loop() {
						for inflight >= window {
							inflight -= p.ca.Poll(p.wc[:])
							p.cb.Poll(p.wc[:0])
						}
						if err := p.qa.PostSend(&wr); err != nil {
							b.Fatal(err)
						}
						inflight++
						il.tick(b)
					}
					for inflight > 0 {
						inflight -= p.ca.Poll(p.wc[:])
						p.cb.Poll(p.wc[:0])
					}
					il.report(b)
				})
			}
		}
	}
}

// BenchmarkLatencyBackground: as BenchmarkLatency with both devices
// started: each post is handed to the device's goroutine (a request slot
// on the lock-free ring and a link wake), each completion waited for in
// CQ.Wait, so the price of the hand-over shows against the inline numbers.
func BenchmarkLatencyBackground(b *testing.B) {
	for _, kind := range []string{"pipe", "udp"} {
		for _, op := range []verbs.WROpcode{verbs.WRWrite, verbs.WRRead} {
			for _, size := range []int{8, 4096} {
				b.Run(fmt.Sprintf("%s/%v/%d", kind, op, size), func(b *testing.B) {
					p := newBenchPair(b, kind)
					p.a.Start()
					p.b.Start()
					req, resp := exchange(op, size)
					il := interleave{base: baseline(b, newRawLink(b, kind), req, resp, 1)}
					wr := verbs.SendWR{Opcode: op, Flags: verbs.SendSignaled, SGL: []verbs.SGE{p.ma.SGE(0, size)},
						RemoteAddr: p.mb.Addr(), RKey: p.mb.RKey()}
					ctx := context.Background()
					b.SetBytes(int64(size))
					b.ReportAllocs()
					for b.Loop() {
						if err := p.qa.PostSend(&wr); err != nil {
							b.Fatal(err)
						}
						if _, err := p.ca.Wait(ctx, p.wc[:1]); err != nil || p.wc[0].Status != verbs.WCSuccess {
							b.Fatalf("%v %+v", err, p.wc[0])
						}
						il.tick(b)
					}
					il.report(b)
				})
			}
		}
	}
}
