// Package metrics exports a uroce device's counters to Prometheus, so that
// dashboards built for rxe's hw_counters and mlx5's congestion counters
// keep working against a Go service that links uroce.
//
// An application registers a device with one call:
//
//	metrics.Register(prometheus.DefaultRegisterer, dev, "uroce0")
//
// Each scrape takes one snapshot of the device (verbs.Device.Counters and
// QPStats, copied out by the engine's owner) and turns it into constant
// metrics; nothing is kept between scrapes, so a QP destroyed since simply
// disappears. Device counters carry the label device; per-QP series carry
// device and qpn.
//
// Names are the kernel's, prefixed uroce_ and suffixed _total for counters:
// rxe's hw_counters (sent_pkts, rcvd_pkts, duplicate_request,
// out_of_seq_request, rcvd_rnr_err, send_rnr_err, rcvd_seq_err,
// retry_exceeded_err, retry_rnr_exceeded_err, completer_retry_err,
// send_err, link_downed) and mlx5's congestion counters
// (np_ecn_marked_roce_packets, np_cnp_sent, rp_cnp_handled,
// rp_cnp_ignored), then uroce's own, with the link's drops by reason
// (icrc_errors, link_rx_dropped, link_tx_dropped). Per-QP series add qp_
// after the prefix, plus gauges of the congestion control state: the
// current and target rate, DCQCN's α and the smoothed RTT. rxe's
// ack_deferred is left out on purpose: it counts responses queued for a
// completer still busy with another, and uroce's completer runs inline on
// each response as it arrives, so it never defers one.
//
// The transport and congestion counters, with their names and help, come
// from the tables verbs.QPCounterTable, verbs.CounterTable and
// cc.CounterTable: a counter added there is exported with no change here.
//
// Completion latency (verbs.QueuePair.Latency) is a summary per QP,
// uroce_qp_completion_latency_seconds, and one per device,
// uroce_completion_latency_seconds, each with the quantiles 0.5, 0.99 and
// 0.999 plus _sum and _count. Unlike client_golang's own summaries, whose
// quantiles cover a sliding window, these cover the QP's (or device's)
// whole life, as its counters do; rate(_sum)/rate(_count) gives the mean
// over any window. They are built from the histograms at scrape time:
// the data path only ever increments them.
//
// To serve them, register the collector and mount promhttp:
//
//	reg := prometheus.NewRegistry()
//	metrics.Register(reg, dev, "uroce0")
//	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
//
// Package verbs does not depend on Prometheus; this package is the bridge.
package metrics
