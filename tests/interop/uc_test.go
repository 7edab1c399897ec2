package interop_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/internal/pcapfile"
	"github.com/uroce/uroce/tests/interop/lab"
)

// ucOpcodes are the UC opcodes of a message of size bytes at the IB MTU:
// ONLY, or FIRST, MIDDLE (from three packets on) and LAST.
func ucOpcodes(send bool, size, ibMTU int) []bth.Opcode {
	only, first, middle, last := bth.UCWriteOnly, bth.UCWriteFirst, bth.UCWriteMiddle, bth.UCWriteLast
	if send {
		only, first, middle, last = bth.UCSendOnly, bth.UCSendFirst, bth.UCSendMiddle, bth.UCSendLast
	}
	switch n := (size + ibMTU - 1) / ibMTU; {
	case n == 1:
		return []bth.Opcode{only}
	case n == 2:
		return []bth.Opcode{first, last}
	}
	return []bth.Opcode{first, middle, last}
}

// checkUCCapture checks a clean UC run's capture: every packet verifies
// and is UC, the message's opcodes are all there, and no packet is an
// acknowledgement or of another service (UC has no ACKs, IBA 9.8.2).
func checkUCCapture(t *testing.T, stats lab.RoCEStats, want []bth.Opcode) {
	t.Helper()
	if err := stats.Err(); err != nil {
		t.Error(err)
	}
	for _, op := range want {
		if stats.Opcodes[op] == 0 {
			t.Errorf("no %v packet in the capture", op)
		}
	}
	for op, n := range stats.Opcodes {
		if op.Service() != bth.ServiceUC {
			t.Errorf("%d %v packets in a UC run", n, op)
		}
	}
}

// checkUCCounters checks a clean UC run's counters: no error counter
// moved on either side, each side received every packet the other sent
// (nothing is ever sent twice), and the capture holds exactly those.
func checkUCCounters(t *testing.T, d lab.Counters, u map[string]uint64, captured int) {
	t.Helper()
	for _, k := range errorCounters {
		if d[k] != 0 {
			t.Errorf("guest's %s moved by %d on a clean bridge", k, d[k])
		}
	}
	for _, k := range append(uroceErrorCounters, "Dropped", "Retransmits") {
		if u[k] != 0 {
			t.Errorf("uroce's %s is %d on a clean bridge", k, u[k])
		}
	}
	if d["rcvd_pkts"] != u["TxPackets"] || u["RxPackets"] != d["sent_pkts"] {
		t.Errorf("packets lost: uroce sent %d, the guest received %d; the guest sent %d, uroce received %d",
			u["TxPackets"], d["rcvd_pkts"], d["sent_pkts"], u["RxPackets"])
	}
	if sent := d["sent_pkts"] + u["TxPackets"]; int(sent) != captured {
		t.Errorf("the two sides sent %d RoCE packets, the capture holds %d", sent, captured)
	}
}

// checkUCSendBytes checks that every UC SEND payload in frames is all b.
func checkUCSendBytes(t *testing.T, frames []pcapfile.Record, b byte) {
	t.Helper()
	n := 0
	for i, r := range frames {
		var f bth.Frame
		if f.Decode(r.Data) != nil || f.Opcode().Service() != bth.ServiceUC || !f.Opcode().Has(bth.Send) {
			continue
		}
		n++
		for j, c := range f.Payload() {
			if c != b {
				t.Errorf("frame %d: %v PSN %d: payload byte %d is %#x, want %#x", i+1, f.Opcode(), f.BTH().PSN(), j, c, b)
				return
			}
		}
	}
	if n == 0 {
		t.Error("no UC SEND payload in the capture")
	}
}

