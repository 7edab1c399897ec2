package interop_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/internal/pcapfile"
	"github.com/uroce/uroce/tests/interop/lab"
)

// rdmacmSizes are the sizes of the -R cells: one packet, and a message
// of four at the IB MTU (atomic_lat moves its fixed 8 bytes).
var rdmacmSizes = []int{2, 4096}

// TestPerfRxeRDMACM runs perftest with -R (--rdma_cm) on an rxe guest
// against uroce-perf -R in the Peer namespace, uroce as the client and as
// the server, for every test at 2 and 4096 bytes: both connections made
// by the CM over QP1, the exchange as RC SENDs over the first, no TCP at
// all. Each cell checks both sides' exit status and reports, uroce's
// banner, that no error counter moved on either side, and a capture of
// the bridge: every RoCE packet verifies, the CM MADs of two connections
// and their teardown, the exchange's SENDs, the test's opcodes, and no
// TCP to perftest's port. Its results are the -R table in README.md (go
// test -run 'TestPerfRxeRDMACM$' -update rewrites it).
func TestPerfRxeRDMACM(t *testing.T) {
	l := lab.New(t, lab.Config{})
	bin := buildOnce(t, "github.com/uroce/uroce/cmd/uroce-perf")
	g := l.Boot(lab.GuestConfig{})[0]
	growTapQueues(t, l)
	const ibMTU = 1024
	m := rdmacmMatrix{cells: map[string]bool{}}
	for _, test := range perfTests {
		sizes := rdmacmSizes
		if test == "atomic_lat" {
			sizes = []int{8}
		}
		for _, size := range sizes {
			for _, uroceClient := range []bool{true, false} {
				c := perfCell{test: test, size: size, iters: perfIters, uroceClient: uroceClient}
				m.cells[c.String()] = t.Run(c.String(), func(t *testing.T) {
					res := runRDMACMCell(t, l, g, bin, c)
					res.check(t)
					res.checkRDMACM(t, ibMTU)
				})
			}
		}
	}
	m.sync(t)
}

// rdmacmMatrix collects which -R cells passed, by perfCell.String.
type rdmacmMatrix struct{ cells map[string]bool }

const (
	rdmacmBegin = "<!-- uroce-perf -R matrix: written by the test with -update; do not edit -->"
	rdmacmEnd   = "<!-- end of the uroce-perf -R matrix -->"
)

func (m rdmacmMatrix) want() int { return (len(perfTests)-1)*len(rdmacmSizes)*2 + 2 }

// table renders the results: a row per test and side of uroce, a column
// per size.
func (m rdmacmMatrix) table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\nLink MTU 1500 (IB MTU 1024), %d iterations per cell, both sides with -R:\n\n", rdmacmBegin, perfIters)
	b.WriteString("| perftest -R on rxe | uroce-perf -R | 2 B | 8 B | 4096 B |\n|---|---|---|---|---|\n")
	for _, test := range perfTests {
		for _, uc := range []bool{true, false} {
			side := "client"
			if !uc {
				side = "server"
			}
			fmt.Fprintf(&b, "| ib_%s | %s |", test, side)
			for _, s := range []int{2, 8, 4096} {
				v, ok := m.cells[perfCell{test: test, size: s, uroceClient: uc}.String()]
				b.WriteString(cellMark(v, ok))
			}
			b.WriteString("\n")
		}
	}
	b.WriteString(rdmacmEnd)
	return b.String()
}

// sync checks README.md's -R table against a full run, or with -update
// rewrites it.
func (m rdmacmMatrix) sync(t *testing.T) {
	syncTable(t, "-R matrix", rdmacmBegin, rdmacmEnd, m.table, len(m.cells), m.want())
}

// rdmacmResult is a perfResult with the capture's frames kept.
type rdmacmResult struct {
	perfResult
	frames []pcapfile.Record
}

