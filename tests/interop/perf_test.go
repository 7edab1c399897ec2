package interop_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/internal/pcapfile"
	"github.com/uroce/uroce/tests/interop/lab"
)

// perfCell is one run of the uroce-perf matrix: a perftest program on the
// guest against the same test of uroce-perf in the lab's Peer namespace.
type perfCell struct {
	test        string // uroce-perf's subcommand; the guest runs "ib_"+test
	size        int
	iters       int
	uroceClient bool     // uroce is the client, the guest the server
	drop        int      // percent of RoCE packets nftables drops; 0: clean
	args        []string // uroce-perf's flags beyond the matrix's own
	guestArgs   string   // perftest's, likewise (the same -c on both ends)
	// timed: the run is for a time (-D), not -n iterations. check wants
	// a report of the size with some iterations; checkClean lets the
	// last packets go unreceived, since perftest's run_iter_bw stops
	// posting when the time is up and leaves without waiting for the
	// WRs in flight, whose packets then meet a QP that is gone.
	timed bool
	// opcodes, when set, replace wantOpcodes' for checkClean (-A
	// CMP_AND_SWAP, -c UD).
	opcodes []bth.Opcode
}

func (c perfCell) side() string {
	if c.uroceClient {
		return "uroce-client"
	}
	return "uroce-server"
}

func (c perfCell) String() string { return fmt.Sprintf("%s/s%d/%s", c.test, c.size, c.side()) }

func (c perfCell) atomic() bool { return c.test == "atomic_lat" || c.test == "atomic_bw" }

// reports says whether the side prints a result table: every client does,
// and every server but the passive side of read_lat and atomic_lat
// (write_bw's and read_bw's servers print the client's report).
func (c perfCell) reports(server bool) bool {
	return !server || (c.test != "read_lat" && c.test != "atomic_lat")
}

// perfResult is what both sides printed and how far the counters moved.
type perfResult struct {
	c          perfCell
	guest      lab.Result
	uroce      lab.Result // Cmd, Stdout, Stderr and ExitCode of uroce-perf
	guestDelta lab.Counters
	tapDrops   uint64 // frames the host's tap dropped toward the guest
	uroceCount map[string]uint64
	frames     []pcapfile.Record
	stats      lab.RoCEStats
	captureErr error
}

// run runs the cell between uroce-perf (bin) in the lab's Peer namespace,
// on the udp backend bound to the Peer address, and perftest on g,
// capturing the bridge. It fails the test only for the lab's own
// failures; check judges the programs.
func (c perfCell) run(t *testing.T, l *lab.Lab, g *lab.Guest, bin string) perfResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), pairTimeout)
	defer cancel()
	guestCmd := fmt.Sprintf("ib_%s -d rxe0 -x 1 -F -n %d", c.test, c.iters)
	// uroce has one GID per device (its address): index 0, the default.
	args := []string{c.test, "--link", "udp", "--ip", lab.PeerAddr.Addr().String(), "-F",
		"-n", strconv.Itoa(c.iters), "-stats",
		// A failure detector only, longer than any retransmission
		// backoff of a descheduled TCG guest.
		"--timeout", "3m"}
	if !c.atomic() {
		guestCmd += fmt.Sprintf(" -s %d", c.size)
		args = append(args, "-s", strconv.Itoa(c.size))
	}
	args = append(args, c.args...)
	if c.guestArgs != "" {
		guestCmd += " " + c.guestArgs
	}
	if c.uroceClient {
		args = append(args, g.Addr.String())
	}
	res := perfResult{c: c, uroce: lab.Result{Cmd: "uroce-perf " + strings.Join(args, " ")}}
	before, tapBefore := counters(t, g)[0], tapDrops(t, l)
	capture := l.Capture(strings.ReplaceAll(t.Name(), "/", "-"))
	var out, errb strings.Builder
	cmd := l.PeerCommand(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if c.uroceClient {
		job, err := g.Start(guestCmd)
		if err != nil {
			t.Fatal(err)
		}
		defer job.Kill() // a server whose client never came
		if err := job.WaitListen(ctx, perftestPort); err != nil {
			t.Fatal(err)
		}
		res.uroce.ExitCode = exitCode(cmd.Run())
		if res.guest, err = job.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	} else {
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waited := false
		defer func() {
			if !waited {
				cmd.Process.Kill() // ip netns exec execs uroce-perf: this PID is ours
				cmd.Wait()
			}
		}()
		if err := waitPeerListen(ctx, l, perftestPort); err != nil {
			t.Fatal(err)
		}
		var err error
		if res.guest, err = g.Run(ctx, guestCmd+" "+lab.PeerAddr.Addr().String()); err != nil {
			t.Fatal(err)
		}
		res.uroce.ExitCode = exitCode(cmd.Wait())
		waited = true
	}
	res.uroce.Stdout, res.uroce.Stderr = out.String(), errb.String()
	res.guestDelta = counters(t, g)[0].Sub(before)
	res.tapDrops = tapDrops(t, l) - tapBefore
	res.frames, res.captureErr = capture.Stop()
	res.stats = lab.VerifyRoCE(res.frames)
	t.Logf("%s (%s):\n%s%s", res.guest.Cmd, g.Name, res.guest.Stdout, res.guest.Stderr)
	t.Logf("%s:\n%s%s", res.uroce.Cmd, res.uroce.Stdout, res.uroce.Stderr)
	t.Logf("capture: %v", res.stats)
	t.Logf("guest hw_counters moved: %v", nonZero(res.guestDelta))
	return res
}

