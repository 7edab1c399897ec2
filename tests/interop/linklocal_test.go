package interop_test

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/tests/interop/lab"
)

// TestLinkLocalRxe runs uroce-perf on a link-local IPv6 address against
// perftest on rxe's GID 0, which is the interface's fe80:: address and
// what many users get by default: write_lat both ways on the udp backend
// (which binds the address on the interface its zone names), asked for
// as perftest's users do, with -x 0, which names the same GID on uroce;
// uroce as the client on afpacket; and write_bw both ways with 1 % of
// RoCE packets dropped, on --ip fe80::…%eth0. Every RoCE packet on the bridge must be IPv6 between the two
// link-local addresses, and verify.
func TestLinkLocalRxe(t *testing.T) {
	l := lab.New(t, lab.Config{})
	bin := buildStatic(t, "github.com/uroce/uroce/cmd/uroce-perf")
	gs := l.Boot(lab.GuestConfig{}, lab.GuestConfig{})
	ug, rg := gs[0], gs[1] // uroce's guest, rxe's
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	installUrocePerf(t, ctx, ug, bin)
	ull, rll := linkLocal(t, ctx, ug), linkLocal(t, ctx, rg)
	// rxe's GID 0 is its interface's link-local address.
	if r, err := rg.Run(ctx, "cat /sys/class/infiniband/rxe0/ports/1/gids/0"); err != nil || r.Err() != nil {
		t.Fatalf("%s: rxe0's GID 0: %v %v", rg.Name, err, r.Err())
	} else if got, want := strings.TrimSpace(r.Stdout), gidString(rll); got != want {
		t.Fatalf("%s: rxe0's GID 0 is %s, want eth0's link-local %v (%s)", rg.Name, got, rll, want)
	}
	t.Logf("uroce on %v%%eth0 in %s, rxe0's GID 0 %v in %s", ull, ug.Name, rll, rg.Name)

	for _, c := range []struct {
		test, link  string
		size, iters int
		uroceClient bool
		drop        int
		x0          bool // -x 0 rather than --ip
	}{
		{"write_lat", "udp", 64, 100, true, 0, true},
		{"write_lat", "udp", 64, 100, false, 0, true},
		{"write_lat", "afpacket", 64, 100, true, 0, false},
		{"write_bw", "udp", 65536, 100, true, 1, false},
		{"write_bw", "udp", 65536, 100, false, 1, false},
	} {
		side := "uroce-server"
		if c.uroceClient {
			side = "uroce-client"
		}
		name := fmt.Sprintf("%s/%s/%s", c.test, c.link, side)
		if c.drop > 0 {
			name = fmt.Sprintf("drop%dpct/%s", c.drop, name)
		}
		t.Run(name, func(t *testing.T) {
			var d *lab.Dropper
			if c.drop > 0 {
				var err error
				if d, err = l.DropRoCE(ctx, c.drop); err != nil {
					t.Fatal(err)
				}
				defer d.Remove(context.Background())
			}
			perftest := fmt.Sprintf("ib_%s -d rxe0 -x 0 -F -n %d -s %d", c.test, c.iters, c.size)
			local := fmt.Sprintf("--ip %v%%eth0", ull)
			if c.x0 {
				local = "-x 0"
			}
			uroce := fmt.Sprintf("/tmp/uroce-perf %s --link %s -d eth0 %s -F -n %d -s %d --timeout 1m --stats",
				c.test, c.link, local, c.iters, c.size)
			capture := l.Capture("ll-" + strings.ReplaceAll(name, "/", "-"))
			var server, client lab.Result
			if c.uroceClient {
				server, client = runPairCmds(t, rg, ug, perftest, uroce)
			} else {
				server, client = runPairCmds(t, ug, rg, uroce, perftest)
			}
			recs, err := capture.Stop()
			if err != nil {
				t.Error(err)
			}
			checkReport(t, client, c.size, c.iters)
			if c.test == "write_lat" {
				checkReport(t, server, c.size, c.iters)
			}
			stats := lab.VerifyRoCE(recs)
			t.Logf("capture: %v", stats)
			if err := stats.Err(); err != nil {
				t.Error(err)
			}
			if stats.Packets < 2*c.iters {
				t.Errorf("capture: %d RoCE packets, want at least %d", stats.Packets, 2*c.iters)
			}
			off := 0
			for _, r := range recs {
				var f bth.Frame
				if f.Decode(r.Data) != nil {
					continue
				}
				ip := f.IPv6()
				if ip == nil {
					off++
					continue
				}
				src, dst := ip.Src(), ip.Dst()
				if !(src == ull && dst == rll || src == rll && dst == ull) {
					off++
				}
			}
			if off != 0 {
				t.Errorf("capture: %d of %d RoCE packets not IPv6 between %v and %v", off, stats.Packets, ull, rll)
			}
			if d != nil {
				dropped, err := d.Dropped(ctx)
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("nftables dropped %d RoCE packets", dropped)
				if dropped == 0 {
					t.Error("nftables dropped nothing")
				}
			}
		})
	}
}

// linkLocal returns the link-local address of g's eth0 once duplicate
// address detection has passed (/proc/net/if_inet6: address, index,
// prefix, scope 0x20 for link, flags with 0x40 while tentative, name).
func linkLocal(t *testing.T, ctx context.Context, g *lab.Guest) netip.Addr {
	t.Helper()
	r, err := g.Run(ctx, `i=0
while [ $i -lt 100 ]; do
	while read a _ _ scope flags dev; do
		[ "$dev" = eth0 ] && [ "$scope" = 20 ] && [ $((0x$flags & 0x40)) = 0 ] && { echo $a; exit 0; }
	done </proc/net/if_inet6
	i=$((i + 1))
	sleep 0.1
done
exit 1`)
	if err == nil {
		err = r.Err()
	}
	if err != nil {
		t.Fatalf("%s: no link-local address on eth0: %v\n%s", g.Name, err, r.Stderr)
	}
	h := strings.TrimSpace(r.Stdout)
	var b [16]byte
	for i := range b {
		if _, err := fmt.Sscanf(h[2*i:2*i+2], "%02x", &b[i]); err != nil {
			t.Fatalf("%s: link-local address %q: %v", g.Name, h, err)
		}
	}
	return netip.AddrFrom16(b)
}

// gidString is a GID as /sys/class/infiniband's gids files print it.
func gidString(a netip.Addr) string {
	b := a.As16()
	var s []string
	for i := 0; i < 16; i += 2 {
		s = append(s, fmt.Sprintf("%02x%02x", b[i], b[i+1]))
	}
	return strings.Join(s, ":")
}
