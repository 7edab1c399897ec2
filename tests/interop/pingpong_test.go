package interop_test

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/tests/interop/lab"
)

// buildPingpong builds examples/pingpong for the Peer namespace to run.
func buildPingpong(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "pingpong")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/uroce/uroce/examples/pingpong").CombinedOutput()
	if err != nil {
		t.Fatalf("go build examples/pingpong: %v\n%s", err, out)
	}
	return bin
}

// uroceCounters reads the "counters: {...}" line pingpong -stats prints.
func uroceCounters(t *testing.T, out string) map[string]uint64 {
	t.Helper()
	i := strings.Index(out, "counters: {")
	if i < 0 {
		t.Fatalf("no counters in uroce's output:\n%s", out)
	}
	line, _, _ := strings.Cut(out[i:], "\n")
	c := map[string]uint64{}
	for _, m := range regexp.MustCompile(`(\w+):(\d+)`).FindAllStringSubmatch(line, -1) {
		v, _ := strconv.ParseUint(m[2], 10, 64)
		c[m[1]] = v
	}
	return c
}

// uroceErrorCounters are the uroce QP counters that only move when a
// packet is lost, refused or out of order.
var uroceErrorCounters = []string{"SeqNAKsRcvd", "SeqNAKsSent", "ErrNAKsSent", "RetryExcErrs", "RNRRetryExcErrs"}

// pingpongRun is one ibv_rc_pingpong run against uroce's pingpong.
type pingpongRun struct {
	uroceClient bool // uroce is the client, the guest the server
	size, iters int
	drop        int // percent of RoCE packets nftables drops; 0 for a clean run
}

func (r pingpongRun) String() string {
	side := "uroce-server"
	if r.uroceClient {
		side = "uroce-client"
	}
	return fmt.Sprintf("%s/s%d", side, r.size)
}

// pingpongResult is what both sides printed and how far the guest's
// counters moved.
type pingpongResult struct {
	guest, uroce string
	guestDelta   lab.Counters
	uroceCount   map[string]uint64
	stats        lab.RoCEStats
}

