package rc_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/internal/netns"
	"github.com/uroce/uroce/verbs"
)

// floodNet is three hosts on one bridge: A and V, the valid peers, and C,
// the attacker.
type floodNet struct {
	a, v, c       *netns.NS
	addrA, addrV  netip.Addr
	addrC         netip.Addr
	path          []netns.Veth // every veth end, whose drops are the kernel's
	client, victm *side
}

func newFloodNet(t testing.TB) *floodNet {
	netns.RequireRoot(t)
	sw := netns.New(t)
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "br0"}}
	if err := sw.Netlink().LinkAdd(br); err != nil {
		t.Fatalf("bridge: %v", err)
	}
	if err := sw.Netlink().LinkSetUp(br); err != nil {
		t.Fatalf("bridge up: %v", err)
	}
	n := &floodNet{
		addrA: netip.MustParseAddr("10.97.0.1"),
		addrV: netip.MustParseAddr("10.97.0.2"),
		addrC: netip.MustParseAddr("10.97.0.3"),
	}
	host := func(addr netip.Addr) (*netns.NS, netns.Veth) {
		ns := netns.New(t)
		h, s := netns.NewVeth(t, ns, sw)
		l, err := sw.Netlink().LinkByIndex(s.Index)
		if err == nil {
			err = sw.Netlink().LinkSetMaster(l, br)
		}
		if err != nil {
			t.Fatalf("bridge port %s: %v", s.Name, err)
		}
		h.AddAddr(t, netip.PrefixFrom(addr, 24))
		n.path = append(n.path, h, s)
		return ns, h
	}
	n.a, _ = host(n.addrA)
	n.v, _ = host(n.addrV)
	n.c, _ = host(n.addrC)
	n.client, n.victm = open(t, n.a, n.addrA), open(t, n.v, n.addrV)
	// V answers on its own goroutine, as a server would; A drives its
	// engine in its Waits.
	n.victm.d.Start()
	psnA, psnV := verbs.RandomPSN(), verbs.RandomPSN()
	if err := n.client.q.Connect(n.victm.q.Endpoint(psnV), verbs.ConnectOptions{PSN: psnA}); err != nil {
		t.Fatal(err)
	}
	if err := n.victm.q.Connect(n.client.q.Endpoint(psnA), verbs.ConnectOptions{PSN: psnV}); err != nil {
		t.Fatal(err)
	}
	return n
}

// floodKind is one kind of garbage the attacker sends.
type floodKind int

const (
	wrongQPN  floodKind = iota // valid packet, no such QP: NoQP
	badICRC                    // the victim's QP, ICRC flipped: RxICRCErrors
	truncated                  // shorter than a BTH and an ICRC: RxDropped
	spoofed                    // the victim's QP, guessed PSN and key, a source that is not its peer: BadAddr
	nKinds
)

