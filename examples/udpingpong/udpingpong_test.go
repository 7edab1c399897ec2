package main

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/uroce/uroce/examples/internal/loopback"
	"github.com/uroce/uroce/pkg/link/pipe"
	"github.com/uroce/uroce/verbs"
)

func TestFlags(t *testing.T) {
	o, err := parseFlags(nil, new(strings.Builder))
	if err != nil {
		t.Fatal(err)
	}
	// ibv_ud_pingpong's defaults.
	if o.port != 18515 || o.size != 0 || o.rxDepth != 500 || o.iters != 1000 || o.gid != -1 || o.ibPort != 1 {
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

// TestDefaultSize: with no -s the datagram is ibv_ud_pingpong's 2048 bytes,
// lowered to the port MTU where that is smaller; an explicit size over the
// port MTU is still refused.
func TestDefaultSize(t *testing.T) {
	for _, c := range []struct {
		mtu, size, want int
		err             bool
	}{
		{mtu: 1500, size: 0, want: 1024},
		{mtu: 9000, size: 0, want: 2048},
		{mtu: 1500, size: 1024, want: 1024},
		{mtu: 1500, size: 2048, err: true},
	} {
		la, lb := pipe.New(pipe.Config{MTU: c.mtu})
		d := verbs.Open(la, verbs.Inline())
		lb.Close()
		p, err := newPingPong(d, c.size, 2)
		switch {
		case c.err && err == nil:
			t.Errorf("MTU %d, -s %d: accepted", c.mtu, c.size)
		case !c.err && err != nil:
			t.Errorf("MTU %d, -s %d: %v", c.mtu, c.size, err)
		case !c.err && p.size != c.want:
			t.Errorf("MTU %d, -s %d: size %d, want %d", c.mtu, c.size, p.size, c.want)
		}
		if p != nil {
			p.close()
		}
		d.Close()
	}
}
