package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"

	"github.com/uroce/uroce/pkg/perftest"
	"github.com/uroce/uroce/verbs"
)

// The demo's two ends: two loopback addresses, each with its own kernel
// UDP socket on port 4791, so no privilege and no setup is needed.
var (
	demoServer = netip.MustParseAddr("127.0.0.1")
	demoClient = netip.MustParseAddr("127.0.0.2")
)

// demoRuns are the demo's tests and sizes: small enough to finish in
// seconds on a loaded machine, large enough to show segmentation at the
// MTU.
var demoRuns = []struct {
	test  string
	sizes []int
	iters int
}{
	{"write_lat", []int{2, 64, 4096}, 1000},
	{"read_lat", []int{2, 64, 4096}, 1000},
	{"send_lat", []int{2, 64, 4096}, 1000},
	{"atomic_lat", []int{8}, 1000},
	{"write_bw", []int{64, 4096, 65536}, 2000},
	{"read_bw", []int{64, 4096, 65536}, 2000},
	{"send_bw", []int{64, 4096, 65536}, 2000},
}

// demo runs every test with both ends in this process over loopback and
// prints the client's reports.
func demo(w io.Writer) error { return demoAt(w, demoServer, demoClient) }

// demoAt runs the demo between two local addresses.
func demoAt(w io.Writer, demoServer, demoClient netip.Addr) error {
	begin := time.Now()
	fmt.Fprintf(w, "uroce-perf demo: both ends in this process, RoCEv2 over UDP %v <-> %v port 4791, perftest exchange over TCP loopback\n", demoClient, demoServer)
	for _, r := range demoRuns {
		k, _ := kindByName(r.test)
		mk := func(peer string) *config {
			c, err := parseArgs(k, []string{"-n", fmt.Sprint(r.iters)}, io.Discard)
			if err != nil {
				panic(err) // the table above is fixed
			}
			c.peer, c.sizeList, c.all = peer, r.sizes, true
			c.timeout = 30 * time.Second
			return c
		}
		fmt.Fprintf(w, "\n=== uroce-perf %s (%d iterations per size)\n", r.test, r.iters)
		t0 := time.Now()
		if _, err := pair(context.Background(), mk(""), mk(demoServer.String()), demoServer, demoClient, io.Discard, w); err != nil {
			return fmt.Errorf("demo %s: %w", r.test, err)
		}
		fmt.Fprintf(w, "(%s: %.1f s)\n", r.test, time.Since(t0).Seconds())
	}
	t0 := time.Now()
	if err := compareUDP(w, demoServer, demoClient, []int{64, 4096}, demoRuns[0].iters); err != nil {
		return err
	}
	fmt.Fprintf(w, "(comparison: %.1f s)\n", time.Since(t0).Seconds())
	fmt.Fprintf(w, "\ndemo done in %.1f s\n", time.Since(begin).Seconds())
	return nil
}

// pairCounters are the two devices' counters after a pair's run.
type pairCounters struct {
	Server, Client verbs.Counters
	// ClientLat and ClientBW are the client's reports.
	ClientLat []perftest.LatencyReport
	ClientBW  []perftest.BandwidthReport
}

// pair runs a server and a client of one test in this process: devices on
// the two addresses, the exchange over a TCP loopback connection.
func pair(ctx context.Context, srvCfg, cliCfg *config, srvAddr, cliAddr netip.Addr, srvOut, cliOut io.Writer) (pc pairCounters, err error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(srvAddr.String(), "0"))
	if err != nil {
		return pc, fmt.Errorf("listen: %w", err)
	}
	defer ln.Close()
	sdev, err := verbs.OpenAddr(srvAddr, verbs.Inline())
	if err != nil {
		return pc, err
	}
	defer sdev.Close()
	cdev, err := verbs.OpenAddr(cliAddr, verbs.Inline())
	if err != nil {
		return pc, err
	}
	defer cdev.Close()
	e := pairEnds{srvDev: sdev, cliDev: cdev, srvName: "udp:" + srvAddr.String(), cliName: "udp:" + cliAddr.String(), ln: ln,
		dial: func() (net.Conn, error) { return dial(ctx, ln.Addr().String(), cliCfg.timeout) }}
	return e.run(ctx, srvCfg, cliCfg, srvOut, cliOut)
}

