package interop_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/internal/pcapfile"
	"github.com/uroce/uroce/tests/interop/lab"
)

// perftestPort is where perftest and the libibverbs examples exchange
// their QP details over TCP.
const perftestPort = 18515

// pairTimeout bounds one server/client run: a failure detector for stuck
// guests, generous because TCG guests share two cores with everything else.
const pairTimeout = 4 * time.Minute

// runPair starts cmd as the server on srv, waits until it listens, runs
// cmd plus srv's address on cli, and returns both results. Either side
// failing to exit 0 fails the test.
func runPair(t *testing.T, srv, cli *lab.Guest, cmd string) (server, client lab.Result) {
	t.Helper()
	return runPairCmds(t, srv, cli, cmd, cmd)
}

// runPairCmds is runPair with a command of each side's own: srvCmd on
// srv, cliCmd plus srv's address on cli.
func runPairCmds(t *testing.T, srv, cli *lab.Guest, srvCmd, cliCmd string) (server, client lab.Result) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), pairTimeout)
	defer cancel()
	sj, err := srv.Start(srvCmd)
	if err != nil {
		t.Fatal(err)
	}
	defer sj.Kill() // a server whose client never came
	if err := sj.WaitListen(ctx, perftestPort); err != nil {
		t.Fatal(err)
	}
	client, err = cli.Run(ctx, cliCmd+" "+srv.Addr.String())
	if err != nil {
		t.Fatal(err)
	}
	server, err = sj.Wait(ctx)
	if err != nil {
		// Most often the client failed first: say how.
		t.Fatalf("%v; the client on %s: %v\n%s\n%s", err, cli.Name, client.Err(), client.Stdout, client.Stderr)
	}
	if err := client.Err(); err != nil {
		t.Errorf("client on %s: %v", cli.Name, err)
	}
	if err := server.Err(); err != nil {
		t.Errorf("server on %s: %v", srv.Name, err)
	}
	if t.Failed() {
		t.FailNow()
	}
	return server, client
}

// counters reads the hw_counters of every guest.
func counters(t *testing.T, gs ...*lab.Guest) []lab.Counters {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs := make([]lab.Counters, len(gs))
	for i, g := range gs {
		c, err := g.Counters(ctx)
		if err != nil {
			t.Fatal(err)
		}
		cs[i] = c
	}
	return cs
}

// errorCounters are rxe hw_counters that only move when packets are lost,
// reordered, malformed or refused: on a clean bridge they stay put.
// (duplicate_request and completer_retry_err are left out: a TCG guest
// can be descheduled past the QP's ACK timeout, so rxe retransmits now
// and then even on a clean bridge, as the reference captures show.)
// Nor is rcvd_rnr_err: an RNR NAK is flow control, not a wire error.
var errorCounters = []string{"out_of_seq_request", "rcvd_seq_err", "retry_exceeded_err", "retry_rnr_exceeded_err", "send_err"}

// retransmitCounters move when rxe recovers from a lost packet.
var retransmitCounters = []string{"completer_retry_err", "rcvd_seq_err", "out_of_seq_request", "duplicate_request"}

func sum(c lab.Counters, names []string) uint64 {
	var n uint64
	for _, k := range names {
		n += c[k]
	}
	return n
}

