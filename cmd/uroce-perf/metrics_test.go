package main

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/uroce/uroce/verbs/metrics"
)

// TestMetricsFlag: --metrics parses among perftest's flags and the peer
// (perftest takes the peer anywhere), and a write_lat client run with it
// serves /metrics whose device counters at the end are the device's and
// whose latency summary counts every iteration.
func TestMetricsFlag(t *testing.T) {
	k, _ := kindByName("write_lat")
	for _, args := range [][]string{
		{"--metrics", "127.0.0.1:0", "-s", "64", "host"},
		{"-s", "64", "host", "-metrics=127.0.0.1:0"},
	} {
		c, err := parseArgs(k, args, io.Discard)
		if err != nil || c.metrics != "127.0.0.1:0" || c.peer != "host" || c.size != 64 {
			t.Fatalf("%q: %+v %v", args, c, err)
		}
	}
	srvAddr, cliAddr := loopbackPair(t)
	const iters = 200
	flags := []string{"-s", "64", "-n", strconv.Itoa(iters)}
	srvCfg, err := parseArgs(k, flags, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	cliCfg, err := parseArgs(k, append(flags, "--metrics", "127.0.0.1:0", srvAddr.String()), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var page string
	cliCfg.metricsDone = func(s *metrics.Server) {
		resp, err := http.Get(s.URL())
		if err != nil {
			t.Error(err)
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		page = string(b)
	}
	var so, co strings.Builder
	pc, err := pair(t.Context(), srvCfg, cliCfg, srvAddr, cliAddr, &so, &co)
	if err != nil {
		t.Fatalf("%v\nserver:\n%s\nclient:\n%s", err, so.String(), co.String())
	}
	dev := `{device="udp:` + cliAddr.String() + `"}`
	get := func(series string) float64 {
		for line := range strings.Lines(page) {
			if rest, ok := strings.CutPrefix(line, series+" "); ok {
				v, _ := strconv.ParseFloat(strings.TrimSpace(rest), 64)
				return v
			}
		}
		t.Fatalf("no %s in\n%s", series, page)
		return 0
	}
	if got, want := get("uroce_rcvd_pkts_total"+dev), float64(pc.Client.RxPackets); got != want || got == 0 {
		t.Errorf("rcvd_pkts %v, want %v", got, want)
	}
	if got := get("uroce_completion_latency_seconds_count" + dev); got < iters {
		t.Errorf("%v latencies, want at least %d", got, iters)
	}
}
