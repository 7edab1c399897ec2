package verbs_test

import (
	"context"
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/uroce/uroce/verbs"
)

// cpuTime is the process's CPU time so far, user and system.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkPaced is the service case of issue 14: a client that blocks,
// on two started devices, calling at a fixed rate (10 000 signaled WRITEs
// a second, each posted on its schedule and waited for with CQ.Wait).
// It reports the process's CPU time as a share of one core over the run
// (cpu-%core; the benchmark's own pacing included) and the median and
// 99th percentile time from PostSend to Wait's return.
func BenchmarkPaced(b *testing.B) {
	const rate = 10000
	for _, kind := range []string{"pipe", "udp"} {
		b.Run(fmt.Sprintf("%s/RDMA_WRITE/8/%dps", kind, rate), func(b *testing.B) {
			p := newBenchPair(b, kind)
			p.a.Start()
			p.b.Start()
			wr := verbs.SendWR{Opcode: verbs.WRWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{p.ma.SGE(0, 8)},
				RemoteAddr: p.mb.Addr(), RKey: p.mb.RKey()}
			ctx := context.Background()
			lat := make([]time.Duration, 0, 1<<16)
			period := time.Second / rate
			cpu0, t0 := cpuTime(b), time.Now()
			next := t0
			for b.Loop() {
				if d := time.Until(next); d > 0 {
					time.Sleep(d)
				}
				next = next.Add(period)
				start := time.Now()
				if err := p.qa.PostSend(&wr); err != nil {
					b.Fatal(err)
				}
				if _, err := p.ca.Wait(ctx, p.wc[:1]); err != nil || p.wc[0].Status != verbs.WCSuccess {
					b.Fatalf("%v %+v", err, p.wc[0])
				}
				if len(lat) < cap(lat) {
					lat = append(lat, time.Since(start))
				}
			}
			wall, cpu := time.Since(t0), cpuTime(b)-cpu0
			slices.Sort(lat)
			b.ReportMetric(100*float64(cpu)/float64(wall), "cpu-%core")
			b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
			b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
		})
	}
}

// TestIdleCPU: two started devices, connected and warmed up by a burst of
// traffic, then left idle, cost the process no measurable CPU: the
// devices' goroutines sleep in the link (bgWait at a time) and no Wait
// spins. Measured on the shared 2-core machine over 3 s: 0.2 to 0.4 % of
// one core (with bgWait at 100 ms it was 1.9 to 2.7 %, the runtime's own
// wake-ups around each sleep); the bound is 2 %.
func TestIdleCPU(t *testing.T) {
	if testing.Short() {
		t.Skip("idles for seconds")
	}
	const idle = 3 * time.Second
	p := newBenchPair(t, "udp")
	p.a.Start()
	p.b.Start()
	wr := verbs.SendWR{Opcode: verbs.WRWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{p.ma.SGE(0, 8)},
		RemoteAddr: p.mb.Addr(), RKey: p.mb.RKey()}
	// Back-to-back calls teach the CQ's Wait to spin.
	for range 2000 {
		if err := p.qa.PostSend(&wr); err != nil {
			t.Fatal(err)
		}
		if _, err := p.ca.Wait(context.Background(), p.wc[:1]); err != nil || p.wc[0].Status != verbs.WCSuccess {
			t.Fatalf("%v %+v", err, p.wc[0])
		}
	}
	// A service's goroutine blocked in Wait for a request that does not
	// come, as the idle device's user would be.
	ctx, cancel := context.WithTimeout(context.Background(), idle+time.Second)
	defer cancel()
	go p.cb.Wait(ctx, make([]verbs.WC, 1))
	time.Sleep(100 * time.Millisecond) // let the burst's spins end
	cpu0, t0 := cpuTime(t), time.Now()
	time.Sleep(idle)
	cpu, wall := cpuTime(t)-cpu0, time.Since(t0)
	share := float64(cpu) / float64(wall)
	t.Logf("idle: %v CPU in %v (%.2f %% of one core)", cpu, wall.Round(time.Millisecond), 100*share)
	if share > 0.02 {
		t.Errorf("idle devices used %.2f %% of one core, want under 2 %%", 100*share)
	}
}
