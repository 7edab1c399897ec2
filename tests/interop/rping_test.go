package interop_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/tests/interop/lab"
)

// rpingPort is rping's default rdma_cm port.
const rpingPort = 7174

// rpingLines counts the lines of an rping's output that start with
// prefix, and checks they are the pings rping sends: "rdma-ping-N: "
// then letters, in order.
func rpingLines(t *testing.T, who, out, prefix string, count int) {
	t.Helper()
	n := 0
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		want := fmt.Sprintf("%srdma-ping-%d: %c", prefix, n, 'A'+n)
		if !strings.HasPrefix(line, want) {
			t.Errorf("%s: line %q, want it to start %q", who, line, want)
		}
		n++
	}
	if n != count {
		t.Errorf("%s printed %d %q lines, want %d:\n%s", who, n, prefix, count, out)
	}
}

// TestRpingRxe runs uroce's examples/rping against rping from rdmacm-utils
// on an rxe guest, each side as client and as server: the connection is
// made by the CM over QP1 (no TCP), then 10 pings of SEND, RDMA READ and
// RDMA WRITE with the client validating every one (-V). Both exit
// statuses, both sides' ping lines and a capture of the bridge (every
// RoCE packet verifies; CM MADs as UD SENDs, and the RC opcodes rping
// uses) are checked.
func TestRpingRxe(t *testing.T) {
	l := lab.New(t, lab.Config{})
	bin := buildExample(t, "rping")
	g := l.Boot(lab.GuestConfig{})[0]
	const count = 10
	peer := lab.PeerAddr.Addr().String()
	for _, uroceClient := range []bool{true, false} {
		name := "uroce-server"
		if uroceClient {
			name = "uroce-client"
		}
		t.Run(name, func(t *testing.T) {
			f := facing{prog: "rping", bin: bin, uroceClient: uroceClient, cmPort: rpingPort, uroceReady: "listening on port"}
			if uroceClient {
				f.guestCmd = fmt.Sprintf("rping -s -a %v -v -V -C %d", g.Addr, count)
				f.uroceArgs = []string{"-c", "-d", "-timeout", "2m", "-I", peer, "-a", g.Addr.String(), "-v", "-V", "-C", fmt.Sprint(count)}
			} else {
				f.guestCmd = fmt.Sprintf("rping -c -a %s -v -V -C %d", peer, count)
				f.uroceArgs = []string{"-s", "-d", "-timeout", "3m", "-a", peer, "-v"}
			}
			res := f.run(t, l, g)
			res.checkEnds(t, f)
			guest, uroce, stats := res.guest, res.uroce, res.stats
			// rping reports a failed -V check on stderr and stops
			// pinging, so the uroce side would also see fewer pings.
			if strings.Contains(guest.Stderr+uroce, "data mismatch") {
				t.Error("validation failed")
			}
			// A server rping ends at the client's disconnect. (A
			// client rping's own report of it races with its exit.)
			if uroceClient && !strings.Contains(guest.Stderr, "server DISCONNECT EVENT") {
				t.Error("rping's server never saw the disconnect")
			}
			if uroceClient {
				rpingLines(t, "uroce client", uroce, "ping data: ", count)
			} else {
				rpingLines(t, "uroce server", uroce, "server ping data: ", count)
			}
			if uroceClient {
				rpingLines(t, "rping server", guest.Stdout, "server ping data: ", count)
			} else {
				rpingLines(t, "rping client", guest.Stdout, "ping data: ", count)
			}
			if err := stats.Err(); err != nil {
				t.Error(err)
			}
			// REQ, REP, RTU, DREQ, DREP (more only if one was
			// lost); each ping is two advertisements and two go
			// aheads, one READ and one WRITE, each acknowledged.
			for op, want := range map[bth.Opcode]int{bth.RCSendOnly: 4 * count, bth.RCReadRequest: count,
				bth.RCReadResponseOnly: count, bth.RCWriteOnly: count, bth.RCAcknowledge: 5 * count} {
				// More only if a slow guest made a side retransmit.
				if stats.Opcodes[op] < want {
					t.Errorf("%d %v packets in the capture, want %d", stats.Opcodes[op], op, want)
				}
			}
			if n := stats.Opcodes[bth.UDSendOnly]; n < 5 {
				t.Errorf("%d CM MADs in the capture, want at least 5", n)
			}
		})
	}
}
