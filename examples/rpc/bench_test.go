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
// size, so all see about the same machine load. Each RPC connection (and
// floor) lives only while it is measured: a server waits in CQ.Wait even
// while idle, and with a busy-polling link that wait spins on a CPU the
// transport being measured would want.
func roundTrips(b *testing.B, pairs []devices, ln net.Listener, dial func(addr string) (*tcpClient, error)) {
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
	if _, err := warmUp(tcp, 64); err != nil {
		b.Fatal(err)
	}
	for _, d := range pairs {
		withRPC(b, d, func(call caller) {
			if _, err := warmUp(call, 64); err != nil {
				b.Fatal(err)
			}
		})
		withFloor(b, d, func(call caller) {
			if _, err := warmUp(call, 64); err != nil {
				b.Fatal(err)
			}
		})
	}
	for _, size := range []int{64, 1024, 16 << 10} {
		var k result
		b.Run(fmt.Sprintf("tcp/%d", size), func(b *testing.B) { k = latency(b, tcp, size) })
		for _, d := range pairs {
			withRPC(b, d, func(call caller) {
				b.Run(fmt.Sprintf("%s/%d", d.name, size), func(b *testing.B) {
					defer retransmits(b, d.client, d.server)()
					u := latency(b, call, size)
					if k.p50 > 0 && u.p50 > 0 {
						b.ReportMetric(ratio(u.p50, k.p50), "x-tcp-p50")
						b.ReportMetric(ratio(u.p99, k.p99), "x-tcp-p99")
						b.ReportMetric(ratio(u.p999, k.p999), "x-tcp-p99.9")
					}
				})
			})
			withFloor(b, d, func(call caller) {
				b.Run(fmt.Sprintf("%s-verbs/%d", d.name, size), func(b *testing.B) {
					defer retransmits(b, d.floorC, d.floorS)()
					latency(b, call, size)
				})
			})
		}
		b.Run(fmt.Sprintf("rate/tcp/%d", size), func(b *testing.B) { rate(b, tcp, size) })
		for _, d := range pairs {
			withRPC(b, d, func(call caller) {
				b.Run(fmt.Sprintf("rate/%s/%d", d.name, size), func(b *testing.B) {
					defer retransmits(b, d.client, d.server)()
					rate(b, call, size)
				})
			})
		}
	}
}

// caller makes one round trip; p is the caller's own TCP call state.
type caller func(req, resp []byte, p *pending) error

// withRPC runs fn with an RPC client on d.client connected to an echo
// server on d.server, and closes both after.
func withRPC(b *testing.B, d devices, fn func(caller)) {
	cfg := rpc.Config{Slots: 64, MaxMsg: 16 << 10}
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
	ctx := context.Background()
	fn(func(req, resp []byte, _ *pending) error {
		_, err := cli.Call(ctx, 1, req, resp)
		return err
	})
}

// withFloor runs fn with the bare verbs ping-pong on d's floor devices.
func withFloor(b *testing.B, d devices, fn func(caller)) {
	f := newFloor(b, d.floorC, d.floorS)
	defer f.close()
	fn(f.call)
}

// retransmits reports, when the returned function runs, the packets both
// devices sent again meanwhile: a lost packet costs a transport timeout
// (67 ms), which no percentile hides.
func retransmits(b *testing.B, client, server *verbs.Device) func() {
	n := func() uint64 { return client.Counters().Retransmits + server.Counters().Retransmits }
	n0 := n()
	return func() { b.ReportMetric(float64(n()-n0), "retx") }
}

// latency times b.N sequential round trips of size bytes.
func latency(b *testing.B, call caller, size int) result {
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
func warmUp(call caller, size int) (*pending, error) {
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
func rate(b *testing.B, call caller, size int) {
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