// TestRxeToRxe boots two rxe guests and runs perftest and ibv_rc_pingpong
// between them, checking each run's reports, the guests' hw_counters and
// a capture of the bridge; then it drops 1 % and 5 % of RoCE packets with
// nftables and checks that rxe recovers.
func TestRxeToRxe(t *testing.T) {
	l := lab.New(t, lab.Config{})
	gs := l.Boot(lab.GuestConfig{}, lab.GuestConfig{})
	g1, g2 := gs[0], gs[1]

	// The commands are the reference captures' (../shared/testdata/rxe-captures),
	// with fewer iterations: TCG is slow.
	const n = 20
	cases := []perfCase{
		{"ib_write_lat", fmt.Sprintf("ib_write_lat -d rxe0 -x 1 -F -n %d -s 64", n), n, 64, true,
			[]bth.Opcode{bth.RCWriteOnly, bth.RCAcknowledge}},
		{"ib_read_lat", fmt.Sprintf("ib_read_lat -d rxe0 -x 1 -F -n %d -s 64", n), n, 64, false,
			[]bth.Opcode{bth.RCReadRequest, bth.RCReadResponseOnly}},
		{"ib_send_lat", fmt.Sprintf("ib_send_lat -d rxe0 -x 1 -F -n %d -s 64", n), n, 64, true,
			[]bth.Opcode{bth.RCSendOnly, bth.RCAcknowledge}},
		{"ib_atomic_lat", fmt.Sprintf("ib_atomic_lat -d rxe0 -x 1 -F -n %d", n), n, 8, false,
			[]bth.Opcode{bth.RCFetchAdd, bth.RCAtomicAcknowledge}},
		{"ib_write_bw", fmt.Sprintf("ib_write_bw -d rxe0 -x 1 -F -n %d -s 4096", n), n, 4096, true,
			[]bth.Opcode{bth.RCWriteFirst, bth.RCWriteMiddle, bth.RCWriteLast, bth.RCAcknowledge}},
		{"ibv_rc_pingpong", fmt.Sprintf("ibv_rc_pingpong -d rxe0 -g 1 -n %d -s 128", n), n, 0, true,
			[]bth.Opcode{bth.RCSendOnly, bth.RCAcknowledge}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := c.runClean(t, l, g1, g2)
			if s.MaxPayload > 1024 {
				t.Errorf("a %d-byte payload at link MTU 1500 (IB MTU 1024)", s.MaxPayload)
			}
		})
	}

	// 64 KiB messages are 64 packets at IB MTU 1024: 50 of them make
	// 3200 data packets, so even 1 % drops a few dozen.
	for _, pct := range []int{1, 5} {
		t.Run(fmt.Sprintf("drop%dpct/ib_write_bw", pct), func(t *testing.T) {
			testDrop(t, l, g1, g2, pct, 65536, 50)
		})
	}
}

// testDrop runs ib_write_bw from cli to srv while the bridge drops pct %
// of RoCE packets, and checks that it completes through retransmission.
func testDrop(t *testing.T, l *lab.Lab, srv, cli *lab.Guest, pct, size, iters int) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, err := l.DropRoCE(ctx, pct)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Remove(context.Background())
	before := counters(t, srv, cli)
	server, client := runPair(t, srv, cli, fmt.Sprintf("ib_write_bw -d rxe0 -x 1 -F -n %d -s %d", iters, size))
	after := counters(t, srv, cli)
	t.Logf("client (%s):\n%s", cli.Name, client.Stdout)
	checkReport(t, server, size, iters)
	checkReport(t, client, size, iters)
	dropped, err := d.Dropped(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ds, dc := nonZero(after[0].Sub(before[0])), nonZero(after[1].Sub(before[1]))
	t.Logf("nftables dropped %d RoCE packets; hw_counters moved: %s %v; %s %v", dropped, srv.Name, ds, cli.Name, dc)
	if dropped == 0 {
		t.Fatalf("nftables dropped nothing: the rule does not see the bridge's RoCE traffic")
	}
	if r := sum(ds, retransmitCounters) + sum(dc, retransmitCounters); r == 0 {
		t.Errorf("%d packets dropped, yet no rxe retransmission counter (%v) moved", dropped, retransmitCounters)
	}
	for _, k := range []string{"retry_exceeded_err", "send_err"} {
		if ds[k]+dc[k] != 0 {
			t.Errorf("%s moved by %d", k, ds[k]+dc[k])
		}
	}
}

// perfCase is one clean run of a perftest or libibverbs example program
// between two guests.
type perfCase struct {
	name  string
	cmd   string // the server's command; the client's adds the server's address
	iters int
	size  int // message size perftest reports; 0 for ibv_rc_pingpong
	// serverReports: the server prints a result table too (the passive
	// side of read and atomic tests prints none).
	serverReports bool
	want          []bth.Opcode // opcodes the capture must hold
}

