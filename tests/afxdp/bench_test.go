package afxdp_test

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/internal/netns"
	"github.com/uroce/uroce/pkg/link"
	"github.com/uroce/uroce/pkg/link/afxdp"
)

// TestZeroAllocs checks the steady-state packet path allocates nothing:
// Alloc, fill, Send on one link; Wait, Recv, Release on the other.
func TestZeroAllocs(t *testing.T) {
	netns.RequireRoot(t)
	for _, fam := range []int{4, 6} {
		t.Run(fmt.Sprintf("ipv%d", fam), func(t *testing.T) {
			p := netns.NewPair(t, pairConfig(9000, fam))
			a := open(t, p.A, afxdp.Config{})
			b := open(t, p.B, afxdp.Config{})
			for _, size := range []int{64, 5000} {
				exchange(t, a, b, p.AddrB, []int{size}) // warm: neighbour cache, rings
				r := newRound(t, a, b, p.AddrB, size)
				if n := testing.AllocsPerRun(200, r.run); n != 0 {
					t.Errorf("%d-byte payload: %v allocations per packet", size, n)
				}
			}
		})
	}
}

// round sends one packet from a to b and receives it.
type round struct {
	t          testing.TB
	a, b       link.Link
	tx, rx     []*link.Packet
	dst        netip.Addr
	proto      []byte
	onRecvRoCE func([]byte)
}

func newRound(t testing.TB, a, b link.Link, dst netip.Addr, payload int) *round {
	r := &round{t: t, a: a, b: b, dst: dst, tx: make([]*link.Packet, 1), rx: make([]*link.Packet, 8)}
	if a.Alloc(r.tx) != 1 {
		t.Fatal("alloc")
	}
	fill(t, r.tx[0], 1, payload, dst)
	r.proto = slices.Clone(r.tx[0].RoCE())
	a.Release(r.tx)
	return r
}

func (r *round) send() {
	if r.a.Alloc(r.tx) != 1 {
		r.t.Fatal("alloc")
	}
	p := r.tx[0]
	p.Len = copy(p.Buf[p.Off:], r.proto)
	p.Remote = r.dst
	if n, err := r.a.Send(r.tx); n != 1 {
		r.t.Fatalf("send: %v", err)
	}
}

func (r *round) recv() {
	for {
		if err := r.b.Wait(time.Second); err != nil {
			r.t.Fatal(err)
		}
		n, _ := r.b.Recv(r.rx)
		r.b.Release(r.rx[:n])
		if n > 0 {
			return
		}
	}
}

func (r *round) run() { r.send(); r.recv() }

// roceFrame builds a whole IPv4 RoCE frame between two veth ends for the
// raw baseline.
func roceFrame(t testing.TB, p *netns.Pair, payload int) []byte {
	buf := make([]*link.Packet, 1)
	pk := &link.Packet{Buf: make([]byte, link.Headroom+payload+64), Off: link.Headroom}
	buf[0] = pk
	fill(t, pk, 1, payload, p.AddrB)
	ip := bth.PutDatagramHeaders(pk.Buf, pk.Off, pk.Len, &bth.DatagramFields{
		Src: p.AddrA, Dst: p.AddrB, SrcPort: 0xc000, DstPort: bth.RoCEPort, TTL: 64, DF: true})
	f := pk.Buf[ip-bth.EthernetLen : pk.Off+pk.Len]
	bth.Ethernet(f).Encode(&bth.EthernetFields{Dst: [6]byte(p.B.MAC), Src: [6]byte(p.A.MAC), EtherType: bth.EtherTypeIPv4})
	if err := bth.PutICRC(f[bth.EthernetLen:]); err != nil {
		t.Fatal(err)
	}
	return slices.Clone(f)
}