// exitCode is a finished command's exit status as lab.Result holds it:
// -1 when it did not run to an exit.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// check checks both sides' exit status and reports (size and iterations)
// and reads uroce's counters. It stops the test when a side failed.
func (res *perfResult) check(t *testing.T) {
	t.Helper()
	c := res.c
	if err := res.guest.Err(); err != nil {
		t.Errorf("perftest on the guest: %v", err)
	}
	if err := res.uroce.Err(); err != nil {
		t.Errorf("uroce-perf: %v", err)
	}
	if t.Failed() {
		t.FailNow()
	}
	for _, r := range []struct {
		server bool
		res    lab.Result
	}{{c.uroceClient, res.guest}, {!c.uroceClient, res.uroce}} {
		switch {
		case !c.reports(r.server):
		case c.timed:
			checkSomeReport(t, r.res, c.size)
		default:
			checkReport(t, r.res, c.size, c.iters)
		}
	}
	res.uroceCount = uroceCounters(t, res.uroce.Stdout)
}

// checkSomeReport checks the report of a run for a time: the size and
// some iterations.
func checkSomeReport(t *testing.T, r lab.Result, size int) {
	t.Helper()
	rep, err := lab.ParsePerftest(r.Stdout)
	if err != nil {
		t.Errorf("%q: %v\n%s", r.Cmd, err, r.Stdout)
		return
	}
	if rep.Bytes != size || rep.Iterations < 1 {
		t.Errorf("%q: report says %d bytes × %d iterations, want %d × at least 1", r.Cmd, rep.Bytes, rep.Iterations, size)
	}
}

// checkClean checks a run on a clean bridge: a capture whose every RoCE
// packet decodes and verifies (ICRC included), with the opcodes of the
// test and payloads no larger than the IB MTU; no error counter moved on
// either side; each side received every packet the other sent (rxe counts
// a packet only once its ICRC and headers passed), and the capture holds
// exactly those packets.
func (res *perfResult) checkClean(t *testing.T, ibMTU int) {
	t.Helper()
	c := res.c
	if res.captureErr != nil {
		t.Error(res.captureErr)
	}
	if err := res.stats.Err(); err != nil {
		t.Error(err)
	}
	want := c.opcodes
	if want == nil {
		want = wantOpcodes(c.test, c.size, ibMTU)
	}
	for _, op := range want {
		if res.stats.Opcodes[op] == 0 {
			t.Errorf("no %v packet in the capture", op)
		}
	}
	if !c.atomic() {
		if want := min(c.size, ibMTU); res.stats.MaxPayload != want {
			t.Errorf("largest payload %d bytes, want %d (%d-byte messages, IB MTU %d)", res.stats.MaxPayload, want, c.size, ibMTU)
		}
	}
	d, u := res.guestDelta, res.uroceCount
	for _, k := range errorCounters {
		if d[k] != 0 {
			t.Errorf("guest's %s moved by %d on a clean bridge", k, d[k])
		}
	}
	for _, k := range uroceErrorCounters {
		if u[k] != 0 {
			t.Errorf("uroce's %s is %d on a clean bridge", k, u[k])
		}
	}
	if res.tapDrops != 0 {
		t.Errorf("the host's tap dropped %d frames toward the guest (it did not keep up)", res.tapDrops)
	}
	// rxe counts a packet received only once its ICRC and headers
	// passed: it took every packet uroce sent, but for a retransmission
	// that came after the guest's program had left (lateRetransmits).
	late := uint64(lateRetransmits(res.frames, fromUroce))
	if d["rcvd_pkts"] > u["TxPackets"] || d["rcvd_pkts"]+late < u["TxPackets"] && !c.timed {
		t.Errorf("packets lost: uroce sent %d (%d of them retransmissions after the guest's last packet), the guest received %d",
			u["TxPackets"], late, d["rcvd_pkts"])
	}
	// uroce reads its socket only while the test runs: when it timed out
	// and retransmitted (a TCG guest descheduled past the 67 ms ACK
	// timeout), the guest's answers to the duplicates can come after
	// uroce's last poll, and so can the guest's own retransmissions
	// after uroce's last packet (lateRetransmits). Otherwise it read
	// every packet the guest sent.
	guestLate := uint64(lateRetransmits(res.frames, fromGuest))
	if got, sent := u["RxPackets"], d["sent_pkts"]; got > sent || got+guestLate < sent && u["Timeouts"] == 0 && !c.timed {
		t.Errorf("the guest sent %d packets (%d of them retransmissions after uroce's last packet), uroce received %d (after %d timeouts)",
			sent, guestLate, got, u["Timeouts"])
	}
	if sent := d["sent_pkts"] + u["TxPackets"]; int(sent) != res.stats.Packets {
		t.Errorf("the two sides sent %d RoCE packets, the capture holds %d", sent, res.stats.Packets)
	}
}

