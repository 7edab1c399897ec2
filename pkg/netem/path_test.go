package netem_test

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/uroce/uroce/pkg/netem"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// box is what a test packet's methods record.
type box struct {
	ce, corrupted, freed bool
	copies               int
}

// pkt is a test packet: n bytes, ECN-capable or not, with spare buffers
// for copies.
type pkt struct {
	id    int
	n     int
	ect   bool
	b     *box
	spare *int
}

func (p pkt) Len() int             { return p.n }
func (p pkt) ECT() bool            { return p.ect }
func (p pkt) MarkCE()              { p.b.ce = true }
func (p pkt) Corrupt(r *rand.Rand) { r.IntN(p.n * 8); p.b.corrupted = true }
func (p pkt) Free()                { p.b.freed = true }
func (p pkt) Copy() (pkt, bool) {
	if *p.spare == 0 {
		return pkt{}, false
	}
	*p.spare--
	p.b.copies++
	c := p
	c.id += 1000
	c.b = &box{}
	return c, true
}

const ms = time.Millisecond

type send struct {
	at  time.Duration // after t0
	n   int
	ect bool
}

type got struct {
	id int
	at time.Duration // delivery, after t0
	ce bool
}

// run sends each packet at its time, then delivers everything.
func run(t *testing.T, f netem.Faults, seed uint64, spare int, sends []send) ([]got, netem.Stats, []*box) {
	t.Helper()
	p := netem.NewPath[pkt](f, rand.New(rand.NewPCG(seed, 1)))
	var boxes []*box
	for i, s := range sends {
		b := &box{}
		boxes = append(boxes, b)
		p.Send(t0.Add(s.at), pkt{id: i, n: s.n, ect: s.ect, b: b, spare: &spare})
	}
	var out []got
	for {
		at, ok := p.Next()
		if !ok {
			break
		}
		v, ok := p.Deliver(at)
		if !ok {
			t.Fatalf("Next said %v, Deliver had nothing", at.Sub(t0))
		}
		out = append(out, got{v.id, at.Sub(t0), v.b.ce})
	}
	return out, p.Stats(), boxes
}

func TestPathBottleneck(t *testing.T) {
	same := func(n int, sz int, ect bool) []send {
		s := make([]send, n)
		for i := range s {
			s[i] = send{0, sz, ect}
		}
		return s
	}
	tests := []struct {
		name  string
		f     netem.Faults
		sends []send
		want  []got
		stats netem.Stats
	}{
		{"perfect", netem.Faults{}, same(3, 1000, false),
			[]got{{0, 0, false}, {1, 0, false}, {2, 0, false}}, netem.Stats{}},
		{"delay", netem.Faults{Delay: 5 * ms}, []send{{0, 100, false}, {1 * ms, 100, false}},
			[]got{{0, 5 * ms, false}, {1, 6 * ms, false}}, netem.Stats{}},
		// 1 MB/s: a 1000-byte packet takes 1 ms to serialise.
		{"rate", netem.Faults{Rate: 1e6, Delay: 5 * ms}, same(3, 1000, false),
			[]got{{0, 6 * ms, false}, {1, 7 * ms, false}, {2, 8 * ms, false}}, netem.Stats{}},
		{"rate idle", netem.Faults{Rate: 1e6}, []send{{0, 1000, false}, {3 * ms, 1000, false}},
			[]got{{0, 1 * ms, false}, {1, 4 * ms, false}}, netem.Stats{}},
		// The third finds 2000 bytes ahead of it: over 2500 with its own.
		{"rate tail drop", netem.Faults{Rate: 1e6, QueueLimit: 2500}, same(4, 1000, false),
			[]got{{0, 1 * ms, false}, {1, 2 * ms, false}}, netem.Stats{QueueDropped: 2}},
		// Without a rate the queue is what is in flight.
		{"in flight tail drop", netem.Faults{Delay: ms, QueueLimit: 2000}, same(3, 1000, false),
			[]got{{0, ms, false}, {1, ms, false}}, netem.Stats{QueueDropped: 1}},
		// Kmin 1000, Kmax 1500: the first two find 0 and 1000 bytes, the
		// third 2000, over Kmax, and is marked if ECN-capable.
		{"red over kmax", netem.Faults{Delay: ms, ECN: &netem.RED{Kmin: 1000, Kmax: 1500, Pmax: 0.5}},
			[]send{{0, 1000, true}, {0, 1000, true}, {0, 1000, true}, {0, 1000, false}},
			[]got{{0, ms, false}, {1, ms, false}, {2, ms, true}, {3, ms, false}}, netem.Stats{Marked: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, st, _ := run(t, tt.f, 1, 0, tt.sends)
			if !slices.Equal(out, tt.want) {
				t.Errorf("delivered %v, want %v", out, tt.want)
			}
			if st != tt.stats {
				t.Errorf("stats %+v, want %+v", st, tt.stats)
			}
		})
	}
}

