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

// report sorts the samples and reports p50 and p99 in ns.
func (l *latencies) report(b *testing.B) result {
	if len(l.d) == 0 {
		return result{}
	}
	slices.Sort(l.d)
	r := result{p50: l.d[len(l.d)/2], p99: l.d[len(l.d)*99/100]}
	b.ReportMetric(float64(r.p50), "p50-ns")
	b.ReportMetric(float64(r.p99), "p99-ns")
	return r
}
