package pipe_test

import (
	"errors"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/uroce/uroce/pkg/link"
	"github.com/uroce/uroce/pkg/link/linktest"
	"github.com/uroce/uroce/pkg/link/pipe"
	"github.com/uroce/uroce/pkg/netem"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// send sends n packets with PSNs from psn0 on l, with the given TOS.
func send(t *testing.T, l *pipe.Link, psn0, n, payload int, tos uint8) {
	t.Helper()
	pk := make([]*link.Packet, 1)
	for i := range n {
		if l.Alloc(pk) != 1 {
			t.Fatal("pool empty")
		}
		if err := linktest.Fill(pk[0], uint32(psn0+i), payload, netip.Addr{}); err != nil {
			t.Fatal(err)
		}
		pk[0].TOS = tos
		if m, err := l.Send(pk); m != 1 || err != nil {
			t.Fatalf("send: %d %v", m, err)
		}
	}
}

type rxPkt struct {
	psn uint32
	ce  bool
}

// drain receives everything due on l.
func drain(t *testing.T, l *pipe.Link) []rxPkt {
	t.Helper()
	var out []rxPkt
	rx := make([]*link.Packet, 16)
	for {
		n, err := l.Recv(rx)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return out
		}
		for _, p := range rx[:n] {
			psn, err := linktest.Check(p)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, rxPkt{psn, p.CE()})
		}
		l.Release(rx[:n])
	}
}

func psns(r []rxPkt) []uint32 {
	var o []uint32
	for _, x := range r {
		o = append(o, x.psn)
	}
	return o
}

func TestPerfect(t *testing.T) {
	for _, c := range []struct{ a, b string }{{"10.0.0.1", "10.0.0.2"}, {"fd00::1", "fd00::2"}} {
		a, b := pipe.New(pipe.Config{A: netip.MustParseAddr(c.a), B: netip.MustParseAddr(c.b), MTU: 9000, Manual: true})
		send(t, a, 0, 10, 4096, link.ECT0)
		var got []rxPkt
		rx := make([]*link.Packet, 16)
		n, _ := b.Recv(rx)
		for _, p := range rx[:n] {
			if p.Remote.String() != c.a || p.Local.String() != c.b || p.TOS != link.ECT0 || p.Unverified {
				t.Fatalf("%+v", p)
			}
			psn, err := linktest.Check(p)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, rxPkt{psn: psn})
		}
		b.Release(rx[:n])
		if !slices.Equal(psns(got), []uint32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}) {
			t.Fatalf("got %v", got)
		}
		st := b.Stats()
		if st.RxPackets != 10 || st.RxICRCErrors != 0 || a.Stats().TxPackets != 10 {
			t.Fatalf("stats %+v %+v", a.Stats(), st)
		}
		// Too big for the MTU, and to someone else.
		pk := make([]*link.Packet, 1)
		a.Alloc(pk)
		linktest.Fill(pk[0], 0, 9000-40, netip.Addr{})
		if _, err := a.Send(pk); !errors.Is(err, link.ErrTooBig) {
			t.Fatalf("err %v", err)
		}
		a.Alloc(pk)
		linktest.Fill(pk[0], 0, 8, netip.MustParseAddr("10.9.9.9"))
		if _, err := a.Send(pk); !errors.Is(err, link.ErrNoRoute) {
			t.Fatalf("err %v", err)
		}
	}
}

// TestSendMixedBatch: a batch with packets the pipe cannot send delivers
// the others in order, drops and frees the bad ones, counts them and
// returns the first one's error.
func TestSendMixedBatch(t *testing.T) {
	a, b := pipe.New(pipe.Config{Buffers: 8, Manual: true})
	pk := make([]*link.Packet, 5)
	if a.Alloc(pk) != 5 {
		t.Fatal("pool empty")
	}
	for i, p := range pk {
		if err := linktest.Fill(p, uint32(i), 64, netip.Addr{}); err != nil {
			t.Fatal(err)
		}
	}
	pk[1].Remote = netip.MustParseAddr("10.9.9.9")
	pk[3].Len = 1500
	n, err := a.Send(pk)
	if n != 3 || !errors.Is(err, link.ErrNoRoute) {
		t.Fatalf("sent %d, %v; want 3 and ErrNoRoute", n, err)
	}
	for i, p := range pk {
		if p != nil {
			t.Fatalf("pkts[%d] not taken", i)
		}
	}
	if got := psns(drain(t, b)); !slices.Equal(got, []uint32{0, 2, 4}) {
		t.Fatalf("got %v", got)
	}
	if st := a.Stats(); st.TxPackets != 3 || st.TxDropped != 2 {
		t.Fatalf("stats %+v", st)
	}
	all := make([]*link.Packet, 8)
	if n := a.Alloc(all); n != 8 {
		t.Fatalf("%d buffers free, want 8", n)
	}
	a.Release(all)
}