// pairEnds are the two ends of an in-process pair: devices, the server's
// listener and how the client dials it (tests open these inside network
// namespaces).
type pairEnds struct {
	srvDev, cliDev   *verbs.Device
	srvName, cliName string
	ln               net.Listener
	dial             func() (net.Conn, error)
}

func (e pairEnds) run(ctx context.Context, srvCfg, cliCfg *config, srvOut, cliOut io.Writer) (pc pairCounters, err error) {
	srvErr := make(chan error, 1)
	go func() {
		c, err := accept(ctx, e.ln)
		if err != nil {
			srvErr <- err
			return
		}
		defer c.Close()
		_, err = runOn(c, srvCfg, e.srvDev, e.srvName, srvOut)
		srvErr <- err
	}()
	c, err := e.dial()
	if err != nil {
		e.ln.Close()
		<-srvErr
		return pc, err
	}
	out, cerr := runOn(c, cliCfg, e.cliDev, e.cliName, cliOut)
	pc.ClientLat, pc.ClientBW = out.Lat, out.BW
	// write_lat ends by closing the socket: closing ours also ends a
	// server still waiting in the exchange if the client failed.
	c.Close()
	serr := <-srvErr
	pc.Server, pc.Client = e.srvDev.Counters(), e.cliDev.Counters()
	if cerr != nil || serr != nil {
		// The counters tell a stalled transport from a stalled test.
		return pc, fmt.Errorf("%w\nserver counters: %+v\nclient counters: %+v",
			errors.Join(clientErr(cerr), serverErr(serr)), pc.Server.Counters, pc.Client.Counters)
	}
	return pc, nil
}

func clientErr(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("client: %w", err)
}

func serverErr(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("server: %w", err)
}

// compareUDP sets uroce's write_lat beside a plain kernel UDP ping-pong of
// the same size between the same two addresses, in the same run: the
// ratio is what uroce's transport costs on top of the kernel's UDP. The
// three are interleaved and each keeps its best of two rounds, so that a
// burst of load from other processes does not land on one of them only.
func compareUDP(w io.Writer, demoServer, demoClient netip.Addr, sizes []int, iters int) error {
	fmt.Fprintf(w, "\n=== uroce write_lat against a kernel UDP ping-pong of the same size (%v <-> %v, half round trip in µs, best of 2 interleaved rounds of %d)\n", demoClient, demoServer, iters)
	fmt.Fprintf(w, " #bytes  udp blocking      udp busy-poll     uroce write_lat   uroce/udp busy-poll\n")
	fmt.Fprintf(w, "         t_min  t_typical  t_min  t_typical  t_min  t_typical  t_min  t_typical\n")
	k, _ := kindByName("write_lat")
	for _, size := range sizes {
		var best [3]perftest.LatencyReport
		keep := func(i int, r perftest.LatencyReport) {
			if best[i].Iters == 0 || r.Typical < best[i].Typical {
				best[i].Typical, best[i].Iters = r.Typical, r.Iters
			}
			if best[i].Min == 0 || r.Min < best[i].Min {
				best[i].Min = r.Min
			}
		}
		for range 2 {
			for i, spin := range []bool{false, true} {
				r, err := udpPingPong(demoServer, demoClient, size, iters, spin, 30*time.Second)
				if err != nil {
					return err
				}
				keep(i, r)
			}
			mk := func(peer string) *config {
				c, err := parseArgs(k, []string{"-s", fmt.Sprint(size), "-n", fmt.Sprint(iters)}, io.Discard)
				if err != nil {
					panic(err)
				}
				c.peer, c.timeout = peer, 30*time.Second
				return c
			}
			pc, err := pair(context.Background(), mk(""), mk(demoServer.String()), demoServer, demoClient, io.Discard, io.Discard)
			if err != nil {
				return fmt.Errorf("demo write_lat: %w", err)
			}
			keep(2, pc.ClientLat[0])
		}
		fmt.Fprintf(w, " %-7d %-6.2f %-10.2f %-6.2f %-10.2f %-6.2f %-10.2f %-6.2f %.2f\n", size,
			best[0].Min, best[0].Typical, best[1].Min, best[1].Typical, best[2].Min, best[2].Typical,
			best[2].Min/best[1].Min, best[2].Typical/best[1].Typical)
	}
	return nil
}
