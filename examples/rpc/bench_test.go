package main

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/uroce/uroce/examples/internal/loopback"
	"github.com/uroce/uroce/examples/internal/rpc"
	"github.com/uroce/uroce/verbs"
)

// BenchmarkRoundTrip measures one caller's echo round trip over uroce and
// over TCP, per size, in the same run, then requests/s with parCallers
// callers. Latency sub-benchmarks report p50, p99 and p99.9 (ns); TCP runs
// first at each size so the uroce ones can report their ratios to it
// (x-tcp-*: below 1 favours uroce). The -verbs sub-benchmarks are the
// floor under the RPC layer: a bare verbs SEND ping-pong on the same
// devices (floor_test.go).
//
//	go test -run XXX -bench 'RoundTrip$' -benchtime 5000x ./examples/rpc
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
	fc, fs, err := loopback.Pair(0)
	if err != nil {
		b.Fatal(err)
	}
	defer fc.Close()
	defer fs.Close()
	roundTrips(b, []devices{{"uroce", dc, ds, fc, fs}}, ln, dialTCP)
}

// devices are a client's and a server's device, named for the report,
// and a second pair of the same kind for the bare verbs floor: on the
// same devices, the floor's server and the RPC server would both wait in
// CQ.Wait on one inline engine, and each would drive the other's QPs.
type devices struct {
	name           string
	client, server *verbs.Device
	floorC, floorS *verbs.Device
}

// parCallers is how many callers share one client (or one TCP connection)
// in the requests/s sub-benchmarks, as the program's -c.
const parCallers = 16

// roundTrips is the body of the round-trip benchmarks: an RPC client and
// its server on each pair of devices, and the TCP echo served on ln and
// reached with dial (the AF_XDP benchmark puts each side in its own
// namespace). Every transport is measured at each size before the next
// size, so all see about the same machine load.
func roundTrips(b *testing.B, pairs []devices, ln net.Listener, dial func(addr string) (*tcpClient, error)) {
	cfg := rpc.Config{Slots: 64, MaxMsg: 16 << 10}
	ctx := context.Background()
	type caller func(req, resp []byte, p *pending) error
	var uroce, bare []caller
	for _, d := range pairs {
		f := newFloor(b, d.floorC, d.floorS)
		defer f.close()
		bare = append(bare, f.call)
		srv := rpc.NewServer(d.server, cfg, func(_ uint16, req, resp []byte) (int, uint16) { return copy(resp, req), 0 })
		defer srv.Close()
		cli, err := rpc.NewClient(d.client, cfg)
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
		uroce = append(uroce, func(req, resp []byte, _ *pending) error {
			_, err := cli.Call(ctx, 1, req, resp)
			return err
		})
	}
	go serveTCP(ln)
	tc, err := dial(ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer tc.c.Close()
	tcp := func(req, resp []byte, p *pending) error {
		if n := tc.call(p, req); n != len(req) {
			return fmt.Errorf("tcp echo of %d bytes: %d", len(req), n)
		}
		return nil
	}
	// The first calls over a new link wait for neighbour resolution (a
	// dropped first packet is an RC retransmission): have them before
	// anything is counted.
	for _, call := range append(append([]caller{tcp}, uroce...), bare...) {
		if _, err := warmUp(call, 64); err != nil {
			b.Fatal(err)
		}
	}
	for _, size := range []int{64, 1024, 16 << 10} {
		var k result
		b.Run(fmt.Sprintf("tcp/%d", size), func(b *testing.B) { k = latency(b, tcp, size) })
		for i, d := range pairs {
			b.Run(fmt.Sprintf("%s/%d", d.name, size), func(b *testing.B) {
				defer retransmits(b, d)()
				u := latency(b, uroce[i], size)
				if k.p50 > 0 && u.p50 > 0 {
					b.ReportMetric(ratio(u.p50, k.p50), "x-tcp-p50")
					b.ReportMetric(ratio(u.p99, k.p99), "x-tcp-p99")
					b.ReportMetric(ratio(u.p999, k.p999), "x-tcp-p99.9")
				}
			})
			b.Run(fmt.Sprintf("%s-verbs/%d", d.name, size), func(b *testing.B) { latency(b, bare[i], size) })
		}
		b.Run(fmt.Sprintf("rate/tcp/%d", size), func(b *testing.B) { rate(b, tcp, size) })
		for i, d := range pairs {
			b.Run(fmt.Sprintf("rate/%s/%d", d.name, size), func(b *testing.B) {
				defer retransmits(b, d)()
				rate(b, uroce[i], size)
			})
		}
	}
}

// retransmits reports, when the returned function runs, the packets both
// devices sent again meanwhile: a lost packet costs a transport timeout
// (67 ms), which no percentile hides.
func retransmits(b *testing.B, d devices) func() {
	n := func() uint64 { return d.client.Counters().Retransmits + d.server.Counters().Retransmits }
	n0 := n()
	return func() { b.ReportMetric(float64(n()-n0), "retx") }
}

// latency times b.N sequential round trips of size bytes.
func latency(b *testing.B, call func(req, resp []byte, p *pending) error, size int) result {
	p, err := warmUp(call, size)
	if err != nil {
		b.Fatal(err)
	}
	req, resp := make([]byte, size), p.buf
	lat := newLatencies(b)
	for b.Loop() {
		lat.start()
		if err := call(req, resp, p); err != nil {
			b.Fatal(err)
		}
		lat.stop()
	}
	return lat.report(b)
}

// warmUp makes 100 calls of size bytes and returns the pending call
// (holding the response buffer) for more.
func warmUp(call func(req, resp []byte, p *pending) error, size int) (*pending, error) {
	req, resp := make([]byte, size), make([]byte, size)
	p := &pending{buf: resp, done: make(chan int, 1)}
	for range 100 {
		if err := call(req, resp, p); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// rate spreads b.N round trips of size bytes over parCallers callers and
// reports requests/s.
func rate(b *testing.B, call func(req, resp []byte, p *pending) error, size int) {
	var wg sync.WaitGroup
	errs := make(chan error, parCallers)
	t0 := time.Now()
	for c := range parCallers {
		wg.Go(func() {
			req, resp := make([]byte, size), make([]byte, size)
			p := &pending{buf: resp, done: make(chan int, 1)}
			for range b.N/parCallers + min(1, max(0, b.N%parCallers-c)) {
				if err := call(req, resp, p); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(t0).Seconds(), "req/s")
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
}
