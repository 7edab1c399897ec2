package interop_test

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/tests/interop/lab"
)

// ucImmCell is one run of UC SENDs and RDMA WRITEs with immediate data
// between testdata/ucimm.c on a trixie guest's rxe and its uroce
// counterpart, internal/ucimm: each round the sender posts a SEND with
// immediate and a WRITE with immediate of ucImmSize bytes (three packets
// at IB MTU 1024) and a one-packet WRITE with immediate, and the receiver
// checks each message that comes.
type ucImmCell struct {
	uroceSender bool
	rounds      int
	drop        int  // percent of RoCE packets nftables drops, both ways
	oneWrite    bool // leave the multi-packet WRITE out (-onewrite)
}

// ucImmSize spans three packets at IB MTU 1024: FIRST, MIDDLE and LAST
// with immediate.
const ucImmSize = 3000

// The tags ucimm.c puts in an immediate's top byte, the round below.
const (
	ucImmSend, ucImmWrite, ucImmSmall, ucImmMark = 0xa1, 0xb2, 0xc3, 0xd4
)

func (c ucImmCell) String() string {
	s := "rxe-sender"
	if c.uroceSender {
		s = "uroce-sender"
	}
	if c.drop > 0 {
		s = fmt.Sprintf("drop%dpct/%s", c.drop, s)
	}
	return s
}

// testUCImmCells runs the UC immediate data cells on g, each way, clean
// and with 1 % of RoCE packets dropped both ways. rxe as the receiver
// under loss gets no multi-packet WRITEs: its UC responder takes nothing
// more once one lost a packet after its first. Such a WRITE leaves
// resp.opcode at RDMA_WRITE_FIRST or MIDDLE, and do_class_d1e_error
// (6.12's rxe_resp.c) resets it only when a receive WQE is in progress,
// which a WRITE has not; so every later FIRST or ONLY packet is refused
// as out of sequence, and every MIDDLE or LAST fails the PSN check.
func testUCImmCells(t *testing.T, l *lab.Lab, g *lab.Guest) {
	guestBin, err := g.Put(buildLabC(t, "ucimm"), "ucimm")
	if err != nil {
		t.Fatal(err)
	}
	uroceBin := buildOnce(t, "github.com/uroce/uroce/tests/interop/internal/ucimm")
	for _, drop := range []int{0, 1} {
		for _, uroceSender := range []bool{true, false} {
			c := ucImmCell{uroceSender: uroceSender, rounds: 16}
			switch {
			case drop > 0 && uroceSender:
				// Four packets a round, some 11 drops: a run with
				// none at all is one in 70 000.
				c = ucImmCell{uroceSender: true, rounds: 280, drop: drop, oneWrite: true}
			case drop > 0:
				// Seven packets a round, as many drops.
				c = ucImmCell{rounds: 160, drop: drop}
			}
			t.Run(c.String(), func(t *testing.T) { c.run(t, l, g, guestBin, uroceBin) })
		}
	}
	for _, uroceSender := range []bool{true, false} {
		c := ucImmCell{uroceSender: uroceSender, rounds: 4}
		t.Run("lost-write-last/"+c.String(), func(t *testing.T) { testUCImmLostWriteLast(t, l, g, guestBin, uroceBin, c) })
	}
}

// facing is the run of c: the C program listens, uroce connects.
func (c ucImmCell) facing(l *lab.Lab, g *lab.Guest, guestBin, uroceBin string) (f facing, each int) {
	guestRole, uroceRole := "sender", "receiver"
	if c.uroceSender {
		guestRole, uroceRole = uroceRole, guestRole
	}
	args := []string{"-p", strconv.Itoa(perftestPort), "-r", strconv.Itoa(c.rounds), "-s", strconv.Itoa(ucImmSize)}
	each = 3 // messages a round
	if c.oneWrite {
		args, each = append(args, "-onewrite"), 2
	}
	return facing{
		prog:        "ucimm.c",
		bin:         uroceBin,
		uroceClient: true, // the C program listens for the exchange
		guestCmd:    guestBin + " " + strings.Join(args, " ") + " " + guestRole,
		uroceArgs:   append(append([]string{"-d", l.PeerLink.Name}, args...), uroceRole, g.Addr.String()),
	}, each
}

