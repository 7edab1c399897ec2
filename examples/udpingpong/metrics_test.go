package main

import (
	"io"
	"strings"
	"testing"
	"time"
)

// TestMetricsFlag: -metrics is parsed, and a client run with it serves
// /metrics (examples/internal/metricsflag) and says where.
func TestMetricsFlag(t *testing.T) {
	o, err := parseFlags([]string{"-metrics", "127.0.0.1:0", "host"}, io.Discard)
	if err != nil || o.metrics != "127.0.0.1:0" || o.peer != "host" {
		t.Fatalf("parse: %+v %v", o, err)
	}
	base := options{size: 64, iters: 20, rxDepth: 50, gid: 0, ibPort: 1, timeout: 10 * time.Second}
	co := base
	co.metrics = "127.0.0.1:0"
	sout, cout, serr, cerr := runPair(t, base, co)
	if serr != nil || cerr != nil {
		t.Fatalf("server: %v\nclient: %v\n%s\n%s", serr, cerr, sout, cout)
	}
	if !strings.Contains(cout, "metrics: http://127.0.0.1:") || strings.Contains(sout, "metrics:") {
		t.Errorf("outputs:\n%s\n%s", sout, cout)
	}
}