// run runs r between uroce's pingpong in the lab's Peer namespace and
// ibv_rc_pingpong on g, capturing the bridge, and checks both sides' exit
// status and reports.
func (r pingpongRun) run(t *testing.T, l *lab.Lab, g *lab.Guest, bin string) pingpongResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), pairTimeout)
	defer cancel()
	guestCmd := fmt.Sprintf("ibv_rc_pingpong -d rxe0 -g 1 -n %d -s %d", r.iters, r.size)
	uroceArgs := []string{"-d", l.PeerLink.Name, "-n", strconv.Itoa(r.iters), "-s", strconv.Itoa(r.size), "-stats"}

	before := counters(t, g)[0]
	capture := l.Capture(strings.ReplaceAll(r.String(), "/", "-"))
	var guest lab.Result
	var uroce []byte
	var uroceErr error
	if r.uroceClient {
		job, err := g.Start(guestCmd)
		if err != nil {
			t.Fatal(err)
		}
		defer job.Kill()
		if err := g.WaitListen(ctx, perftestPort); err != nil {
			t.Fatal(err)
		}
		uroce, uroceErr = l.PeerCommand(ctx, bin, append(uroceArgs, g.Addr.String())...).CombinedOutput()
		if guest, err = job.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	} else {
		var out strings.Builder
		cmd := l.PeerCommand(ctx, bin, uroceArgs...)
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waited := false
		defer func() {
			if !waited {
				cmd.Process.Kill()
				cmd.Wait()
			}
		}()
		if err := waitPeerListen(ctx, l, perftestPort); err != nil {
			t.Fatal(err)
		}
		var err error
		if guest, err = g.Run(ctx, guestCmd+" "+lab.PeerAddr.Addr().String()); err != nil {
			t.Fatal(err)
		}
		uroceErr = cmd.Wait()
		waited = true
		uroce = []byte(out.String())
	}
	after := counters(t, g)[0]
	frames, err := capture.Stop()
	if err != nil {
		t.Error(err)
	}
	res := pingpongResult{guest: guest.Stdout, uroce: string(uroce), guestDelta: after.Sub(before)}
	t.Logf("ibv_rc_pingpong (%s):\n%s%s", g.Name, guest.Stdout, guest.Stderr)
	t.Logf("uroce pingpong:\n%s", uroce)
	if err := guest.Err(); err != nil {
		t.Errorf("ibv_rc_pingpong: %v", err)
	}
	if uroceErr != nil {
		t.Errorf("uroce pingpong: %v", uroceErr)
	}
	iters := fmt.Sprintf("%d iters in", r.iters)
	if !strings.Contains(guest.Stdout, iters) {
		t.Errorf("ibv_rc_pingpong's output lacks %q", iters)
	}
	for _, want := range []string{iters, fmt.Sprintf("%d bytes in", 2*r.size*r.iters)} {
		if !strings.Contains(res.uroce, want) {
			t.Errorf("uroce's output lacks %q", want)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	res.uroceCount = uroceCounters(t, res.uroce)
	res.stats = lab.VerifyRoCE(frames)
	t.Logf("capture: %v", res.stats)
	t.Logf("guest hw_counters moved: %v", nonZero(res.guestDelta))
	if err := res.stats.Err(); err != nil {
		t.Error(err)
	}
	if res.stats.MaxPayload > 1024 {
		t.Errorf("a %d-byte payload at IB MTU 1024", res.stats.MaxPayload)
	}
	want := []bth.Opcode{bth.RCSendOnly, bth.RCAcknowledge}
	if r.size > 1024 {
		want = []bth.Opcode{bth.RCSendFirst, bth.RCSendMiddle, bth.RCSendLast, bth.RCAcknowledge}
	}
	for _, op := range want {
		if res.stats.Opcodes[op] == 0 {
			t.Errorf("no %v packet in the capture", op)
		}
	}
	return res
}

// checkClean checks a run on a clean bridge: no error counter moved on
// either side, each side received every packet the other sent, and the
// capture holds exactly those packets.
func (res pingpongResult) checkClean(t *testing.T) {
	t.Helper()
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
	if d["rcvd_pkts"] != u["TxPackets"] || u["RxPackets"] != d["sent_pkts"] {
		t.Errorf("packets lost: uroce sent %d, the guest received %d; the guest sent %d, uroce received %d",
			u["TxPackets"], d["rcvd_pkts"], d["sent_pkts"], u["RxPackets"])
	}
	if sent := d["sent_pkts"] + u["TxPackets"]; int(sent) != res.stats.Packets {
		t.Errorf("the two sides sent %d RoCE packets, the capture holds %d", sent, res.stats.Packets)
	}
}

// waitPeerListen waits until something in the Peer namespace listens on
// TCP port (probing with a connection would take the server's one accept).
func waitPeerListen(ctx context.Context, l *lab.Lab, port int) error {
	for {
		out, err := l.PeerCommand(ctx, "ss", "-Hltn", fmt.Sprintf("sport = :%d", port)).Output()
		if err == nil && len(strings.TrimSpace(string(out))) > 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("nothing listens on port %d in the peer namespace: %w", port, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestPingpongRxe runs uroce's examples/pingpong against ibv_rc_pingpong
// on an rxe guest, each side as client and as server, at message sizes of
// one packet and of several, checking both programs' exit status and
// reports, a capture of the bridge whose every RoCE packet must verify,
// and both sides' counters.
func TestPingpongRxe(t *testing.T) {
	l := lab.New(t, lab.Config{})
	bin := buildPingpong(t)
	g := l.Boot(lab.GuestConfig{})[0]
	const iters = 50
	for _, size := range []int{1, 1024, 4096} {
		for _, uroceClient := range []bool{true, false} {
			r := pingpongRun{uroceClient: uroceClient, size: size, iters: iters}
			t.Run(r.String(), func(t *testing.T) {
				r.run(t, l, g, bin).checkClean(t)
			})
		}
	}
}