// TestUCPingpongRxe runs uroce's examples/pingpong -uc against
// ibv_uc_pingpong on an rxe guest, each side as client and as server, at
// message sizes of one packet and of several: both programs' exit status
// and reports, a capture whose every packet verifies and is a UC SEND (no
// ACK), and both sides' counters.
func TestUCPingpongRxe(t *testing.T) {
	l := lab.New(t, lab.Config{})
	bin := buildExample(t, "pingpong")
	g := l.Boot(lab.GuestConfig{})[0]
	const iters = 50
	for _, size := range []int{1, 4096} {
		for _, uroceClient := range []bool{true, false} {
			r := pingpongRun{uroceClient: uroceClient, size: size, iters: iters}
			t.Run(r.String(), func(t *testing.T) {
				res := runPingpong(t, l, g, r, facing{prog: "ibv_uc_pingpong", bin: bin,
					guestCmd:  fmt.Sprintf("ibv_uc_pingpong -d rxe0 -g 1 -n %d -s %d", iters, size),
					uroceArgs: []string{"-uc", "-d", l.PeerLink.Name, "-n", strconv.Itoa(iters), "-s", strconv.Itoa(size), "-stats"}})
				res.checkEnds(t, res.f)
				want := fmt.Sprintf("%d iters in", iters)
				for who, out := range map[string]string{"ibv_uc_pingpong": res.guest.Stdout, "uroce": res.uroce} {
					if !strings.Contains(out, want) {
						t.Errorf("%s's output lacks %q", who, want)
					}
				}
				if t.Failed() {
					t.FailNow()
				}
				checkUCCapture(t, res.stats, ucOpcodes(true, size, 1024))
				if !uroceClient {
					// ibv_uc_pingpong, like ibv_rc_pingpong, sends its
					// 0x7b buffer and what it received back.
					checkUCSendBytes(t, res.frames, 0x7b)
				}
				checkUCCounters(t, res.guestDelta, uroceCounters(t, res.uroce), res.stats.Packets)
			})
		}
	}
}

// TestPerfRxeUC runs perftest's write and send tests with -c UC against
// uroce-perf -c UC, each side as client and as server, on a clean bridge,
// and write_bw with 1 % of the RoCE packets dropped, which UC does not
// recover: both sides must still finish, and uroce as the receiver must
// count the rest of each damaged message dropped.
func TestPerfRxeUC(t *testing.T) {
	const ibMTU = 1024
	l := lab.New(t, lab.Config{})
	bin := buildOnce(t, "github.com/uroce/uroce/cmd/uroce-perf")
	g := l.Boot(lab.GuestConfig{})[0]
	growTapQueues(t, l)
	uc := []string{"-c", "UC"}
	for _, test := range []string{"write_lat", "send_lat", "write_bw", "send_bw"} {
		for _, size := range []int{2, 4096, 65536} {
			for _, uroceClient := range []bool{true, false} {
				c := perfCell{test: test, size: size, iters: perfIters, uroceClient: uroceClient, args: uc, guestArgs: "-c UC"}
				t.Run(c.String(), func(t *testing.T) {
					res := c.run(t, l, g, bin)
					res.check(t)
					if res.captureErr != nil {
						t.Error(res.captureErr)
					}
					send := test == "send_lat" || test == "send_bw"
					checkUCCapture(t, res.stats, ucOpcodes(send, size, ibMTU))
					if res.tapDrops != 0 {
						t.Errorf("the host's tap dropped %d frames toward the guest (it did not keep up)", res.tapDrops)
					}
					checkUCCounters(t, res.guestDelta, res.uroceCount, res.stats.Packets)
				})
			}
		}
	}
	for _, uroceClient := range []bool{true, false} {
		c := perfCell{test: "write_bw", size: dropSize, iters: max(20, dropPackets*ibMTU/dropSize), uroceClient: uroceClient,
			drop: 1, args: uc, guestArgs: "-c UC"}
		t.Run(fmt.Sprintf("drop1pct/%v", c), func(t *testing.T) {
			res, dropped := c.runDropping(t, l, g, bin)
			u := res.uroceCount
			checkUCCapture(t, lab.RoCEStats{Opcodes: res.stats.Opcodes}, nil)
			if u["Retransmits"] != 0 || u["RetryExcErrs"] != 0 {
				t.Errorf("uroce retransmitted %d packets, %d retry errors: UC has neither", u["Retransmits"], u["RetryExcErrs"])
			}
			// uroce as the server receives the WRITEs: a message that
			// lost a packet before its last is dropped from there on.
			if !uroceClient && u["Dropped"] == 0 {
				t.Errorf("%d packets dropped on the way, yet uroce dropped no rest of a message", dropped)
			}
		})
	}
}
