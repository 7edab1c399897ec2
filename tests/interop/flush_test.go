package interop_test

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/tests/interop/lab"
)

// flushCell is one run of IBA 1.5's ATOMIC WRITE, and optionally FLUSH,
// between testdata/flushatomic.c on a trixie guest's rxe and its uroce
// counterpart, internal/flushatomic, in the Peer namespace. The requester
// posts rounds × (n ATOMIC WRITEs to consecutive 8-byte slots, then with
// flush a FLUSH of that range and one of the whole region) and checks
// every completion; the responder prints its region's slots once the
// requester is done.
type flushCell struct {
	uroceRequester bool
	rounds, n      int
	flush          bool // each round ends with two FLUSHes
	neg            bool // end with an ATOMIC WRITE to a misaligned address
	drop           int  // percent of RoCE packets nftables drops
}

func (c flushCell) String() string {
	s := "rxe-requester"
	if c.uroceRequester {
		s = "uroce-requester"
	}
	if c.drop > 0 {
		s = fmt.Sprintf("drop%dpct/%s", c.drop, s)
	}
	return s
}

// flushValue is what round r writes to slot k (flushatomic.c's value).
func flushValue(r, k int) uint64 {
	return 0x0123456789abcdef ^ uint64(r)<<56 ^ uint64(k+1)*0x9e3779b97f4a7c15
}

// buildLabC compiles testdata/NAME.c on the host against Debian 13's
// libibverbs-dev (lab/verbsdev.sh): the host's own headers may predate
// ibv_wr_flush. It links against trixie's libibverbs.so.1, so the binary
// asks only for symbols the guest's rdma-core has; the library's own
// dependencies are the guest's business (--allow-shlib-undefined).
func buildLabC(t *testing.T, name string) string {
	t.Helper()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skipf("no gcc on the host to build testdata/%s.c (scripts/setup installs it)", name)
	}
	out, err := exec.Command("lab/verbsdev.sh", string(lab.Trixie)).Output()
	if err != nil {
		t.Fatalf("lab/verbsdev.sh %s: %v\n%s", lab.Trixie, err, stderrOf(err))
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	dir := lines[len(lines)-1]
	bin := filepath.Join(t.TempDir(), name)
	cmd := exec.Command(gcc, "-O2", "-Wall", "-Werror", "-I", filepath.Join(dir, "usr/include"),
		"-o", bin, "testdata/"+name+".c",
		filepath.Join(dir, "usr/lib/x86_64-linux-gnu/libibverbs.so.1"), "-Wl,--allow-shlib-undefined")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", cmd, err, out)
	}
	return bin
}

func stderrOf(err error) []byte {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.Stderr
	}
	return nil
}

// testFlushCells runs the ATOMIC WRITE cells on g, each way, clean
// (ending with a misaligned ATOMIC WRITE) and with 1 % of RoCE packets
// dropped. FLUSH stays out: rxe (6.12) computes a FLUSH's ICRC over its
// headers twice (RC_FLUSH has no payload offset in rxe's opcode table,
// so rxe_icrc_check's payload_addr and payload_size span BTH, FETH and
// RETH), so rxe and uroce drop each other's FLUSHes as corrupt and the
// requester retries forever (README.md, "FLUSH and ATOMIC WRITE").
func testFlushCells(t *testing.T, l *lab.Lab, g *lab.Guest) {
	cbin := buildLabC(t, "flushatomic")
	guestBin, err := g.Put(cbin, "flushatomic")
	if err != nil {
		t.Fatal(err)
	}
	uroceBin := buildOnce(t, "github.com/uroce/uroce/tests/interop/internal/flushatomic")
	for _, drop := range []int{0, 1} {
		for _, uroceRequester := range []bool{true, false} {
			c := flushCell{uroceRequester: uroceRequester, rounds: 2, n: 64, neg: true}
			if drop > 0 {
				// About 2000 packets: some 20 drops.
				c = flushCell{uroceRequester: uroceRequester, rounds: 16, n: 64, drop: drop}
			}
			t.Run(c.String(), func(t *testing.T) { c.run(t, l, g, guestBin, uroceBin) })
		}
	}
	t.Run("rxe-flush-icrc", func(t *testing.T) { testRxeFlushICRC(t, l, g, guestBin, uroceBin) })
}