// TestPathDraws: each stage draws from the random source only when its
// probability is set (RED only on its ramp), so a run without a fault
// keeps the sequence of the others.
func TestPathDraws(t *testing.T) {
	tests := []struct {
		name  string
		f     netem.Faults
		draws bool
	}{
		{"perfect", netem.Faults{Delay: ms, Rate: 1e6}, false},
		{"red under kmin", netem.Faults{ECN: &netem.RED{Kmin: 1 << 20, Kmax: 2 << 20, Pmax: 1}}, false},
		{"red over kmax", netem.Faults{ECN: &netem.RED{Kmin: 0, Kmax: 1, Pmax: 1}}, false},
		{"red on the ramp", netem.Faults{ECN: &netem.RED{Kmin: 0, Kmax: 1 << 20, Pmax: 1}}, true},
		{"drop", netem.Faults{Drop: 1e-9}, true},
		{"jitter", netem.Faults{Jitter: ms}, true},
		{"corrupt", netem.Faults{Corrupt: 1e-9}, true},
		{"duplicate", netem.Faults{Duplicate: 1e-9}, true},
		{"reorder", netem.Faults{Reorder: 1e-9}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(7, 7))
			p := netem.NewPath[pkt](tt.f, r)
			spare := 0
			for i := range 3 {
				p.Send(t0, pkt{id: i, n: 1000, ect: true, b: &box{}, spare: &spare})
			}
			fresh := rand.New(rand.NewPCG(7, 7))
			if drew := r.Uint64() != fresh.Uint64(); drew != tt.draws {
				t.Errorf("drew %v, want %v", drew, tt.draws)
			}
		})
	}
}

