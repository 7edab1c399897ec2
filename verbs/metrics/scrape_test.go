package metrics_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/uroce/uroce/pkg/link/pipe"
	"github.com/uroce/uroce/pkg/netem"
	"github.com/uroce/uroce/verbs"
	"github.com/uroce/uroce/verbs/metrics"
)

// scrape gets /metrics over HTTP and parses the text exposition.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// counters flattens every counter series to "name{labels}" → value.
func counters(fams map[string]*dto.MetricFamily) map[string]float64 {
	m := map[string]float64{}
	for name, f := range fams {
		for _, s := range f.Metric {
			if s.Counter == nil {
				continue
			}
			key := name + "{"
			for _, l := range s.Label {
				key += l.GetName() + "=" + l.GetValue() + ","
			}
			m[key+"}"] = s.Counter.GetValue()
		}
	}
	return m
}

// TestScrapeLossyRun: two devices over a seeded pipe that drops 5 % of
// requests and 5 % of responses (few: one ACK answers a receive burst)
// run 300 four-packet WRITEs while /metrics
// is scraped over HTTP. Every counter only grows from scrape to scrape;
// at the end the scrape equals the verbs counters API, and the
// retransmission and NAK counters agree with what the pipe dropped: every
// dropped request packet was sent again, the responder NAKed at most once
// per drop, every packet sent either arrived or was dropped.
func TestScrapeLossyRun(t *testing.T) {
	const (
		wrs    = 300
		size   = 4096 // 4 packets at path MTU 1024
		perWR  = 4
		window = 16
		tick   = 50 * time.Microsecond
	)
	var mu sync.Mutex
	now := time.Unix(1e6, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	la, lb := pipe.New(pipe.Config{Seed: 7, Clock: clock,
		AtoB: netem.Faults{Drop: 0.05, Delay: 10 * time.Microsecond},
		BtoA: netem.Faults{Drop: 0.05, Delay: 10 * time.Microsecond}})
	da, db := verbs.Open(la, verbs.Inline()), verbs.Open(lb, verbs.Inline())
	t.Cleanup(func() { da.Close(); db.Close() })
	da.SetClock(clock)
	db.SetClock(clock)
	mk := func(d *verbs.Device) (*verbs.QueuePair, *verbs.CQ, *verbs.MR) {
		pd := d.AllocPD()
		cq := d.CreateCQ(64)
		q, err := pd.CreateQP(&verbs.QPInit{SendCQ: cq, RecvCQ: cq, Cap: verbs.QPCap{MaxSendWR: window, MaxRecvWR: 1}})
		if err != nil {
			t.Fatal(err)
		}
		mr, err := pd.RegMR(make([]byte, size), verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
		if err != nil {
			t.Fatal(err)
		}
		return q, cq, mr
	}
	qa, ca, src := mk(da)
	qb, cb, dst := mk(db)
	// A 4 ms ACK timeout (14 would be 67 ms: many idle ticks).
	o := verbs.ConnectOptions{PathMTU: 1024, Timeout: 10, RetryCnt: 7}
	o.PSN = 1
	if err := qa.Connect(qb.Endpoint(2), o); err != nil {
		t.Fatal(err)
	}
	o.PSN = 2
	if err := qb.Connect(qa.Endpoint(1), o); err != nil {
		t.Fatal(err)
	}

	reg := prometheus.NewPedanticRegistry()
	for name, d := range map[string]*verbs.Device{"a": da, "b": db} {
		if _, err := metrics.Register(reg, d, name); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.PanicOnError}))
	defer srv.Close()
	url := srv.URL + "/metrics"

	prev := counters(scrape(t, url))
	scrapes := 1
	check := func() map[string]*dto.MetricFamily {
		fams := scrape(t, url)
		cur := counters(fams)
		for k, v := range prev {
			if cur[k] < v {
				t.Errorf("scrape %d: %s went from %v to %v", scrapes, k, v, cur[k])
			}
		}
		prev = cur
		scrapes++
		return fams
	}

	wr := verbs.SendWR{Opcode: verbs.WRWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(0, size)}, RemoteAddr: dst.Addr(), RKey: dst.RKey()}
	var wc [window]verbs.WC
	posted, done, idle := 0, 0, 0
	for done < wrs {
		for posted < wrs && posted-done < window {
			wr.ID = uint64(posted)
			if err := qa.PostSend(&wr); err != nil {
				t.Fatal(err)
			}
			posted++
		}
		cb.Poll(nil) // drives b's engine
		n := ca.Poll(wc[:])
		for _, w := range wc[:n] {
			if w.Status != verbs.WCSuccess {
				t.Fatalf("WR %d: %v", w.WRID, w.Status)
			}
		}
		if done/25 != (done+n)/25 {
			check()
		}
		done += n
		if n > 0 {
			idle = 0
			continue
		}
		// Nothing moved: let the pipe's delay and the timers run.
		if idle++; idle > 1_000_000 {
			t.Fatalf("stuck at %d of %d", done, wrs)
		}
		mu.Lock()
		now = now.Add(tick)
		mu.Unlock()
	}
	// Let the last ACKs and stray retransmissions settle, then scrape.
	for range 200 {
		mu.Lock()
		now = now.Add(tick)
		mu.Unlock()
		cb.Poll(nil)
		ca.Poll(nil)
	}
	fams := check()

	ca2, cb2 := da.Counters(), db.Counters()
	qpnA, qpnB := fmt.Sprint(qa.QPN()), fmt.Sprint(qb.QPN())
	dropAB, dropBA := la.FaultStats().Dropped, lb.FaultStats().Dropped
	t.Logf("%d scrapes; dropped A→B %d, B→A %d; retransmits %d, timeouts %d, seq NAKs sent %d received %d",
		scrapes, dropAB, dropBA, ca2.Retransmits, ca2.Timeouts, cb2.SeqNAKsSent, ca2.SeqNAKsRcvd)
	if dropAB == 0 || dropBA == 0 {
		t.Fatalf("the pipe dropped %d and %d: no loss to check against", dropAB, dropBA)
	}
	// The final scrape is the counters API.
	for _, c := range []struct {
		name   string
		labels []string
		want   uint64
	}{
		{"uroce_sent_pkts_total", []string{"device", "a"}, ca2.TxPackets},
		{"uroce_retransmits_total", []string{"device", "a"}, ca2.Retransmits},
		{"uroce_local_ack_timeouts_total", []string{"device", "a"}, ca2.Timeouts},
		{"uroce_rcvd_seq_err_total", []string{"device", "a"}, ca2.SeqNAKsRcvd},
		{"uroce_out_of_seq_request_total", []string{"device", "b"}, cb2.SeqNAKsSent},
		{"uroce_duplicate_request_total", []string{"device", "b"}, cb2.DupRequests},
		{"uroce_rcvd_pkts_total", []string{"device", "b"}, cb2.RxPackets},
		{"uroce_qp_retransmits_total", []string{"device", "a", "qpn", qpnA}, qa.Counters().Retransmits},
		{"uroce_qp_out_of_seq_request_total", []string{"device", "b", "qpn", qpnB}, qb.Counters().SeqNAKsSent},
		{"uroce_retry_exceeded_err_total", []string{"device", "a"}, 0},
	} {
		if got := value(t, fams, c.name, c.labels...); got != float64(c.want) {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	// What the pipe dropped.
	first := uint64(wrs * perWR)
	checks := []struct {
		what string
		ok   bool
	}{
		{"A sent each request packet once plus its retransmissions", ca2.TxPackets == first+ca2.Retransmits},
		{"every dropped request packet was sent again", ca2.Retransmits >= dropAB},
		{"B received what A sent less what was dropped", cb2.RxPackets == ca2.TxPackets-dropAB},
		{"A received what B sent less what was dropped", ca2.RxPackets == cb2.TxPackets-dropBA},
		{"B sent a sequence NAK at most once per drop", cb2.SeqNAKsSent <= dropAB},
		{"A received at most the NAKs B sent", ca2.SeqNAKsRcvd <= cb2.SeqNAKsSent},
		{"each retry was started by a NAK or a timeout", ca2.Retransmits == 0 || ca2.SeqNAKsRcvd+ca2.Timeouts+ca2.ImplicitNAKs > 0},
		{"every WR completed", ca2.CompletedSends == wrs},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s: a %+v, b %+v, dropped %d/%d", c.what, ca2.Counters, cb2.Counters, dropAB, dropBA)
		}
	}
	// The latency summary counts every WR, with P50 ≤ P99 ≤ P99.9.
	lat := fams["uroce_qp_completion_latency_seconds"]
	if lat == nil || len(lat.Metric) != 2 {
		t.Fatalf("latency summary: %v", lat)
	}
	var s *dto.Summary
	for _, m := range lat.Metric {
		if m.Label[0].GetValue() == "a" {
			s = m.Summary
		}
	}
	if s.GetSampleCount() != wrs || len(s.Quantile) != 3 {
		t.Fatalf("latency summary: %v", s)
	}
	for i := 1; i < len(s.Quantile); i++ {
		if s.Quantile[i].GetValue() < s.Quantile[i-1].GetValue() {
			t.Errorf("quantiles out of order: %v", s.Quantile)
		}
	}
	if q := s.Quantile[0]; q.GetQuantile() != 0.5 || q.GetValue() < 20e-6*63/64 {
		t.Errorf("median %v below the 20 µs round trip", q)
	}
}
