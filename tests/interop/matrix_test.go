package interop_test

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/uroce/uroce/tests/interop/lab"
)

// update rewrites the matrix tables in README.md from the run.
var update = flag.Bool("update", false, "rewrite the uroce-perf matrix tables in README.md from this run")

const readme = "README.md"

// The matrix: every perftest test, at each size (atomic_lat moves its
// fixed 8 bytes), each side of it uroce, on a clean bridge; then write_bw
// and read_bw with RoCE packets dropped.
var (
	perfTests  = []string{"write_lat", "read_lat", "send_lat", "atomic_lat", "write_bw", "read_bw", "send_bw"}
	perfSizes  = []int{2, 1024, 4096, 65536}
	perfDrops  = []int{1, 5}
	dropTests  = []string{"write_bw", "read_bw"}
	tableSizes = []int{2, 8, 1024, 4096, 65536}
)

// perfIters keeps TCG guests' runs short; the checks are of sizes,
// iterations, exit status, counters and packets, not of speed.
const perfIters = 10

// dropSize and dropPackets: drop runs move 64 KiB messages, enough of them
// for about dropPackets data packets at the IB MTU, so that even 1 % drops
// a dozen or so and both sides have something to recover from.
const dropSize, dropPackets = 65536, 1280

// TestPerfRxe is the uroce-perf interop matrix at link MTU 1500 (IB MTU
// 1024) against perftest on one rxe guest. Its results are the first
// table in README.md (go test -run 'TestPerfRxe$' -update rewrites it).
func TestPerfRxe(t *testing.T) { testPerfMatrix(t, 1500, 1024) }

// TestPerfRxeJumbo is the matrix at link MTU 9000 (IB MTU 4096).
func TestPerfRxeJumbo(t *testing.T) { testPerfMatrix(t, 9000, 4096) }

// testPerfMatrix boots one guest and runs every cell of the matrix in it,
// one after the other, as subtests.
func testPerfMatrix(t *testing.T, mtu, ibMTU int) {
	start := time.Now()
	l := lab.New(t, lab.Config{MTU: mtu})
	bin := buildOnce(t, "github.com/uroce/uroce/cmd/uroce-perf")
	g := l.Boot(lab.GuestConfig{})[0]
	growTapQueues(t, l)
	m := matrix{mtu: mtu, ibMTU: ibMTU, cells: map[string]bool{}}
	for _, test := range perfTests {
		sizes := perfSizes
		if test == "atomic_lat" {
			sizes = []int{8}
		}
		for _, size := range sizes {
			for _, uroceClient := range []bool{true, false} {
				c := perfCell{test: test, size: size, iters: perfIters, uroceClient: uroceClient}
				m.cells[m.key(c)] = t.Run(c.String(), func(t *testing.T) {
					res := c.run(t, l, g, bin)
					res.check(t)
					res.checkClean(t, ibMTU)
				})
			}
		}
	}
	for _, pct := range perfDrops {
		for _, test := range dropTests {
			for _, uroceClient := range []bool{true, false} {
				c := perfCell{test: test, size: dropSize, iters: max(20, dropPackets*ibMTU/dropSize), uroceClient: uroceClient, drop: pct}
				m.cells[m.key(c)] = t.Run(fmt.Sprintf("drop%dpct/%v", pct, c), func(t *testing.T) {
					testPerfDrop(t, l, g, bin, c)
				})
			}
		}
	}
	t.Logf("matrix at MTU %d: %d cells in %.0fs (boot included)", mtu, len(m.cells), time.Since(start).Seconds())
	m.sync(t)
}

// matrix collects which cells passed at one MTU.
type matrix struct {
	mtu, ibMTU int
	cells      map[string]bool // by key
}

func (m matrix) key(c perfCell) string {
	return fmt.Sprintf("%s/%d/%s/%d", c.test, c.size, c.side(), c.drop)
}

