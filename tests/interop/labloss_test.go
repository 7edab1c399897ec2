package interop_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/uroce/uroce/tests/interop/lab"
)

// lossRun is one way of running a latency cell under loss: which packets
// the bridge drops and how uroce retransmits.
type lossRun struct {
	name  string
	drop  string   // "", "both" or "uroce" (only uroce's requests)
	flags []string // uroce-perf's retransmission flags
}

var lossRuns = []lossRun{
	{"clean", "", nil},
	{"both ways, IBA timer", "both", []string{"--fixed_timeout"}},
	{"both ways, adaptive", "both", nil},
	{"uroce's requests, IBA timer", "uroce", []string{"--fixed_timeout"}},
	{"uroce's requests, adaptive", "uroce", nil},
}

// TestLabLoss measures what loss does to the latency tail against rxe:
// send_lat at 64 B and write_lat at 2000 B, with uroce as the client and
// as the server, while the bridge drops a share of the RoCE packets in
// both directions, or of uroce's requests only. Each row runs with the
// IBA local ACK timer alone (--fixed_timeout, what rxe does) and with
// adaptive retransmission (uroce's default), and reports uroce-perf's
// t_typical, t_99 and t_max and t_max over the clean run's t_typical.
// Packets rxe sends and uroce's ACKs of them, when dropped, wait out
// rxe's own timer (perftest's -u 14, 67 ms) whatever uroce does; the
// requests-only rows leave them out.
//
// It is a benchmark, not a check, and runs only when asked:
//
//	UROCE_LABLOSS=1 go test -count=1 -run TestLabLoss -v ./tests/interop
//
// UROCE_LABLOSS_PCT sets the drop percentage (default 2).
func TestLabLoss(t *testing.T) {
	pct, l, g := labLossGuest(t)
	bin := buildOnce(t, "github.com/uroce/uroce/cmd/uroce-perf")

	var b strings.Builder
	fmt.Fprintf(&b, "uroce-perf against perftest on rxe (one TCG guest), %d %% of RoCE packets dropped on the bridge:\n\n", pct)
	b.WriteString("| test | uroce | drop | retransmission | t_typical µs | t_99 µs | t_max µs | t_max ÷ clean t_typical | dropped | uroce retransmits | uroce timeouts |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, cell := range []struct {
		test string
		size int
	}{{"send_lat", 64}, {"write_lat", 2000}} {
		for _, client := range []bool{true, false} {
			var clean float64
			for _, r := range lossRuns {
				c := perfCell{test: cell.test, size: cell.size, iters: 1000, uroceClient: client, args: r.flags}
				typ, p99, tmax, dropped, u := lossCell(t, l, g, bin, c, r, pct)
				if r.drop == "" {
					clean = typ
				}
				fmt.Fprintf(&b, "| %s %d B | %s | %s | %s | %.1f | %.0f | %.0f | %.0f | %d | %d | %d |\n",
					cell.test, cell.size, c.side(), r.drop, r.name, typ, p99, tmax, tmax/clean, dropped, u["Retransmits"], u["Timeouts"])
			}
		}
	}
	t.Logf("lab loss benchmark:\n%s", b.String())
}

// labLossGuest skips unless UROCE_LABLOSS is set, and boots the lab loss
// benchmarks' one rxe guest; it returns their drop percentage,
// UROCE_LABLOSS_PCT (default 2).
func labLossGuest(t *testing.T) (int, *lab.Lab, *lab.Guest) {
	if os.Getenv("UROCE_LABLOSS") == "" {
		t.Skip("the lab loss benchmark (uroce against rxe under loss, a TCG guest, minutes) runs only with UROCE_LABLOSS=1")
	}
	pct := 2
	if s := os.Getenv("UROCE_LABLOSS_PCT"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 50 {
			t.Fatalf("UROCE_LABLOSS_PCT=%q: want a percentage from 1 to 50", s)
		}
		pct = n
	}
	l := lab.New(t, lab.Config{})
	g := l.Boot(lab.GuestConfig{})[0]
	growTapQueues(t, l)
	return pct, l, g
}

