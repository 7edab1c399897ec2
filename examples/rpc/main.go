// Command rpc runs an echo RPC over uroce (two loopback devices, kernel UDP
// backend, no root) and the same RPC over kernel TCP on loopback, and
// prints round-trip latency (p50, p99, p99.9) and requests/s per message size with
// their ratios. See README.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/uroce/uroce/examples/internal/loopback"
	"github.com/uroce/uroce/examples/internal/metricsflag"
	"github.com/uroce/uroce/examples/internal/rpc"
)

func main() {
	port := flag.Uint("port", 0, loopback.PortUsage)
	n := flag.Int("n", 5000, "round trips per latency measurement")
	par := flag.Int("c", 16, "concurrent callers for requests/s")
	metricsAddr := flag.String("metrics", "", metricsflag.Usage)
	flag.Parse()
	if err := run(uint16(*port), *n, *par, []int{64, 1024, 16 << 10}, *metricsAddr); err != nil {
		log.Fatal(err)
	}
}

// result is one transport's numbers at one size.
type result struct {
	p50, p99, p999 time.Duration
	rate           float64 // requests/s with par callers
}

func run(port uint16, n, par int, sizes []int, metricsAddr string) error {
	dc, ds, closeAll, err := loopback.Open(port, metricsAddr, os.Stdout)
	if err != nil {
		return err
	}
	defer closeAll()
	cfg := rpc.Config{Slots: 64, MaxMsg: 16 << 10}
	srv := rpc.NewServer(ds, cfg, func(_ uint16, req, resp []byte) (int, uint16) { return copy(resp, req), 0 })
	defer srv.Close()
	cli, err := rpc.NewClient(dc, cfg)
	if err != nil {
		return err
	}
	defer cli.Close()
	ep, err := srv.Accept(cli.Endpoint())
	if err != nil {
		return err
	}
	if err := cli.Connect(ep); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	go serveTCP(ln)
	tc, err := dialTCP(ln.Addr().String())
	if err != nil {
		return err
	}
	defer tc.c.Close()

	ctx := context.Background()
	uroce := func(req, resp []byte, _ *pending) error {
		_, err := cli.Call(ctx, 1, req, resp)
		return err
	}
	tcp := func(req, _ []byte, p *pending) error {
		if n := tc.call(p, req); n != len(req) {
			return fmt.Errorf("tcp echo of %d bytes: %d", len(req), n)
		}
		return nil
	}
	fmt.Printf("%-6s %-6s %10s %10s %10s %12s\n", "size", "", "p50", "p99", "p99.9", "req/s")
	for _, size := range sizes {
		u, err := measure(uroce, size, n, par)
		if err != nil {
			return err
		}
		k, err := measure(tcp, size, n, par)
		if err != nil {
			return err
		}
		fmt.Printf("%-6d %-6s %10v %10v %10v %12.0f\n", size, "uroce", u.p50, u.p99, u.p999, u.rate)
		fmt.Printf("%-6d %-6s %10v %10v %10v %12.0f\n", size, "tcp", k.p50, k.p99, k.p999, k.rate)
		fmt.Printf("%-6d %-6s %10.2f %10.2f %10.2f %12.2f\n", size, "ratio", ratio(u.p50, k.p50), ratio(u.p99, k.p99), ratio(u.p999, k.p999), u.rate/k.rate)
	}
	fmt.Println("ratio: uroce/tcp (latency: below 1 is better for uroce; req/s: above 1 is)")
	return nil
}

func ratio(a, b time.Duration) float64 { return float64(a) / float64(b) }

// measure times n sequential round trips for the percentiles, then n
// round trips spread over par concurrent callers for the rate.
func measure(call func(req, resp []byte, p *pending) error, size, n, par int) (result, error) {
	req, resp := make([]byte, size), make([]byte, size)
	ch := &pending{buf: resp, done: make(chan int, 1)}
	for range 100 { // warm up
		if err := call(req, resp, ch); err != nil {
			return result{}, err
		}
	}
	lat := make([]time.Duration, n)
	for i := range lat {
		t0 := time.Now()
		if err := call(req, resp, ch); err != nil {
			return result{}, err
		}
		lat[i] = time.Since(t0)
	}
	slices.Sort(lat)
	r := percentiles(lat)
	var wg sync.WaitGroup
	errs := make(chan error, par)
	t0 := time.Now()
	for range par {
		wg.Go(func() {
			req, resp := make([]byte, size), make([]byte, size)
			ch := &pending{buf: resp, done: make(chan int, 1)}
			for range n / par {
				if err := call(req, resp, ch); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	r.rate = float64(n/par*par) / time.Since(t0).Seconds()
	close(errs)
	return r, <-errs
}
