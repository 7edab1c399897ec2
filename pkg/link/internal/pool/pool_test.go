package pool

import (
	"errors"
	"testing"

	"github.com/uroce/uroce/pkg/link"
)

func TestAllocRelease(t *testing.T) {
	p := New(4, 256)
	pk := make([]*link.Packet, 6)
	if n := p.Alloc(pk); n != 4 || p.Len() != 0 {
		t.Fatalf("Alloc gave %d, %d left", n, p.Len())
	}
	seen := map[*byte]bool{}
	for _, x := range pk[:4] {
		if len(x.Buf) != 256 || cap(x.Buf) != 256 || x.Off != link.Headroom || x.Len != 0 {
			t.Fatalf("packet %+v", x)
		}
		if seen[&x.Buf[0]] {
			t.Fatal("one buffer handed out twice")
		}
		seen[&x.Buf[0]] = true
		x.Len, x.Off, x.TOS = 10, 3, 2
	}
	p.Release(pk[:4])
	for i, x := range pk[:4] {
		if x != nil {
			t.Fatalf("slot %d kept its packet after Release", i)
		}
	}
	if p.Len() != 4 {
		t.Fatalf("%d free after Release", p.Len())
	}
	// Alloc resets what the last user left.
	p.Alloc(pk[:1])
	if x := pk[0]; x.Len != 0 || x.Off != link.Headroom || x.TOS != 0 {
		t.Fatalf("reused packet not reset: %+v", x)
	}
	g := p.Get()
	p.Put(g)
	if p.Len() != 3 {
		t.Fatalf("%d free after Get and Put", p.Len())
	}
}

func TestSplit(t *testing.T) {
	pk := make([]*link.Packet, 10)
	errA, errB := errors.New("a"), errors.New("b")
	var runs []int
	sent, err := Split(pk, 4, func(b []*link.Packet) (int, error) {
		runs = append(runs, len(b))
		switch len(runs) {
		case 2:
			return len(b) - 1, errA
		case 3:
			return len(b), errB
		}
		return len(b), nil
	})
	if sent != 9 || err != errA || len(runs) != 3 || runs[0] != 4 || runs[1] != 4 || runs[2] != 2 {
		t.Fatalf("sent %d, err %v, runs %v", sent, err, runs)
	}
}

func TestNoAllocs(t *testing.T) {
	p := New(64, 128)
	pk := make([]*link.Packet, 32)
	send := func(b []*link.Packet) (int, error) { p.Release(b); return len(b), nil }
	if n := testing.AllocsPerRun(100, func() {
		n := p.Alloc(pk)
		Split(pk[:n], 8, send)
	}); n != 0 {
		t.Fatalf("%v allocations per round", n)
	}
}

func BenchmarkAllocRelease(b *testing.B) {
	p := New(64, 128)
	pk := make([]*link.Packet, 32)
	b.ReportAllocs()
	for b.Loop() {
		n := p.Alloc(pk)
		p.Release(pk[:n])
	}
}
