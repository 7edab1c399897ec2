package interop_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/tests/interop/lab"
)

// ucmatosePort is ucmatose's default rdma_cm port.
const ucmatosePort = 7471

// TestUcmatoseRxe runs uroce's examples/ucmatose against ucmatose from
// rdmacm-utils on an rxe guest, each side as client and as server: two
// connections made by the CM over QP1, 10 SENDs of 100 bytes each way on
// each, and the server's disconnect. Both exit statuses, both reports and
// a capture of the bridge are checked.
func TestUcmatoseRxe(t *testing.T) {
	l := lab.New(t, lab.Config{})
	bin := buildExample(t, "ucmatose")
	g := l.Boot(lab.GuestConfig{})[0]
	const conns, count, size = 2, 10, 100
	peer := lab.PeerAddr.Addr().String()
	args := fmt.Sprintf("-c %d -C %d -S %d", conns, count, size)
	for _, uroceClient := range []bool{true, false} {
		name := "uroce-server"
		if uroceClient {
			name = "uroce-client"
		}
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), pairTimeout)
			defer cancel()
			capture := l.Capture(strings.ReplaceAll(t.Name(), "/", "-"))
			var guest lab.Result
			var uroce string
			var uroceErr error
			uroceArgs := append([]string{"-timeout", "2m"}, strings.Fields(args)...)
			if uroceClient {
				job, err := g.Start(fmt.Sprintf("ucmatose -b %v %s", g.Addr, args))
				if err != nil {
					t.Fatal(err)
				}
				defer job.Kill()
				if err := waitCMListen(ctx, g, ucmatosePort); err != nil {
					t.Fatal(err)
				}
				out, err := l.PeerCommand(ctx, bin, append(uroceArgs, "-b", peer, "-s", g.Addr.String())...).CombinedOutput()
				uroce, uroceErr = string(out), err
				wctx, wcancel := context.WithTimeout(ctx, time.Minute)
				defer wcancel()
				if guest, err = job.Wait(wctx); err != nil {
					job.Kill()
					t.Fatalf("%v\nuroce ucmatose (%v):\n%s", err, uroceErr, uroce)
				}
			} else {
				var out syncBuilder
				cmd, done := startPeer(ctx, t, l, "starting server", &out, bin, append(uroceArgs, "-b", peer)...)
				var err error
				if guest, err = g.Run(ctx, fmt.Sprintf("ucmatose -s %s %s", peer, args)); err != nil {
					t.Fatal(err)
				}
				select {
				case uroceErr = <-done:
				case <-time.After(time.Minute):
					cmd.Process.Kill()
					t.Fatalf("uroce ucmatose server still running a minute after the guest's client ended\nguest:\n%s%s\nuroce:\n%s", guest.Stdout, guest.Stderr, out.String())
				}
				uroce = out.String()
			}
			frames, err := capture.Stop()
			if err != nil {
				t.Error(err)
			}
			stats := lab.VerifyRoCE(frames)
			t.Logf("ucmatose (%s):\n%s%s", g.Name, guest.Stdout, guest.Stderr)
			t.Logf("uroce ucmatose:\n%s", uroce)
			t.Logf("capture: %v", stats)

			if err := guest.Err(); err != nil {
				t.Errorf("ucmatose: %v", err)
			}
			if uroceErr != nil {
				t.Errorf("uroce ucmatose: %v", uroceErr)
			}
			for who, out := range map[string]string{"ucmatose": guest.Stdout, "uroce": uroce} {
				for _, want := range []string{"data transfers complete", "return status 0"} {
					if !strings.Contains(out, want) {
						t.Errorf("%s's output lacks %q", who, want)
					}
				}
			}
			if err := stats.Err(); err != nil {
				t.Error(err)
			}
			// Each connection: count SENDs each way (more only if a
			// slow guest made a side retransmit); REQ, REP, RTU,
			// DREQ and DREP.
			if n := stats.Opcodes[bth.RCSendOnly]; n < 2*conns*count {
				t.Errorf("%d SENDs in the capture, want %d", n, 2*conns*count)
			}
			if n := stats.Opcodes[bth.UDSendOnly]; n < 5*conns {
				t.Errorf("%d CM MADs in the capture, want at least %d", n, 5*conns)
			}
		})
	}
}
