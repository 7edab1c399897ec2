package metrics

import (
	"fmt"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/uroce/uroce/cc"
	"github.com/uroce/uroce/pkg/link"
	"github.com/uroce/uroce/verbs"
)

// Device is what the collector reads; *verbs.Device is one.
type Device interface {
	Counters() verbs.Counters
	QPStats(dst []verbs.QPStats) []verbs.QPStats
	LinkStats() link.Stats
	Latency() verbs.LatencySnapshot
	QPLatencies(dst []verbs.QPLatency) []verbs.QPLatency
}

var _ Device = (*verbs.Device)(nil)

const namespace = "uroce"

// linkCounters lists the link's own counters: the drops below the
// transport, by reason.
var linkCounters = []struct {
	name, help string
	get        func(*link.Stats) uint64
}{
	{"icrc_errors", "Received packets dropped for a bad ICRC.", func(s *link.Stats) uint64 { return s.RxICRCErrors }},
	{"link_rx_dropped", "Received packets the link dropped for another reason (malformed, not RoCE, no buffer).", func(s *link.Stats) uint64 { return s.RxDropped }},
	{"link_tx_dropped", "Packets handed to the link that did not go out.", func(s *link.Stats) uint64 { return s.TxDropped }},
}

// quantiles are the latency quantiles exported: P50, P99 and P99.9.
var quantiles = []float64{0.5, 0.99, 0.999}

// Collector is a prometheus.Collector for one device.
type Collector struct {
	d    Device
	name string

	// Counters' descriptions, each in its table's order:
	// verbs.QPCounterTable (devTransport, qpTransport), verbs.CounterTable
	// (devOnly), cc.CounterTable (devCC, qpCC) and linkCounters (devLink).
	devTransport []*prometheus.Desc
	devCC        []*prometheus.Desc
	devOnly      []*prometheus.Desc
	devLink      []*prometheus.Desc
	devLatency   *prometheus.Desc
	qpLatency    *prometheus.Desc
	qpTransport  []*prometheus.Desc
	qpCC         []*prometheus.Desc
	rate, target *prometheus.Desc
	alpha, srtt  *prometheus.Desc
	window       *prometheus.Desc
}

var _ prometheus.Collector = (*Collector)(nil)

// NewCollector returns a collector for d, whose series carry the label
// device=name.
func NewCollector(d Device, name string) *Collector {
	c := &Collector{d: d, name: name}
	devL := prometheus.Labels{"device": name}
	qpL := []string{"qpn"}
	desc := func(sub, n, help string, vars []string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(namespace, sub, n), help, vars, devL)
	}
	for _, t := range verbs.QPCounterTable {
		c.devTransport = append(c.devTransport, desc("", t.Name+"_total", t.Help, nil))
		c.qpTransport = append(c.qpTransport, desc("qp", t.Name+"_total", t.Help, qpL))
	}
	for _, t := range cc.CounterTable {
		c.devCC = append(c.devCC, desc("", t.Name+"_total", t.Help, nil))
		c.qpCC = append(c.qpCC, desc("qp", t.Name+"_total", t.Help, qpL))
	}
	for _, t := range verbs.CounterTable {
		c.devOnly = append(c.devOnly, desc("", t.Name+"_total", t.Help, nil))
	}
	for _, t := range linkCounters {
		c.devLink = append(c.devLink, desc("", t.name+"_total", t.help, nil))
	}
	const latencyHelp = "Completion latency of signaled send work requests, from post to completion, since the %s was created (cumulative; quantiles within 1.6 %%)."
	c.devLatency = desc("", "completion_latency_seconds", fmt.Sprintf(latencyHelp, "device"), nil)
	c.qpLatency = desc("qp", "completion_latency_seconds", fmt.Sprintf(latencyHelp, "QP"), qpL)
	c.rate = desc("qp", "cc_rate_bits_per_second", "Current sending rate of the QP's congestion control (DCQCN's Rc).", append(qpL, "algorithm"))
	c.target = desc("qp", "cc_target_rate_bits_per_second", "Target rate of the QP's congestion control (DCQCN's Rt).", append(qpL, "algorithm"))
	c.alpha = desc("qp", "cc_alpha", "DCQCN's alpha as a fraction (the firmware's 10-bit value over 1024); 0 for other algorithms.", qpL)
	c.window = desc("qp", "cc_window_bytes", "Congestion window in bytes; 0 when the algorithm has none.", qpL)
	c.srtt = desc("qp", "srtt_seconds", "Smoothed round-trip time from a request's send to its ACK.", qpL)
	return c
}

