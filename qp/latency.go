package qp

import "github.com/uroce/uroce/pkg/hist"

// Completion latency: each send WQE carries the time PostSend was given,
// and a signaled WR that completes successfully records the time from then
// to its completion in its QP's histogram. The engine keeps the QPs'
// histograms in one hist.Table, a slot per QP: its owner alone writes and
// reads them, so a record is plain stores into arrays that stay cached
// whatever the number of QPs, where a histogram per QP (8 KiB of atomic
// counters) put every record on a cold page of its own
// (BenchmarkManyQPs). Unsignaled WRs are not recorded, as they have no
// completion to measure to; failed and flushed ones neither, since their
// time says nothing about the path.

// latSlot is the QP's slot in the engine's latency table: 0 for the GSI
// QP, 1 up for the others by QPN.
func (q *QP) latSlot() int {
	if q.qpn == GSIQPN {
		return 0
	}
	return int(q.qpn-FirstQPN) + 1
}

// Latency copies the completion latency of the QP's signaled send WRs,
// in nanoseconds, into s. The caller owns the engine.
func (q *QP) Latency(s *hist.Snapshot) { q.e.lat.Snapshot(q.latSlot(), s) }

// Latency copies the completion latency of every signaled send WR the
// engine completed, over its live QPs and those destroyed, into s. The
// caller owns the engine.
func (e *Engine) Latency(s *hist.Snapshot) {
	e.lat.Total(s)
	s.Merge(&e.retiredLat)
}

// retireLatency keeps a destroyed QP's latencies in the engine's and
// empties its slot for the QP that next takes its number.
func (e *Engine) retireLatency(q *QP) {
	var s hist.Snapshot
	e.lat.Snapshot(q.latSlot(), &s)
	e.retiredLat.Merge(&s)
	e.lat.Clear(q.latSlot())
}
