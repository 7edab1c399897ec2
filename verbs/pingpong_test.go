package verbs_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/uroce/uroce/verbs"
)

// TestWritePingPong runs perftest's write_lat loop (run_iter_lat_write) in
// inline mode on two goroutines: each side writes iteration n into the
// last byte of the peer's buffer, waits for its WRITE's completion and for
// the peer's n. The side that receives the last WRITE stops calling at
// once, so the ACK of every WRITE must leave in the call that received it
// (rxe acknowledges each AckReq request), or the writer would wait forever.
func TestWritePingPong(t *testing.T) {
	const iters = 500
	a, b, qa, qb, ma, mb, ca, cb := connectedPair()
	defer a.Close()
	defer b.Close()
	// The IBA timer: an adaptive RTO of a few hundred microseconds would
	// resend whenever the peer's goroutine waits that long for a
	// processor, and a retransmission here must mean a missing ACK.
	for _, q := range []*verbs.QueuePair{qa, qb} {
		if err := q.Modify(&verbs.QPAttr{Retrans: verbs.RetransFixed}, verbs.AttrRetrans); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	side := func(server bool, q *verbs.QueuePair, mine, peer *verbs.MR, cq *verbs.CQ) error {
		wr := verbs.SendWR{Opcode: verbs.WRWrite, Flags: verbs.SendSignaled | verbs.SendInline,
			SGL: []verbs.SGE{mine.SGE(0, 8)}, InlineData: mine.Buf()[:8],
			RemoteAddr: peer.Addr() + 4096, RKey: peer.RKey()}
		var wc [1]verbs.WC
		var none [0]verbs.WC
		// perftest's loop: it runs until it has sent, completed and
		// received iters each, so the server, which writes first, ends
		// by waiting for the client's last WRITE.
		scnt, rcnt := 0, 0
		for scnt < iters || rcnt < iters {
			// The server's n-th WRITE follows the peer's (n-1)-th, the
			// client's follows the server's n-th.
			if rcnt < iters && !(server && scnt == 0) {
				rcnt++
				for mine.Buf()[4096+7] != byte(rcnt) {
					cq.Poll(none[:])
					runtime.Gosched() // one P must still run the peer
					if ctx.Err() != nil {
						return fmt.Errorf("waiting for the peer's %d: %w", rcnt, ctx.Err())
					}
				}
			}
			if scnt == iters {
				continue
			}
			scnt++
			mine.Buf()[7] = byte(scnt)
			if err := q.PostSend(&wr); err != nil {
				return err
			}
			for cq.Poll(wc[:]) == 0 {
				runtime.Gosched()
				if ctx.Err() != nil {
					return fmt.Errorf("waiting for completion %d: %w", scnt, ctx.Err())
				}
			}
			if wc[0].Status != verbs.WCSuccess {
				return fmt.Errorf("completion %d: %v", scnt, wc[0].Status)
			}
		}
		return nil
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	wg.Add(2)
	go func() { defer wg.Done(); errs[0] = side(true, qb, mb, ma, cb) }()
	go func() { defer wg.Done(); errs[1] = side(false, qa, ma, mb, ca) }()
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("side %d: %v", i, err)
		}
	}
	// The wire is rxe's: a WRITE and an ACK per iteration each way, none
	// sent twice.
	for i, d := range []*verbs.Device{a, b} {
		c := d.Counters()
		if c.TxPackets != 2*iters || c.RxPackets != 2*iters || c.Retransmits != 0 {
			t.Errorf("device %d: %d packets sent, %d received, %d retransmitted; want %d, %d, 0",
				i, c.TxPackets, c.RxPackets, c.Retransmits, 2*iters, 2*iters)
		}
	}
}
