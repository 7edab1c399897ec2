package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/uroce/uroce/examples/internal/loopback"
	"github.com/uroce/uroce/examples/internal/pingdest"
	"github.com/uroce/uroce/verbs"
)

// loopbackPair opens devices on two loopback addresses (a free port, so
// that other tests on 4791 cannot collide with this one).
func loopbackPair(t *testing.T) (srv, cli *verbs.Device) {
	t.Helper()
	srv, cli, err := loopback.Pair(0)
	if err != nil {
		t.Fatal(err)
	}
	return srv, cli
}

// runPair runs a server and a client as the program runs them, over the
// kernel's loopback, and returns their outputs and errors.
func runPair(t *testing.T, so, co options) (sout, cout string, serr, cerr error) {
	t.Helper()
	// Failure detection only: a hung run fails instead of blocking.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var sb, cb strings.Builder
	serr, cerr = loopback.RunTCP(ctx, func(d *verbs.Device, ln net.Listener) error {
		so.listener = ln
		return run(ctx, d, so, &sb)
	}, func(d *verbs.Device, port int) error {
		co.peer, co.port = "127.0.0.1", port
		return run(ctx, d, co, &cb)
	})
	return sb.String(), cb.String(), serr, cerr
}

// TestLoopback runs the server and the client, each as the program runs,
// over the kernel's loopback: every answer must equal the message sent
// (the client checks), and both print ibv_rc_pingpong's summary.
func TestLoopback(t *testing.T) {
	for _, c := range []struct{ size, iters, mtu, depth int }{
		{1, 200, 1024, 500},
		{1024, 100, 1024, 500},
		{4096, 100, 1024, 500}, // four packets a message
		{4096, 50, 4096, 500},
		{10000, 50, 1024, 3}, // few receives: reposted as they complete
	} {
		t.Run(fmt.Sprintf("s%d_m%d_r%d", c.size, c.mtu, c.depth), func(t *testing.T) {
			base := options{size: c.size, iters: c.iters, mtu: c.mtu, rxDepth: c.depth, linger: 100 * time.Millisecond}
			sout, cout, serr, cerr := runPair(t, base, base)
			if serr != nil || cerr != nil {
				t.Fatalf("server: %v\n%s\nclient: %v\n%s", serr, sout, cerr, cout)
			}
			for _, out := range []string{sout, cout} {
				for _, want := range []string{
					"  local address:  LID 0x0000, QPN 0x",
					"  remote address: LID 0x0000, QPN 0x",
					fmt.Sprintf("%d bytes in ", 2*c.size*c.iters),
					fmt.Sprintf("%d iters in ", c.iters),
				} {
					if !strings.Contains(out, want) {
						t.Errorf("output lacks %q:\n%s", want, out)
					}
				}
			}
		})
	}
}

