package interop_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/uroce/uroce/bth"
	"github.com/uroce/uroce/tests/interop/lab"
)

// mwCell is one run of memory windows and SEND with invalidate between
// testdata/mwinv.c on a trixie guest's rxe and its uroce counterpart,
// internal/mwinv: the owner binds a type 1 window and, round by round, a
// type 2 window that the user writes, reads and takes back with a SEND
// with invalidate; uroce as the owner offers a fast-registration region
// instead every other round.
type mwCell struct {
	uroceOwner bool
	rounds     int
	neg        bool // end with a WRITE through the invalidated key
	drop       int  // percent of RoCE packets nftables drops, both ways
}

func (c mwCell) String() string {
	s := "rxe-owner"
	if c.uroceOwner {
		s = "uroce-owner"
	}
	if c.drop > 0 {
		s = fmt.Sprintf("drop%dpct/%s", c.drop, s)
	}
	return s
}

// testMWCells runs the memory window cells on g, each way, clean (ending
// with a WRITE through the invalidated key) and with 1 % of RoCE packets
// dropped both ways.
func testMWCells(t *testing.T, l *lab.Lab, g *lab.Guest) {
	guestBin, err := g.Put(buildLabC(t, "mwinv"), "mwinv")
	if err != nil {
		t.Fatal(err)
	}
	uroceBin := buildOnce(t, "github.com/uroce/uroce/tests/interop/internal/mwinv")
	for _, drop := range []int{0, 1} {
		for _, uroceOwner := range []bool{true, false} {
			c := mwCell{uroceOwner: uroceOwner, rounds: 8, neg: true}
			if drop > 0 {
				// About 10 packets a round, some 10 drops: a run
				// with none at all is one in 20 000.
				c = mwCell{uroceOwner: uroceOwner, rounds: 96, drop: drop}
			}
			t.Run(c.String(), func(t *testing.T) { c.run(t, l, g, guestBin, uroceBin) })
		}
	}
}

func (c mwCell) run(t *testing.T, l *lab.Lab, g *lab.Guest, guestBin, uroceBin string) {
	guestRole, uroceRole := "owner", "user"
	if c.uroceOwner {
		guestRole, uroceRole = uroceRole, guestRole
	}
	args := []string{"-p", strconv.Itoa(perftestPort), "-r", strconv.Itoa(c.rounds)}
	if c.neg {
		args = append(args, "-neg")
	}
	f := facing{
		prog:        "mwinv.c",
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
	ownerOut, userOut := res.guest.Stdout, res.uroce
	if c.uroceOwner {
		ownerOut, userOut = userOut, ownerOut
	}
	// Each side checked every completion, the data and, the owner, that
	// every receive carried the invalidation of its round's key.
	if want := fmt.Sprintf("owner: %d rounds: type 2 window bound, written, read and invalidated by SEND with invalidate", c.rounds); !strings.Contains(ownerOut, want) {
		t.Errorf("owner's output lacks %q", want)
	}
	if want := fmt.Sprintf("user: type 1 window read; %d rounds:", c.rounds); !strings.Contains(userOut, want) {
		t.Errorf("user's output lacks %q", want)
	}
	if want := fmt.Sprintf("fast registration: %d of the rounds", c.rounds/2); c.uroceOwner && !strings.Contains(ownerOut, want) {
		t.Errorf("owner's output lacks %q", want)
	}
	if c.neg {
		// The invalidated key names nothing: the responder NAKs the
		// WRITE with a remote access error (IBA 9.7.5.2.4's class C,
		// rxe's RESPST_ERR_RKEY_VIOLATION), the requester's WR
		// completes with IBV_WC_REM_ACCESS_ERR (10) and the
		// responder's QP moves to the error state.
		if got := lineWith(userOut, "write after invalidate:"); !strings.Contains(got, "(10)") {
			t.Errorf("user's WRITE through the invalidated key: %q, want status 10 (remote access error)", got)
		}
		if got := lineWith(ownerOut, "qp state:"); got != "qp state: ERR" {
			t.Errorf("owner after the WRITE through the invalidated key: %q, want qp state: ERR", got)
		}
	}

	// The capture: every packet verifies, and each round's SEND with
	// invalidate went out as SEND Only with Invalidate (0x17).
	if err := res.stats.Err(); err != nil {
		t.Error(err)
	}
	if n := res.stats.Opcodes[bth.RCSendOnlyInvalidate]; n < c.rounds {
		t.Errorf("capture: %d SEND Only with Invalidate packets, want at least %d", n, c.rounds)
	}
	u := uroceCounters(t, res.uroce)
	for _, k := range []string{"RetryExcErrs", "RNRRetryExcErrs"} {
		if u[k] != 0 {
			t.Errorf("uroce's %s is %d", k, u[k])
		}
	}
	if c.drop == 0 {
		for _, k := range []string{"SeqNAKsRcvd", "SeqNAKsSent"} {
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
	for _, k := range []string{"retry_exceeded_err", "send_err"} {
		if gd[k] != 0 {
			t.Errorf("guest's %s moved by %d", k, gd[k])
		}
	}
}