// forgeFlood builds count packets of every kind, IPv4 headers and all,
// for a raw socket in C.
func (n *floodNet) forgeFlood(t testing.TB, seed uint64, count int) [][]byte {
	r := rand.New(rand.NewPCG(seed, 4791))
	qpn := n.victm.q.QPN()
	var pkts [][]byte
	for i := range count * int(nKinds) {
		kind := floodKind(i % int(nKinds))
		f := bth.PacketFields{BTH: bth.BTHFields{Opcode: bth.RCWriteOnly, DestQP: qpn, PSN: bth.PSN(r.Uint32() & 0xffffff), PKey: 0xffff, AckReq: true},
			RETH: bth.RETHFields{VA: n.victm.mr.Addr() + uint64(r.IntN(4096)), RKey: r.Uint32(), DMALen: 64}}
		src := n.addrC
		switch kind {
		case wrongQPN:
			f.BTH.DestQP = 0x100000 | r.Uint32()&0x7fffff // far above any QPN the victim has
		case spoofed:
			// Anyone on the subnet but the peer: the attacker does not
			// have the peer's address (see docs/security.md).
			src = netip.AddrFrom4([4]byte{10, 97, byte(r.IntN(256)), byte(10 + r.IntN(240))})
		}
		payload := make([]byte, 64)
		const off = 64
		buf := make([]byte, off+bth.PacketLen(f.BTH.Opcode, len(payload)))
		m, err := f.Encode(buf[off:], payload)
		if err != nil {
			t.Fatal(err)
		}
		if kind == truncated {
			m = 4 + r.IntN(bth.BTHLen+bth.ICRCLen-4)
		}
		h := bth.DatagramFields{Src: src, Dst: n.addrV, SrcPort: uint16(49152 + r.IntN(16384)), DstPort: bth.RoCEPort, TTL: 64,
			ID: uint16(1 + r.IntN(65535)), DF: true} // a raw socket fills in an ID of 0
		ip := bth.PutDatagramHeaders(buf, off, m, &h)
		if kind != truncated {
			if err := bth.PutICRC(buf[ip : off+m]); err != nil {
				t.Fatal(err)
			}
		}
		if kind == badICRC {
			buf[off+m-1-r.IntN(bth.ICRCLen)] ^= byte(1 + r.IntN(255))
		}
		pkts = append(pkts, buf[ip:off+m])
	}
	return pkts
}

// flood sends pkts round and round from C until stop closes, at most
// perSec a second (0: as fast as one core sends), and returns how many it
// sent.
func (n *floodNet) flood(t testing.TB, pkts [][]byte, perSec int, stop <-chan struct{}) (sent uint64, err error) {
	err = n.c.Do(func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
		if err != nil {
			return fmt.Errorf("raw socket: %w", err)
		}
		defer unix.Close(fd)
		to := &unix.SockaddrInet4{Addr: n.addrV.As4()}
		const burst = 32
		start := time.Now()
		for i := 0; ; i++ {
			if i%burst == 0 {
				select {
				case <-stop:
					return nil
				default:
				}
				if perSec > 0 {
					if ahead := time.Duration(sent)*time.Second/time.Duration(perSec) - time.Since(start); ahead > 0 {
						time.Sleep(ahead)
					}
				}
			}
			switch err := unix.Sendto(fd, pkts[i%len(pkts)], 0, to); err {
			case nil:
				sent++
			case unix.ENOBUFS, unix.EAGAIN:
				// The veth's queue is full: the flood is at the
				// pipe's rate; what was not sent is not counted.
			default:
				return fmt.Errorf("sendto: %w", err)
			}
		}
	})
	return sent, err
}

// kernelDrops is what the kernel dropped on the way, before uroce's socket
// could read it: V's UDP receive buffer's overflows, and every veth end's
// drops (a veth counts a packet its peer's CPU backlog had no room for as
// the sender's tx_dropped).
func (n *floodNet) kernelDrops(t testing.TB) uint64 {
	var d uint64
	st, err := n.v.UDPStats()
	if err != nil {
		t.Fatal(err)
	}
	d += st["RcvbufErrors"]
	for _, v := range n.path {
		l, err := v.NS.Netlink().LinkByIndex(v.Index)
		if err != nil {
			t.Fatal(err)
		}
		if st := l.Attrs().Statistics; st != nil {
			d += st.RxDropped + st.TxDropped
		}
	}
	return d
}

// rejected sums V's counters of refused packets.
func (n *floodNet) rejected() uint64 {
	c, l := n.victm.d.Counters(), n.victm.d.LinkStats()
	return c.NoQP + c.BadAddr + c.BadPacket + c.BadPKey + l.RxICRCErrors + l.RxDropped
}

