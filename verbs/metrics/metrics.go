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

// counter is one transport counter, read from a QP's or the device's
// summed counters.
type counter struct {
	name, help string
	get        func(*verbs.QPCounters) uint64
}

// transport lists the counters kept per QP and summed per device: rxe's
// hw_counters names first, then uroce's own.
var transport = []counter{
	{"sent_pkts", "RoCE packets sent (rxe sent_pkts).", func(c *verbs.QPCounters) uint64 { return c.TxPackets }},
	{"rcvd_pkts", "RoCE packets received for a QP (rxe rcvd_pkts).", func(c *verbs.QPCounters) uint64 { return c.RxPackets }},
	{"duplicate_request", "Duplicate requests answered or dropped (rxe duplicate_request).", func(c *verbs.QPCounters) uint64 { return c.DupRequests }},
	{"out_of_seq_request", "Requests ahead of the expected PSN, answered with a sequence NAK (rxe out_of_seq_request).", func(c *verbs.QPCounters) uint64 { return c.SeqNAKsSent }},
	{"rcvd_rnr_err", "RNR NAKs received (rxe rcvd_rnr_err).", func(c *verbs.QPCounters) uint64 { return c.RNRNAKsRcvd }},
	{"send_rnr_err", "RNR NAKs sent (rxe send_rnr_err).", func(c *verbs.QPCounters) uint64 { return c.RNRNAKsSent }},
	{"rcvd_seq_err", "PSN sequence error NAKs received (rxe rcvd_seq_err).", func(c *verbs.QPCounters) uint64 { return c.SeqNAKsRcvd }},
	{"retry_exceeded_err", "Work requests failed after the retry count ran out (rxe retry_exceeded_err).", func(c *verbs.QPCounters) uint64 { return c.RetryExcErrs }},
	{"retry_rnr_exceeded_err", "Work requests failed after the RNR retry count ran out (rxe retry_rnr_exceeded_err).", func(c *verbs.QPCounters) uint64 { return c.RNRRetryExcErrs }},
	{"completer_retry_err", "Go-back-N retries started by the completer (rxe completer_retry_err).", func(c *verbs.QPCounters) uint64 { return c.CompleterRetries }},
	{"sent_bytes", "Payload bytes sent.", func(c *verbs.QPCounters) uint64 { return c.TxBytes }},
	{"rcvd_bytes", "Payload bytes received.", func(c *verbs.QPCounters) uint64 { return c.RxBytes }},
	{"posted_sends", "Send work requests posted.", func(c *verbs.QPCounters) uint64 { return c.PostedSends }},
	{"completed_sends", "Send work requests completed successfully.", func(c *verbs.QPCounters) uint64 { return c.CompletedSends }},
	{"rdma_sends", "SEND work requests completed successfully (rxe rdma_sends).", func(c *verbs.QPCounters) uint64 { return c.RDMASends }},
	{"completed_recvs", "Receive work requests completed successfully (what rxe counts as rdma_recvs).", func(c *verbs.QPCounters) uint64 { return c.CompletedRecvs }},
	{"retransmits", "Request packets sent again.", func(c *verbs.QPCounters) uint64 { return c.Retransmits }},
	{"local_ack_timeouts", "Local ACK timeouts that started a retry.", func(c *verbs.QPCounters) uint64 { return c.Timeouts }},
	{"implicit_naks", "Retries started by a response after a gap.", func(c *verbs.QPCounters) uint64 { return c.ImplicitNAKs }},
	{"err_naks_sent", "NAKs sent for invalid requests and access errors.", func(c *verbs.QPCounters) uint64 { return c.ErrNAKsSent }},
	{"dropped", "Packets a QP ignored (stale, out of sequence, wrong state).", func(c *verbs.QPCounters) uint64 { return c.Dropped }},
}

// ccHelp explains mlx5's congestion counters, by their cc names.
var ccHelp = map[string]string{
	cc.NameNPECNMarkedRoCEPackets: "CE-marked RoCE packets received (mlx5 np_ecn_marked_roce_packets).",
	cc.NameNPCNPSent:              "CNPs sent in answer to CE marks (mlx5 np_cnp_sent).",
	cc.NameRPCNPHandled:           "CNPs the reaction point acted on (mlx5 rp_cnp_handled).",
	cc.NameRPCNPIgnored:           "CNPs received by QPs whose algorithm does not react to them (mlx5 rp_cnp_ignored).",
}