// runRDMACMCell runs one cell with -R on both sides. Neither side opens a
// socket: the guest's server is waited for as an rdma_cm listener, uroce's
// by the line it prints once it listens.
func runRDMACMCell(t *testing.T, l *lab.Lab, g *lab.Guest, bin string, c perfCell) rdmacmResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), pairTimeout)
	defer cancel()
	guestCmd := fmt.Sprintf("ib_%s -d rxe0 -x 1 -F -R -n %d", c.test, c.iters)
	args := []string{c.test, "-R", "--link", "udp", "--ip", lab.PeerAddr.Addr().String(), "-F",
		"-n", strconv.Itoa(c.iters), "-stats", "--timeout", "3m"}
	if !c.atomic() {
		guestCmd += fmt.Sprintf(" -s %d", c.size)
		args = append(args, "-s", strconv.Itoa(c.size))
	}
	if c.uroceClient {
		args = append(args, g.Addr.String())
	}
	res := rdmacmResult{perfResult: perfResult{c: c, uroce: lab.Result{Cmd: "uroce-perf " + strings.Join(args, " ")}}}
	before, tapBefore := counters(t, g)[0], tapDrops(t, l)
	capture := l.Capture(strings.ReplaceAll(t.Name(), "/", "-"))
	if c.uroceClient {
		job, err := g.Start(guestCmd)
		if err != nil {
			t.Fatal(err)
		}
		defer job.Kill() // a server whose client never came
		if err := waitCMListen(ctx, g, perftestPort); err != nil {
			t.Fatal(err)
		}
		var out, errb strings.Builder
		cmd := l.PeerCommand(ctx, bin, args...)
		cmd.Stdout, cmd.Stderr = &out, &errb
		res.uroce.ExitCode = exitCode(cmd.Run())
		res.uroce.Stdout, res.uroce.Stderr = out.String(), errb.String()
		if res.guest, err = job.Wait(ctx); err != nil {
			t.Fatalf("%v\nuroce-perf:\n%s%s\nconsole:\n%s", err, res.uroce.Stdout, res.uroce.Stderr, g.ConsoleTail(30))
		}
	} else {
		var out syncBuilder
		cmd, done := startPeer(ctx, t, l, "Waiting for client", &out, bin, args...)
		var err error
		if res.guest, err = g.Run(ctx, guestCmd+" "+lab.PeerAddr.Addr().String()); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			res.uroce.ExitCode = exitCode(err)
		case <-time.After(time.Minute):
			cmd.Process.Kill() // ip netns exec execs uroce-perf: this PID is ours
			res.uroce.ExitCode = exitCode(<-done)
			t.Errorf("uroce-perf server still running a minute after the guest's client ended")
		}
		// startPeer joins stdout and stderr.
		res.uroce.Stdout = out.String()
	}
	res.guestDelta = counters(t, g)[0].Sub(before)
	res.tapDrops = tapDrops(t, l) - tapBefore
	res.frames, res.captureErr = capture.Stop()
	res.stats = lab.VerifyRoCE(res.frames)
	t.Logf("%s (%s):\n%s%s", guestCmd, g.Name, res.guest.Stdout, res.guest.Stderr)
	t.Logf("%s:\n%s%s", res.uroce.Cmd, res.uroce.Stdout, res.uroce.Stderr)
	t.Logf("capture: %v", res.stats)
	t.Logf("guest hw_counters moved: %v", nonZero(res.guestDelta))
	return res
}

// checkRDMACM checks a clean -R run: uroce says rdma_cm in its banner; the
// capture verifies and holds the CM MADs of two connections and their
// release (REQ, REP, RTU twice, then DREQ and DREP for each: 10 at least,
// more if a MAD was resent), the exchange's SENDs (4 of the hello, 2
// zeroed handshakes and the test's: at least 10 each way), the test's
// opcodes at the IB MTU (a 4096-byte message in FIRST, MIDDLE and LAST
// packets), and no TCP to port 18515; no error counter moved on either
// side.
func (res *rdmacmResult) checkRDMACM(t *testing.T, ibMTU int) {
	t.Helper()
	c := res.c
	if !strings.Contains(res.uroce.Stdout, "Data ex. method : rdma_cm") {
		t.Errorf("uroce-perf's banner does not say rdma_cm:\n%s", res.uroce.Stdout)
	}
	if res.captureErr != nil {
		t.Error(res.captureErr)
	}
	if err := res.stats.Err(); err != nil {
		t.Error(err)
	}
	if n := res.stats.Opcodes[bth.UDSendOnly]; n < 10 {
		t.Errorf("%d CM MADs in the capture, want at least 10 (two connections made and released)", n)
	}
	if n := res.stats.Opcodes[bth.RCSendOnly]; n < 20 {
		t.Errorf("%d RC SEND Only packets, want at least 20 (the exchange, 10 each way)", n)
	}
	for _, op := range wantOpcodes(c.test, c.size, ibMTU) {
		if res.stats.Opcodes[op] == 0 {
			t.Errorf("no %v packet in the capture", op)
		}
	}
	if n := tcpTo(res.frames, perftestPort); n != 0 {
		t.Errorf("%d TCP segments to or from port %d: the exchange went over TCP", n, perftestPort)
	}
	for _, k := range errorCounters {
		if res.guestDelta[k] != 0 {
			t.Errorf("guest's %s moved by %d on a clean bridge", k, res.guestDelta[k])
		}
	}
	for _, k := range uroceErrorCounters {
		if res.uroceCount[k] != 0 {
			t.Errorf("uroce's %s is %d on a clean bridge", k, res.uroceCount[k])
		}
	}
	if res.tapDrops != 0 {
		t.Errorf("the host's tap dropped %d frames toward the guest", res.tapDrops)
	}
}

// tcpTo counts the IPv4 TCP segments of a capture from or to port.
func tcpTo(frames []pcapfile.Record, port uint16) int {
	n := 0
	for _, r := range frames {
		b := r.Data
		if len(b) < 14+20+4 || binary.BigEndian.Uint16(b[12:]) != 0x0800 || b[14+9] != 6 {
			continue
		}
		tcp := b[14+int(b[14]&15)*4:]
		if len(tcp) >= 4 && (binary.BigEndian.Uint16(tcp) == port || binary.BigEndian.Uint16(tcp[2:]) == port) {
			n++
		}
	}
	return n
}
