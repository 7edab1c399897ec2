package main

import (
	"fmt"
	"io"
	"net/netip"
	"runtime"
	"testing"

	"github.com/uroce/uroce/pkg/perftest"
	"github.com/uroce/uroce/verbs"
)

// latPair is a server's and a client's bench of a latency test, connected
// over UDP loopback without the TCP exchange.
type latPair struct {
	srv, cli *bench
	size     int
	srvRun   chan struct{}
	srvDone  chan error
	cliDone  chan struct{}
	passive  bool
}

func newLatPair(tb testing.TB, test string, size, iters int) *latPair {
	tb.Helper()
	k, _ := kindByName(test)
	sa, ca := loopbackPair(tb)
	args := []string{"-s", fmt.Sprint(size), "-n", fmt.Sprint(iters)}
	scfg, err := parseArgs(k, args, io.Discard)
	if err != nil {
		tb.Fatal(err)
	}
	ccfg, err := parseArgs(k, append(args, sa.String()), io.Discard)
	if err != nil {
		tb.Fatal(err)
	}
	sys := perftest.SysData{PageSize: 4096, CacheLine: 64, MTU: 3}
	p := &latPair{size: size, srvRun: make(chan struct{}), srvDone: make(chan error), cliDone: make(chan struct{}, 1)}
	var dests [2][]perftest.Dest
	for i, side := range []struct {
		addr   string
		cfg    *config
		server bool
		to     **bench
	}{{sa.String(), scfg, true, &p.srv}, {ca.String(), ccfg, false, &p.cli}} {
		d, err := verbs.OpenAddr(mustAddr(side.addr), verbs.Inline())
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { d.Close() })
		*side.to = newBench(side.cfg, d, side.server)
		if dests[i], err = (*side.to).Setup(sys); err != nil {
			tb.Fatal(err)
		}
	}
	if err := p.srv.Connect(dests[1]); err != nil {
		tb.Fatal(err)
	}
	if err := p.cli.Connect(dests[0]); err != nil {
		tb.Fatal(err)
	}
	passive := k.verb == verbRead || k.verb == verbAtomic
	p.passive = passive
	go func() {
		for range p.srvRun {
			if !passive {
				_, err := p.srv.Latency(p.size)
				p.srvDone <- err
				continue
			}
			// The server of read_lat only answers: it drives its
			// engine until the client is done, as the exchange's
			// drivingConn does in the real sequence.
			var none [0]verbs.WC
			for {
				select {
				case <-p.cliDone:
					p.srvDone <- nil
				default:
					// AllocsPerRun runs with GOMAXPROCS 1: let the
					// client run.
					p.srv.scq.Poll(none[:])
					runtime.Gosched()
					continue
				}
				break
			}
		}
	}()
	tb.Cleanup(func() { close(p.srvRun) })
	return p
}

// run measures once on both sides.
func (p *latPair) run(iters int) error {
	p.srv.cfg.iters, p.cli.cfg.iters = iters, iters
	if p.srv.cfg.kind.verb == verbSend {
		// Both sides' receives are posted before either sends, as
		// the sequence's barrier makes sure.
		for _, b := range []*bench{p.srv, p.cli} {
			if err := b.PostRecvs(p.size); err != nil {
				return err
			}
		}
	}
	p.srvRun <- struct{}{}
	_, cerr := p.cli.Latency(p.size)
	if p.passive {
		p.cliDone <- struct{}{}
	}
	serr := <-p.srvDone
	if cerr != nil || serr != nil {
		return fmt.Errorf("client: %v, server: %v", cerr, serr)
	}
	return nil
}

// TestLatencyLoopAllocs checks that the measurement loops allocate nothing
// per iteration: a run of 400 iterations allocates what a run of 40 does
// (the timestamp slices and the report's arithmetic, once per run).
func TestLatencyLoopAllocs(t *testing.T) {
	for _, test := range []string{"write_lat", "send_lat", "read_lat"} {
		t.Run(test, func(t *testing.T) {
			p := newLatPair(t, test, 64, 40)
			var err error
			allocs := func(iters int) float64 {
				return testing.AllocsPerRun(5, func() {
					if err == nil {
						err = p.run(iters)
					}
				})
			}
			few, many := allocs(40), allocs(400)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("allocations per run: %v with 40 iterations, %v with 400", few, many)
			if many > few+2 {
				t.Errorf("%v allocations for 400 iterations, %v for 40: the loop allocates", many, few)
			}
		})
	}
}

// BenchmarkWriteLat measures one write_lat run of 100 round trips of 64
// bytes over UDP loopback between two benches in this process.
func BenchmarkWriteLat(b *testing.B) {
	p := newLatPair(b, "write_lat", 64, 100)
	b.ReportAllocs()
	for b.Loop() {
		if err := p.run(100); err != nil {
			b.Fatal(err)
		}
	}
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }
