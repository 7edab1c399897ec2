package cc_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/uroce/uroce/cc"
)

func TestPacer(t *testing.T) {
	const byteNS = 8 * cc.Gbps // one byte per nanosecond
	p := cc.NewPacer(byteNS, 1000)
	steps := []struct {
		op    string
		t     time.Duration
		n     int
		delay time.Duration
	}{
		{"delay", 0, 1000, 0},
		{"take", 0, 1000, 0},
		{"delay", 0, 1, 1},
		{"delay", 0, 500, 500},
		{"delay", 499, 500, 1},
		{"delay", 500, 500, 0},
		{"take", 500, 500, 0},
		{"delay", time.Hour, 1000, 0}, // idle: full bucket, no more
		{"take", time.Hour, 1000, 0},
		{"delay", time.Hour, 1, 1},
		{"rate", time.Hour, 0, 0}, // half the rate from here
		{"delay", time.Hour, 100, 200},
		{"delay", time.Hour, 5000, 2000}, // larger than the burst: waits for a full bucket
		{"take", time.Hour + 2000, 5000, 0},
		{"delay", time.Hour + 2000, 1000, 10000}, // 4000 bytes of debt + 1000
	}
	for i, s := range steps {
		now := at(s.t)
		switch s.op {
		case "delay":
			if got := p.Delay(now, s.n); got != s.delay {
				t.Fatalf("step %d: Delay(%v, %d) = %v, want %v", i, s.t, s.n, got, s.delay)
			}
		case "take":
			p.Take(now, s.n)
		case "rate":
			p.SetRate(now, byteNS/2)
		}
	}
	p.SetRate(at(time.Hour+2000), 0)
	if d := p.Delay(at(2*time.Hour), 1); d != cc.Never {
		t.Fatalf("zero rate: %v", d)
	}
}

// Over any run, a QP that always waits for Delay sends no more than burst
// plus rate × elapsed, and keeps up with the rate when backlogged.
func TestPacerConformance(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 50 {
		rate := cc.Rate(rng.Int64N(int64(100*cc.Gbps))) + cc.Mbps
		burst := 64 + rng.IntN(1<<16)
		p := cc.NewPacer(rate, burst)
		now := t0
		sent := 0
		for range 2000 {
			n := 64 + rng.IntN(4096)
			d := p.Delay(now, n)
			now = now.Add(d)
			if p.Delay(now, n) != 0 {
				t.Fatalf("not ready after the delay it named")
			}
			p.Take(now, n)
			sent += n
			// Sometimes idle.
			if rng.IntN(10) == 0 {
				now = now.Add(time.Duration(rng.IntN(100_000)))
			}
		}
		el := now.Sub(t0).Seconds()
		limit := float64(burst) + float64(rate)/8*el + 4096 + 64
		if float64(sent) > limit {
			t.Fatalf("rate %v burst %d: sent %d > %f", rate, burst, sent, limit)
		}
	}
}
