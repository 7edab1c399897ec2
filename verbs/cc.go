package verbs

import (
	"fmt"
	"time"

	"github.com/uroce/uroce/cc"
	"github.com/uroce/uroce/qp"
)

// SetCC sets the device's default congestion control: the algorithm of QPs
// created from now on whose QPInit names none. A device starts with "none"
// (no pacing, no ECN-capable data) at qp.DefaultLineRate, and answers
// CE-marked packets with CNPs whatever it runs, as a ConnectX peer expects.
// It returns an error wrapping cc.ErrUnknownKind or cc.ErrBadParams, or
// cc.ErrNoINT for HPCC, which needs in-band telemetry no link here carries.
func (d *Device) SetCC(cfg cc.Config) error {
	if cfg.LineRate == 0 {
		cfg.LineRate = qp.DefaultLineRate
	}
	if _, err := cc.New(&cfg); err != nil {
		return fmt.Errorf("set congestion control: %w", err)
	}
	return d.withEngine(func() error { d.e.CC = cfg; return nil })
}

// SetCC replaces the QP's congestion control (nil: the device default),
// starting afresh. It returns an error wrapping cc.ErrUnknownKind,
// cc.ErrBadParams or cc.ErrNoINT (HPCC: no in-band telemetry).
func (q *QueuePair) SetCC(cfg *cc.Config) error {
	d := q.pd.d
	return d.withEngine(func() error { return q.q.SetCC(cfg) })
}

// CCStats returns the QP's congestion control state: the mlx5 counters
// (np_ecn_marked_roce_packets, np_cnp_sent, rp_cnp_handled,
// rp_cnp_ignored), the current and target rate and DCQCN's α.
func (q *QueuePair) CCStats() cc.Stats {
	d := q.pd.d
	var s cc.Stats
	d.withEngine(func() error { s = q.q.CCStats(d.clock()); return nil })
	return s
}

// QPStats is one QP's counters, as Device.QPStats reports them.
type QPStats struct {
	QPN      uint32
	Counters QPCounters
	CC       cc.Stats
	// SRTT is the smoothed round-trip time of requests, 0 before the
	// first ACK.
	SRTT time.Duration
}

// QPStats appends every QP's counters to dst and returns it, in QPN
// order, taken in one pass of the engine: for metrics exporters.
func (d *Device) QPStats(dst []QPStats) []QPStats {
	d.withEngine(func() error {
		now := d.clock()
		for _, q := range d.e.AppendQPs(nil) {
			dst = append(dst, QPStats{QPN: q.QPN(), Counters: q.Counters(), CC: q.CCStats(now), SRTT: q.SRTT()})
		}
		return nil
	})
	return dst
}
