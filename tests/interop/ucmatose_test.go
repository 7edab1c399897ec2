package interop_test

import (
	"fmt"
	"strings"
	"testing"

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
			f := facing{prog: "ucmatose", bin: bin, uroceClient: uroceClient, cmPort: ucmatosePort, uroceReady: "starting server"}
			f.uroceArgs = append([]string{"-timeout", "2m"}, strings.Fields(args)...)
			if uroceClient {
				f.guestCmd = fmt.Sprintf("ucmatose -b %v %s", g.Addr, args)
				f.uroceArgs = append(f.uroceArgs, "-b", peer, "-s", g.Addr.String())
			} else {
				f.guestCmd = fmt.Sprintf("ucmatose -s %s %s", peer, args)
				f.uroceArgs = append(f.uroceArgs, "-b", peer)
			}
			res := f.run(t, l, g)
			res.checkEnds(t, f)
			guest, uroce, stats := res.guest, res.uroce, res.stats
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
