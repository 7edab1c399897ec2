package qp

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// fireDue takes the timers due at now out of w as Process does and
// returns their kinds, which the tests use as indexes.
func fireDue(w *timerWheel, now time.Time) []int {
	var got []int
	for _, t := range w.expire(now) {
		if t.idx != idxFiring {
			continue
		}
		t.idx = idxStopped
		got = append(got, int(t.kind))
	}
	return got
}

func newTimers(n int) []timer {
	ts := make([]timer, n)
	for i := range ts {
		ts[i] = timer{idx: idxStopped, kind: timerKind(i)}
	}
	return ts
}

func TestTimerWheel(t *testing.T) {
	t0 := time.Unix(1e6, 0)
	us := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Microsecond) }
	type op struct {
		arm  int // timer to arm at at, or -1
		at   time.Time
		stop int // timer to stop, or -1
		run  time.Time
		want []int // fired, in order, when run is set
		next time.Time
	}
	cases := []struct {
		name string
		ops  []op
	}{
		{"fires at its deadline, not before", []op{
			{arm: 0, at: us(100), stop: -1},
			{arm: -1, stop: -1, run: us(99), next: us(100)},
			{arm: -1, stop: -1, run: us(100), want: []int{0}},
		}},
		{"in deadline order across slots", []op{
			{arm: 0, at: us(300), stop: -1},
			{arm: 1, at: us(100), stop: -1},
			{arm: 2, at: us(200), stop: -1, next: us(100)},
			{arm: -1, stop: -1, run: us(1000), want: []int{1, 2, 0}},
		}},
		{"same tick, order by deadline", []op{
			{arm: 0, at: us(101), stop: -1},
			{arm: 1, at: us(100), stop: -1},
			{arm: -1, stop: -1, run: us(101), want: []int{1, 0}},
		}},
		{"stopped never fires", []op{
			{arm: 0, at: us(100), stop: -1},
			{arm: 1, at: us(200), stop: 0, next: us(200)},
			{arm: -1, stop: -1, run: us(150)},
			{arm: -1, stop: -1, run: us(250), want: []int{1}},
		}},
		{"moved later fires later", []op{
			{arm: 0, at: us(100), stop: -1},
			{arm: 0, at: us(500), stop: -1, next: us(500)},
			{arm: -1, stop: -1, run: us(499)},
			{arm: -1, stop: -1, run: us(500), want: []int{0}},
		}},
		{"beyond one turn of the wheel", []op{
			{arm: 0, at: us(3 * 67_109), stop: -1},
			{arm: 1, at: us(10), stop: -1},
			{arm: -1, stop: -1, run: us(67_109), want: []int{1}, next: us(3 * 67_109)},
			{arm: -1, stop: -1, run: us(2 * 67_109)},
			{arm: -1, stop: -1, run: us(3*67_109 - 1)},
			{arm: -1, stop: -1, run: us(3 * 67_109), want: []int{0}},
		}},
		{"already due when armed", []op{
			{arm: -1, stop: -1, run: us(1000)},
			{arm: 0, at: us(10), stop: -1, next: us(10)},
			{arm: -1, stop: -1, run: us(1000), want: []int{0}},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var w timerWheel
			ts := newTimers(4)
			for i, o := range c.ops {
				if o.arm >= 0 {
					w.set(&ts[o.arm], o.at)
				}
				if o.stop >= 0 {
					w.remove(&ts[o.stop])
				}
				if !o.run.IsZero() {
					if got := fireDue(&w, o.run); !slices.Equal(got, o.want) {
						t.Fatalf("op %d: fired %v at %v, want %v", i, got, o.run.Sub(t0), o.want)
					}
				}
				if !o.next.IsZero() {
					if got, ok := w.next(); !ok || !got.Equal(o.next) {
						t.Fatalf("op %d: next %v %v, want %v", i, got.Sub(t0), ok, o.next.Sub(t0))
					}
				}
			}
		})
	}
}

// TestTimerWheelModel arms, moves, stops and runs seeded random timers
// against a plain map of deadlines: the wheel fires exactly the timers
// the model has due, in deadline order, and its next deadline is the
// model's earliest.
func TestTimerWheelModel(t *testing.T) {
	for seed := range uint64(20) {
		// Odd seeds crowd many timers into a few ticks, so slots fill
		// with holes and are compacted.
		crowd := seed%2 == 1
		r := rand.New(rand.NewPCG(seed, 19))
		var w timerWheel
		ts := newTimers(64)
		if crowd {
			ts = newTimers(250)
		}
		model := map[int]time.Time{}
		now := time.Unix(1e6, 0)
		// Deadlines from under a tick to several turns of the wheel.
		span := func() time.Duration {
			if crowd && r.IntN(8) != 0 {
				return time.Duration(r.IntN(4 << tickShift))
			}
			switch r.IntN(4) {
			case 0:
				return time.Duration(r.IntN(1 << tickShift))
			case 1:
				return time.Duration(r.IntN(1 << (tickShift + 6)))
			case 2:
				return time.Duration(r.Int64N(wheelSlots << tickShift))
			}
			return time.Duration(r.Int64N(4 * wheelSlots << tickShift))
		}
		for step := range 20000 {
			switch k := r.IntN(10); {
			case k < 5:
				i := r.IntN(len(ts))
				at := now.Add(span())
				if r.IntN(20) == 0 {
					at = now.Add(-span()) // due already
				}
				w.set(&ts[i], at)
				model[i] = at
			case k < 7:
				i := r.IntN(len(ts))
				w.remove(&ts[i])
				delete(model, i)
			default:
				if r.IntN(50) == 0 {
					now = now.Add(-time.Duration(r.IntN(1 << tickShift))) // the clock went back
				} else {
					now = now.Add(span() / time.Duration(1+r.IntN(8)))
				}
				due := w.expire(now)
				var got []int
				for _, t := range due {
					got = append(got, int(t.kind))
				}
				var want []int
				for i, at := range model {
					if !at.After(now) {
						want = append(want, i)
					}
				}
				if len(got) != len(want) {
					t.Fatalf("seed %d step %d: fired %v, want %v", seed, step, got, want)
				}
				for j, i := range got {
					if at, ok := model[i]; !ok || at.After(now) {
						t.Fatalf("seed %d step %d: fired %d early or stopped", seed, step, i)
					}
					if j > 0 && ts[i].when < ts[got[j-1]].when {
						t.Fatalf("seed %d step %d: fired out of deadline order", seed, step)
					}
				}
				for _, i := range got {
					delete(model, i)
				}
				// As a fired timer's handler may, stop or re-arm
				// some of those due before they fire.
				for _, t := range due {
					switch r.IntN(10) {
					case 0:
						w.remove(t)
					case 1:
						at := now.Add(span())
						w.set(t, at)
						model[int(t.kind)] = at
					default:
						if t.idx == idxFiring {
							t.idx = idxStopped
						}
					}
				}
			}
			got, ok := w.next()
			if ok != (len(model) > 0) {
				t.Fatalf("seed %d step %d: next %v, model has %d timers", seed, step, ok, len(model))
			}
			if ok {
				var first time.Time
				for _, at := range model {
					if first.IsZero() || at.Before(first) {
						first = at
					}
				}
				if !got.Equal(first) {
					t.Fatalf("seed %d step %d: next %v, want %v", seed, step, got, first)
				}
			}
			if w.n != len(model) {
				t.Fatalf("seed %d step %d: %d armed, model %d", seed, step, w.n, len(model))
			}
		}
	}
}
