package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uroce/uroce/internal/pcapfile"
	"github.com/uroce/uroce/pkg/link/udp"
	"github.com/uroce/uroce/verbs"
)

// tcpPayloads returns the TCP payloads of an Ethernet/IPv4 capture to or
// from port, in capture order.
func tcpPayloads(t *testing.T, name string, port uint16) [][]byte {
	t.Helper()
	f, err := pcapfile.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, r := range f.Records {
		b := r.Data
		if len(b) < 14+20 || binary.BigEndian.Uint16(b[12:]) != 0x0800 || b[14+9] != 6 {
			continue
		}
		ip := b[14:]
		ihl := int(ip[0]&0xf) * 4
		tcp := ip[ihl:binary.BigEndian.Uint16(ip[2:])]
		if binary.BigEndian.Uint16(tcp[0:]) != port && binary.BigEndian.Uint16(tcp[2:]) != port {
			continue
		}
		if p := tcp[int(tcp[12]>>4)*4:]; len(p) > 0 {
			out = append(out, p)
		}
	}
	return out
}

// TestExchangeCapture checks the message format against rxe's own: the
// capture's two address messages and "done" parse to what the guests
// printed and marshal back byte for byte.
func TestExchangeCapture(t *testing.T) {
	msgs := tcpPayloads(t, "../../testdata/rxe-captures/ibv_rc_pingpong.pcap", 18515)
	if len(msgs) != 3 {
		t.Fatalf("%d TCP payloads on port 18515, want 3 (client, server, done)", len(msgs))
	}
	want := []dest{
		{QPN: 0x19, PSN: 0x6efaca, GID: netip.MustParseAddr("::ffff:10.77.0.12")},
		{QPN: 0x19, PSN: 0xa69686, GID: netip.MustParseAddr("::ffff:10.77.0.11")},
	}
	for i, w := range want {
		if len(msgs[i]) != msgSize {
			t.Fatalf("message %d is %d bytes, want %d", i, len(msgs[i]), msgSize)
		}
		d, err := parseDest(msgs[i])
		if err != nil {
			t.Fatal(err)
		}
		if d != w {
			t.Errorf("message %d: %+v, want %+v", i, d, w)
		}
		if m := d.marshal(); !bytes.Equal(m[:], msgs[i]) {
			t.Errorf("message %d marshals to %q, want %q", i, m, msgs[i])
		}
	}
	if !bytes.Equal(msgs[2], done) {
		t.Errorf("last message %q, want %q", msgs[2], done)
	}
	if got := want[0].String(); got != "LID 0x0000, QPN 0x000019, PSN 0x6efaca, GID ::ffff:10.77.0.12" {
		t.Errorf("String() = %q", got)
	}
}

func TestParseDestErrors(t *testing.T) {
	good := dest{QPN: 0x11, PSN: 0x123456, GID: netip.MustParseAddr("::ffff:10.0.0.1")}.marshal()
	if _, err := parseDest(good[:]); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{
		"",
		"0000:000011:123456",
		"0000:000011:123456:00000000000000000000ffff0a00000",    // 31 digits
		"0000:000011:123456:00000000000000000000ffff0a0000011",  // 33 digits
		"0000:000011:123456:00000000000000000000ffff0a00000g",   // not hex
		"0000:1000000:123456:00000000000000000000ffff0a000001",  // QPN over 24 bits
		"10000:000011:123456:00000000000000000000ffff0a000001",  // LID over 16 bits
		"0000:000011:123456:00000000000000000000ffff0a000001:x", // extra field
	} {
		if _, err := parseDest([]byte(m)); !errors.Is(err, errMessage) {
			t.Errorf("parseDest(%q) = %v, want %v", m, err, errMessage)
		}
	}
	// Every truncation of a good message fails cleanly.
	for n := range msgSize - 1 {
		if _, err := parseDest(good[:n]); err == nil {
			t.Errorf("parseDest of %d bytes succeeded", n)
		}
	}
}

