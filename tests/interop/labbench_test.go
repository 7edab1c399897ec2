package interop_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/uroce/uroce/internal/stats"
	"github.com/uroce/uroce/tests/interop/lab"
)

// benchCell is one row of the lab benchmark: a perftest test at one size,
// the column of its report that is the row's figure, and whether lower
// is better (latency) or higher (rates).
type benchCell struct {
	test   string // uroce-perf's subcommand; rxe runs "ib_"+test
	size   int
	iters  int
	column string // perftest's heading without its unit, e.g. "t_typical"
	unit   string
	lower  bool
}

// benchCells are the rows: latency at 64 B, message rate at 64 B and
// bandwidth at 64 KiB. The iteration counts are perftest's defaults
// (1000 for latency, 5000 for bandwidth) but 1000 at 64 KiB, which moves
// 64 MiB through two TCG guests.
var benchCells = []benchCell{
	{"write_lat", 64, 1000, "t_typical", "µs", true},
	{"write_bw", 64, 5000, "MsgRate", "Mpps", false},
	{"write_bw", 65536, 1000, "BW average", "MiB/s", false},
}

// TestLabBench sets uroce beside rxe on the same two emulated hosts: each
// row runs perftest between the guests' rxe0 (server on g2, client on
// g1), then uroce-perf on the udp backend between the same guests' eth0,
// with the same size and iterations, in one sitting. TCG inflates both
// sides, so only the ratio uroce÷rxe is a result. Rows alternate which
// stack goes first (rxe, uroce; uroce, rxe; ...), so that a load that
// drifts during the run falls on both.
//
// rdma_rxe holds UDP port 4791 while loaded (Guest.RemoveRxe), so the
// uroce runs go with rxe0 deleted and the module unloaded on both guests,
// and the rxe runs with it loaded again: each stack has the guests to
// itself.
//
// It is a benchmark, not a check, and runs only when asked:
//
//	UROCE_LABBENCH=1 go test -count=1 -run TestLabBench -v ./tests/interop
//
// UROCE_LABBENCH_ROUNDS=N runs every row N times and reports the median.
func TestLabBench(t *testing.T) {
	if os.Getenv("UROCE_LABBENCH") == "" {
		t.Skip("the lab benchmark (uroce beside rxe, two TCG guests, minutes) runs only with UROCE_LABBENCH=1")
	}
	rounds := 1
	if s := os.Getenv("UROCE_LABBENCH_ROUNDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("UROCE_LABBENCH_ROUNDS=%q: want a positive count", s)
		}
		rounds = n
	}
	l := lab.New(t, lab.Config{})
	bin := buildStatic(t, "github.com/uroce/uroce/cmd/uroce-perf")
	gs := l.Boot(lab.GuestConfig{}, lab.GuestConfig{})
	cli, srv := gs[0], gs[1]

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, g := range gs {
		p, err := g.Put(bin, "uroce-perf")
		if err != nil {
			t.Fatal(err)
		}
		// From the guest's tmpfs: no 9p reads while it runs.
		if r, err := g.Run(ctx, "cp "+p+" /tmp/uroce-perf"); err != nil || r.Err() != nil {
			t.Fatalf("%s: copy uroce-perf: %v %v", g.Name, err, r.Err())
		}
	}

	rxeUp := true // as the guests boot
	setRxe := func(up bool) {
		t.Helper()
		if up == rxeUp {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, g := range gs {
			var err error
			if up {
				err = g.AddRxe(ctx)
			} else {
				err = g.RemoveRxe(ctx)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		rxeUp = up
	}

	rxe := make([][]float64, len(benchCells))
	uroce := make([][]float64, len(benchCells))
	turn := 0
	for r := 0; r < rounds; r++ {
		for i, c := range benchCells {
			rxeFirst := turn%2 == 0
			turn++
			for _, onRxe := range []bool{rxeFirst, !rxeFirst} {
				setRxe(onRxe)
				v := c.run(t, srv, cli, onRxe)
				if onRxe {
					rxe[i] = append(rxe[i], v)
				} else {
					uroce[i] = append(uroce[i], v)
				}
			}
		}
	}
	setRxe(true) // leave the guests as booted

	var b strings.Builder
	fmt.Fprintf(&b, "uroce beside rxe, two TCG guests, link MTU %d (IB MTU 1024), client on %s, server on %s; ", l.MTU, cli.Name, srv.Name)
	if rounds == 1 {
		b.WriteString("one run per cell:\n\n")
	} else {
		fmt.Fprintf(&b, "median of %d runs per cell:\n\n", rounds)
	}
	b.WriteString("| test | size | iterations | rxe↔rxe | uroce↔uroce | uroce÷rxe | better |\n")
	b.WriteString("|---|---|---|---|---|---|---|\n")
	for i, c := range benchCells {
		x, u := stats.Median(rxe[i]), stats.Median(uroce[i])
		better := "higher"
		if c.lower {
			better = "lower"
		}
		fmt.Fprintf(&b, "| %s %s (%s) | %d B | %d | %.4g | %.4g | %.2f | %s |\n",
			c.test, c.column, c.unit, c.size, c.iters, x, u, u/x, better)
	}
	t.Logf("lab benchmark:\n%s", b.String())
}

// run runs the cell once between srv and cli, on rxe0 with perftest or on
// eth0 with uroce-perf, checks both sides' exit status and reports, and
// returns the client's figure.
func (c benchCell) run(t *testing.T, srv, cli *lab.Guest, onRxe bool) float64 {
	t.Helper()
	stack, cmd := "uroce", fmt.Sprintf("/tmp/uroce-perf %s --link udp -d eth0 -F -n %d -s %d -stats --timeout 3m", c.test, c.iters, c.size)
	if onRxe {
		stack, cmd = "rxe", fmt.Sprintf("ib_%s -d rxe0 -x 1 -F -n %d -s %d", c.test, c.iters, c.size)
	}
	var before []lab.Counters
	if onRxe {
		before = counters(t, srv, cli)
	}
	start := time.Now()
	server, client := runPair(t, srv, cli, cmd)
	took := time.Since(start)
	checkReport(t, server, c.size, c.iters)
	checkReport(t, client, c.size, c.iters)
	rep, err := lab.ParsePerftest(client.Stdout)
	if err != nil {
		t.Fatalf("%q: %v", client.Cmd, err)
	}
	// perftest and uroce-perf head their bandwidth "[MB/sec]" (or
	// "[Gb/sec]"), both dividing bytes by 2^20 (perftest's MB).
	v, ok := math.NaN(), false
	for k, x := range rep.Values {
		if strings.HasPrefix(k, c.column+"[") {
			v, ok = x, true
		}
	}
	if !ok || math.IsNaN(v) || v <= 0 {
		t.Fatalf("%q: no usable %q in its report (%v)", client.Cmd, c.column, rep.Values)
	}
	// The recoveries a descheduled guest causes, for the log: rxe's
	// hw_counters, uroce's -stats.
	var moved string
	if onRxe {
		after := counters(t, srv, cli)
		moved = fmt.Sprintf("hw_counters moved: %s %v; %s %v", srv.Name, nonZero(after[0].Sub(before[0])), cli.Name, nonZero(after[1].Sub(before[1])))
	} else {
		moved = fmt.Sprintf("counters: %s %v; %s %v", srv.Name, uroceCounters(t, server.Stdout), cli.Name, uroceCounters(t, client.Stdout))
	}
	t.Logf("%s %s %d B: %s %g (%.1fs)\n%s\n%s", stack, c.test, c.size, c.column, v, took.Seconds(), client.Stdout, moved)
	return v
}
