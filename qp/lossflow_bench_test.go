package qp

import (
	"fmt"
	"testing"
	"time"

	"github.com/uroce/uroce/cc"
	"github.com/uroce/uroce/pkg/netem"
)

// BenchmarkLossyFlow measures what go-back-N and selective repeat keep of
// a bulk flow (four 128 KiB WRITEs outstanding, 10 Gb/s line, 10 µs
// delay, no congestion control) over the in-memory pipe with packets
// dropped or reordered, in 200 ms of the pair's own clock: goodput in MB/s
// of that clock, the IBA timeouts it waited out, and the retransmissions
// per packet the pipe dropped. docs/loss.md has the table.
//
//	go test -run XXX -bench LossyFlow -benchtime 1x ./qp
func BenchmarkLossyFlow(b *testing.B) {
	modes := []struct {
		name    string
		retrans RetransFlags
	}{{"gbn", 0}, {"sr", RetransSelective}}
	for _, f := range []netem.Faults{
		{Delay: 10 * time.Microsecond},
		{Drop: 0.01, Delay: 10 * time.Microsecond},
		{Drop: 0.02, Delay: 10 * time.Microsecond},
		{Drop: 0.05, Delay: 10 * time.Microsecond},
		{Reorder: 0.02, Delay: 10 * time.Microsecond},
	} {
		for _, m := range modes {
			b.Run(fmt.Sprintf("%s/drop%v/reorder%v", m.name, f.Drop, f.Reorder), func(b *testing.B) {
				for b.Loop() {
					cfg := cc.DefaultConfig(cc.KindNone, 10*cc.Gbps)
					r := newFlowRunRetrans(b, 1, f, &cfg, 7, m.retrans)
					const span = 200 * time.Millisecond
					start := r.p.now
					r.run(b, start, start.Add(span))
					a := r.p.a.e.Stats()
					dropped := r.p.a.l.FaultStats().Dropped + r.p.b.l.FaultStats().Dropped
					b.ReportMetric(float64(r.bytes[0])/span.Seconds()/1e6, "MB/s")
					b.ReportMetric(float64(a.Timeouts-a.EarlyRetransTimeouts), "IBA-timeouts")
					b.ReportMetric(float64(a.Retransmits), "retransmits")
					b.ReportMetric(float64(dropped), "dropped")
				}
			})
		}
	}
}
