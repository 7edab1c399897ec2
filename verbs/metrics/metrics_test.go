package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/uroce/uroce/cc"
	"github.com/uroce/uroce/pkg/link/pipe"
	"github.com/uroce/uroce/pkg/netem"
	"github.com/uroce/uroce/verbs"
	"github.com/uroce/uroce/verbs/metrics"
)

// connected returns two devices over a pipe whose A-to-B direction marks
// every queued packet CE, with one connected QP each running DCQCN.
func connected(t *testing.T) (da, db *verbs.Device, qa, qb *verbs.QueuePair, cq *verbs.CQ, src, dst *verbs.MR) {
	la, lb := pipe.New(pipe.Config{Seed: 1, AtoB: netem.Faults{Rate: 10e6, ECN: &netem.RED{}}})
	da, db = verbs.Open(la, verbs.Inline()), verbs.Open(lb, verbs.Inline())
	t.Cleanup(func() { da.Close(); db.Close() })
	dcqcn := cc.DefaultConfig(cc.KindDCQCN, cc.Gbps)
	mk := func(d *verbs.Device) (*verbs.QueuePair, *verbs.CQ, *verbs.MR) {
		pd := d.AllocPD()
		c := d.CreateCQ(64)
		q, err := pd.CreateQP(&verbs.QPInit{SendCQ: c, RecvCQ: c, Cap: verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16}, CC: &dcqcn})
		if err != nil {
			t.Fatal(err)
		}
		mr, err := pd.RegMR(make([]byte, 1<<16), verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
		if err != nil {
			t.Fatal(err)
		}
		return q, c, mr
	}
	qa, cq, src = mk(da)
	qb, _, dst = mk(db)
	if err := qa.Connect(qb.Endpoint(1), verbs.ConnectOptions{PSN: 100}); err != nil {
		t.Fatal(err)
	}
	if err := qb.Connect(qa.Endpoint(100), verbs.ConnectOptions{PSN: 1}); err != nil {
		t.Fatal(err)
	}
	return
}

func gather(t *testing.T, g prometheus.Gatherer) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]*dto.MetricFamily{}
	for _, f := range mfs {
		m[f.GetName()] = f
	}
	return m
}

