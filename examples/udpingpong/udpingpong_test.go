package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uroce/uroce/examples/internal/loopback"
	"github.com/uroce/uroce/internal/pcapfile"
	"github.com/uroce/uroce/verbs"
)

// tcpPayloads returns the TCP payloads of an Ethernet/IPv4 capture to or
// from port, in capture order.
func tcpPayloads(t testing.TB, name string, port uint16) [][]byte {
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

// TestExchangeCapture checks the message format against ibv_ud_pingpong's
// own in the lab's capture: both address messages and "done" parse and
// marshal back byte for byte.
func TestExchangeCapture(t *testing.T) {
	msgs := tcpPayloads(t, "../../testdata/rxe-captures/ibv_ud_pingpong.pcap", 18515)
	if len(msgs) != 3 {
		t.Fatalf("%d TCP payloads on port 18515, want 3 (client, server, done)", len(msgs))
	}
	want := []dest{
		{QPN: 0x1a, PSN: 0x3e1c8e, GID: netip.MustParseAddr("::ffff:10.77.0.12")},
		{QPN: 0x1a, PSN: 0x7edf34, GID: netip.MustParseAddr("::ffff:10.77.0.11")},
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
}

func TestParseDestErrors(t *testing.T) {
	for _, m := range []string{
		"",
		"0000:000011:123456",
		"0000:000011:123456:00000000000000000000ffff0a00000",   // 31 digits
		"0000:1000000:123456:00000000000000000000ffff0a000001", // QPN over 24 bits
		"0000:000011:123456:00000000000000000000ffff0a00000g",  // not hex
	} {
		if _, err := parseDest([]byte(m)); !errors.Is(err, errMessage) {
			t.Errorf("parseDest(%q) = %v, want %v", m, err, errMessage)
		}
	}
}

func TestFlags(t *testing.T) {
	o, err := parseFlags(nil, new(strings.Builder))
	if err != nil {
		t.Fatal(err)
	}
	// ibv_ud_pingpong's defaults.
	if o.port != 18515 || o.size != 2048 || o.rxDepth != 500 || o.iters != 1000 || o.gid != -1 || o.ibPort != 1 {
		t.Errorf("defaults %+v", o)
	}
	for _, args := range [][]string{{"-s", "0"}, {"-r", "1"}, {"-i", "2"}, {"a", "b"}} {
		if _, err := parseFlags(args, new(strings.Builder)); err == nil {
			t.Errorf("parseFlags(%q) succeeded", args)
		}
	}
}

// runPair runs a server and a client as the program runs them, over the
// kernel's loopback, and returns their outputs and errors.
func runPair(t *testing.T, so, co options) (sout, cout string, serr, cerr error) {
	t.Helper()
	srvDev, cliDev, err := loopback.Pair(0)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// Failure detection only: a hung run fails instead of blocking.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	so.listener = ln
	so.open = func() (*verbs.Device, error) { return srvDev, nil }
	co.peer = "127.0.0.1"
	co.port = ln.Addr().(*net.TCPAddr).Port
	co.open = func() (*verbs.Device, error) { return cliDev, nil }
	var wg sync.WaitGroup
	var sb, cb strings.Builder
	wg.Go(func() {
		serr = run(ctx, so, &sb)
		ln.Close() // a server that failed early leaves no client waiting
	})
	wg.Go(func() { cerr = run(ctx, co, &cb) })
	wg.Wait()
	return sb.String(), cb.String(), serr, cerr
}

// TestLoopback: both sides as programs over loopback; the client checks
// every echo, both check each datagram's length and source QP, and both
// print ibv_ud_pingpong's lines.
func TestLoopback(t *testing.T) {
	for _, c := range []struct{ size, iters, depth int }{
		{1, 200, 500},
		{2048, 100, 500}, // the default size
		{4096, 50, 500},  // the loopback port's MTU
		{100, 100, 2},    // few receives: reposted as they complete
	} {
		t.Run(fmt.Sprintf("s%d_r%d", c.size, c.depth), func(t *testing.T) {
			base := options{size: c.size, iters: c.iters, rxDepth: c.depth, gid: 0, ibPort: 1, timeout: 10 * time.Second}
			sout, cout, serr, cerr := runPair(t, base, base)
			if serr != nil || cerr != nil {
				t.Fatalf("server: %v\nclient: %v\n%s\n%s", serr, cerr, sout, cout)
			}
			for _, out := range []string{sout, cout} {
				for _, w := range []string{"  local address:  LID 0x0000, QPN 0x", ": GID ::ffff:127.0.0.", "  remote address: LID 0x0000, QPN 0x",
					fmt.Sprintf("%d bytes in ", c.size*c.iters*2), fmt.Sprintf("%d iters in ", c.iters)} {
					if !strings.Contains(out, w) {
						t.Errorf("output lacks %q:\n%s", w, out)
					}
				}
			}
		})
	}
}

// TestErrors: a size over the port MTU and a peer without a GID fail with
// ibv_ud_pingpong's reasons.
func TestErrors(t *testing.T) {
	base := options{size: 64, iters: 10, rxDepth: 10, gid: 0, ibPort: 1, timeout: 5 * time.Second}
	big := base
	big.size = 8192
	_, _, serr, _ := runPair(t, big, base)
	if serr == nil || !strings.Contains(serr.Error(), "larger than port MTU (4096)") {
		t.Errorf("oversize: %v", serr)
	}
	nogid := base
	nogid.gid = -1
	_, _, serr, _ = runPair(t, base, nogid)
	if serr == nil || !strings.Contains(serr.Error(), "no GID") {
		t.Errorf("zero GID: %v", serr)
	}
}

// FuzzParseDest: any bytes from the peer parse or fail cleanly, and what
// parses marshals back to a message that parses the same.
func FuzzParseDest(f *testing.F) {
	for _, m := range tcpPayloads(f, "../../testdata/rxe-captures/ibv_ud_pingpong.pcap", 18515) {
		f.Add(m)
	}
	f.Add([]byte("0000:000011:123456:00000000000000000000ffff0a00000"))
	f.Fuzz(func(t *testing.T, m []byte) {
		d, err := parseDest(m)
		if err != nil {
			return
		}
		b := d.marshal()
		d2, err := parseDest(b[:])
		if err != nil || d2 != d {
			t.Fatalf("%+v marshals to %q, which parses to %+v, %v", d, b, d2, err)
		}
	})
}