// wantOpcodes are the opcodes a clean run of test at size must put on
// the wire: a message of more than one IB MTU goes as FIRST, MIDDLE (from
// three packets on) and LAST; writes and sends are acknowledged.
func wantOpcodes(test string, size, ibMTU int) []bth.Opcode {
	multi := func(only, first, middle, last bth.Opcode) []bth.Opcode {
		switch n := (size + ibMTU - 1) / ibMTU; {
		case n == 1:
			return []bth.Opcode{only}
		case n == 2:
			return []bth.Opcode{first, last}
		default:
			return []bth.Opcode{first, middle, last}
		}
	}
	switch test {
	case "write_lat", "write_bw":
		return append(multi(bth.RCWriteOnly, bth.RCWriteFirst, bth.RCWriteMiddle, bth.RCWriteLast), bth.RCAcknowledge)
	case "send_lat", "send_bw":
		return append(multi(bth.RCSendOnly, bth.RCSendFirst, bth.RCSendMiddle, bth.RCSendLast), bth.RCAcknowledge)
	case "read_lat", "read_bw":
		return append(multi(bth.RCReadResponseOnly, bth.RCReadResponseFirst, bth.RCReadResponseMiddle, bth.RCReadResponseLast), bth.RCReadRequest)
	case "atomic_lat", "atomic_bw":
		return []bth.Opcode{bth.RCFetchAdd, bth.RCAtomicAcknowledge}
	}
	panic("unknown test " + test)
}

// uroceRetransmitCounters move when uroce recovers from a lost packet,
// as requester (retransmissions, timeouts, NAKs and implicit NAKs
// received) or as responder (sequence NAKs sent, duplicates answered).
var uroceRetransmitCounters = []string{"Retransmits", "Timeouts", "SeqNAKsRcvd", "ImplicitNAKs", "SeqNAKsSent", "DupRequests"}

// runDropping runs c while the bridge drops c.drop % of RoCE packets and
// checks it as any run (check); it returns the result and how many packets
// nftables dropped, failing the test if that is none (the rule did not see
// the traffic).
func (c perfCell) runDropping(t *testing.T, l *lab.Lab, g *lab.Guest, bin string) (perfResult, uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, err := l.DropRoCE(ctx, c.drop)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Remove(context.Background())
	res := c.run(t, l, g, bin)
	res.check(t)
	dropped, err := d.Dropped(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("nftables dropped %d RoCE packets; uroce's counters: %v", dropped, res.uroceCount)
	if dropped == 0 {
		t.Fatal("nftables dropped nothing: the rule does not see the bridge's RoCE traffic")
	}
	return res, dropped
}

// testPerfDrop runs c while the bridge drops c.drop % of RoCE packets, and
// checks that it completes and that both sides' counters show the
// recovery.
func testPerfDrop(t *testing.T, l *lab.Lab, g *lab.Guest, bin string, c perfCell) {
	res, dropped := c.runDropping(t, l, g, bin)
	gd, u := res.guestDelta, res.uroceCount
	if n := sum(gd, retransmitCounters); n == 0 {
		t.Errorf("%d packets dropped, yet no guest retransmission counter (%v) moved", dropped, retransmitCounters)
	}
	var n uint64
	for _, k := range uroceRetransmitCounters {
		n += u[k]
	}
	if n == 0 {
		t.Errorf("%d packets dropped, yet no uroce recovery counter (%v) moved", dropped, uroceRetransmitCounters)
	}
	for _, k := range []string{"retry_exceeded_err", "send_err"} {
		if gd[k] != 0 {
			t.Errorf("guest's %s moved by %d", k, gd[k])
		}
	}
	for _, k := range []string{"RetryExcErrs", "RNRRetryExcErrs"} {
		if u[k] != 0 {
			t.Errorf("uroce's %s is %d", k, u[k])
		}
	}
}