// value returns the value of the family's series whose labels include
// want (name=value pairs).
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, want ...string) float64 {
	t.Helper()
	f := fams[name]
	if f == nil {
		t.Fatalf("no metric %s", name)
	}
next:
	for _, m := range f.Metric {
		labels := map[string]string{}
		for _, l := range m.Label {
			labels[l.GetName()] = l.GetValue()
		}
		for i := 0; i+1 < len(want); i += 2 {
			if labels[want[i]] != want[i+1] {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		}
	}
	t.Fatalf("no series of %s with %v", name, want)
	return 0
}

// TestCollector: after a congested transfer, one Register call exposes the
// device and per-QP counters under rxe's and mlx5's names with the values
// the verbs counters API reports.
func TestCollector(t *testing.T) {
	da, db, qa, qb, cq, src, dst := connected(t)
	reg := prometheus.NewPedanticRegistry()
	if _, err := metrics.Register(reg, da, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := metrics.Register(reg, db, "b"); err != nil {
		t.Fatal(err)
	}
	if _, err := metrics.Register(reg, db, "b"); err == nil || !errors.As(err, new(prometheus.AlreadyRegisteredError)) {
		t.Fatalf("registering twice: %v", err)
	}
	db.Start()
	wr := verbs.SendWR{Opcode: verbs.WRWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(0, 1<<16)}, RemoteAddr: dst.Addr(), RKey: dst.RKey()}
	if err := qa.PostSend(&wr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	wc := make([]verbs.WC, 1)
	if n, err := cq.Wait(ctx, wc); err != nil || n != 1 || wc[0].Status != verbs.WCSuccess {
		t.Fatalf("write: %d %v %v", n, err, wc[0].Status)
	}
	// Freeze a's clock (it runs inline, on this goroutine): DCQCN's α
	// and rate move with time, and the scrape and CCStats must agree.
	frozen := time.Now()
	da.SetClock(func() time.Time { return frozen })
	fams := gather(t, reg)
	ca, cb := da.Counters(), db.Counters()
	sa := qa.CCStats()
	qpnA, qpnB := fmt.Sprint(qa.QPN()), fmt.Sprint(qb.QPN())
	checks := []struct {
		name   string
		labels []string
		want   float64
	}{
		{"uroce_sent_pkts_total", []string{"device", "a"}, float64(ca.TxPackets)},
		{"uroce_rcvd_pkts_total", []string{"device", "b"}, float64(cb.RxPackets)},
		{"uroce_np_ecn_marked_roce_packets_total", []string{"device", "b"}, float64(cb.CC.NPECNMarkedRoCEPackets)},
		{"uroce_np_cnp_sent_total", []string{"device", "b"}, float64(cb.CC.NPCNPSent)},
		{"uroce_rp_cnp_handled_total", []string{"device", "a"}, float64(ca.CC.RPCNPHandled)},
		{"uroce_rp_cnp_ignored_total", []string{"device", "a"}, 0},
		{"uroce_retry_exceeded_err_total", []string{"device", "a"}, 0},
		{"uroce_cnps_rcvd_total", []string{"device", "a"}, float64(ca.CNPsRcvd)},
		{"uroce_link_downed_total", []string{"device", "a"}, 0}, // a pipe's port is always active
		{"uroce_qp_sent_pkts_total", []string{"device", "a", "qpn", qpnA}, float64(qa.Counters().TxPackets)},
		{"uroce_qp_rp_cnp_handled_total", []string{"device", "a", "qpn", qpnA}, float64(sa.RPCNPHandled)},
		{"uroce_qp_np_cnp_sent_total", []string{"device", "b", "qpn", qpnB}, float64(qb.CCStats().NPCNPSent)},
		{"uroce_qp_cc_rate_bits_per_second", []string{"device", "a", "qpn", qpnA, "algorithm", "dcqcn"}, float64(sa.Rate)},
		{"uroce_qp_cc_alpha", []string{"device", "a", "qpn", qpnA}, float64(sa.Alpha) / 1024},
	}
	for _, c := range checks {
		if got := value(t, fams, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if ca.CC.RPCNPHandled == 0 || cb.CC.NPCNPSent == 0 {
		t.Errorf("no congestion: a %+v, b %+v", ca.CC, cb.CC)
	}
	// Every rxe hw_counters name this stack keeps is there.
	for _, n := range []string{"sent_pkts", "rcvd_pkts", "duplicate_request", "out_of_seq_request", "rcvd_rnr_err", "send_rnr_err",
		"rcvd_seq_err", "retry_exceeded_err", "retry_rnr_exceeded_err", "completer_retry_err"} {
		for _, p := range []string{"uroce_", "uroce_qp_"} {
			if fams[p+n+"_total"] == nil {
				t.Errorf("no %s%s_total", p, n)
			}
		}
	}
	// The device's completion latency summary holds the one WRITE, and
	// the link's drop counters are there.
	if f := fams["uroce_completion_latency_seconds"]; f == nil || f.Metric[0].Summary.GetSampleCount() != 1 {
		t.Errorf("device latency summary: %v", f)
	}
	for _, n := range []string{"uroce_icrc_errors_total", "uroce_link_rx_dropped_total", "uroce_link_tx_dropped_total", "uroce_send_err_total"} {
		if v := value(t, fams, n, "device", "b"); v != 0 {
			t.Errorf("%s = %v on a clean pipe", n, v)
		}
	}
	if v := value(t, fams, "uroce_qp_srtt_seconds", "device", "a", "qpn", qpnA); v <= 0 {
		t.Errorf("srtt %v", v)
	}
	for name := range fams {
		if !strings.HasPrefix(name, "uroce_") {
			t.Errorf("metric %s outside the namespace", name)
		}
	}
}
