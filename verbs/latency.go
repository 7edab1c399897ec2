package verbs

import (
	"time"

	"github.com/uroce/uroce/pkg/hist"
)

// LatencySnapshot is a histogram of completion latencies: for each
// signaled send WR that completed successfully, the time from PostSend to
// its completion in the engine (the ACK or response that completed it
// arriving), whether or not the application has polled it yet. It is on
// by default: recording costs a few plain stores per signaled completion
// into the engine's latency table (hist.Table), with no lock, and no
// allocation once the QP's latencies have reached their octave. Quantiles are within
// 1.6 % of the true value (see package hist).
type LatencySnapshot struct {
	// Hist holds the latencies in nanoseconds.
	Hist hist.Snapshot
}

// Count returns the number of completions recorded.
func (l LatencySnapshot) Count() uint64 { return l.Hist.Count }

// Quantile returns the latency at quantile q: 0.5 for the median, 0.99
// for P99, 0.999 for P99.9; 0 when nothing was recorded.
func (l LatencySnapshot) Quantile(q float64) time.Duration {
	return time.Duration(l.Hist.Quantile(q))
}

// Mean returns the mean latency.
func (l LatencySnapshot) Mean() time.Duration { return time.Duration(l.Hist.Mean()) }

// Max returns the largest latency.
func (l LatencySnapshot) Max() time.Duration { return time.Duration(l.Hist.Max) }

// Sum returns the sum of the latencies.
func (l LatencySnapshot) Sum() time.Duration { return time.Duration(l.Hist.Sum) }

// Latency returns the completion latency of the QP's signaled send WRs
// since it was created. It takes the engine for a moment, as Counters
// does: the engine alone writes the histograms, which keeps a record's
// stores plain.
func (q *QueuePair) Latency() LatencySnapshot {
	var l LatencySnapshot
	q.pd.d.withEngine(func() error { q.q.Latency(&l.Hist); return nil })
	return l
}

// Latency returns the completion latency of the signaled send WRs of
// every QP the device has had, destroyed ones included.
func (d *Device) Latency() LatencySnapshot {
	var l LatencySnapshot
	d.withEngine(func() error { d.e.Latency(&l.Hist); return nil })
	return l
}

// QPLatency is one QP's completion latency, as Device.QPLatencies reports
// it.
type QPLatency struct {
	QPN     uint32
	Latency LatencySnapshot
}

// QPLatencies appends every live QP's completion latency to dst and
// returns it, in QPN order: for metrics exporters. A QPLatency is about
// 8.5 KiB; reuse dst across calls.
func (d *Device) QPLatencies(dst []QPLatency) []QPLatency {
	d.withEngine(func() error {
		for _, q := range d.e.AppendQPs(nil) {
			dst = append(dst, QPLatency{QPN: q.QPN()})
			q.Latency(&dst[len(dst)-1].Latency.Hist)
		}
		return nil
	})
	return dst
}