// TestLoopbackUC runs the program with -uc, as ibv_uc_pingpong, over the
// kernel's loopback: every answer checked, and no ACK on the wire (each
// side received exactly the other's packets, -stats shows).
func TestLoopbackUC(t *testing.T) {
	for _, size := range []int{1, 4096} {
		base := options{size: size, iters: 100, mtu: 1024, rxDepth: 500, uc: true, stats: true}
		sout, cout, serr, cerr := runPair(t, base, base)
		if serr != nil || cerr != nil {
			t.Fatalf("server: %v\n%s\nclient: %v\n%s", serr, sout, cerr, cout)
		}
		pkts := uint64(100 * ((size + 1023) / 1024))
		for _, out := range []string{sout, cout} {
			for _, want := range []string{
				fmt.Sprintf("%d iters in ", 100),
				fmt.Sprintf("TxPackets:%d RxPackets:%d ", pkts, pkts),
			} {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
		}
	}
}

// TestClientChecksAnswers has the client face a server that answers with
// other bytes: the client must stop with errData, not count the exchange.
func TestClientChecksAnswers(t *testing.T) {
	srvDev, cliDev := loopbackPair(t)
	defer srvDev.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const size = 64
	srv, err := newPingPong(srvDev, size, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.close()
	srvErr := make(chan error, 1)
	srvDone := make(chan struct{})
	go func() {
		defer close(srvDone)
		// A server that answers its first message with the bytes
		// flipped, and then drives its engine until the test ends.
		local := pingdest.Dest{QPN: srv.qp.QPN(), PSN: 7, GID: srvDev.GIDs()[0]}
		_, err := pingdest.Exchange(ctx, pingdest.Config{Listener: ln}, local, func(r pingdest.Dest) error { return srv.connect(r, local.PSN, 1024) })
		if err != nil {
			srvErr <- err
			return
		}
		var wc [1]verbs.WC
		if _, err := srv.cq.Wait(ctx, wc[:]); err != nil {
			srvErr <- err
			return
		}
		for i, b := range srv.slot(int(wc[0].WRID & 0xffffffff)) {
			srv.mr.Buf()[i] = ^b
		}
		srvErr <- srv.qp.PostSend(&verbs.SendWR{ID: sendWRID, Opcode: verbs.WRSend, SGL: []verbs.SGE{srv.mr.SGE(0, size)}})
		for ctx.Err() == nil {
			srv.cq.Wait(ctx, wc[:])
		}
	}()
	co := options{size: size, iters: 10, mtu: 1024, rxDepth: 4, peer: "127.0.0.1",
		port: ln.Addr().(*net.TCPAddr).Port}
	var out strings.Builder
	err = run(ctx, cliDev, co, &out)
	if !errors.Is(err, errData) {
		t.Fatalf("client against a wrong answer: %v, want %v\n%s", err, errData, out.String())
	}
	cancel()
	<-srvDone
	if err := <-srvErr; err != nil {
		t.Fatal(err)
	}
}

// TestRunAllocs checks that the exchange loop allocates nothing per
// message: twice the iterations must not cost more allocations (both
// sides run in this process, so both are counted).
func TestRunAllocs(t *testing.T) {
	srvDev, cliDev := loopbackPair(t)
	defer srvDev.Close()
	defer cliDev.Close()
	const size = 256
	srv, err := newPingPong(srvDev, size, 16)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.close()
	cli, err := newPingPong(cliDev, size, 16)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.close()
	if err := srv.connect(pingdest.Dest{QPN: cli.qp.QPN(), PSN: 100, GID: cliDev.GIDs()[0]}, 200, 1024); err != nil {
		t.Fatal(err)
	}
	if err := cli.connect(pingdest.Dest{QPN: srv.qp.QPN(), PSN: 200, GID: srvDev.GIDs()[0]}, 100, 1024); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	mallocs := func(iters int) uint64 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		errc := make(chan error, 1)
		go func() { errc <- srv.run(ctx, iters, false) }()
		if err := cli.run(ctx, iters, true); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		return after.Mallocs - before.Mallocs
	}
	mallocs(100) // warm up: the engine's and the link's first use
	short, long := mallocs(200), mallocs(1200)
	t.Logf("mallocs: %d for 200 exchanges, %d for 1200", short, long)
	// A per-message allocation would add at least 1000 (2000 with both
	// sides); the margin is for the runtime's own.
	if long > short+100 {
		t.Errorf("1000 more exchanges cost %d more allocations", long-short)
	}
}

// TestConnectZeroGID: ibv_rc_pingpong without -g sends a zero GID, which
// must be refused with advice rather than connected to "::".
func TestConnectZeroGID(t *testing.T) {
	srvDev, cliDev := loopbackPair(t)
	defer srvDev.Close()
	defer cliDev.Close()
	p, err := newPingPong(srvDev, 64, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	m := []byte("0000:000011:123456:00000000000000000000000000000000\x00")
	d, err := pingdest.Parse(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.connect(d, 1, 1024); err == nil || !strings.Contains(err.Error(), "-g") {
		t.Errorf("connect to a zero GID: %v, want an error naming -g", err)
	}
	if s := p.qp.State(); s != verbs.StateInit {
		t.Errorf("QP in %v after a refused connect, want INIT", s)
	}
}
