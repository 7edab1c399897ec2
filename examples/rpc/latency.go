package main

import (
	"slices"
	"testing"
	"time"
)

// latencies records round trips without allocating per sample.
type latencies struct {
	t0 time.Time
	d  []time.Duration
}

// newLatencies has room for the runs -benchtime Nx asks for up to 64k.
func newLatencies(*testing.B) *latencies { return &latencies{d: make([]time.Duration, 0, 1<<16)} }

func (l *latencies) start() { l.t0 = time.Now() }
func (l *latencies) stop()  { l.d = append(l.d, time.Since(l.t0)) }

// report sorts the samples and reports p50, p99 and p99.9 in ns.
func (l *latencies) report(b *testing.B) result {
	if len(l.d) == 0 {
		return result{}
	}
	slices.Sort(l.d)
	r := percentiles(l.d)
	b.ReportMetric(float64(r.p50), "p50-ns")
	b.ReportMetric(float64(r.p99), "p99-ns")
	b.ReportMetric(float64(r.p999), "p99.9-ns")
	return r
}

// percentiles reads p50, p99 and p99.9 off sorted samples, the same way
// for every transport: the sample at rank ⌊n·q⌋ (so p99.9 of fewer than
// 1000 samples is the largest).
func percentiles(sorted []time.Duration) result {
	n := len(sorted)
	at := func(num, den int) time.Duration { return sorted[min(n*num/den, n-1)] }
	return result{p50: at(1, 2), p99: at(99, 100), p999: at(999, 1000)}
}