// pingWrites times iters signaled 64-byte WRITEs from A to V, each waited
// for (a WRITE and its ACK: write_lat's round trip), and checks that each
// landed.
func (n *floodNet) pingWrites(ctx context.Context, t testing.TB, iters, seed int) []time.Duration {
	a := n.client
	rtts := make([]time.Duration, 0, iters)
	var wc [1]verbs.WC
	for i := range iters {
		off := 4096 + (i%64)*64
		fill(a.mr.Buf()[off:off+64], seed+i)
		wr := verbs.SendWR{ID: uint64(i), Opcode: verbs.WRWrite, Flags: verbs.SendSignaled, SGL: sgl(a.mr, off, 64),
			RemoteAddr: n.victm.mr.Addr() + uint64(off), RKey: n.victm.mr.RKey()}
		t0 := time.Now()
		if err := a.q.PostSend(&wr); err != nil {
			t.Fatal(err)
		}
		if _, err := a.cq.Wait(ctx, wc[:]); err != nil {
			t.Fatalf("WRITE %d: %v", i, err)
		}
		rtts = append(rtts, time.Since(t0))
		if wc[0].Status != verbs.WCSuccess {
			t.Fatalf("WRITE %d: %v", i, wc[0].Status)
		}
	}
	return rtts
}

func percentile(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

// floodResult is one quiet and one flooded run of pingWrites.
type floodResult struct {
	quiet, flooded []time.Duration
	sent           uint64        // attacker packets sent
	rejected       uint64        // V's refusals
	kernel         uint64        // V's kernel's drops
	elapsed        time.Duration // of the flooded run
}

func (r floodResult) String() string {
	q50, q99 := percentile(r.quiet, .5), percentile(r.quiet, .99)
	f50, f99 := percentile(r.flooded, .5), percentile(r.flooded, .99)
	return fmt.Sprintf("quiet p50 %v p99 %v; flooded at %.0f packets/s: p50 %v (%.2fx) p99 %v (%.2fx); %d sent, %d refused by uroce, %d dropped by the kernel where counted, %d elsewhere",
		q50, q99, float64(r.sent)/r.elapsed.Seconds(), f50, float64(f50)/float64(q50), f99, float64(f99)/float64(q99),
		r.sent, r.rejected, r.kernel, max(0, int64(r.sent)-int64(r.rejected+r.kernel)))
}

// runFlood measures write round trips quiet, then under a flood from C at
// perSec (0: flat out), and checks that nothing the attacker sent was
// taken: V's memory holds only A's WRITEs, V's QP received only A's
// packets, and every attack packet is refused by uroce or dropped by the
// kernel before it.
func runFlood(t testing.TB, n *floodNet, iters, perSec int) floodResult {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pkts := n.forgeFlood(t, 1, 256)
	n.pingWrites(ctx, t, 200, 0) // warm: neighbours learnt, RTO settled
	var res floodResult
	res.quiet = n.pingWrites(ctx, t, iters, 1000)
	rx0, tx0, rej0, k0 := n.victm.d.Counters().RxPackets, n.client.d.Counters().TxPackets, n.rejected(), n.kernelDrops(t)
	stop := make(chan struct{})
	var (
		wg    sync.WaitGroup
		sent  atomic.Uint64
		ferr  error
		start = time.Now()
	)
	wg.Go(func() {
		s, err := n.flood(t, pkts, perSec, stop)
		sent.Store(s)
		ferr = err
	})
	time.Sleep(50 * time.Millisecond) // the flood is on before the measure starts
	res.flooded = n.pingWrites(ctx, t, iters, 2000)
	close(stop)
	wg.Wait()
	res.elapsed = time.Since(start)
	if ferr != nil {
		t.Fatal(ferr)
	}
	res.sent = sent.Load()
	// Let V's engine read what is still queued.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		res.rejected, res.kernel = n.rejected()-rej0, n.kernelDrops(t)-k0
		if res.rejected+res.kernel >= res.sent {
			break
		}
	}
	// Every attack packet is refused or was dropped before uroce saw it.
	// The kernel's drops may include some of A's packets (the counters
	// do not say whose), so only a run the kernel dropped nothing of is
	// held to an exact sum.
	// Flat out (perSec 0), the kernel also drops where no counter of
	// the namespaces says (a neighbour queue, a CPU's backlog), so only
	// a paced flood is held to the sum; any flood to nothing accepted.
	if got := res.rejected + res.kernel; res.rejected > res.sent || perSec > 0 && (got < res.sent || res.kernel == 0 && got != res.sent) {
		t.Errorf("the attacker sent %d packets; uroce refused %d and the kernel dropped %d",
			res.sent, res.rejected, res.kernel)
	}
	// V's QP took A's packets, a WRITE each and any retransmission,
	// and no other: all of them when the kernel dropped none.
	if rx, tx := n.victm.d.Counters().RxPackets-rx0, n.client.d.Counters().TxPackets-tx0; rx > tx || perSec > 0 && res.kernel == 0 && rx != tx {
		t.Errorf("V's QP received %d packets during the flood, A sent %d (the kernel dropped %d)", rx, tx, res.kernel)
	}
	// V's region holds A's last WRITEs, and nothing else moved.
	snap := n.victm.snapshot()
	want := make([]byte, regionSize)
	copy(want[4096:4096+64*64], n.client.mr.Buf()[4096:4096+64*64])
	if !bytes.Equal(snap, want) {
		i := 0
		for i < len(snap) && snap[i] == want[i] {
			i++
		}
		t.Errorf("V's region differs from A's WRITEs at byte %d", i)
	}
	return res
}

