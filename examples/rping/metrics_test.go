package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/uroce/uroce/examples/internal/loopback"
)

// TestMetricsFlag: -metrics is parsed, and a client run with it serves
// /metrics and says where on standard error, leaving rping's standard
// output as it was.
func TestMetricsFlag(t *testing.T) {
	o, err := parseFlags([]string{"-c", "-a", "10.0.0.1", "-metrics", "127.0.0.1:0"}, io.Discard)
	if err != nil || o.metrics != "127.0.0.1:0" {
		t.Fatalf("parse: %+v %v", o, err)
	}
	cliDev, srvDev, err := loopback.Pair(0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	listening := make(chan struct{})
	var srvOut, srvErr, cliOut, cliErr syncBuf
	srvDone := make(chan error, 1)
	go func() {
		srvDone <- run(ctx, srvDev, options{server: true, port: 7174, size: 64,
			listening: func() { close(listening) }}, &srvOut, &srvErr)
	}()
	select {
	case <-listening:
	case err := <-srvDone:
		t.Fatalf("server: %v", err)
	}
	err = run(ctx, cliDev, options{client: true, addr: loopback.B.String(), port: 7174, count: 3, size: 64, verbose: true, metrics: "127.0.0.1:0"},
		&cliOut, &cliErr)
	if err != nil {
		t.Fatalf("client: %v\n%s", err, cliErr.String())
	}
	if err := <-srvDone; err != nil {
		t.Fatalf("server: %v\n%s", err, srvErr.String())
	}
	if !strings.HasPrefix(cliErr.String(), "metrics: http://127.0.0.1:") || strings.Contains(cliOut.String(), "metrics") {
		t.Errorf("stdout %q, stderr %q", cliOut.String(), cliErr.String())
	}
	if n := strings.Count(cliOut.String(), "ping data: "); n != 3 {
		t.Errorf("%d pings:\n%s", n, cliOut.String())
	}
}
