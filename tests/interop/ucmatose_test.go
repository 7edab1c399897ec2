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
	const conns, count = 2, 10
	runCMTest(t, "ucmatose", ucmatosePort, conns, count, 100, func(t *testing.T, res facingResult) {
		// Each connection: count SENDs each way (more only if a slow
		// guest made a side retransmit); REQ, REP, RTU, DREQ and DREP.
		if n := res.stats.Opcodes[bth.RCSendOnly]; n < 2*conns*count {
			t.Errorf("%d SENDs in the capture, want %d", n, 2*conns*count)
		}
		if n := res.stats.Opcodes[bth.UDSendOnly]; n < 5*conns {
			t.Errorf("%d CM MADs in the capture, want at least %d", n, 5*conns)
		}
	})
}

// runCMTest runs uroce's examples/<prog> against the rdmacm-utils program
// of that name (the cmatose family: ucmatose, udaddy) on an rxe guest,
// each side as client and as server, with conns connections of count
// messages of size bytes: both must exit 0 with the family's closing
// lines, the capture must decode, and check judges the packets.
func runCMTest(t *testing.T, prog string, port, conns, count, size int, check func(*testing.T, facingResult)) {
	l := lab.New(t, lab.Config{})
	bin := buildExample(t, prog)
	g := l.Boot(lab.GuestConfig{})[0]
	peer := lab.PeerAddr.Addr().String()
	args := fmt.Sprintf("-c %d -C %d -S %d", conns, count, size)
	for _, uroceClient := range []bool{true, false} {
		name := "uroce-server"
		if uroceClient {
			name = "uroce-client"
		}
		t.Run(name, func(t *testing.T) {
			f := facing{prog: prog, bin: bin, uroceClient: uroceClient, cmPort: port, uroceReady: "starting server"}
			f.uroceArgs = append([]string{"-timeout", "2m"}, strings.Fields(args)...)
			if uroceClient {
				f.guestCmd = fmt.Sprintf("%s -b %v %s", prog, g.Addr, args)
				f.uroceArgs = append(f.uroceArgs, "-b", peer, "-s", g.Addr.String())
			} else {
				f.guestCmd = fmt.Sprintf("%s -s %s %s", prog, peer, args)
				f.uroceArgs = append(f.uroceArgs, "-b", peer)
			}
			res := f.run(t, l, g)
			res.checkEnds(t, f)
			for who, out := range map[string]string{prog: res.guest.Stdout, "uroce": res.uroce} {
				for _, want := range []string{"data transfers complete", "return status 0"} {
					if !strings.Contains(out, want) {
						t.Errorf("%s's output lacks %q", who, want)
					}
				}
			}
			if err := res.stats.Err(); err != nil {
				t.Error(err)
			}
			check(t, res)
		})
	}
}
