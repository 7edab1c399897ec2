package netem_test

import (
	"cmp"
	"fmt"
	"slices"
	"testing"
	"testing/quick"
	"time"

	"github.com/uroce/uroce/pkg/netem"
)

type item struct {
	at int64
	id int // push order
}

func (a *item) Compare(b *item) int { return cmp.Compare(a.at, b.at) }

// TestHeapProperty: whatever the interleaving of pushes and pops, each pop
// returns the earliest value held and, among values due at the same time,
// the one pushed first. Times are drawn at random (the heap part) and
// rising with now and then an earlier one, as a delay line's are (the FIFO
// lane, its reuse of popped slots, and the two mixed).
func TestHeapProperty(t *testing.T) {
	for _, rising := range []bool{false, true} {
		t.Run(fmt.Sprintf("rising=%v", rising), func(t *testing.T) { heapProperty(t, rising) })
	}
}

func heapProperty(t *testing.T, rising bool) {
	f := func(ops []uint8) bool {
		var h netem.Heap[item, *item]
		var model []item // held values, in push order
		id := 0
		clock := int64(0)
		for _, op := range ops {
			if op%3 == 0 {
				if h.Len() == 0 {
					continue
				}
				// The model's answer: the first held value with the
				// least time.
				m := 0
				for i, v := range model {
					if v.at < model[m].at {
						m = i
					}
				}
				want := model[m]
				model = slices.Delete(model, m, m+1)
				if p := h.Peek(); p != want {
					t.Logf("Peek %+v, want %+v", p, want)
					return false
				}
				if got := h.Pop(); got != want {
					t.Logf("Pop %+v, want %+v", got, want)
					return false
				}
			} else {
				v := item{at: int64(op % 8), id: id} // few times: many ties
				if rising {
					clock += int64(op & 1)
					v.at = clock
					if op%16 == 5 {
						v.at -= 3
					}
				}
				id++
				h.Push(v)
				model = append(model, v)
			}
			if h.Len() != len(model) {
				return false
			}
		}
		return true
	}
	if err := quick.Check(f, &quick.Config{MaxCount: 2000}); err != nil {
		t.Fatal(err)
	}
}

// TestHeapOrder: values pop by time and, at equal times, in push order.
func TestHeapOrder(t *testing.T) {
	var h netem.Heap[item, *item]
	for i, at := range []int64{5, 1, 3, 1, 9, 0, 3} {
		h.Push(item{at: at, id: i})
	}
	var got []item
	for h.Len() > 0 {
		got = append(got, h.Pop())
	}
	want := []item{{0, 5}, {1, 1}, {1, 3}, {3, 2}, {3, 6}, {5, 0}, {9, 4}}
	if !slices.Equal(got, want) {
		t.Fatalf("popped %v, want %v", got, want)
	}
}

// instant is a time.Time in a heap, as the pipe link keeps its packets.
type instant struct{ time.Time }

func (a *instant) Compare(b *instant) int { return a.Time.Compare(b.Time) }

func TestHeapTimes(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	var h netem.Heap[instant, *instant]
	in := []time.Duration{5, 1, 4, 1, 3, 9, 2, 6, 5, 3}
	for _, d := range in {
		h.Push(instant{t0.Add(d)})
	}
	var got []time.Duration
	for h.Len() > 0 {
		got = append(got, h.Pop().Sub(t0))
	}
	want := slices.Clone(in)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("popped %v, want %v", got, want)
	}
}

func BenchmarkHeap(b *testing.B) {
	var h netem.Heap[item, *item]
	for i := range 64 {
		h.Push(item{at: int64(i * 7 % 64)})
	}
	b.ReportAllocs()
	at := int64(64)
	for b.Loop() {
		h.Pop()
		h.Push(item{at: at})
		at++
	}
}

// TestHeapNoAlloc: once grown, pushing and popping allocate nothing, in
// the FIFO lane (times in order) and in the heap part (out of order).
func TestHeapNoAlloc(t *testing.T) {
	var h netem.Heap[item, *item]
	at := int64(100)
	for _, order := range []int64{1, -1} {
		if n := testing.AllocsPerRun(100, func() {
			for range 8 {
				at += order
				h.Push(item{at: at})
			}
			for h.Len() > 0 {
				h.Pop()
			}
		}); n != 0 {
			t.Errorf("step %d: %v allocs per run", order, n)
		}
	}
}
