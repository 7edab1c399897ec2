package qp

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkTimerRearm re-arms n QPs' ACK timers in turn, each for the
// local ACK timeout after now, as every ACK that makes progress does
// (rearmRetrans), with the clock 1 µs on per step and the timers' memory
// spread as QPs' is: the cost per re-arm should not grow with n.
func BenchmarkTimerRearm(b *testing.B) {
	for _, n := range []int{10, 1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			e := NewEngine(nil)
			ts := make([]*QP, n)
			now := time.Unix(1e6, 0)
			for i := range ts {
				q := new(qpBlock)
				q.qp.retrans = timer{idx: -1, qp: &q.qp, kind: timerRetrans}
				ts[i] = &q.qp
				e.setTimer(&ts[i].retrans, now.Add(67*time.Millisecond+time.Duration(i)*time.Microsecond))
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				now = now.Add(time.Microsecond)
				e.Process(now)
				e.setTimer(&ts[i].retrans, now.Add(67*time.Millisecond))
				if i++; i == n {
					i = 0
				}
			}
		})
	}
}
