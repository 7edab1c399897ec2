package main

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/uroce/uroce/verbs"
	"github.com/uroce/uroce/verbs/metrics"
)

// sample returns the value of the exposition line that starts with
// series, or -1.
func sample(page, series string) float64 {
	for line := range strings.Lines(page) {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err == nil {
				return v
			}
		}
	}
	return -1
}

// TestMetricsFlag: -metrics is parsed, and a client run with it serves
// /metrics whose counters, scraped at the end, are the QP's.
func TestMetricsFlag(t *testing.T) {
	o, err := parseFlags([]string{"-metrics", "127.0.0.1:0", "host"}, io.Discard)
	if err != nil || o.metrics != "127.0.0.1:0" || o.peer != "host" {
		t.Fatalf("parse: %+v %v", o, err)
	}
	const iters = 50
	base := options{size: 64, iters: iters, mtu: 1024, rxDepth: 500, linger: 100 * time.Millisecond}
	so, co := base, base
	co.metrics = "127.0.0.1:0"
	var page string
	var want verbs.QPCounters
	var qpn uint32
	co.scraped = func(s *metrics.Server, cliDev *verbs.Device) {
		qps := cliDev.QPStats(nil)
		if len(qps) != 1 {
			t.Errorf("%d QPs", len(qps))
			return
		}
		want, qpn = qps[0].Counters, qps[0].QPN
		resp, err := http.Get(s.URL())
		if err != nil {
			t.Error(err)
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		page = string(b)
	}
	sout, cout, serr, cerr := runPair(t, so, co)
	if serr != nil || cerr != nil {
		t.Fatalf("server: %v\n%s\nclient: %v\n%s", serr, sout, cerr, cout)
	}
	if !strings.Contains(cout, "  metrics:        http://127.0.0.1:") {
		t.Errorf("client output lacks the metrics address:\n%s", cout)
	}
	qp := fmt.Sprintf(`{device="uroce0",qpn="%d"}`, qpn)
	for _, c := range []struct {
		series string
		want   float64
	}{
		{"uroce_qp_sent_pkts_total" + qp, float64(want.TxPackets)},
		{"uroce_qp_completed_recvs_total" + qp, float64(want.CompletedRecvs)},
		{"uroce_qp_retransmits_total" + qp, float64(want.Retransmits)},
	} {
		if got := sample(page, c.series); got != c.want {
			t.Errorf("%s = %v, want %v", c.series, got, c.want)
		}
	}
	if want.CompletedRecvs < iters {
		t.Errorf("completed %d receives, want %d", want.CompletedRecvs, iters)
	}
	if n := sample(page, "uroce_qp_completion_latency_seconds_count"+qp); n < iters {
		t.Errorf("%v latencies recorded, want at least %d", n, iters)
	}
	if p := sample(page, `uroce_qp_completion_latency_seconds{device="uroce0",qpn="`+fmt.Sprint(qpn)+`",quantile="0.99"}`); p <= 0 {
		t.Errorf("P99 %v", p)
	}
}