func openRaw(t testing.TB, v netns.Veth, busy bool) *afxdp.Raw {
	var r *afxdp.Raw
	if err := v.NS.Do(func() (err error) {
		r, err = afxdp.OpenRaw(afxdp.RawConfig{Interface: v.Name, BusyPoll: busy})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkPingPong measures round-trip time, one packet in flight, for
// the raw AF_XDP baseline and the afxdp link, with poll() and busy-poll
// waits. ns/op is the mean RTT; p50-µs is the median.
func BenchmarkPingPong(b *testing.B) {
	netns.RequireRoot(b)
	const payload = 64
	for _, busy := range []bool{false, true} {
		mode := "poll"
		if busy {
			mode = "busy"
		}
		b.Run("raw/"+mode, func(b *testing.B) {
			p := netns.NewPair(b, pairConfig(1500, 4))
			ra, rb := openRaw(b, p.A, busy), openRaw(b, p.B, busy)
			if err := ra.SetFrame(roceFrame(b, p, payload)); err != nil {
				b.Fatal(err)
			}
			var stop atomic.Bool
			var wg sync.WaitGroup
			wg.Go(func() { rb.Echo(&stop) })
			defer func() { stop.Store(true); wg.Wait() }()
			rtt := make([]time.Duration, 1)
			var all []time.Duration
			b.ReportAllocs()
			for b.Loop() {
				if err := ra.PingPong(rtt); err != nil {
					b.Fatal(err)
				}
				all = append(all, rtt[0])
			}
			b.ReportMetric(float64(median(all))/1e3, "p50-µs")
		})
		b.Run("afxdp/"+mode, func(b *testing.B) {
			p := netns.NewPair(b, pairConfig(1500, 4))
			w := afxdp.WaitPoll
			if busy {
				w = afxdp.WaitBusyPoll
			}
			la := open2(b, p.A, afxdp.Config{Wait: w})
			lb := open2(b, p.B, afxdp.Config{Wait: w})
			warm(b, la, lb, p.AddrB)
			warm(b, lb, la, p.AddrA)
			var stop atomic.Bool
			var wg sync.WaitGroup
			wg.Go(func() { echo(lb, &stop) })
			defer func() { stop.Store(true); wg.Wait() }()
			r := newRound(b, la, la, p.AddrB, payload)
			var all []time.Duration
			b.ReportAllocs()
			for b.Loop() {
				t0 := time.Now()
				r.run()
				all = append(all, time.Since(t0))
			}
			b.ReportMetric(float64(median(all))/1e3, "p50-µs")
		})
	}
}

// warm sends from a to b until a packet arrives, so a has resolved its
// next hop (Send drops with link.ErrResolving until then) before anything
// is timed.
func warm(t testing.TB, a, b link.Link, dst netip.Addr) {
	pk, rx := make([]*link.Packet, 1), make([]*link.Packet, 8)
	for start := time.Now(); time.Since(start) < giveUp; {
		if a.Alloc(pk) != 1 {
			t.Fatal("alloc")
		}
		fill(t, pk[0], 0, 0, dst)
		if _, err := a.Send(pk); err != nil && !errors.Is(err, link.ErrResolving) {
			t.Fatal(err)
		}
		b.Wait(10 * time.Millisecond)
		if n, _ := b.Recv(rx); n > 0 {
			b.Release(rx[:n])
			return
		}
	}
	t.Fatalf("%v: next hop never resolved", dst)
}

func open2(b testing.TB, v netns.Veth, cfg afxdp.Config) *afxdp.Link {
	cfg.Interface = v.Name
	var l *afxdp.Link
	if err := v.NS.Do(func() (err error) { l, err = afxdp.Open(cfg); return err }); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	return l
}

// echo sends every packet it receives back to its sender, through the Link
// API (Alloc, copy, Send), until stop is set.
func echo(l link.Link, stop *atomic.Bool) {
	rx := make([]*link.Packet, 32)
	tx := make([]*link.Packet, 32)
	for !stop.Load() {
		l.Wait(10 * time.Millisecond)
		n, _ := l.Recv(rx)
		if n == 0 {
			continue
		}
		k := l.Alloc(tx[:n])
		for i := range k {
			tx[i].Len = copy(tx[i].Buf[tx[i].Off:], rx[i].RoCE())
			tx[i].Remote = rx[i].Remote
		}
		l.Release(rx[:n])
		l.Send(tx[:k])
	}
}

// BenchmarkBlast measures one-way throughput of 4 KiB-payload packets over
// an MTU-9000 veth (multi-buffer), raw AF_XDP against the afxdp link. The
// receiver's count is what is reported, as Gbit/s of RoCE payload.
func BenchmarkBlast(b *testing.B) {
	netns.RequireRoot(b)
	const payload = 4096
	for _, busy := range []bool{false, true} {
		mode := "poll"
		w := afxdp.WaitPoll
		if busy {
			mode, w = "busy", afxdp.WaitBusyPoll
		}
		blast(b, mode, busy, w, payload)
	}
}

func blast(b *testing.B, mode string, busy bool, w afxdp.WaitMode, payload int) {
	b.Run("raw/"+mode, func(b *testing.B) {
		p := netns.NewPair(b, pairConfig(9000, 4))
		ra, rb := openRaw(b, p.A, busy), openRaw(b, p.B, busy)
		frame := roceFrame(b, p, payload)
		if err := ra.SetFrame(frame); err != nil {
			b.Fatal(err)
		}
		var stop, sinkStop atomic.Bool
		var wg sync.WaitGroup
		wg.Go(func() { rb.Sink(&sinkStop) })
		t0 := time.Now()
		wg.Go(func() { ra.Blast(&stop) })
		for b.Loop() {
			time.Sleep(time.Millisecond)
		}
		stop.Store(true)
		el := time.Since(t0)
		time.Sleep(10 * time.Millisecond)
		sinkStop.Store(true)
		wg.Wait()
		got := rb.Received()
		b.ReportMetric(float64(got)*float64(payload)*8/el.Seconds()/1e9, "Gbit/s")
		b.ReportMetric(float64(got)/el.Seconds()/1e3, "kpps")
	})
	b.Run("afxdp/"+mode, func(b *testing.B) {
		p := netns.NewPair(b, pairConfig(9000, 4))
		la := open2(b, p.A, afxdp.Config{Wait: w})
		lb := open2(b, p.B, afxdp.Config{Wait: w})
		r := newRound(b, la, lb, p.AddrB, payload)
		var stop atomic.Bool
		var got atomic.Uint64
		var wg sync.WaitGroup
		wg.Go(func() {
			rx := make([]*link.Packet, 64)
			var n uint64
			for !stop.Load() {
				lb.Wait(time.Millisecond)
				k, _ := lb.Recv(rx)
				lb.Release(rx[:k])
				n += uint64(k)
			}
			got.Store(n)
		})
		var sendStop atomic.Bool
		t0 := time.Now()
		wg.Go(func() {
			tx := make([]*link.Packet, 32)
			for !sendStop.Load() {
				k := la.Alloc(tx)
				for _, q := range tx[:k] {
					q.Len = copy(q.Buf[q.Off:], r.proto)
					q.Remote = p.AddrB
				}
				la.Send(tx[:k])
			}
		})
		for b.Loop() {
			time.Sleep(time.Millisecond)
		}
		sendStop.Store(true)
		el := time.Since(t0)
		time.Sleep(10 * time.Millisecond)
		stop.Store(true)
		wg.Wait()
		b.ReportMetric(float64(got.Load())*float64(payload)*8/el.Seconds()/1e9, "Gbit/s")
		b.ReportMetric(float64(got.Load())/el.Seconds()/1e3, "kpps")
	})
}
