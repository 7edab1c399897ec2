package verbs_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/uroce/uroce/pkg/link/pipe"
	"github.com/uroce/uroce/verbs"
)

// TestSRQ: four RC QPs on one device share an SRQ; messages from their
// peers land in it, the armed limit is reported once through
// GetAsyncEvent, and an empty SRQ holds the senders back (RNR) until WRs
// are posted. Inline and background modes.
func TestSRQ(t *testing.T) {
	for _, background := range []bool{false, true} {
		t.Run(fmt.Sprintf("background=%v", background), func(t *testing.T) {
			la, lb := pipe.New(pipe.Config{})
			da, db := verbs.Open(la, verbs.Inline()), verbs.Open(lb, verbs.Inline())
			defer da.Close()
			defer db.Close()
			if background {
				da.Start()
				db.Start()
			}
			pa, pb := da.AllocPD(), db.AllocPD()
			ca, cb := da.CreateCQ(256), db.CreateCQ(256)
			srq, err := pb.CreateSRQ(verbs.SRQInit{MaxWR: 32, MaxSGE: 1})
			if err != nil {
				t.Fatal(err)
			}
			mb, err := pb.RegMR(make([]byte, 32*256), verbs.AccessLocalWrite)
			if err != nil {
				t.Fatal(err)
			}
			ma, err := pa.RegMR(make([]byte, 4096), verbs.AccessLocalWrite)
			if err != nil {
				t.Fatal(err)
			}
			const nqp = 4
			var qas, qbs []*verbs.QueuePair
			for range nqp {
				qa, err := pa.CreateQP(&verbs.QPInit{SendCQ: ca, RecvCQ: ca, Cap: verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 1}})
				if err != nil {
					t.Fatal(err)
				}
				qb, err := pb.CreateQP(&verbs.QPInit{SendCQ: cb, RecvCQ: cb, SRQ: srq, Cap: verbs.QPCap{MaxSendWR: 1}})
				if err != nil {
					t.Fatal(err)
				}
				if err := qa.Connect(qb.Endpoint(1), verbs.ConnectOptions{PSN: 1, MinRNRTimer: 1}); err != nil {
					t.Fatal(err)
				}
				if err := qb.Connect(qa.Endpoint(1), verbs.ConnectOptions{PSN: 1, MinRNRTimer: 1}); err != nil {
					t.Fatal(err)
				}
				qas, qbs = append(qas, qa), append(qbs, qb)
			}
			if err := qbs[0].PostRecv(&verbs.RecvWR{SGL: []verbs.SGE{mb.SGE(0, 1)}}); !errors.Is(err, verbs.ErrHasSRQ) {
				t.Fatalf("PostRecv on a QP with an SRQ: %v", err)
			}
			post := func(from, to int) {
				for i := from; i < to; i++ {
					if err := srq.PostRecv(&verbs.RecvWR{ID: uint64(i), SGL: []verbs.SGE{mb.SGE(i%32*256, 256)}}); err != nil {
						t.Fatal(err)
					}
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			send := func(n int) {
				for i := range n {
					wr := verbs.SendWR{ID: uint64(i), Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{ma.SGE(0, 64)}}
					if err := qas[i%nqp].PostSend(&wr); err != nil {
						t.Fatal(err)
					}
				}
			}
			// recv polls both CQs (in inline mode each Poll drives its
			// device: the senders must run too, for RNR retries) until
			// n receives and n sends have completed.
			recv := func(n int) map[uint32]int {
				perQP := map[uint32]int{}
				var wc [16]verbs.WC
				got, sent := 0, 0
				for got < n || sent < n {
					if ctx.Err() != nil {
						t.Fatalf("%d of %d receives, %d sends: %v", got, n, sent, ctx.Err())
					}
					k := cb.Poll(wc[:])
					for _, w := range wc[:k] {
						if w.Status != verbs.WCSuccess || w.ByteLen != 64 {
							t.Fatalf("receive %+v", w)
						}
						perQP[w.QPN]++
					}
					got += k
					k = ca.Poll(wc[:])
					for _, w := range wc[:k] {
						if w.Status != verbs.WCSuccess {
							t.Fatalf("send %+v", w)
						}
					}
					sent += k
					if k == 0 {
						time.Sleep(10 * time.Microsecond)
					}
				}
				return perQP
			}
			post(0, 16)
			if err := srq.Modify(&verbs.SRQAttr{Limit: 4}, verbs.SRQLimit); err != nil {
				t.Fatal(err)
			}
			if got := recv(0); len(got) != 0 {
				t.Fatal(got)
			}
			send(12) // 4 left: not below the limit
			if got := recv(12); len(got) != nqp {
				t.Fatalf("receives per QP %v", got)
			}
			if a := srq.Query(); a.Limit != 4 || srq.Len() != 4 {
				t.Fatalf("SRQ %+v, %d WRs", a, srq.Len())
			}
			send(1)
			recv(1)
			ectx, ecancel := context.WithTimeout(ctx, 5*time.Second)
			ev, err := db.GetAsyncEvent(ectx)
			ecancel()
			if err != nil || ev.Type != verbs.EventSRQLimitReached || ev.SRQ != srq {
				t.Fatalf("event %+v, %v", ev, err)
			}
			if a := srq.Query(); a.Limit != 0 {
				t.Fatalf("limit still armed: %+v", a)
			}
			// Empty the SRQ, then send more than it holds: RNR NAKs
			// until the WRs come.
			send(3)
			recv(3)
			send(8)
			// Let both devices run (in inline mode Poll drives them)
			// until the SRQ has refused a message.
			for end := time.Now().Add(5 * time.Second); time.Now().Before(end); {
				var none [1]verbs.WC
				if cb.Poll(none[:]) != 0 {
					t.Fatal("a receive from an empty SRQ")
				}
				ca.Poll(none[:0])
				var rnr uint64
				for _, q := range qbs {
					rnr += q.Counters().RNRNAKsSent
				}
				if rnr > 0 {
					break
				}
				time.Sleep(time.Millisecond)
			}
			post(100, 108)
			recv(8)
			var rnr uint64
			for _, q := range qbs {
				rnr += q.Counters().RNRNAKsSent
			}
			if rnr == 0 {
				t.Error("no RNR NAK from the empty SRQ")
			}
			ectx, ecancel = context.WithTimeout(ctx, 50*time.Millisecond)
			if ev, err := db.GetAsyncEvent(ectx); err == nil {
				t.Errorf("a second event while disarmed: %+v", ev)
			}
			ecancel()
			if err := srq.Destroy(); !errors.Is(err, verbs.ErrBusy) {
				t.Errorf("destroy in use: %v", err)
			}
			for _, q := range qbs {
				if err := q.Destroy(); err != nil {
					t.Fatal(err)
				}
			}
			if err := srq.Destroy(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