// want is the number of cells a full run has.
func (m matrix) want() int {
	return (len(perfTests)-1)*len(perfSizes)*2 + 2 + len(perfDrops)*len(dropTests)*2
}

// table renders the results as markdown: a row per test and side of
// uroce, a column per size.
func (m matrix) table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\nLink MTU %d (IB MTU %d), %d iterations per clean cell:\n\n", m.begin(), m.mtu, m.ibMTU, perfIters)
	b.WriteString("| perftest on rxe | uroce-perf |")
	for _, s := range tableSizes {
		fmt.Fprintf(&b, " %d B |", s)
	}
	b.WriteString("\n|---|---|" + strings.Repeat("---|", len(tableSizes)) + "\n")
	row := func(label string, uroceClient bool, drop int, test string) {
		side := "client"
		if !uroceClient {
			side = "server"
		}
		fmt.Fprintf(&b, "| %s | %s |", label, side)
		for _, s := range tableSizes {
			v, ok := m.cells[m.key(perfCell{test: test, size: s, uroceClient: uroceClient, drop: drop})]
			b.WriteString(cellMark(v, ok))
		}
		b.WriteString("\n")
	}
	for _, test := range perfTests {
		for _, uc := range []bool{true, false} {
			row("ib_"+test, uc, 0, test)
		}
	}
	for _, pct := range perfDrops {
		for _, test := range dropTests {
			for _, uc := range []bool{true, false} {
				row(fmt.Sprintf("ib_%s, %d %% of RoCE packets dropped", test, pct), uc, pct, test)
			}
		}
	}
	b.WriteString(m.end())
	return b.String()
}

func (m matrix) begin() string {
	return fmt.Sprintf("<!-- uroce-perf matrix, MTU %d: written by the test with -update; do not edit -->", m.mtu)
}

func (m matrix) end() string {
	return fmt.Sprintf("<!-- end of the uroce-perf matrix, MTU %d -->", m.mtu)
}

// sync checks README.md's table against the run, or with -update rewrites
// it. A run of some cells only (-run with a subtest pattern) checks
// nothing against README.md.
func (m matrix) sync(t *testing.T) {
	syncTable(t, fmt.Sprintf("matrix for MTU %d", m.mtu), m.begin(), m.end(), m.table, len(m.cells), m.want())
}

// cellMark is a table cell: the cell passed (v) or failed, or did not run
// (!ok).
func cellMark(v, ok bool) string {
	switch {
	case !ok:
		return " — |"
	case v:
		return " pass |"
	default:
		return " FAIL |"
	}
}

// syncTable checks the part of README.md from begin to end, the markers
// included, against table, or with -update rewrites it; what names the
// table in messages. A run of fewer than all the cells (ran < want, -run
// with a subtest pattern) compares nothing.
func syncTable(t *testing.T, what, begin, end string, table func() string, ran, want int) {
	t.Helper()
	if ran != want {
		t.Logf("%d of %d cells ran: %s not compared", ran, want, readme)
		return
	}
	b, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i < 0 || j < i {
		t.Fatalf("%s has no %s between %q and %q", readme, what, begin, end)
	}
	got, tab := doc[i:j+len(end)], table()
	if got == tab {
		return
	}
	if !*update {
		t.Errorf("%s's %s differs from this run's (go test -run %s -update rewrites it):\n%s", readme, what, t.Name(), tab)
		return
	}
	// The tables are Debian 12's (the default flavour); another flavour
	// is checked against them but does not rewrite them.
	if f, err := lab.DefaultFlavour(); err != nil || f != lab.Bookworm {
		t.Fatalf("-update rewrites the %s tables, which are of the %s flavour; this run is %s=%s", readme, lab.Bookworm, lab.FlavourEnv, f)
	}
	if err := os.WriteFile(readme, []byte(doc[:i]+tab+doc[j+len(end):]), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %s rewritten", readme, what)
}
