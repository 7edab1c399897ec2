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

// rstreamPort is rstream's default rdma_cm port.
const rstreamPort = 7471

// TestRstreamRxe runs uroce's examples/rstream (package rsocket) against
// rstream from rdmacm-utils on an rxe guest, each side as client and as
// server, at several transfer sizes and counts, the guest with
// non-blocking calls (rstream's default) and with blocking ones (-T b),
// both sides checking the data (-T v), and with 1 % of the RoCE packets
// (data, ACKs and CM MADs alike) dropped on the bridge. Both exit statuses, both result
// lines and a capture of the bridge (every RoCE packet verifies; data and
// credits as RDMA WRITE WITH IMMEDIATE) are checked.
func TestRstreamRxe(t *testing.T) {
	l := lab.New(t, lab.Config{})
	bin := buildExample(t, "rstream")
	g := l.Boot(lab.GuestConfig{})[0]
	peer := lab.PeerAddr.Addr().String()
	for _, tc := range []struct {
		size, count, iterations int
		block                   bool
		dropPct                 int // RoCE packets dropped on the bridge, both ways
	}{
		{64, 100, 5, false, 0},
		{4096, 50, 2, true, 0},
		{100000, 10, 2, false, 0},
		{1 << 20, 2, 1, true, 0},
		{4096, 100, 2, false, 1},
		{65536, 20, 2, true, 1},
	} {
		args := fmt.Sprintf("-S %d -C %d -I %d", tc.size, tc.count, tc.iterations)
		guestOpts := "-T v"
		if tc.block {
			guestOpts += " -T b"
		}
		for _, uroceClient := range []bool{true, false} {
			name := fmt.Sprintf("S%d-C%d-I%d", tc.size, tc.count, tc.iterations)
			if tc.block {
				name += "-block"
			}
			if tc.dropPct > 0 {
				name += fmt.Sprintf("-drop%d", tc.dropPct)
			}
			if uroceClient {
				name += "/uroce-client"
			} else {
				name += "/uroce-server"
			}
			t.Run(name, func(t *testing.T) {
				f := facing{prog: "rstream", bin: bin, uroceClient: uroceClient, cmPort: rstreamPort, uroceReady: "name"}
				f.uroceArgs = append([]string{"-timeout", "2m", "-T", "v", "-b", peer}, strings.Fields(args)...)
				if uroceClient {
					f.guestCmd = fmt.Sprintf("rstream -b %v %s %s", g.Addr, args, guestOpts)
					f.uroceArgs = append(f.uroceArgs, "-s", g.Addr.String())
				} else {
					f.guestCmd = fmt.Sprintf("rstream -s %s %s %s", peer, args, guestOpts)
				}
				var d *lab.Dropper
				if tc.dropPct > 0 {
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					var err error
					if d, err = l.DropRoCE(ctx, tc.dropPct); err != nil {
						t.Fatal(err)
					}
				}
				res := f.run(t, l, g)
				if d != nil {
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					dropped, err := d.Dropped(ctx)
					if err != nil {
						t.Fatal(err)
					}
					if err := d.Remove(ctx); err != nil {
						t.Fatal(err)
					}
					t.Logf("the bridge dropped %d RoCE packets", dropped)
				}
				res.checkEnds(t, f)
				guest, uroce, stats := res.guest, res.uroce, res.stats
				if strings.Contains(guest.Stdout+uroce, "verification failed") {
					t.Error("data verification failed")
				}
				for who, out := range map[string]string{"rstream": guest.Stdout, "uroce": uroce} {
					if !strings.Contains(out, "\ncustom ") {
						t.Errorf("%s printed no result line", who)
					}
				}
				if err := stats.Err(); err != nil {
					t.Error(err)
				}
				imm := stats.Opcodes[bth.RCWriteOnlyImm] + stats.Opcodes[bth.RCWriteLastImm]
				if want := 2*tc.iterations*tc.count + 4; imm < want {
					t.Errorf("%d RDMA WRITEs with immediate in the capture, want at least %d", imm, want)
				}
			})
		}
	}
}

// TestRstreamRiostreamRxe runs uroce's examples/riostream against
// riostream from rdmacm-utils on an rxe guest, each side as client and as
// server: each side riomaps a buffer and riowrites into the other's, the
// mapping itself going as an RS_OP_IOMAP_SGL message on the stream.
func TestRstreamRiostreamRxe(t *testing.T) {
	l := lab.New(t, lab.Config{})
	bin := buildExample(t, "riostream")
	g := l.Boot(lab.GuestConfig{})[0]
	peer := lab.PeerAddr.Addr().String()
	for _, tc := range []struct {
		size, count, iterations int
		block                   bool
	}{
		{64, 50, 5, false},
		{4096, 20, 3, true},
		{100000, 4, 2, false},
	} {
		args := fmt.Sprintf("-S %d -C %d -I %d", tc.size, tc.count, tc.iterations)
		guestOpts := "-T v"
		if tc.block {
			guestOpts += " -T b"
		}
		for _, uroceClient := range []bool{true, false} {
			name := fmt.Sprintf("S%d-C%d-I%d", tc.size, tc.count, tc.iterations)
			if tc.block {
				name += "-block"
			}
			if uroceClient {
				name += "/uroce-client"
			} else {
				name += "/uroce-server"
			}
			t.Run(name, func(t *testing.T) {
				f := facing{prog: "riostream", bin: bin, uroceClient: uroceClient, cmPort: rstreamPort, uroceReady: "name"}
				f.uroceArgs = append([]string{"-timeout", "2m", "-T", "v", "-b", peer}, strings.Fields(args)...)
				if uroceClient {
					f.guestCmd = fmt.Sprintf("riostream -b %v %s %s", g.Addr, args, guestOpts)
					f.uroceArgs = append(f.uroceArgs, "-s", g.Addr.String())
				} else {
					f.guestCmd = fmt.Sprintf("riostream -s %s %s %s", peer, args, guestOpts)
				}
				res := f.run(t, l, g)
				res.checkEnds(t, f)
				guest, uroce, stats := res.guest, res.uroce, res.stats
				if strings.Contains(guest.Stdout+uroce, "verification failed") {
					t.Error("data verification failed")
				}
				for who, out := range map[string]string{"riostream": guest.Stdout, "uroce": uroce} {
					if !strings.Contains(out, "\ncustom ") {
						t.Errorf("%s printed no result line", who)
					}
				}
				if err := stats.Err(); err != nil {
					t.Error(err)
				}
				// The transfers are plain RDMA WRITEs; the iomap entries,
				// the sync messages and credits carry immediates.
				writes := stats.Opcodes[bth.RCWriteOnly] + stats.Opcodes[bth.RCWriteFirst]
				if want := 2 * tc.iterations * tc.count; writes < want {
					t.Errorf("%d RDMA WRITEs without immediate in the capture, want at least %d", writes, want)
				}
			})
		}
	}
}
