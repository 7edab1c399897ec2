package interop_test

import (
	"testing"
	"time"

	"github.com/uroce/uroce/tests/interop/lab"
)

// TestTrixieQuick is the quick set on the lab's Debian 13 flavour (kernel
// 6.12, rdma-core 56, perftest 25.01) that every run of the suite makes:
// one guest, and a few cells of each kind the suite has on Debian 12,
// each both ways with the same checks as there: ibv_rc_pingpong at one
// packet and at four; ib_write_lat at one packet and at four, ib_read_lat,
// ib_atomic_lat, ib_write_bw, ib_read_bw and ib_send_bw; ib_write_bw
// with 1 % of RoCE packets dropped; ib_send_lat over rdma_cm (-R);
// ATOMIC WRITE against rxe, which Debian 12's rxe lacks (flush_test.go);
// memory windows with SEND with invalidate (mw_test.go); and UC SENDs
// and WRITEs with immediate data, clean, under 1 % loss and with one
// chosen packet dropped (ucimm_test.go): 37 cells, the UC ones about
// 35 s. The whole suite runs on trixie with UROCE_LAB_FLAVOUR=trixie
// (README.md).
func TestTrixieQuick(t *testing.T) {
	start := time.Now()
	l := lab.New(t, lab.Config{Flavour: lab.Trixie})
	perf := buildOnce(t, "github.com/uroce/uroce/cmd/uroce-perf")
	pingpong := buildExample(t, "pingpong")
	g := l.Boot(lab.GuestConfig{})[0]
	growTapQueues(t, l)
	const ibMTU = 1024
	both := []bool{true, false}

	for _, size := range []int{1, 4096} {
		for _, uroceClient := range both {
			r := pingpongRun{uroceClient: uroceClient, size: size, iters: 50}
			t.Run("pingpong/"+r.String(), func(t *testing.T) {
				res := r.run(t, l, g, pingpong)
				res.check(t)
				res.checkClean(t)
			})
		}
	}
	for _, c := range []perfCell{
		{test: "write_lat", size: 2},
		{test: "write_lat", size: 4096},
		{test: "read_lat", size: 2},
		{test: "atomic_lat", size: 8},
		{test: "write_bw", size: 65536},
		{test: "read_bw", size: 65536},
		{test: "send_bw", size: 4096},
	} {
		for _, uroceClient := range both {
			c.iters, c.uroceClient = perfIters, uroceClient
			t.Run("perf/"+c.String(), func(t *testing.T) {
				res := c.run(t, l, g, perf)
				res.check(t)
				res.checkClean(t, ibMTU)
			})
		}
	}
	for _, uroceClient := range both {
		c := perfCell{test: "write_bw", size: dropSize, iters: max(20, dropPackets*ibMTU/dropSize), uroceClient: uroceClient, drop: 1}
		t.Run("perf/drop1pct/"+c.String(), func(t *testing.T) { testPerfDrop(t, l, g, perf, c) })
	}
	for _, uroceClient := range both {
		c := perfCell{test: "send_lat", size: 4096, iters: perfIters, uroceClient: uroceClient}
		t.Run("rdmacm/"+c.String(), func(t *testing.T) {
			res := runRDMACMCell(t, l, g, perf, c)
			res.check(t)
			res.checkRDMACM(t, ibMTU)
		})
	}
	t.Run("flush", func(t *testing.T) { testFlushCells(t, l, g) })
	t.Run("mw", func(t *testing.T) { testMWCells(t, l, g) })
	t.Run("ucimm", func(t *testing.T) { testUCImmCells(t, l, g) })
	t.Logf("trixie quick set in %.0fs (boot included)", time.Since(start).Seconds())
}
