package rc_test

import (
	"bytes"
	"context"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/internal/netns"
	"github.com/uroce/uroce/verbs"
)

// forger sends hand-made RoCE requests to a QP from a UDP socket of its
// own: what a buggy or hostile peer could put on the wire.
type forger struct {
	c        net.Conn
	src, dst netip.Addr
	sport    uint16
}

// newForger opens the forger's socket in ns, bound to src (any free port),
// toward dst's RoCE port.
func newForger(t *testing.T, ns *netns.NS, src, dst netip.Addr) *forger {
	t.Helper()
	f := &forger{src: src, dst: dst}
	err := ns.Do(func() (err error) {
		d := net.Dialer{LocalAddr: net.UDPAddrFromAddrPort(netip.AddrPortFrom(src, 0)),
			Control: func(_, _ string, rc syscall.RawConn) error {
				var serr error
				err := rc.Control(func(fd uintptr) {
					serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DO)
				})
				if err != nil {
					return err
				}
				return serr
			}}
		f.c, err = d.Dial("udp4", netip.AddrPortFrom(dst, bth.RoCEPort).String())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.c.Close() })
	f.sport = uint16(f.c.LocalAddr().(*net.UDPAddr).Port)
	return f
}

// send encodes p with payload, computes its ICRC over the headers the
// kernel will write, and sends it.
func (f *forger) send(t *testing.T, p *bth.PacketFields, payload []byte) {
	t.Helper()
	const off = 64
	buf := make([]byte, off+bth.PacketLen(p.BTH.Opcode, len(payload)))
	n, err := p.Encode(buf[off:], payload)
	if err != nil {
		t.Fatal(err)
	}
	ip := bth.PutDatagramHeaders(buf, off, n, &bth.DatagramFields{Src: f.src, Dst: f.dst, SrcPort: f.sport, DstPort: bth.RoCEPort, TTL: 64, DF: true})
	if err := bth.PutICRC(buf[ip : off+n]); err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.Write(buf[off : off+n]); err != nil {
		t.Fatal(err)
	}
}

// waitCounter polls until get reaches want, or 5 s pass.
func waitCounter(get func() uint64, want uint64) uint64 {
	deadline := time.Now().Add(5 * time.Second)
	v := get()
	for v < want && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
		v = get()
	}
	return v
}