// Register makes a collector for d and registers it with reg: the one call
// an application makes. It returns the registry's error, wrapped.
func Register(reg prometheus.Registerer, d Device, name string) (*Collector, error) {
	c := NewCollector(d, name)
	if err := reg.Register(c); err != nil {
		return nil, fmt.Errorf("register metrics of %s: %w", name, err)
	}
	return c, nil
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, ds := range [][]*prometheus.Desc{c.devTransport, c.devOnly, c.devCC, c.devLink, c.qpTransport, c.qpCC} {
		for _, d := range ds {
			ch <- d
		}
	}
	for _, d := range []*prometheus.Desc{c.devLatency, c.qpLatency, c.rate, c.target, c.alpha, c.window, c.srtt} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: one snapshot of the device per
// scrape.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	dc := c.d.Counters()
	for i, t := range verbs.QPCounterTable {
		ch <- prometheus.MustNewConstMetric(c.devTransport[i], prometheus.CounterValue, float64(*t.Ptr(&dc.Counters)))
	}
	for i, t := range verbs.CounterTable {
		ch <- prometheus.MustNewConstMetric(c.devOnly[i], prometheus.CounterValue, float64(*t.Ptr(&dc)))
	}
	for i, t := range cc.CounterTable {
		ch <- prometheus.MustNewConstMetric(c.devCC[i], prometheus.CounterValue, float64(*t.Ptr(&dc.CC)))
	}
	ls := c.d.LinkStats()
	for i, t := range linkCounters {
		ch <- prometheus.MustNewConstMetric(c.devLink[i], prometheus.CounterValue, float64(t.get(&ls)))
	}
	ch <- summary(c.devLatency, c.d.Latency())
	for _, l := range c.d.QPLatencies(nil) {
		ch <- summary(c.qpLatency, l.Latency, strconv.FormatUint(uint64(l.QPN), 10))
	}
	for _, s := range c.d.QPStats(nil) {
		qpn := strconv.FormatUint(uint64(s.QPN), 10)
		for i, t := range verbs.QPCounterTable {
			ch <- prometheus.MustNewConstMetric(c.qpTransport[i], prometheus.CounterValue, float64(*t.Ptr(&s.Counters)), qpn)
		}
		for i, t := range cc.CounterTable {
			ch <- prometheus.MustNewConstMetric(c.qpCC[i], prometheus.CounterValue, float64(*t.Ptr(&s.CC.Counters)), qpn)
		}
		alg := s.CC.Kind.String()
		ch <- prometheus.MustNewConstMetric(c.rate, prometheus.GaugeValue, float64(s.CC.Rate), qpn, alg)
		ch <- prometheus.MustNewConstMetric(c.target, prometheus.GaugeValue, float64(s.CC.TargetRate), qpn, alg)
		ch <- prometheus.MustNewConstMetric(c.alpha, prometheus.GaugeValue, float64(s.CC.Alpha)/1024, qpn)
		ch <- prometheus.MustNewConstMetric(c.window, prometheus.GaugeValue, float64(s.CC.Window), qpn)
		ch <- prometheus.MustNewConstMetric(c.srtt, prometheus.GaugeValue, s.SRTT.Seconds(), qpn)
	}
}

// summary turns a latency histogram into a constant summary in seconds
// with the P50, P99 and P99.9 quantiles.
func summary(d *prometheus.Desc, l verbs.LatencySnapshot, labels ...string) prometheus.Metric {
	q := make(map[float64]float64, len(quantiles))
	for _, x := range quantiles {
		q[x] = l.Quantile(x).Seconds()
	}
	return prometheus.MustNewConstSummary(d, l.Count(), l.Sum().Seconds(), q, labels...)
}
