package qp

import (
	"testing"
	"time"

	"github.com/uroce/uroce/cc"
	"github.com/uroce/uroce/pkg/netem"
)

// TestCCWindowFlows: two flows of each window-based algorithm share a
// 1 Gb/s bottleneck with a 5 µs delay, so the base RTT is under Swift's
// target. A requester held by its window must ask for the ACK that opens
// it: before ccWindowFull, each flow sent its first window, then waited
// out the 67 ms IBA timer again and again (0 bytes delivered in 60 ms,
// about 900 timeouts). Now the flows fill the bottleneck fairly with no
// timeout, no loss and a queue near the target.
func TestCCWindowFlows(t *testing.T) {
	const bottleneck = 1e9 / 8 // bytes/s
	faults := netem.Faults{Rate: bottleneck, QueueLimit: 512 << 10, Delay: 5 * time.Microsecond}
	for _, tc := range []struct {
		name string
		cfg  cc.Config
	}{
		{"swift", cc.DefaultConfig(cc.KindSwift, 10*cc.Gbps)},
		{cc.DefaultPresetName, cc.DefaultPreset(10 * cc.Gbps)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newFlowRun(t, 2, faults, &tc.cfg, 7)
			start := r.p.now
			warm, end := start.Add(20*time.Millisecond), start.Add(60*time.Millisecond)
			r.run(t, warm, end)
			r.drain(t)
			var sum int64
			for _, b := range r.bytes {
				sum += b
			}
			goodput := float64(sum) / end.Sub(warm).Seconds() / bottleneck
			rtt := r.rttSum / time.Duration(max(r.rttN, 1))
			a := r.p.a.e.Stats()
			qd := r.p.a.l.FaultStats().QueueDropped
			t.Logf("flows %v goodput %.3f, Jain %.3f, mean RTT %v, timeouts %d, retransmits %d, queue drops %d",
				r.bytes, goodput, jain(r.bytes), rtt, a.Timeouts, a.Retransmits, qd)
			if goodput < 0.9 || jain(r.bytes) < 0.95 {
				t.Errorf("goodput %.3f, Jain %.3f; want ≥ 0.9 and ≥ 0.95", goodput, jain(r.bytes))
			}
			if a.Timeouts != 0 || a.Retransmits != 0 || qd != 0 {
				t.Errorf("%d timeouts, %d retransmits, %d queue drops; want none", a.Timeouts, a.Retransmits, qd)
			}
			// Swift holds the RTT near its target: a few packets of
			// queue at 1 Gb/s (8 µs each), not the window's worth.
			if target := tc.cfg.Swift.BaseTarget + tc.cfg.Swift.FSRange; rtt > 2*target {
				t.Errorf("mean RTT %v, more than twice the largest target %v", rtt, target)
			}
		})
	}
}