// TestPerfectRing: a direction without faults delivers in the order sent,
// each packet due when sent (Next), across partial receives; Close frees
// what is still in flight.
func TestPerfectRing(t *testing.T) {
	a, b := pipe.New(pipe.Config{Buffers: 32, Manual: true})
	a.Advance(t0)
	send(t, a, 0, 6, 64, 0)
	if at, ok := b.Next(); !ok || !at.Equal(t0) {
		t.Fatalf("Next %v %v", at, ok)
	}
	rx := make([]*link.Packet, 4)
	var got []uint32
	recv := func() {
		n, _ := b.Recv(rx)
		for _, p := range rx[:n] {
			psn, err := linktest.Check(p)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, psn)
		}
		b.Release(rx[:n])
	}
	recv()
	a.Advance(t0.Add(time.Millisecond))
	send(t, a, 6, 10, 64, 0)
	if at, _ := b.Next(); !at.Equal(t0) {
		t.Fatalf("Next %v, want the oldest's send time", at)
	}
	for range 4 {
		recv()
	}
	if want := []uint32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}; !slices.Equal(got, want) {
		t.Fatalf("got %v", got)
	}
	if _, ok := b.Next(); ok {
		t.Fatal("Next after draining")
	}
	send(t, a, 16, 5, 64, 0)
	b.Close()
	pk := make([]*link.Packet, 32)
	if n := a.Alloc(pk); n != 32 {
		t.Fatalf("%d buffers free after Close, want 32", n)
	}
	a.Release(pk)
}

