package qp

import (
	"math/rand/v2"
	"testing"
)

// TestSpeckVector checks the cipher against the Speck32/64 test vector of
// its designers' paper (Appendix C).
func TestSpeckVector(t *testing.T) {
	c := newKeyCipher(0x1918_1110_0908_0100)
	if got := c.encrypt(0x6574_694c); got != 0xa868_42f2 {
		t.Fatalf("encrypt = %#08x, want 0xa86842f2", got)
	}
	if got := c.decrypt(0xa868_42f2); got != 0x6574_694c {
		t.Fatalf("decrypt = %#08x, want 0x6574694c", got)
	}
}

func TestKeyCipherInverts(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		c := newKeyCipher(r.Uint64())
		for _, v := range []uint32{0, 1, 0x101, 1<<keyGenBits | 1, 0xffffffff} {
			if got := c.decrypt(c.encrypt(v)); got != v {
				t.Fatalf("decrypt(encrypt(%#x)) = %#x", v, got)
			}
		}
		for range 1000 {
			v := r.Uint32()
			if got := c.decrypt(c.encrypt(v)); got != v {
				t.Fatalf("decrypt(encrypt(%#x)) = %#x", v, got)
			}
		}
	}
}

// TestMRKeys: keys are distinct, never 0, look nothing like index<<8 |
// generation, differ between tables, and a slot registered again and again
// does not give a key back before 4096 registrations.
func TestMRKeys(t *testing.T) {
	var a, b MRTable
	buf := make([]byte, 64)
	seen := map[uint32]bool{}
	var first [2]uint32
	const n = 1000
	for i := range n {
		m, err := a.Register(1, buf, 0x1000, accessAll)
		if err != nil {
			t.Fatal(err)
		}
		if m.RKey == 0 || m.LKey != m.RKey || seen[m.RKey] {
			t.Fatalf("region %d: key %#x (lkey %#x), seen before %v", i, m.RKey, m.LKey, seen[m.RKey])
		}
		seen[m.RKey] = true
		if a.Lookup(m.RKey, 1, AccessRemoteWrite) != m {
			t.Fatalf("region %d: key %#x does not find it", i, m.RKey)
		}
		if i == 0 {
			first[0] = m.RKey
		}
	}
	// rxe's keys for these would be index<<8 | byte: count keys whose
	// top 24 bits are a small index, as predictable keys all would.
	small := 0
	for k := range seen {
		if k>>8 <= n {
			small++
		}
	}
	if small > 2 {
		t.Errorf("%d of %d keys have an index-like top: keys are predictable", small, n)
	}
	m, err := b.Register(1, buf, 0x1000, accessAll)
	if err != nil {
		t.Fatal(err)
	}
	first[1] = m.RKey
	if first[0] == first[1] || first[0] == 0x101 {
		t.Errorf("two tables' first keys %#x and %#x", first[0], first[1])
	}
	// One slot, again and again.
	again := map[uint32]int{}
	for i := range keyGenMask {
		if err := b.Deregister(m.RKey); err != nil {
			t.Fatal(err)
		}
		if b.Lookup(m.RKey, 1, 0) != nil {
			t.Fatal("a deregistered key still finds its region")
		}
		if m, err = b.Register(1, buf, 0x1000, accessAll); err != nil {
			t.Fatal(err)
		}
		if j, ok := again[m.RKey]; ok {
			t.Fatalf("registration %d reuses the key of registration %d", i, j)
		}
		again[m.RKey] = i
	}
}

// TestMRFreeOldestFirst: a freed slot goes to the back of the line, so a
// register/deregister loop with other slots free walks them all.
func TestMRFreeOldestFirst(t *testing.T) {
	var tb MRTable
	buf := make([]byte, 8)
	var ms []*MR
	for range 8 {
		m, err := tb.Register(1, buf, 0, accessAll)
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	for _, m := range ms {
		if err := tb.Deregister(m.RKey); err != nil {
			t.Fatal(err)
		}
	}
	slot := func(m *MR) uint32 { return tb.keys.decrypt(m.RKey) >> keyGenBits }
	var got []uint32
	for range 20 {
		m, err := tb.Register(1, buf, 0, accessAll)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, slot(m))
		if err := tb.Deregister(m.RKey); err != nil {
			t.Fatal(err)
		}
	}
	for i, s := range got {
		if want := uint32(i%8 + 1); s != want {
			t.Fatalf("registration %d took slot %d, want %d (all: %v)", i, s, want, got)
		}
	}
	if len(tb.free) > 16 {
		t.Errorf("free list grew to %d for 8 slots", len(tb.free))
	}
}

func BenchmarkMRLookup(b *testing.B) {
	var tb MRTable
	var keys [64]uint32
	for i := range keys {
		m, err := tb.Register(1, make([]byte, 64), 0x1000, accessAll)
		if err != nil {
			b.Fatal(err)
		}
		keys[i] = m.RKey
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if tb.Lookup(keys[i&63], 1, AccessRemoteWrite) == nil {
			b.Fatal("lookup failed")
		}
		i++
	}
}