// TestExchangeOrder runs both halves of the exchange over a pipe: the
// server connects its QP after reading the client's message and before
// answering, and the client's "done" comes last.
func TestExchangeOrder(t *testing.T) {
	cs, ss := net.Pipe()
	defer cs.Close()
	defer ss.Close()
	cli := dest{QPN: 0x11, PSN: 0xabcdef, GID: netip.MustParseAddr("::ffff:127.0.0.2")}
	srv := dest{QPN: 0x22, PSN: 0x000001, GID: netip.MustParseAddr("::ffff:127.0.0.1")}
	var connected dest
	errc := make(chan error, 1)
	var gotCli dest
	go func() {
		var err error
		gotCli, err = exchangeServer(ss, srv, func(r dest) error { connected = r; return nil })
		errc <- err
	}()
	gotSrv, err := exchangeClient(cs, cli)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if gotSrv != srv || gotCli != cli || connected != cli {
		t.Errorf("client got %+v, server got %+v and connected to %+v", gotSrv, gotCli, connected)
	}
}

// loopbackPair opens two UDP links on 127.0.0.1 and 127.0.0.2 on one
// port. The port is not 4791 so that other tests binding it on loopback
// at the same time cannot collide with this one; a port that is taken is
// skipped.
func loopbackPair(t *testing.T) (srv, cli *verbs.Device) {
	t.Helper()
	var last error
	for range 50 {
		port := uint16(20000 + rand.IntN(30000))
		a, err := udp.Open(udp.Config{Addr: netip.MustParseAddr("127.0.0.1"), Port: port})
		if err != nil {
			last = err
			continue
		}
		b, err := udp.Open(udp.Config{Addr: netip.MustParseAddr("127.0.0.2"), Port: port})
		if err != nil {
			a.Close()
			last = err
			continue
		}
		return verbs.Open(a), verbs.Open(b)
	}
	t.Fatalf("no free UDP port on 127.0.0.1 and 127.0.0.2: %v", last)
	return nil, nil
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
			srvDev, cliDev := loopbackPair(t)
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			// Failure detection only: a hung run fails instead of
			// blocking the test binary.
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			base := options{size: c.size, iters: c.iters, mtu: c.mtu, rxDepth: c.depth, linger: 100 * time.Millisecond}
			so, co := base, base
			so.listener = ln
			so.open = func() (*verbs.Device, error) { return srvDev, nil }
			co.peer = "127.0.0.1"
			co.port = ln.Addr().(*net.TCPAddr).Port
			co.open = func() (*verbs.Device, error) { return cliDev, nil }

			var wg sync.WaitGroup
			var sout, cout strings.Builder
			var serr, cerr error
			wg.Go(func() { serr = run(ctx, so, &sout) })
			wg.Go(func() { cerr = run(ctx, co, &cout) })
			wg.Wait()
			if serr != nil || cerr != nil {
				t.Fatalf("server: %v\n%s\nclient: %v\n%s", serr, sout.String(), cerr, cout.String())
			}
			for _, out := range []string{sout.String(), cout.String()} {
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
		local := dest{QPN: srv.qp.QPN(), PSN: 7, GID: srvDev.GIDs()[0]}
		_, err := exchange(ctx, options{listener: ln}, local, func(r dest) error { return srv.connect(r, local.PSN, 1024) })
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
		port: ln.Addr().(*net.TCPAddr).Port, open: func() (*verbs.Device, error) { return cliDev, nil }}
	var out strings.Builder
	err = run(ctx, co, &out)
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
	if err := srv.connect(dest{QPN: cli.qp.QPN(), PSN: 100, GID: cliDev.GIDs()[0]}, 200, 1024); err != nil {
		t.Fatal(err)
	}
	if err := cli.connect(dest{QPN: srv.qp.QPN(), PSN: 200, GID: srvDev.GIDs()[0]}, 100, 1024); err != nil {
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
	d, err := parseDest(m)
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