func TestFaults(t *testing.T) {
	const n = 2000
	tests := []struct {
		name  string
		f     netem.Faults
		check func(t *testing.T, got []rxPkt, fs netem.Stats, st link.Stats)
	}{
		{"drop", netem.Faults{Drop: 0.2}, func(t *testing.T, got []rxPkt, fs netem.Stats, st link.Stats) {
			if len(got)+int(fs.Dropped) != n || fs.Dropped < n/10 || fs.Dropped > n*3/10 {
				t.Fatalf("received %d, dropped %d", len(got), fs.Dropped)
			}
			if !slices.IsSorted(psns(got)) {
				t.Fatal("drop reordered")
			}
		}},
		{"duplicate", netem.Faults{Duplicate: 0.1}, func(t *testing.T, got []rxPkt, fs netem.Stats, st link.Stats) {
			if len(got) != n+int(fs.Duplicated) || fs.Duplicated == 0 {
				t.Fatalf("received %d, duplicated %d", len(got), fs.Duplicated)
			}
		}},
		{"reorder", netem.Faults{Reorder: 0.05, ReorderAfter: 4}, func(t *testing.T, got []rxPkt, fs netem.Stats, st link.Stats) {
			p := psns(got)
			if len(got) != n || slices.IsSorted(p) || fs.Reordered == 0 {
				t.Fatalf("received %d, reordered %d, sorted %v", len(got), fs.Reordered, slices.IsSorted(p))
			}
			slices.Sort(p)
			for i, x := range p {
				if x != uint32(i) {
					t.Fatalf("PSN %d missing", i)
				}
			}
		}},
		{"corrupt", netem.Faults{Corrupt: 0.1}, func(t *testing.T, got []rxPkt, fs netem.Stats, st link.Stats) {
			if fs.Corrupted == 0 || st.RxICRCErrors != fs.Corrupted || len(got)+int(fs.Corrupted) != n {
				t.Fatalf("received %d, corrupted %d, ICRC errors %d", len(got), fs.Corrupted, st.RxICRCErrors)
			}
		}},
		{"ecn", netem.Faults{ECN: &netem.RED{Kmin: 100 << 10, Kmax: 400 << 10, Pmax: 0.2}}, func(t *testing.T, got []rxPkt, fs netem.Stats, st link.Stats) {
			// Nothing is received until all are sent, so the queue
			// grows by one packet per send: under Kmin no mark, over
			// Kmax every packet marked, some in between.
			per := 1024 + 12 + 4 + 28 // payload, BTH, ICRC, IPv4 and UDP
			ramp := 0
			for i, g := range got {
				q := i * per
				switch {
				case q <= 100<<10 && g.ce:
					t.Fatalf("packet %d marked with queue %d under Kmin", i, q)
				case q >= 400<<10 && !g.ce:
					t.Fatalf("packet %d unmarked with queue %d over Kmax", i, q)
				case q > 100<<10 && q < 400<<10 && g.ce:
					ramp++
				}
			}
			if ramp == 0 || fs.Marked == 0 {
				t.Fatalf("no marks on the ramp (%d marked)", fs.Marked)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var runs [2][]rxPkt
			for r := range runs {
				a, b := pipe.New(pipe.Config{Seed: 42, AtoB: tc.f, Manual: true, Buffers: 2 * n})
				a.Advance(t0)
				send(t, a, 0, n, 1024, link.ECT0)
				a.Advance(t0.Add(time.Second)) // release anything held
				runs[r] = drain(t, b)
				tc.check(t, runs[r], a.FaultStats(), b.Stats())
				a.Close()
				b.Close()
			}
			if !slices.Equal(runs[0], runs[1]) {
				t.Fatal("same seed, different outcome")
			}
		})
	}
}

func TestECNNotECT(t *testing.T) {
	a, b := pipe.New(pipe.Config{AtoB: netem.Faults{ECN: &netem.RED{Kmin: 0, Kmax: 1, Pmax: 1}}, Manual: true})
	send(t, a, 0, 20, 100, link.ECNNotECT)
	for _, g := range drain(t, b) {
		if g.ce {
			t.Fatal("not-ECT packet marked")
		}
	}
}

func TestDelayAndRate(t *testing.T) {
	now := t0
	clock := func() time.Time { return now }
	// 1 MB/s: a 1000-byte datagram takes 1 ms to serialise.
	a, b := pipe.New(pipe.Config{Clock: clock, AtoB: netem.Faults{Delay: 5 * time.Millisecond, Rate: 1e6}})
	payload := 1000 - 28 - 12 - 4
	send(t, a, 0, 3, payload, 0)
	if got := drain(t, b); len(got) != 0 {
		t.Fatalf("delivered early: %v", got)
	}
	for i, want := range []time.Duration{6, 7, 8} {
		at, ok := b.Next()
		if !ok || at.Sub(t0) != want*time.Millisecond {
			t.Fatalf("packet %d due at %v, want %v", i, at.Sub(t0), want*time.Millisecond)
		}
		now = at.Add(-time.Nanosecond)
		if got := drain(t, b); len(got) != 0 {
			t.Fatalf("delivered before due: %v", got)
		}
		now = at
		if got := drain(t, b); len(got) != 1 || got[0].psn != uint32(i) {
			t.Fatalf("at %v got %v", at.Sub(t0), got)
		}
	}
}

func TestWait(t *testing.T) {
	t.Run("realtime", func(t *testing.T) {
		a, b := pipe.New(pipe.Config{AtoB: netem.Faults{Delay: 2 * time.Millisecond}})
		done := make(chan error)
		go func() {
			err := b.Wait(-1)
			done <- err
		}()
		send(t, a, 0, 1, 10, 0)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if got := drain(t, b); len(got) != 1 {
			t.Fatalf("Wait returned but Recv got %v", got)
		}
	})
	t.Run("manual", func(t *testing.T) {
		a, b := pipe.New(pipe.Config{Manual: true, AtoB: netem.Faults{Delay: time.Second}})
		a.Advance(t0)
		send(t, a, 0, 1, 10, 0)
		done := make(chan error)
		go func() { done <- b.Wait(-1) }()
		b.Advance(t0.Add(time.Second))
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if got := drain(t, b); len(got) != 1 {
			t.Fatalf("got %v", got)
		}
		if err := b.Wait(time.Millisecond); err != nil {
			t.Fatalf("timeout: %v", err)
		}
	})
	t.Run("close", func(t *testing.T) {
		_, b := pipe.New(pipe.Config{})
		done := make(chan error)
		go func() { done <- b.Wait(-1) }()
		b.Close()
		if err := <-done; !errors.Is(err, link.ErrClosed) {
			t.Fatalf("Wait after Close: %v", err)
		}
		if _, err := b.Recv(make([]*link.Packet, 1)); !errors.Is(err, link.ErrClosed) {
			t.Fatalf("Recv after Close: %v", err)
		}
	})
}

func BenchmarkSendRecv(b *testing.B) {
	for _, size := range []int{64, 1024, 4096} {
		b.Run(byteSize(size), func(b *testing.B) {
			l1, l2 := pipe.New(pipe.Config{MTU: 9000, AtoB: netem.Faults{Drop: 0.01, ECN: &netem.RED{Kmin: 1 << 10, Kmax: 1 << 20, Pmax: 0.1}}})
			const batch = 32
			pk := make([]*link.Packet, batch)
			rx := make([]*link.Packet, batch)
			b.ReportAllocs()
			b.SetBytes(int64(size * batch))
			for b.Loop() {
				n := l1.Alloc(pk)
				for _, p := range pk[:n] {
					p.Len = size
					p.TOS = link.ECT0
				}
				l1.Send(pk[:n])
				m, _ := l2.Recv(rx)
				l2.Release(rx[:m])
			}
		})
	}
}

func byteSize(n int) string {
	if n >= 1024 {
		return string(rune('0'+n/1024)) + "KiB"
	}
	return "64B"
}