// testRxeFlushICRC pins down why FLUSH is not among the cells: rxe as
// the requester of one ATOMIC WRITE and one FLUSH for a few seconds,
// uroce the responder. Every FLUSH rxe sends must carry rxe's ICRC, the
// standard CRC continued over the packet's BTH, FETH and RETH a second
// time, and none the standard one; uroce drops them all, so neither
// program ends by itself. Once rxe sends standard FLUSHes this fails,
// and the FLUSH cells can join (-flush).
func testRxeFlushICRC(t *testing.T, l *lab.Lab, g *lab.Guest, guestBin, uroceBin string) {
	args := []string{"-p", strconv.Itoa(perftestPort), "-r", "1", "-n", "1", "-flush"}
	f := facing{
		prog:        "flushatomic.c",
		bin:         uroceBin,
		uroceClient: true,
		guestCmd:    guestBin + " " + strings.Join(args, " ") + " -t 4 requester",
		uroceArgs:   append(append([]string{"-d", l.PeerLink.Name, "-t", "3s"}, args...), "responder", g.Addr.String()),
	}
	res := f.run(t, l, g)
	if res.captureError != nil {
		t.Fatal(res.captureError)
	}
	if !strings.Contains(res.guest.Stderr, "timed out") {
		t.Errorf("rxe's requester ended otherwise than timed out: %v", res.guest.Err())
	}
	rxeICRC, standard := 0, 0
	for _, r := range res.frames {
		var fr bth.Frame
		if fr.Decode(r.Data) != nil || fr.Opcode() != bth.RCFlush || fr.IPVersion() != 4 {
			continue
		}
		dg := fr.Datagram()
		std, err := bth.ICRC(dg)
		if err != nil {
			t.Fatal(err)
		}
		hdr := int(dg[0]&0x0f)*4 + bth.UDPLen // the BTH's offset
		got := binary.LittleEndian.Uint32(dg[len(dg)-bth.ICRCLen:])
		switch got {
		case std:
			standard++
		case crc32.Update(std, crc32.IEEETable, dg[hdr:hdr+12+4+16]):
			rxeICRC++
		}
	}
	t.Logf("rxe's FLUSH packets: %d with rxe's ICRC, %d with the standard one", rxeICRC, standard)
	if rxeICRC == 0 || standard != 0 {
		t.Errorf("rxe sent %d FLUSHes with its own ICRC and %d with the standard one: has rxe's FLUSH ICRC changed?", rxeICRC, standard)
	}
}