// device lists the counters only a device has.
var device = []struct {
	name, help string
	get        func(*verbs.Counters) uint64
}{
	{"no_qp", "Packets for a QP number with no QP.", func(c *verbs.Counters) uint64 { return c.NoQP }},
	{"bad_packet", "Packets that do not decode or are not RC.", func(c *verbs.Counters) uint64 { return c.BadPacket }},
	{"bad_pkey", "Packets with a P_Key mismatch.", func(c *verbs.Counters) uint64 { return c.BadPKey }},
	{"no_buffer", "Packets not built for lack of a transmit buffer.", func(c *verbs.Counters) uint64 { return c.NoBuffer }},
	{"send_err", "Packets the link did not send (rxe send_err).", func(c *verbs.Counters) uint64 { return c.TxErrors }},
	{"cnps_rcvd", "CNPs received for an existing QP.", func(c *verbs.Counters) uint64 { return c.CNPsRcvd }},
	{"link_downed", "Times the port's interface went down, its port from active to down (rxe link_downed).", func(c *verbs.Counters) uint64 { return c.LinkDowned }},
}

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

	devTransport []*prometheus.Desc
	devCC        map[string]*prometheus.Desc
	devOnly      []*prometheus.Desc
	devLink      []*prometheus.Desc
	devLatency   *prometheus.Desc
	qpLatency    *prometheus.Desc
	qpTransport  []*prometheus.Desc
	qpCC         map[string]*prometheus.Desc
	rate, target *prometheus.Desc
	alpha, srtt  *prometheus.Desc
	window       *prometheus.Desc
}

var _ prometheus.Collector = (*Collector)(nil)

// NewCollector returns a collector for d, whose series carry the label
// device=name.
func NewCollector(d Device, name string) *Collector {
	c := &Collector{d: d, name: name, devCC: map[string]*prometheus.Desc{}, qpCC: map[string]*prometheus.Desc{}}
	devL := prometheus.Labels{"device": name}
	qpL := []string{"qpn"}
	desc := func(sub, n, help string, vars []string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(namespace, sub, n), help, vars, devL)
	}
	for _, t := range transport {
		c.devTransport = append(c.devTransport, desc("", t.name+"_total", t.help, nil))
		c.qpTransport = append(c.qpTransport, desc("qp", t.name+"_total", t.help, qpL))
	}
	var zero cc.Counters
	for _, n := range zero.Named() {
		c.devCC[n.Name] = desc("", n.Name+"_total", ccHelp[n.Name], nil)
		c.qpCC[n.Name] = desc("qp", n.Name+"_total", ccHelp[n.Name], qpL)
	}
	for _, t := range device {
		c.devOnly = append(c.devOnly, desc("", t.name+"_total", t.help, nil))
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
	for _, d := range c.devTransport {
		ch <- d
	}
	for _, d := range c.devOnly {
		ch <- d
	}
	for _, d := range c.devLink {
		ch <- d
	}
	ch <- c.devLatency
	ch <- c.qpLatency
	for _, d := range c.qpTransport {
		ch <- d
	}
	for _, d := range c.devCC {
		ch <- d
	}
	for _, d := range c.qpCC {
		ch <- d
	}
	ch <- c.rate
	ch <- c.target
	ch <- c.alpha
	ch <- c.window
	ch <- c.srtt
}

// Collect implements prometheus.Collector: one snapshot of the device per
// scrape.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	dc := c.d.Counters()
	for i, t := range transport {
		ch <- prometheus.MustNewConstMetric(c.devTransport[i], prometheus.CounterValue, float64(t.get(&dc.Counters)))
	}
	for i, t := range device {
		ch <- prometheus.MustNewConstMetric(c.devOnly[i], prometheus.CounterValue, float64(t.get(&dc)))
	}
	for _, n := range dc.CC.Named() {
		ch <- prometheus.MustNewConstMetric(c.devCC[n.Name], prometheus.CounterValue, float64(n.Value))
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
		for i, t := range transport {
			ch <- prometheus.MustNewConstMetric(c.qpTransport[i], prometheus.CounterValue, float64(t.get(&s.Counters)), qpn)
		}
		for _, n := range s.CC.Named() {
			ch <- prometheus.MustNewConstMetric(c.qpCC[n.Name], prometheus.CounterValue, float64(n.Value), qpn)
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
