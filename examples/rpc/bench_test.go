package main

import (
	"context"
	"fmt"
	"net"
	"testing"

	"github.com/uroce/uroce/examples/internal/loopback"
	"github.com/uroce/uroce/examples/internal/rpc"
	"github.com/uroce/uroce/verbs"
)

// BenchmarkRoundTrip measures one caller's echo round trip over uroce and
// over TCP, per size, in the same run; each reports p50 and p99 (ns) and
// the uroce sub-benchmark runs first so the TCP one can report ratios.
// go test -bench RoundTrip -benchtime 5000x ./examples/rpc
func BenchmarkRoundTrip(b *testing.B) {
	dc, ds, err := loopback.Pair(0)
	if err != nil {
		b.Fatal(err)
	}
	defer dc.Close()
	defer ds.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	roundTrips(b, dc, ds, ln, dialTCP)
}

// roundTrips is the body of the round-trip benchmarks: an RPC client on
// dc, its server on ds, and the TCP echo served on ln and reached with
// dial (the AF_XDP benchmark puts each side in its own namespace).
func roundTrips(b *testing.B, dc, ds *verbs.Device, ln net.Listener, dial func(addr string) (*tcpClient, error)) {
	cfg := rpc.Config{Slots: 64, MaxMsg: 16 << 10}
	srv := rpc.NewServer(ds, cfg, func(_ uint16, req, resp []byte) (int, uint16) { return copy(resp, req), 0 })
	defer srv.Close()
	cli, err := rpc.NewClient(dc, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Close()
	ep, err := srv.Accept(cli.Endpoint())
	if err != nil {
		b.Fatal(err)
	}
	if err := cli.Connect(ep); err != nil {
		b.Fatal(err)
	}
	go serveTCP(ln)
	tc, err := dial(ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer tc.c.Close()
	ctx := context.Background()
	for _, size := range []int{64, 1024, 16 << 10} {
		req, resp := make([]byte, size), make([]byte, size)
		p := &pending{buf: resp, done: make(chan int, 1)}
		var u result
		b.Run(fmt.Sprintf("uroce/%d", size), func(b *testing.B) {
			lat := newLatencies(b)
			for b.Loop() {
				lat.start()
				if _, err := cli.Call(ctx, 1, req, resp); err != nil {
					b.Fatal(err)
				}
				lat.stop()
			}
			u = lat.report(b)
		})
		b.Run(fmt.Sprintf("tcp/%d", size), func(b *testing.B) {
			lat := newLatencies(b)
			for b.Loop() {
				lat.start()
				tc.call(p, req)
				lat.stop()
			}
			k := lat.report(b)
			if u.p50 > 0 && k.p50 > 0 {
				b.ReportMetric(ratio(u.p50, k.p50), "uroce/tcp-p50")
				b.ReportMetric(ratio(u.p99, k.p99), "uroce/tcp-p99")
			}
		})
	}
}
