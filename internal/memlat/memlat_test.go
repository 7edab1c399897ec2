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

var sink uint64