// TestHostileRequests plays a connected peer that misbehaves: from the
// peer's own address (so past the address check) it replays a WRITE at a
// PSN already executed, sends PSNs out of the window, a frame larger than
// the path MTU, and asks for an atomic at an unaligned address; then the
// victim vanishes in the middle of a transfer. Each ends as IBA says,
// none changes memory, and the connection, or a new one, goes on.
func TestHostileRequests(t *testing.T) {
	netns.RequireRoot(t)
	// Link MTU 9000, path MTU 1024: room on the wire for a frame over
	// the path MTU.
	p := netns.NewPair(t, netns.PairConfig{MTU: 9000,
		A: []netip.Prefix{netip.MustParsePrefix("10.96.0.1/24")},
		B: []netip.Prefix{netip.MustParsePrefix("10.96.0.2/24")},
	})
	a, b := open(t, p.A.NS, p.AddrA), open(t, p.B.NS, p.AddrB)
	a.d.Start()
	var psnA, psnB uint32
	connect := func(o verbs.ConnectOptions) {
		t.Helper()
		for _, q := range []*verbs.QueuePair{a.q, b.q} {
			if err := q.Modify(&verbs.QPAttr{State: verbs.StateReset}, verbs.AttrState); err != nil {
				t.Fatal(err)
			}
		}
		psnA, psnB = verbs.RandomPSN(), verbs.RandomPSN()
		ob := o
		ob.PSN = psnB
		if err := b.q.Connect(a.q.Endpoint(psnA), ob); err != nil {
			t.Fatal(err)
		}
		oa := o
		oa.PSN = psnA
		if err := a.q.Connect(b.q.Endpoint(psnB), oa); err != nil {
			t.Fatal(err)
		}
	}
	connect(verbs.ConnectOptions{PathMTU: 1024})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	fill(a.mr.Buf(), 5)
	before := a.snapshot()
	f := newForger(t, p.B.NS, p.AddrB, p.AddrA)
	nextPSN := bth.PSN(psnB) // B's next request PSN, as A expects it

	// write has B WRITE n bytes of pattern seed to off in A's region and
	// checks that they landed; before follows.
	write := func(t *testing.T, off, n, seed int) {
		t.Helper()
		fill(b.mr.Buf()[:n], seed)
		wr := verbs.SendWR{ID: uint64(seed), Opcode: verbs.WRWrite, Flags: verbs.SendSignaled, SGL: sgl(b.mr, 0, n),
			RemoteAddr: a.mr.Addr() + uint64(off), RKey: a.mr.RKey()}
		if err := b.q.PostSend(&wr); err != nil {
			t.Fatal(err)
		}
		b.next(ctx, t, "the peer's WRITE")
		copy(before[off:], b.mr.Buf()[:n])
		if !bytes.Equal(a.snapshot(), before) {
			t.Fatalf("the peer's WRITE of %d bytes at %d did not land, or more moved", n, off)
		}
		nextPSN = nextPSN.Add((n + 1023) / 1024)
	}
	forgeWrite := func(t *testing.T, psn bth.PSN, off int, payload []byte) {
		t.Helper()
		f.send(t, &bth.PacketFields{BTH: bth.BTHFields{Opcode: bth.RCWriteOnly, DestQP: a.q.QPN(), PSN: psn, PKey: 0xffff, AckReq: true},
			RETH: bth.RETHFields{VA: a.mr.Addr() + uint64(off), RKey: a.mr.RKey(), DMALen: uint32(len(payload))}}, payload)
	}

	t.Run("replayed WRITE", func(t *testing.T) {
		write(t, 0, 64, 11)
		old := nextPSN.Add(-1) // the PSN that WRITE used
		dup0 := a.d.Counters().DupRequests
		// The same request, its bytes changed: a replay is a duplicate
		// (IBA 9.7.5.1.1), answered and not executed again.
		forgeWrite(t, old, 0, bytes.Repeat([]byte{0xee}, 64))
		if got := waitCounter(func() uint64 { return a.d.Counters().DupRequests }, dup0+1); got != dup0+1 {
			t.Fatalf("duplicate_request moved by %d, want 1", got-dup0)
		}
		if !bytes.Equal(a.snapshot(), before) {
			t.Fatal("a replayed WRITE changed memory")
		}
		write(t, 4096, 64, 12)
	})

	t.Run("PSNs out of the window", func(t *testing.T) {
		seq0, drop0, dup0 := a.d.Counters().SeqNAKsSent, a.d.Counters().Dropped, a.d.Counters().DupRequests
		// Ahead of the expected PSN: one sequence NAK, then silence
		// until the expected PSN comes (IBA 9.7.5.2.2). Far behind,
		// past half the PSN space: still a duplicate in the window's
		// arithmetic, never executed.
		for _, d := range []int{1, 1000, 1 << 22} {
			forgeWrite(t, nextPSN.Add(d), 0, bytes.Repeat([]byte{0xdd}, 64))
		}
		forgeWrite(t, nextPSN.Add(1<<23+1), 0, bytes.Repeat([]byte{0xdd}, 64))
		sum := func() uint64 {
			c := a.d.Counters()
			return c.SeqNAKsSent - seq0 + c.Dropped - drop0 + c.DupRequests - dup0
		}
		if got := waitCounter(sum, 4); got != 4 {
			t.Fatalf("out_of_seq_request, dropped and duplicate_request moved by %d, want 4", got)
		}
		if c := a.d.Counters(); c.SeqNAKsSent-seq0 != 1 {
			t.Errorf("out_of_seq_request moved by %d, want 1 (one NAK until the expected PSN)", c.SeqNAKsSent-seq0)
		}
		if !bytes.Equal(a.snapshot(), before) {
			t.Fatal("a WRITE out of the window changed memory")
		}
		write(t, 8192, 64, 13)
	})

	t.Run("frame over the path MTU", func(t *testing.T) {
		inv0 := a.d.Counters().ErrNAKsSent
		// 2048 bytes at path MTU 1024: an invalid request (rxe's
		// payload check), NAKed, and the responder's QP errs.
		forgeWrite(t, nextPSN, 0, bytes.Repeat([]byte{0xcc}, 2048))
		if got := waitCounter(func() uint64 { return a.d.Counters().ErrNAKsSent }, inv0+1); got != inv0+1 {
			t.Fatalf("err_naks_sent moved by %d, want 1", got-inv0)
		}
		if !bytes.Equal(a.snapshot(), before) {
			t.Fatal("an oversized WRITE changed memory")
		}
		connect(verbs.ConnectOptions{PathMTU: 1024})
		nextPSN = bth.PSN(psnB)
		write(t, 12288, 64, 14)
	})

	t.Run("atomic at an unaligned address", func(t *testing.T) {
		for _, op := range []verbs.WROpcode{verbs.WRFetchAdd, verbs.WRCompareSwap} {
			wr := verbs.SendWR{ID: 7, Opcode: op, Flags: verbs.SendSignaled, SGL: sgl(b.mr, 0, 8),
				RemoteAddr: a.mr.Addr() + 4, RKey: a.mr.RKey(), CompareAdd: 1, Swap: 2}
			if err := b.q.PostSend(&wr); err != nil {
				t.Fatal(err)
			}
			var wc [1]verbs.WC
			if _, err := b.cq.Wait(ctx, wc[:]); err != nil {
				t.Fatal(err)
			}
			// IBA 9.4.5: an atomic's VA must be 8-byte aligned, or the
			// responder NAKs it as an invalid request.
			if wc[0].Status != verbs.WCRemInvReqErr {
				t.Fatalf("%v at an unaligned address: %v, want a remote invalid request error", op, wc[0].Status)
			}
			if !bytes.Equal(a.snapshot(), before) {
				t.Fatalf("an unaligned %v changed memory", op)
			}
			connect(verbs.ConnectOptions{PathMTU: 1024})
			nextPSN = bth.PSN(psnB)
		}
		write(t, 16384, 64, 15)
	})

	t.Run("peer vanishes mid-transfer", func(t *testing.T) {
		// Short timers so the retries run out in a fraction of a
		// second: 4.096 µs × 2^10 = 4 ms, three retries.
		connect(verbs.ConnectOptions{PathMTU: 1024, Timeout: 10, RetryCnt: 3})
		const n = 12
		for i := range n {
			wr := verbs.SendWR{ID: uint64(100 + i), Opcode: verbs.WRWrite, Flags: verbs.SendSignaled, SGL: sgl(b.mr, 0, 16384),
				RemoteAddr: a.mr.Addr() + 65536, RKey: a.mr.RKey()}
			if err := b.q.PostSend(&wr); err != nil {
				t.Fatal(err)
			}
			if i == 2 {
				a.d.Close() // A is gone: no more ACKs
			}
		}
		var wcs []verbs.WC
		for len(wcs) < n {
			var wc [n]verbs.WC
			k, err := b.cq.Wait(ctx, wc[:])
			if err != nil {
				t.Fatalf("after %d completions: %v", len(wcs), err)
			}
			wcs = append(wcs, wc[:k]...)
		}
		// Those A acknowledged succeed; the first it did not fails
		// with retry exceeded; the rest are flushed, in order.
		failed := -1
		for i, wc := range wcs {
			if wc.WRID != uint64(100+i) {
				t.Fatalf("completion %d is WR %d: out of order", i, wc.WRID)
			}
			switch {
			case failed < 0 && wc.Status == verbs.WCSuccess:
			case failed < 0 && wc.Status == verbs.WCRetryExcErr:
				failed = i
			case failed >= 0 && wc.Status == verbs.WCWRFlushErr:
			default:
				t.Fatalf("completion %d: %v (first failure at %d)", i, wc.Status, failed)
			}
		}
		if failed < 0 {
			t.Fatal("every WRITE succeeded after the peer closed")
		}
		if c := b.d.Counters(); c.RetryExcErrs != 1 {
			t.Errorf("retry_exceeded_err %d, want 1", c.RetryExcErrs)
		}
	})
}