// TestFlood floods the victim of a connection, from a third host on the
// same bridge, with garbage of every kind, while its peer's WRITEs go on:
// none of it lands, every packet is accounted for, and the connection's
// own traffic completes. The flood is paced here, as the suite shares its
// machine; BenchmarkFlood floods flat out and reports what it costs.
func TestFlood(t *testing.T) {
	n := newFloodNet(t)
	res := runFlood(t, n, 1000, 20000)
	t.Log(res)
	c := n.victm.d.Counters()
	l := n.victm.d.LinkStats()
	t.Logf("victim's refusals: no QP %d, bad address %d, ICRC %d, short %d", c.NoQP, c.BadAddr, l.RxICRCErrors, l.RxDropped)
	if res.sent == 0 || c.NoQP == 0 || c.BadAddr == 0 || l.RxICRCErrors == 0 || l.RxDropped == 0 {
		t.Errorf("some kind of garbage was not seen refused: sent %d, no QP %d, bad address %d, ICRC %d, short %d",
			res.sent, c.NoQP, c.BadAddr, l.RxICRCErrors, l.RxDropped)
	}
}

// BenchmarkFlood measures the valid connection's write round trip, quiet
// and under a flat-out flood in the same run, and reports both and their
// ratios (issue targets: p50 within 1.5x, p99 within 3x of quiet):
//
//	go test -run XXX -bench Flood -benchtime 1x ./tests/rc
func BenchmarkFlood(b *testing.B) {
	n := newFloodNet(b)
	for b.Loop() {
		res := runFlood(b, n, 20000, 0)
		q50, q99 := percentile(res.quiet, .5), percentile(res.quiet, .99)
		f50, f99 := percentile(res.flooded, .5), percentile(res.flooded, .99)
		b.ReportMetric(float64(q50.Nanoseconds())/1e3, "quiet-p50-us")
		b.ReportMetric(float64(q99.Nanoseconds())/1e3, "quiet-p99-us")
		b.ReportMetric(float64(f50.Nanoseconds())/1e3, "flood-p50-us")
		b.ReportMetric(float64(f99.Nanoseconds())/1e3, "flood-p99-us")
		b.ReportMetric(float64(f50)/float64(q50), "p50-ratio")
		b.ReportMetric(float64(f99)/float64(q99), "p99-ratio")
		b.ReportMetric(float64(res.sent)/res.elapsed.Seconds(), "flood-pps")
		b.ReportMetric(float64(res.kernel), "kernel-drops")
		b.Log(res)
	}
}
