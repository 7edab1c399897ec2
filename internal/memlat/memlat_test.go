package memlat

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

const line = 64

// cycle returns a buffer of mb MiB whose lines hold, in their first
// word, the index of the next line of one random cycle through all of
// them.
func cycle(mb int) []uint64 {
	n := mb << 20 / line
	perm := make([]int, n)
	for i := range perm {
		perm[i] = i
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(n, func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
	buf := make([]uint64, n*line/8)
	for i, l := range perm {
		buf[l*line/8] = uint64(perm[(i+1)%n] * line / 8)
	}
	return buf
}

func TestCycle(t *testing.T) {
	buf := cycle(1)
	n := len(buf) * 8 / line
	seen := make([]bool, n)
	j := uint64(0)
	for range n {
		l := j * 8 / line
		if seen[l] {
			t.Fatalf("line %d visited twice before all %d were", l, n)
		}
		seen[l] = true
		j = buf[j]
	}
	if j != 0 {
		t.Fatalf("after %d loads the walk is at word %d, not back at 0", n, j)
	}
}

func BenchmarkDependentLoad(b *testing.B) {
	for _, mb := range []int{1, 2, 4, 8, 16, 32, 64} {
		buf := cycle(mb)
		b.Run(fmt.Sprintf("%dMiB", mb), func(b *testing.B) {
			j := uint64(0)
			for b.Loop() {
				j = buf[j]
			}
			sink = j
		})
	}
}

// BenchmarkSecondLine walks the 64 MiB cycle and, after each line,
// loads a second line whose address waits for the first load: the
// other line of its 128-byte pair, a line 1 KiB away in the same
// 4 KiB page, or the same line of a page 1 MiB away. ns/op is what a
// step costs: a QP block's later lines in the page its first miss
// opened cost far less than a second cold QP would.
func BenchmarkSecondLine(b *testing.B) {
	buf := cycle(64)
	mask := zero // not known to the compiler: the second load stays
	for _, c := range []struct {
		name string
		flip uint64 // in words: the second line's offset from the first's
	}{{"none", 0}, {"pair", 64 / 8}, {"page", 1024 / 8}, {"far", 1 << 20 / 8}} {
		b.Run(c.name, func(b *testing.B) {
			j := uint64(0)
			for b.Loop() {
				next := buf[j]
				if c.flip != 0 {
					next += buf[j^c.flip+next&mask] & mask
				}
				j = next
			}
			sink = j
		})
	}
}

var sink, zero uint64