func TestPathFaults(t *testing.T) {
	const n = 2000
	sends := make([]send, n)
	for i := range sends {
		sends[i] = send{time.Duration(i) * time.Microsecond, 100, true}
	}
	tests := []struct {
		name  string
		f     netem.Faults
		spare int
		check func(t *testing.T, out []got, st netem.Stats, boxes []*box)
	}{
		{"drop", netem.Faults{Drop: 0.2}, 0, func(t *testing.T, out []got, st netem.Stats, boxes []*box) {
			freed := 0
			for _, b := range boxes {
				if b.freed {
					freed++
				}
			}
			if len(out)+int(st.Dropped) != n || int(st.Dropped) != freed || st.Dropped < n/10 || st.Dropped > n*3/10 {
				t.Fatalf("delivered %d, dropped %d, freed %d", len(out), st.Dropped, freed)
			}
		}},
		{"corrupt", netem.Faults{Corrupt: 0.1}, 0, func(t *testing.T, out []got, st netem.Stats, boxes []*box) {
			c := 0
			for _, b := range boxes {
				if b.corrupted {
					c++
				}
			}
			if st.Corrupted == 0 || int(st.Corrupted) != c || len(out) != n {
				t.Fatalf("corrupted %d, counted %d, delivered %d", c, st.Corrupted, len(out))
			}
		}},
		{"duplicate", netem.Faults{Duplicate: 0.1}, 1 << 20, func(t *testing.T, out []got, st netem.Stats, boxes []*box) {
			if st.Duplicated == 0 || len(out) != n+int(st.Duplicated) {
				t.Fatalf("duplicated %d, delivered %d", st.Duplicated, len(out))
			}
		}},
		// No spare buffers: the draws happen, no copy is made or counted.
		{"duplicate no buffers", netem.Faults{Duplicate: 0.5}, 0, func(t *testing.T, out []got, st netem.Stats, boxes []*box) {
			if st.Duplicated != 0 || len(out) != n {
				t.Fatalf("duplicated %d, delivered %d", st.Duplicated, len(out))
			}
		}},
		{"duplicate few buffers", netem.Faults{Duplicate: 0.5}, 10, func(t *testing.T, out []got, st netem.Stats, boxes []*box) {
			if st.Duplicated != 10 || len(out) != n+10 {
				t.Fatalf("duplicated %d, delivered %d", st.Duplicated, len(out))
			}
		}},
		{"reorder", netem.Faults{Reorder: 0.05, ReorderAfter: 4}, 0, func(t *testing.T, out []got, st netem.Stats, boxes []*box) {
			ids := make([]int, len(out))
			for i, g := range out {
				ids[i] = g.id
			}
			if len(out) != n || st.Reordered == 0 || slices.IsSorted(ids) {
				t.Fatalf("delivered %d, reordered %d, sorted %v", len(out), st.Reordered, slices.IsSorted(ids))
			}
			slices.Sort(ids)
			for i, id := range ids {
				if id != i {
					t.Fatalf("packet %d missing", i)
				}
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, st, boxes := run(t, tt.f, 42, tt.spare, sends)
			tt.check(t, out, st, boxes)
			again, st2, _ := run(t, tt.f, 42, tt.spare, sends)
			if !slices.Equal(out, again) || st != st2 {
				t.Fatal("same seed, different outcome")
			}
		})
	}
}

// TestPathHold: a held packet comes out after ReorderAfter later packets,
// no earlier than they do, or when ReorderMaxHold runs out.
func TestPathHold(t *testing.T) {
	spare := 0
	mk := func(id int) pkt { return pkt{id: id, n: 100, b: &box{}, spare: &spare} }

	// Reorder 1: every packet is held, each freed by the second after it.
	p := netem.NewPath[pkt](netem.Faults{Reorder: 1, ReorderAfter: 2, Delay: ms}, rand.New(rand.NewPCG(1, 1)))
	for i := range 4 {
		p.Send(t0.Add(time.Duration(i)*ms), mk(i))
	}
	// Packet 0 is released by packet 2, at packet 2's time (2 ms + 1 ms);
	// packet 1 by packet 3 (4 ms). 2 and 3 are still held.
	var order []got
	for {
		at, ok := p.Next()
		if !ok {
			break
		}
		v, _ := p.Deliver(at)
		order = append(order, got{v.id, at.Sub(t0), false})
	}
	if want := []got{{0, 3 * ms, false}, {1, 4 * ms, false}}; !slices.Equal(order, want) {
		t.Fatalf("released %v, want %v", order, want)
	}
	if st := p.Stats(); st.Reordered != 4 {
		t.Fatalf("reordered %d", st.Reordered)
	}
	// 2 and 3 were held at 2 and 3 ms: Due points at the end of 2's hold
	// (10 ms later), and ReleaseHeld lets each go at its own.
	next, ready := p.Due(t0.Add(5 * ms))
	if ready || next.Sub(t0) != 12*ms {
		t.Fatalf("Due: %v %v, want 12ms false", next.Sub(t0), ready)
	}
	p.ReleaseHeld(t0.Add(12*ms - 1))
	if _, ok := p.Next(); ok {
		t.Fatal("released before its hold ran out")
	}
	p.ReleaseHeld(t0.Add(12 * ms))
	if at, ok := p.Next(); !ok || at.Sub(t0) != 12*ms {
		t.Fatalf("Next %v %v, want 12ms", at.Sub(t0), ok)
	}
	if next, ready := p.Due(t0.Add(12 * ms)); !ready || next.Sub(t0) != 12*ms {
		t.Fatalf("Due: %v %v, want 12ms true", next.Sub(t0), ready)
	}
	// Discard frees the rest.
	p.Discard()
	if _, ok := p.Next(); ok {
		t.Fatal("Next after Discard")
	}
	if next, ready := p.Due(t0.Add(time.Hour)); ready || !next.IsZero() {
		t.Fatalf("Due after Discard: %v %v", next, ready)
	}
}