// TestLabLossRping times rping -C 200 -S 1000 (SEND, RDMA READ and RDMA
// WRITE per ping, each validated) between uroce's examples/rping and
// rping on rxe, uroce as client and as server, clean and while the bridge
// drops a share of the RoCE packets both ways, or of uroce's requests
// only: the whole run's time against the clean run's (issue 13 asks for
// at most 3x at 2 %). Packets rxe sends and uroce's ACKs of them, when
// dropped, wait out rxe's own fixed timer whatever uroce does.
//
//	UROCE_LABLOSS=1 go test -count=1 -run TestLabLossRping -v ./tests/interop
func TestLabLossRping(t *testing.T) {
	pct, l, g := labLossGuest(t)
	bin := buildExample(t, "rping")
	const count, size = 200, 1000
	peer := lab.PeerAddr.Addr().String()
	var b strings.Builder
	fmt.Fprintf(&b, "rping -C %d -S %d against rping on rxe (one TCG guest), %d %% of RoCE packets dropped on the bridge:\n\n", count, size, pct)
	b.WriteString("| uroce | drop | seconds | ÷ clean | dropped |\n|---|---|---|---|---|\n")
	for _, uroceClient := range []bool{true, false} {
		name := "uroce-server"
		if uroceClient {
			name = "uroce-client"
		}
		var clean time.Duration
		for _, drop := range []string{"", "both", "uroce"} {
			f := facing{prog: "rping", bin: bin, uroceClient: uroceClient, cmPort: rpingPort, uroceReady: "listening on port"}
			if uroceClient {
				f.guestCmd = fmt.Sprintf("rping -s -a %v -V -C %d -S %d", g.Addr, count, size)
				f.uroceArgs = []string{"-c", "-d", "-timeout", "4m", "-I", peer, "-a", g.Addr.String(), "-V", "-C", fmt.Sprint(count), "-S", fmt.Sprint(size)}
			} else {
				f.guestCmd = fmt.Sprintf("rping -c -a %s -V -C %d -S %d", peer, count, size)
				f.uroceArgs = []string{"-s", "-d", "-timeout", "4m", "-a", peer, "-S", fmt.Sprint(size)}
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			var d *lab.Dropper
			var err error
			switch drop {
			case "both":
				d, err = l.DropRoCE(ctx, pct)
			case "uroce":
				d, err = l.DropRoCERequestsFrom(ctx, pct, lab.PeerAddr.Addr())
			}
			if err != nil {
				t.Fatal(err)
			}
			cancel()
			start := time.Now()
			res := f.run(t, l, g)
			took := time.Since(start)
			// A context of its own: the run may outlast the first.
			ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
			var dropped uint64
			if d != nil {
				if dropped, err = d.Dropped(ctx); err != nil {
					t.Fatal(err)
				}
				if err := d.Remove(ctx); err != nil {
					t.Fatal(err)
				}
			}
			cancel()
			res.checkEnds(t, f)
			if strings.Contains(res.guest.Stderr+res.uroce, "data mismatch") {
				t.Errorf("%s, drop %q: validation failed", name, drop)
			}
			if drop == "" {
				clean = took
			}
			fmt.Fprintf(&b, "| %s | %s | %.1f | %.1f | %d |\n", name, drop, took.Seconds(), took.Seconds()/clean.Seconds(), dropped)
		}
	}
	t.Log(b.String())
}

// lossCell runs c under r and returns uroce-perf's t_typical, t_99 and
// t_max, the packets the bridge dropped and uroce's counters.
func lossCell(t *testing.T, l *lab.Lab, g *lab.Guest, bin string, c perfCell, r lossRun, pct int) (typ, p99, tmax float64, dropped uint64, u map[string]uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var d *lab.Dropper
	var err error
	switch r.drop {
	case "both":
		d, err = l.DropRoCE(ctx, pct)
	case "uroce":
		d, err = l.DropRoCERequestsFrom(ctx, pct, lab.PeerAddr.Addr())
	}
	if err != nil {
		t.Fatal(err)
	}
	res := c.run(t, l, g, bin)
	if d != nil {
		if dropped, err = d.Dropped(ctx); err != nil {
			t.Fatal(err)
		}
		if err := d.Remove(ctx); err != nil {
			t.Fatal(err)
		}
	}
	res.check(t)
	rep, err := lab.ParsePerftest(res.uroce.Stdout)
	if err != nil {
		t.Fatalf("%q: %v", res.uroce.Cmd, err)
	}
	typ, p99, tmax = rep.Values["t_typical[usec]"], rep.Values["99% percentile[usec]"], rep.Values["t_max[usec]"]
	if typ <= 0 || tmax <= 0 || p99 <= 0 {
		t.Fatalf("%q: no t_typical, t_99 or t_max in its report (%v)", res.uroce.Cmd, rep.Values)
	}
	return typ, p99, tmax, dropped, res.uroceCount
}
