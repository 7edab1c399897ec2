package metrics_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/uroce/uroce/cc"
	"github.com/uroce/uroce/pkg/link"
	"github.com/uroce/uroce/verbs"
	"github.com/uroce/uroce/verbs/metrics"
)

// fixedDevice reports the counters it holds and one QP.
type fixedDevice struct {
	c  verbs.Counters
	qp verbs.QPStats
}

func (f *fixedDevice) Counters() verbs.Counters                            { return f.c }
func (f *fixedDevice) QPStats(dst []verbs.QPStats) []verbs.QPStats         { return append(dst, f.qp) }
func (f *fixedDevice) LinkStats() link.Stats                               { return link.Stats{} }
func (f *fixedDevice) Latency() verbs.LatencySnapshot                      { return verbs.LatencySnapshot{} }
func (f *fixedDevice) QPLatencies(dst []verbs.QPLatency) []verbs.QPLatency { return dst }

// TestCollectorExportsEveryCounter: every row of verbs.QPCounterTable,
// verbs.CounterTable and cc.CounterTable is exported under its name, per
// device and, for those a QP keeps, per QP, with the value of its own
// field. Each counter holds a different value, so a row read from the
// wrong field fails too.
func TestCollectorExportsEveryCounter(t *testing.T) {
	f := &fixedDevice{qp: verbs.QPStats{QPN: 17}}
	type series struct {
		name   string
		labels []string
		want   uint64
	}
	var all []series
	n := uint64(0)
	set := func(p *uint64, name string, labels ...string) {
		n++
		*p = n
		all = append(all, series{name, labels, n})
	}
	dev, qp := []string{"device", "d"}, []string{"device", "d", "qpn", "17"}
	for _, d := range verbs.QPCounterTable {
		set(d.Ptr(&f.c.Counters), "uroce_"+d.Name+"_total", dev...)
		set(d.Ptr(&f.qp.Counters), "uroce_qp_"+d.Name+"_total", qp...)
	}
	for _, d := range verbs.CounterTable {
		set(d.Ptr(&f.c), "uroce_"+d.Name+"_total", dev...)
	}
	for _, d := range cc.CounterTable {
		set(d.Ptr(&f.c.CC), "uroce_"+d.Name+"_total", dev...)
		set(d.Ptr(&f.qp.CC.Counters), "uroce_qp_"+d.Name+"_total", qp...)
	}
	reg := prometheus.NewPedanticRegistry()
	if _, err := metrics.Register(reg, f, "d"); err != nil {
		t.Fatal(err)
	}
	fams := gather(t, reg)
	for _, s := range all {
		if got := value(t, fams, s.name, s.labels...); got != float64(s.want) {
			t.Errorf("%s%v = %v, want %d", s.name, s.labels, got, s.want)
		}
	}
}