// runClean runs the case with srv as server and cli as client on l's
// clean bridge and checks the reports, the counters and a capture.
func (c perfCase) runClean(t *testing.T, l *lab.Lab, srv, cli *lab.Guest) lab.RoCEStats {
	t.Helper()
	before := counters(t, srv, cli)
	capture := l.Capture(c.name)
	server, client := runPair(t, srv, cli, c.cmd)
	after := counters(t, srv, cli)
	frames, err := capture.Stop()
	if err != nil {
		t.Error(err)
	}
	t.Logf("client (%s):\n%s", cli.Name, client.Stdout)
	reports := []lab.Result{client}
	if c.serverReports {
		reports = append(reports, server)
	}
	for _, r := range reports {
		if c.size == 0 {
			if want := fmt.Sprintf("%d iters in", c.iters); !strings.Contains(r.Stdout, want) {
				t.Errorf("%q: output lacks %q:\n%s", r.Cmd, want, r.Stdout)
			}
			continue
		}
		checkReport(t, r, c.size, c.iters)
	}
	return checkCapture(t, frames, c.want, before, after)
}

// checkReport checks that perftest's output has a result table for the
// size and iteration count asked for.
func checkReport(t *testing.T, r lab.Result, size, iters int) {
	t.Helper()
	rep, err := lab.ParsePerftest(r.Stdout)
	if err != nil {
		t.Errorf("%q: %v\n%s", r.Cmd, err, r.Stdout)
		return
	}
	if rep.Bytes != size || rep.Iterations != iters {
		t.Errorf("%q: report says %d bytes × %d iterations, want %d × %d", r.Cmd, rep.Bytes, rep.Iterations, size, iters)
	}
}

// checkCapture checks a clean run's capture against the guests' counters:
// every RoCEv2 packet decodes and has a good ICRC, the expected opcodes
// are there, each guest received every packet the other sent (rxe counts
// a packet received only once it passed its ICRC and header checks), and
// the capture holds exactly the packets the guests counted as sent.
func checkCapture(t *testing.T, frames []pcapfile.Record, want []bth.Opcode, before, after []lab.Counters) lab.RoCEStats {
	t.Helper()
	s := lab.VerifyRoCE(frames)
	t.Logf("capture: %v", s)
	if err := s.Err(); err != nil {
		t.Error(err)
	}
	for _, op := range want {
		if s.Opcodes[op] == 0 {
			t.Errorf("no %v packet in the capture", op)
		}
	}
	d1, d2 := after[0].Sub(before[0]), after[1].Sub(before[1])
	t.Logf("hw_counters moved: g1 %v; g2 %v", nonZero(d1), nonZero(d2))
	for _, k := range errorCounters {
		if d1[k] != 0 || d2[k] != 0 {
			t.Errorf("%s moved on a clean bridge: g1 +%d, g2 +%d", k, d1[k], d2[k])
		}
	}
	if d1["rcvd_pkts"] != d2["sent_pkts"] || d2["rcvd_pkts"] != d1["sent_pkts"] {
		t.Errorf("packets lost between the guests: g1 sent %d, g2 received %d; g2 sent %d, g1 received %d",
			d1["sent_pkts"], d2["rcvd_pkts"], d2["sent_pkts"], d1["rcvd_pkts"])
	}
	if sent := int(d1["sent_pkts"] + d2["sent_pkts"]); sent != s.Packets {
		t.Errorf("the guests sent %d RoCE packets, the capture holds %d", sent, s.Packets)
	}
	return s
}

func nonZero(c lab.Counters) lab.Counters {
	out := lab.Counters{}
	for k, v := range c {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

// TestRxeToRxeJumbo checks the lab at link MTU 9000: rxe0 runs at IB MTU
// 4096 and a bandwidth test moves 4096-byte payloads across the bridge.
func TestRxeToRxeJumbo(t *testing.T) {
	l := lab.New(t, lab.Config{MTU: 9000})
	gs := l.Boot(lab.GuestConfig{}, lab.GuestConfig{})
	g1, g2 := gs[0], gs[1]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := g1.Run(ctx, "ibv_devinfo -d rxe0")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(r.Stdout, "active_mtu:\t\t4096") {
		t.Fatalf("rxe0 on a 9000-byte link is not at IB MTU 4096:\n%s", r.Stdout)
	}
	c := perfCase{"ib_write_bw", "ib_write_bw -d rxe0 -x 1 -F -n 20 -s 65536", 20, 65536, true,
		[]bth.Opcode{bth.RCWriteFirst, bth.RCWriteMiddle, bth.RCWriteLast, bth.RCAcknowledge}}
	if s := c.runClean(t, l, g1, g2); s.MaxPayload != 4096 {
		t.Errorf("largest payload %d bytes, want 4096 (IB MTU at link MTU 9000)", s.MaxPayload)
	}
}
