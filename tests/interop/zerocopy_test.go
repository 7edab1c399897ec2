package interop_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/uroce/uroce/tests/interop/lab"
)

// TestZeroCopyRxe runs uroce-perf on AF_XDP in zero-copy mode, which only
// a guest gives it here: trixie-backports' kernel, whose virtio-net binds
// XSK sockets zero-copy on a NIC with the features GuestConfig.ZeroCopyNIC
// asks QEMU for. rxe runs in the other guest. Each cell checks that the
// bind was zero-copy, that both sides report the whole run, and that every
// RoCE packet on the bridge verifies.
//
// Two virtio-net behaviours had stalled this (pkg/link/afxdp/quirks_linux.go):
// busy polling left transmitted frames on the ring, and with one of two
// queue pairs in use, XDP made the device receive on both. The first cell
// checks that uroce now refuses the second with a clear error.
func TestZeroCopyRxe(t *testing.T) {
	l := lab.New(t, lab.Config{Flavour: lab.TrixieBackports})
	bin := buildStatic(t, "github.com/uroce/uroce/cmd/uroce-perf")
	gs := l.Boot(lab.GuestConfig{ZeroCopyNIC: true}, lab.GuestConfig{})
	ug, rg := gs[0], gs[1] // uroce's guest, rxe's
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	installUrocePerf(t, ctx, ug, bin)
	uroce := func(test, bind string, size, iters int) string {
		return fmt.Sprintf("/tmp/uroce-perf %s --link afxdp --xdp_bind %s -d eth0 -F -n %d -s %d --timeout 1m --stats", test, bind, iters, size)
	}
	perftest := func(test string, size, iters int) string {
		return fmt.Sprintf("ib_%s -d rxe0 -x 1 -F -n %d -s %d", test, iters, size)
	}

	t.Run("spare-queue-pair", func(t *testing.T) {
		r, err := ug.Run(ctx, uroce("write_lat", "zero-copy", 64, 10)+" "+rg.Addr.String())
		if err != nil {
			t.Fatal(err)
		}
		if r.Err() == nil || !strings.Contains(r.Stderr, "ethtool -L eth0 combined 2") {
			t.Fatalf("with one of two queue pairs in use: %v, want a refusal naming ethtool -L\n%s\n%s", r.Err(), r.Stdout, r.Stderr)
		}
		t.Logf("refused: %s", strings.TrimSpace(r.Stderr))
	})
	if r, err := ug.Run(ctx, "ethtool -L eth0 combined 2 && ethtool -l eth0 | tail -n 1"); err != nil || r.Err() != nil {
		t.Fatalf("ethtool -L: %v %v\n%s", err, r.Err(), r.Stderr)
	}

	for _, c := range []struct {
		test        string
		bind        string
		size, iters int
		uroceClient bool
		dropPct     int
	}{
		{"write_lat", "zero-copy", 64, 200, true, 0},
		{"write_lat", "zero-copy", 64, 200, false, 0},
		{"write_bw", "auto", 65536, 200, true, 0},
		{"write_bw", "zero-copy", 65536, 200, false, 0},
		{"write_bw", "zero-copy", 64, 2000, true, 0},
		{"send_lat", "zero-copy", 4096, 100, true, 0},
		{"write_bw", "zero-copy", 65536, 200, true, 1},
		{"write_lat", "zero-copy", 64, 200, false, 1},
	} {
		side := "uroce-server"
		if c.uroceClient {
			side = "uroce-client"
		}
		name := fmt.Sprintf("%s/s%d/%s", c.test, c.size, side)
		if c.dropPct > 0 {
			name = fmt.Sprintf("drop%dpct/%s", c.dropPct, name)
		}
		t.Run(name, func(t *testing.T) {
			var d *lab.Dropper
			if c.dropPct > 0 {
				var err error
				if d, err = l.DropRoCE(ctx, c.dropPct); err != nil {
					t.Fatal(err)
				}
				defer d.Remove(context.Background())
			}
			capture := l.Capture("zc-" + strings.ReplaceAll(name, "/", "-"))
			var server, client lab.Result
			u, pt := uroce(c.test, c.bind, c.size, c.iters), perftest(c.test, c.size, c.iters)
			if c.uroceClient {
				server, client = runPairCmds(t, rg, ug, pt, u)
			} else {
				server, client = runPairCmds(t, ug, rg, u, pt)
			}
			recs, err := capture.Stop()
			if err != nil {
				t.Error(err)
			}
			ur := client
			if !c.uroceClient {
				ur = server
			}
			if !strings.Contains(ur.Stdout, "AF_XDP bind     : zero-copy") {
				t.Errorf("uroce-perf did not bind zero-copy:\n%s", ur.Stdout)
			}
			checkReport(t, client, c.size, c.iters)
			if c.test != "write_bw" || !c.uroceClient {
				checkReport(t, server, c.size, c.iters)
			}
			t.Logf("uroce:\n%s", ur.Stdout)
			stats := lab.VerifyRoCE(recs)
			t.Logf("capture: %v", stats)
			if err := stats.Err(); err != nil {
				t.Error(err)
			}
			if d != nil {
				dropped, err := d.Dropped(ctx)
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("nftables dropped %d RoCE packets", dropped)
				if dropped == 0 {
					t.Errorf("nftables dropped nothing")
				}
			}
		})
	}
}