func (c flushCell) run(t *testing.T, l *lab.Lab, g *lab.Guest, guestBin, uroceBin string) {
	guestRole, uroceRole := "responder", "requester"
	if !c.uroceRequester {
		guestRole, uroceRole = uroceRole, guestRole
	}
	args := []string{"-p", strconv.Itoa(perftestPort), "-r", strconv.Itoa(c.rounds), "-n", strconv.Itoa(c.n)}
	if c.flush {
		args = append(args, "-flush")
	}
	if c.neg {
		args = append(args, "-neg")
	}
	f := facing{
		prog:        "flushatomic.c",
		bin:         uroceBin,
		uroceClient: true, // the C program listens for the exchange
		guestCmd:    guestBin + " " + strings.Join(args, " ") + " " + guestRole,
		uroceArgs:   append(append([]string{"-d", l.PeerLink.Name}, args...), uroceRole, g.Addr.String()),
	}
	var dropper *lab.Dropper
	if c.drop > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var err error
		if c.uroceRequester {
			dropper, err = l.DropRoCE(ctx, c.drop)
		} else {
			// Only uroce's answers (its READ Response Only packets;
			// ACKs pass): rxe (6.12) retransmits an ATOMIC WRITE with
			// a RETH VA of 0, as req_retry resets wqe->iova only for
			// WR_ATOMIC_MASK and WR_READ_OR_WRITE_MASK operations, so
			// a retransmission that is not a duplicate at the
			// responder fails with a remote access error (seen:
			// psn 457 resent with va=0x0, NAKed, the WR failing with
			// IBV_WC_REM_ACCESS_ERR). A lost answer makes rxe resend
			// requests uroce has executed, which it answers from its
			// responder resources without looking at the VA.
			dropper, err = l.DropRoCERequestsFrom(ctx, c.drop, lab.PeerAddr.Addr())
		}
		if err != nil {
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
	reqOut, respOut := res.guest.Stdout, res.uroce
	if c.uroceRequester {
		reqOut, respOut = respOut, reqOut
	}

	// The requester checked every completion's status, opcode and order.
	if want := fmt.Sprintf("requester: %d rounds: %d atomic writes", c.rounds, c.rounds*c.n); !strings.Contains(reqOut, want) {
		t.Errorf("requester's output lacks %q", want)
	}
	// The last round's values landed in the responder's region.
	var want strings.Builder
	want.WriteString("mr:")
	var v [8]byte
	for k := range c.n {
		binary.LittleEndian.PutUint64(v[:], flushValue(c.rounds-1, k))
		want.WriteString(" " + hex.EncodeToString(v[:]))
	}
	if !strings.Contains(respOut, want.String()+"\n") {
		t.Errorf("responder's region is not what the ATOMIC WRITEs wrote:\n got %s\nwant %s", lineWith(respOut, "mr:"), want.String())
	}
	if c.neg {
		// IBA o9-20.2.1: a misaligned ATOMIC WRITE is an invalid
		// request; the responder NAKs it and its QP goes to the error
		// state (C9-204: a class C error), the requester's WR completes
		// with remote invalid request (IBV_WC_REM_INV_REQ_ERR, 9).
		if !strings.Contains(reqOut, "misaligned atomic write: status") || !strings.Contains(lineWith(reqOut, "misaligned atomic write:"), "(9)") {
			t.Errorf("requester's misaligned ATOMIC WRITE: %q, want status 9 (remote invalid request)", lineWith(reqOut, "misaligned atomic write:"))
		}
		if got := lineWith(respOut, "qp state:"); got != "qp state: ERR" {
			t.Errorf("responder after the misaligned ATOMIC WRITE: %q, want qp state: ERR", got)
		}
	}

	// The capture: every packet verifies; requests are 0x1c/0x1d, each
	// answered by a READ Response Only without payload (rxe's
	// read_reply for FLUSH and ATOMIC WRITE).
	if err := res.stats.Err(); err != nil {
		t.Error(err)
	}
	s := res.stats.Opcodes
	aw, fl, rro := s[bth.RCAtomicWrite], s[bth.RCFlush], s[bth.RCReadResponseOnly]
	wantAW, wantFl := c.rounds*c.n, 0
	if c.neg {
		wantAW++
	}
	if c.flush {
		wantFl = 2 * c.rounds
	}
	if aw < wantAW || fl < wantFl {
		t.Errorf("capture: %d ATOMIC WRITEs (0x1d) and %d FLUSHes (0x1c), want at least %d and %d", aw, fl, wantAW, wantFl)
	}
	if rro < c.rounds*c.n+wantFl {
		t.Errorf("capture: %d READ Response Only packets for %d FLUSHes and ATOMIC WRITEs", rro, c.rounds*c.n+wantFl)
	}
	if c.drop == 0 && rro > aw+fl {
		t.Errorf("capture: %d READ Response Only packets, more than the %d requests", rro, aw+fl)
	}
	nakInv := 0
	for i, r := range res.frames {
		var fr bth.Frame
		if fr.Decode(r.Data) != nil {
			continue
		}
		switch fr.Opcode() {
		case bth.RCReadResponseOnly:
			if n := len(fr.Payload()); n != 0 {
				t.Errorf("frame %d: READ Response Only PSN %d with %d bytes of payload", i+1, fr.BTH().PSN(), n)
			}
		case bth.RCAcknowledge:
			if sy := fr.AETH().Syndrome(); sy.Kind() == bth.KindNAK && sy.NAKCode() == bth.NAKInvalidRequest {
				nakInv++
			}
		}
	}
	if c.neg && nakInv == 0 {
		t.Error("capture: no NAK invalid request for the misaligned ATOMIC WRITE")
	}
	if !c.neg && nakInv != 0 {
		t.Errorf("capture: %d NAKs invalid request", nakInv)
	}

	u := uroceCounters(t, res.uroce)
	if c.drop == 0 {
		for _, k := range errorCounters {
			if gd[k] != 0 {
				t.Errorf("guest's %s moved by %d on a clean bridge", k, gd[k])
			}
		}
		for _, k := range []string{"SeqNAKsRcvd", "SeqNAKsSent", "RetryExcErrs", "RNRRetryExcErrs"} {
			if u[k] != 0 {
				t.Errorf("uroce's %s is %d on a clean bridge", k, u[k])
			}
		}
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dropped, err := dropper.Dropped(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("nftables dropped %d RoCE packets; uroce's counters: %v", dropped, u)
	if dropped == 0 {
		t.Fatal("nftables dropped nothing: the rule does not see the bridge's RoCE traffic")
	}
	if c.uroceRequester {
		// Whichever packet was lost, a request or its answer, the
		// requester recovered it: by a timeout or a sequence NAK.
		var n uint64
		for _, k := range uroceRetransmitCounters {
			n += u[k]
		}
		if n == 0 {
			t.Errorf("%d packets dropped, yet no uroce recovery counter (%v) moved", dropped, uroceRetransmitCounters)
		}
	} else {
		// Only answers were lost, and a later answer acknowledges the
		// earlier requests too (a coalesced acknowledgement, which
		// rxe's completer takes): rxe retransmits only when a round's
		// last answer was lost, so its retransmission counters may
		// rightly stay put. That every WR completed with success and
		// the bytes landed is the check.
		t.Logf("guest retransmission counters: %d", sum(gd, retransmitCounters))
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

// lineWith returns the first line of out that starts with prefix.
func lineWith(out, prefix string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}
