package qp

import "github.com/uroce/uroce/pkg/hist"

// Completion latency: each send WQE carries the time PostSend was given,
// and a signaled WR that completes successfully records the time from then
// to its completion in its QP's histogram (atomic loads and stores, as the
// engine is its one writer; no allocation, no lock: a metrics reader
// snapshots it from any goroutine). A turn's records are gathered and
// published at its end (hist.Owned), a store per run of one bucket
// rather than two per WR. Unsignaled
// WRs are not recorded, as they have no completion to measure to; failed
// and flushed ones neither, since their time says nothing about the path.

// recordLatency counts a successful WQE's completion latency if it is
// signaled; the caller owns the engine, whose now is the completion time.
func (q *QP) recordLatency(w *sendWQE) {
	if w.wr.Flags&FlagSignaled != 0 {
		q.e.lat.Record(q.lat, uint64(max(q.e.nowNS-w.posted, 0)))
	}
}

// Latency copies the completion latency of the QP's signaled send WRs,
// in nanoseconds, into s. Unlike the QP's other methods it is safe from
// any goroutine, at any time, even while the engine runs.
func (q *QP) Latency(s *hist.Snapshot) { q.lat.Snapshot(s) }

// Latency copies the completion latency of every signaled send WR the
// engine completed, over its live QPs and those destroyed, into s. The
// caller owns the engine.
func (e *Engine) Latency(s *hist.Snapshot) {
	e.lat.Flush()
	e.retiredLat.Snapshot(s)
	var one hist.Snapshot
	for _, q := range e.AppendQPs(nil) {
		q.lat.Snapshot(&one)
		s.Merge(&one)
	}
}

// retireLatency keeps a destroyed QP's latencies in the engine's.
func (e *Engine) retireLatency(q *QP) {
	e.lat.Flush()
	var s hist.Snapshot
	q.lat.Snapshot(&s)
	e.retiredLat.Add(&s)
}
