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

// udRun is one ibv_ud_pingpong run against uroce's udpingpong.
type udRun struct {
	uroceClient bool
	size, iters int
}

func (r udRun) String() string {
	side := "uroce-server"
	if r.uroceClient {
		side = "uroce-client"
	}
	return fmt.Sprintf("%s/s%d", side, r.size)
}

// run runs r between udpingpong in the Peer namespace (GID index 0, its
// only one) and ibv_ud_pingpong -g 1 on g, capturing the bridge.
func (r udRun) run(t *testing.T, l *lab.Lab, g *lab.Guest, bin string) pingpongResult {
	t.Helper()
	return runPingpong(t, l, g, pingpongRun{uroceClient: r.uroceClient, size: r.size, iters: r.iters}, facing{
		prog:      "ibv_ud_pingpong",
		bin:       bin,
		guestCmd:  fmt.Sprintf("ibv_ud_pingpong -d rxe0 -g 1 -n %d -s %d", r.iters, r.size),
		uroceArgs: []string{"-d", l.PeerLink.Name, "-g", "0", "-n", strconv.Itoa(r.iters), "-s", strconv.Itoa(r.size), "-stats"},
	})
}

// checkUD checks both programs' status and reports, that the capture holds
// only UD SEND Only packets with DETH and Q_Key 0x11111111 between the two
// QPs, each verifying, and that no datagram was lost or refused on either
// side. With uroce as the server, every payload on the wire is the guest's
// 0x7b fill: uroce echoes exactly what it received.
func (res *pingpongResult) checkUD(t *testing.T) {
	t.Helper()
	r := res.r
	res.checkEnds(t, res.f)
	iters := fmt.Sprintf("%d iters in", r.iters)
	for who, out := range map[string]string{"ibv_ud_pingpong": res.guest.Stdout, "uroce": res.uroce} {
		for _, want := range []string{iters, fmt.Sprintf("%d bytes in", 2*r.size*r.iters)} {
			if !strings.Contains(out, want) {
				t.Errorf("%s's output lacks %q", who, want)
			}
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	u := uroceCounters(t, res.uroce)
	if err := res.stats.Err(); err != nil {
		t.Error(err)
	}
	if got := res.stats.Opcodes[bth.UDSendOnly]; got != res.stats.Packets || got != 2*r.iters {
		t.Errorf("capture: %d UD SEND Only of %d RoCE packets, want %d and nothing else", got, res.stats.Packets, 2*r.iters)
	}
	n, bad := 0, 0
	for _, rec := range res.frames {
		var f bth.Frame
		if f.Decode(rec.Data) != nil || f.Opcode() != bth.UDSendOnly {
			continue
		}
		n++
		if f.DETH().QKey() != 0x11111111 || len(f.Payload()) != r.size || f.BTH().AckReq() {
			bad++
		}
	}
	if n == 0 || bad > 0 {
		t.Errorf("%d of %d UD packets lack Q_Key 0x11111111, size %d, or carry AckReq", bad, n, r.size)
	}
	if u["TxPackets"] != uint64(r.iters) || u["RxPackets"] != uint64(r.iters) || u["CompletedRecvs"] != uint64(r.iters) {
		t.Errorf("uroce sent %d and received %d packets, completed %d receives; want %d each", u["TxPackets"], u["RxPackets"], u["CompletedRecvs"], r.iters)
	}
	if u["BadQKey"] != 0 || u["Dropped"] != 0 {
		t.Errorf("uroce dropped datagrams: BadQKey %d, Dropped %d", u["BadQKey"], u["Dropped"])
	}
	d := res.guestDelta
	if d["rcvd_pkts"] != u["TxPackets"] || d["sent_pkts"] != u["RxPackets"] {
		t.Errorf("the guest received %d of uroce's %d packets and sent %d, uroce received %d",
			d["rcvd_pkts"], u["TxPackets"], d["sent_pkts"], u["RxPackets"])
	}
	for _, k := range errorCounters {
		if d[k] != 0 {
			t.Errorf("guest's %s moved by %d", k, d[k])
		}
	}
	if !r.uroceClient {
		checkUDBytes(t, res.frames, 0x7b)
	}
}

// checkUDBytes checks that every UD SEND payload in frames is all b.
func checkUDBytes(t *testing.T, frames []pcapfile.Record, b byte) {
	t.Helper()
	for i, rec := range frames {
		var f bth.Frame
		if f.Decode(rec.Data) != nil || f.Opcode() != bth.UDSendOnly {
			continue
		}
		for j, c := range f.Payload() {
			if c != b {
				t.Errorf("frame %d: payload byte %d is %#x, want %#x", i+1, j, c, b)
				return
			}
		}
	}
}

// TestUDPingpongRxe runs uroce's examples/udpingpong against
// ibv_ud_pingpong -g 1 on an rxe guest, each side as client and as server,
// with a datagram of one byte and one of the port MTU (1024 at link MTU
// 1500): both programs' reports, a capture whose every packet verifies and
// is a UD SEND Only with ibv_ud_pingpong's Q_Key, and both sides' counters.
func TestUDPingpongRxe(t *testing.T) {
	l := lab.New(t, lab.Config{})
	bin := buildExample(t, "udpingpong")
	g := l.Boot(lab.GuestConfig{})[0]
	const iters = 50
	for _, size := range []int{1, 1024} {
		for _, uroceClient := range []bool{true, false} {
			r := udRun{uroceClient: uroceClient, size: size, iters: iters}
			t.Run(r.String(), func(t *testing.T) {
				res := r.run(t, l, g, bin)
				res.checkUD(t)
			})
		}
	}
}

// TestUDPingpongReference checks checkUD's expectations of the wire on
// rxe's own ibv_ud_pingpong capture (both sides the C program): UD SEND
// Only, Q_Key 0x11111111, no AckReq, all 0x7b.
func TestUDPingpongReference(t *testing.T) {
	f, err := pcapfile.ReadFile("../../testdata/rxe-captures/ibv_ud_pingpong.pcap")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, rec := range f.Records {
		var fr bth.Frame
		if fr.Decode(rec.Data) != nil {
			continue
		}
		n++
		if fr.Opcode() != bth.UDSendOnly || fr.DETH().QKey() != 0x11111111 || fr.BTH().AckReq() || len(fr.Payload()) != 128 {
			t.Errorf("packet %d: %v qkey %#x ackreq %v, %d bytes", n, fr.Opcode(), fr.DETH().QKey(), fr.BTH().AckReq(), len(fr.Payload()))
		}
	}
	if n != 40 {
		t.Errorf("%d RoCE packets, want 40", n)
	}
	checkUDBytes(t, f.Records, 0x7b)
}

// TestUDPingpongRxeJumbo is TestUDPingpongRxe at link MTU 9000, where the
// port MTU is 4096: ibv_ud_pingpong's default size (2048) and the largest
// datagram.
func TestUDPingpongRxeJumbo(t *testing.T) {
	l := lab.New(t, lab.Config{MTU: 9000})
	bin := buildExample(t, "udpingpong")
	g := l.Boot(lab.GuestConfig{})[0]
	const iters = 50
	for _, size := range []int{2048, 4096} {
		for _, uroceClient := range []bool{true, false} {
			r := udRun{uroceClient: uroceClient, size: size, iters: iters}
			t.Run(r.String(), func(t *testing.T) {
				res := r.run(t, l, g, bin)
				res.checkUD(t)
			})
		}
	}
}