func (c ucImmCell) run(t *testing.T, l *lab.Lab, g *lab.Guest, guestBin, uroceBin string) {
	f, each := c.facing(l, g, guestBin, uroceBin)
	var dropper *lab.Dropper
	if c.drop > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var err error
		if dropper, err = l.DropRoCE(ctx, c.drop); err != nil {
			t.Fatal(err)
		}
		defer dropper.Remove(context.Background())
	}
	before := counters(t, g)[0]
	res := f.run(t, l, g)
	gd := counters(t, g)[0].Sub(before)
	t.Logf("guest hw_counters moved: %v", nonZero(gd))
	res.checkEnds(t, f)
	if t.Failed() {
		t.FailNow()
	}
	senderOut, receiverOut := res.guest.Stdout, res.uroce
	if c.uroceSender {
		senderOut, receiverOut = receiverOut, senderOut
	}
	// The sender checked that every message completed successfully; the
	// receiver checked each message that came: its opcode, the
	// immediate flag, the immediate's tag and round (so none came twice
	// or late), byte_len and the bytes.
	if want := fmt.Sprintf("sender: %d rounds: %d messages with immediate and", c.rounds, each*c.rounds); !strings.Contains(senderOut, want) {
		t.Errorf("sender's output lacks %q", want)
	}
	var rounds, sends, writes, smalls int
	line := lineWith(receiverOut, "receiver:")
	if _, err := fmt.Sscanf(line, "receiver: %d rounds: delivered %d SENDs %d multi-packet WRITEs %d one-packet WRITEs",
		&rounds, &sends, &writes, &smalls); err != nil || rounds != c.rounds {
		t.Fatalf("receiver's report %q: %v, want %d rounds", line, err, c.rounds)
	}
	// UC never moves a QP to the error state for a lost packet.
	for who, out := range map[string]string{"sender": senderOut, "receiver": receiverOut} {
		if got := lineWith(out, "qp state:"); got != "qp state: RTS" {
			t.Errorf("%s's QP at the end: %q, want qp state: RTS", who, got)
		}
	}

	// The capture: every packet verifies and is UC (no ACK, IBA 9.8.2);
	// the messages went out as SEND FIRST, MIDDLE, LAST with Immediate,
	// RDMA WRITE FIRST, MIDDLE, LAST with Immediate and RDMA WRITE ONLY
	// with Immediate; and every immediate on the wire is a tag and a
	// round in network order, as both sides put it there.
	ops := []bth.Opcode{bth.UCSendFirst, bth.UCSendMiddle, bth.UCSendLastImm, bth.UCWriteOnlyImm}
	if !c.oneWrite {
		ops = append(ops, bth.UCWriteFirst, bth.UCWriteMiddle, bth.UCWriteLastImm)
	}
	checkUCCapture(t, res.stats, ops)
	imms := map[string]int{}
	for i, r := range res.frames {
		var fr bth.Frame
		if fr.Decode(r.Data) != nil || fr.Info().Mask&bth.HasImmDt == 0 {
			continue
		}
		imm := fr.ImmDt().Imm()
		tag := byte(imm >> 24)
		imms[fmt.Sprintf("%02x", tag)]++
		if (tag != ucImmSend && (tag != ucImmWrite || c.oneWrite) && tag != ucImmSmall && tag != ucImmMark) || int(imm&0xffffff) >= c.rounds {
			t.Errorf("frame %d: %v with immediate %08x: no tag and round of this run", i+1, fr.Opcode(), imm)
		}
	}
	t.Logf("immediates on the wire by tag: %v", imms)

	u := uroceCounters(t, res.uroce)
	if c.drop == 0 {
		// Every message came, and each went out once.
		if sends != c.rounds || writes != c.rounds || smalls != c.rounds {
			t.Errorf("receiver: %d SENDs, %d multi-packet WRITEs, %d one-packet WRITEs delivered of %d each on a clean bridge",
				sends, writes, smalls, c.rounds)
		}
		for op, want := range map[bth.Opcode]int{bth.UCSendLastImm: c.rounds, bth.UCWriteLastImm: c.rounds, bth.UCWriteOnlyImm: c.rounds} {
			if n := res.stats.Opcodes[op]; n != want {
				t.Errorf("capture: %d %v packets, want %d", n, op, want)
			}
		}
		checkUCCounters(t, gd, u, res.stats.Packets)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dropped, err := dropper.Dropped(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lost := each*c.rounds - sends - writes - smalls
	t.Logf("nftables dropped %d RoCE packets; %d of %d messages lost; uroce's counters: %v", dropped, lost, each*c.rounds, u)
	if dropped == 0 {
		t.Fatal("nftables dropped nothing: the rule does not see the bridge's RoCE traffic")
	}
	// uroce loses a message only when one of its own packets is lost:
	// a FIRST or ONLY packet after a broken message starts the next
	// (IBA 9.8.2). rxe drops that packet too (do_class_d1e_error's
	// class D1 ends in RESPST_CLEANUP), so one drop can cost it two
	// messages.
	perDrop := 1
	if c.uroceSender {
		perDrop = 2
	}
	if lost > perDrop*int(dropped) {
		t.Errorf("%d messages lost for %d packets dropped, want at most %d a drop", lost, dropped, perDrop)
	}
	// A three-packet message survives 1 % loss with probability
	// 0.99^3 = 0.97: some 5 of 160 are lost. Fewer than half of a kind
	// delivered is a binomial tail below 1e-60, so it means the
	// receiver drops more than the lost messages (or the transport
	// fails after the first loss), not bad luck.
	kinds := map[string]int{"SENDs": sends, "multi-packet WRITEs": writes, "one-packet WRITEs": smalls}
	if c.oneWrite {
		if writes != 0 {
			t.Errorf("receiver: %d multi-packet WRITEs with -onewrite", writes)
		}
		delete(kinds, "multi-packet WRITEs")
	}
	for name, n := range kinds {
		if n < c.rounds/2 {
			t.Errorf("receiver: %d of %d %s delivered under %d %% loss, want at least %d", n, c.rounds, name, c.drop, c.rounds/2)
		}
	}
	if u["Retransmits"] != 0 || u["RetryExcErrs"] != 0 {
		t.Errorf("uroce retransmitted %d packets, %d retry errors: UC has neither", u["Retransmits"], u["RetryExcErrs"])
	}
}

// testUCImmLostWriteLast drops one packet on purpose: the first UC RDMA
// WRITE LAST with Immediate, round 0's multi-packet WRITE's last. The
// bridge drops the first such packet only: the quota lets the rule match
// while fewer than 1500 bytes went through it, and each of these
// packets is about 1000 (952 bytes of payload).
//
// uroce as the receiver loses that WRITE and nothing else (IBA 9.8.2:
// the next FIRST or ONLY packet starts a new message). rxe as the
// receiver takes nothing more, not even the marks, and its program gives
// up after eight of them: the WRITE left resp.opcode at
// RDMA_WRITE_MIDDLE, and with no receive WQE in progress
// do_class_d1e_error (6.12's rxe_resp.c) drops each new message's first
// packet without resetting it, while every later packet fails the PSN
// check. This pins that down: once rxe takes the next message, it fails,
// and the 1 % loss cell towards rxe can have its multi-packet WRITEs
// back.
func testUCImmLostWriteLast(t *testing.T, l *lab.Lab, g *lab.Guest, guestBin, uroceBin string, c ucImmCell) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const table = "uroce_lab_ucimm"
	err := l.Nft(ctx, fmt.Sprintf(`table bridge %s {
	chain forward {
		type filter hook forward priority 0; policy accept;
		udp dport 4791 @th,64,8 0x%02x quota until 1500 bytes counter drop
	}
}
`, table, byte(bth.UCWriteLastImm)))
	if err != nil {
		t.Fatal(err)
	}
	defer l.NSCommand(context.Background(), "nft", "delete", "table", "bridge", table).Run()
	f, _ := c.facing(l, g, guestBin, uroceBin)
	before := counters(t, g)[0]
	res := f.run(t, l, g)
	gd := counters(t, g)[0].Sub(before)
	t.Logf("guest hw_counters moved: %v", nonZero(gd))
	if res.captureError != nil {
		t.Fatal(res.captureError)
	}
	if err := res.stats.Err(); err != nil {
		t.Error(err)
	}
	out, err := l.NSCommand(ctx, "nft", "list", "table", "bridge", table).Output()
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`counter packets (\d+)`).FindSubmatch(out); m == nil || string(m[1]) != "1" {
		t.Fatalf("the rule dropped other than one packet:\n%s", out)
	}
	if !c.uroceSender {
		res.checkEnds(t, f)
		want := fmt.Sprintf("receiver: %d rounds: delivered %d SENDs %d multi-packet WRITEs %d one-packet WRITEs with immediate",
			c.rounds, c.rounds, c.rounds-1, c.rounds)
		if !strings.Contains(res.uroce, want) {
			t.Errorf("uroce's output lacks %q", want)
		}
		if got := lineWith(res.uroce, "qp state:"); got != "qp state: RTS" {
			t.Errorf("uroce's QP at the end: %q, want qp state: RTS", got)
		}
		return
	}
	// rxe completed round 0's SEND and nothing after: not the one-packet
	// WRITE behind the lost packet, not a mark.
	if want := "ucimm: round 0: nothing came after 8 marks"; !strings.Contains(res.guest.Stderr, want) {
		t.Errorf("ucimm.c on rxe: %v, stderr %q, want %q", res.guest.Err(), res.guest.Stderr, want)
	}
	if gd["rdma_recvs"] != 1 {
		t.Errorf("rxe completed %d receives, want 1 (round 0's SEND)", gd["rdma_recvs"])
	}
	if marks := res.stats.Opcodes[bth.UCSendOnlyImm]; marks < 8 {
		t.Errorf("capture: %d marks (UC SEND Only with Immediate), want 8", marks)
	}
	if sent, got := res.stats.Packets, int(gd["rcvd_pkts"]); got != sent-1 {
		t.Errorf("rxe received %d RoCE packets of the %d uroce sent, want all but the one dropped", got, sent)
	}
}
