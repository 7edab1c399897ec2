package verbs_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uroce/uroce/pkg/link"
	"github.com/uroce/uroce/pkg/link/pipe"
	"github.com/uroce/uroce/verbs"
)

// stressSize is the length of the k-th message on a QP: 8 to 3007 bytes,
// so most span several packets.
func stressSize(k int) int { return 8 + k*37%3000 }

// stressByte is byte j of message k on QP i (its first 8 bytes hold k).
func stressByte(i, k, j int) byte { return byte(i*131 + k*7 + j) }

// TestStress: several QP pairs between two devices, each with a poster,
// a poller of its send CQ and a receiver, and goroutines reading counters
// and states meanwhile; one receive CQ is shared by every QP and polled
// by several goroutines at once. Every SEND's payload and every READ's
// data is checked, every WR completes exactly once and in order per QP.
// Modes: both devices inline, both in background, one of each, and both
// switched from inline to background in mid-run.
// Run it with -race: the devices' engines and links must only ever be
// used by their owner. Over UDP on loopback the link itself also checks
// that: its data path panics when two goroutines are in it at once.
func TestStress(t *testing.T) {
	for _, kind := range []string{"pipe", "udp"} {
		for _, mode := range []string{"inline", "background", "mixed", "switch"} {
			t.Run(kind+"/"+mode, func(t *testing.T) { stress(t, kind, mode) })
		}
	}
}

func stress(t *testing.T, kind, mode string) {
	const (
		nqp      = 4
		ops      = 600 // per QP
		depth    = 16  // outstanding WRs per QP, and receive slots
		slot     = 4096
		readSpan = 8192
	)
	var la, lb link.Link
	if kind == "pipe" {
		la, lb = pipe.New(pipe.Config{})
	} else {
		la, lb = linkPair(t, kind, 3)
	}
	a, b := verbs.Open(la, verbs.Inline()), verbs.Open(lb, verbs.Inline())
	defer a.Close()
	defer b.Close()
	switch mode {
	case "background":
		a.Start()
		b.Start()
	case "mixed":
		b.Start()
	}
	access := verbs.AccessLocalWrite | verbs.AccessRemoteWrite | verbs.AccessRemoteRead | verbs.AccessRemoteAtomic
	pda, pdb := a.AllocPD(), b.AllocPD()
	rcq := b.CreateCQ(nqp * depth) // shared by every receiving QP
	type side struct {
		qa, qb   *verbs.QueuePair
		scq, bcq *verbs.CQ
		ma, mb   *verbs.MR // ma: send and READ slots; mb: receive slots, then the READ source
		desc     [ops]struct {
			op     verbs.WROpcode
			off, n int
		}
		tokens chan struct{}
	}
	s := make([]*side, nqp)
	for i := range s {
		x := &side{tokens: make(chan struct{}, depth)}
		x.scq, x.bcq = a.CreateCQ(depth), b.CreateCQ(depth)
		var err error
		if x.qa, err = pda.CreateQP(&verbs.QPInit{SendCQ: x.scq, RecvCQ: x.scq, Cap: verbs.QPCap{MaxSendWR: depth, MaxRecvWR: 1}}); err != nil {
			t.Fatal(err)
		}
		if x.qb, err = pdb.CreateQP(&verbs.QPInit{SendCQ: x.bcq, RecvCQ: rcq, Cap: verbs.QPCap{MaxSendWR: 1, MaxRecvWR: depth}}); err != nil {
			t.Fatal(err)
		}
		if x.ma, err = pda.RegMR(make([]byte, depth*slot), access); err != nil {
			t.Fatal(err)
		}
		if x.mb, err = pdb.RegMR(make([]byte, depth*slot+readSpan), access); err != nil {
			t.Fatal(err)
		}
		for j := range readSpan {
			x.mb.Buf()[depth*slot+j] = byte(i ^ j*3)
		}
		if err := x.qa.Connect(x.qb.Endpoint(uint32(100*i)), verbs.ConnectOptions{PSN: uint32(7 * i)}); err != nil {
			t.Fatal(err)
		}
		if err := x.qb.Connect(x.qa.Endpoint(uint32(7*i)), verbs.ConnectOptions{PSN: uint32(100 * i)}); err != nil {
			t.Fatal(err)
		}
		for r := range depth {
			if err := x.qb.PostRecv(&verbs.RecvWR{ID: uint64(i)<<32 | uint64(r), SGL: []verbs.SGE{x.mb.SGE(r*slot, slot)}}); err != nil {
				t.Fatal(err)
			}
		}
		s[i] = x
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errc := make(chan error, 4*nqp+8)
	fail := func(err error) {
		errc <- err
		cancel()
	}
	var sent, received [nqp]atomic.Int64
	seen := make([][]atomic.Bool, nqp)
	for i := range seen {
		seen[i] = make([]atomic.Bool, ops)
	}
	for i, x := range s {
		wg.Add(2)
		go func() { // poster: SENDs and READs, at most depth outstanding
			defer wg.Done()
			for k := range ops {
				select {
				case x.tokens <- struct{}{}:
				case <-ctx.Done():
					return
				}
				sl, n := k%depth*slot, stressSize(k)
				wr := verbs.SendWR{ID: uint64(k), Flags: verbs.SendSignaled, SGL: []verbs.SGE{x.ma.SGE(sl, n)}}
				if k%3 == 2 {
					off := k * 13 % (readSpan - n)
					x.desc[k].op, x.desc[k].off, x.desc[k].n = verbs.WRRead, off, n
					wr.Opcode, wr.RemoteAddr, wr.RKey = verbs.WRRead, x.mb.Addr()+uint64(depth*slot+off), x.mb.RKey()
				} else {
					buf := x.ma.Buf()[sl : sl+n]
					binary.LittleEndian.PutUint64(buf, uint64(k))
					for j := 8; j < n; j++ {
						buf[j] = stressByte(i, k, j)
					}
					x.desc[k].op, x.desc[k].n = verbs.WRSend, n
					wr.Opcode = verbs.WRSend
					sent[i].Add(1)
				}
				if err := x.qa.PostSend(&wr); err != nil {
					fail(fmt.Errorf("QP %d post %d: %w", i, k, err))
					return
				}
			}
		}()
		go func() { // poller of the send CQ: order, status, READ data
			defer wg.Done()
			var wc [4]verbs.WC
			for next := 0; next < ops; {
				n, err := x.scq.Wait(ctx, wc[:])
				if err != nil {
					fail(fmt.Errorf("QP %d send CQ after %d: %w", i, next, err))
					return
				}
				for _, w := range wc[:n] {
					if w.WRID != uint64(next) || w.Status != verbs.WCSuccess {
						fail(fmt.Errorf("QP %d completion %+v, want WR %d", i, w, next))
						return
					}
					if d := x.desc[next]; d.op == verbs.WRRead {
						sl := next % depth * slot
						got, want := x.ma.Buf()[sl:sl+d.n], x.mb.Buf()[depth*slot+d.off:][:d.n]
						if string(got) != string(want) {
							fail(fmt.Errorf("QP %d READ %d: data differs", i, next))
							return
						}
					}
					next++
					<-x.tokens
				}
			}
		}()
	}
	total := int64(0)
	for k := range ops {
		if k%3 != 2 {
			total++
		}
	}
	total *= nqp
	var got atomic.Int64
	// The receivers' context ends when the senders have all their
	// completions (in inline mode the receivers' Waits are what drives
	// device B, which must answer to the end); a failure ends both.
	rctx, rcancel := context.WithCancel(ctx)
	defer rcancel()
	var rwg sync.WaitGroup
	for range 3 {
		rwg.Add(1)
		go func() { // receivers sharing one CQ: payload, then repost
			defer rwg.Done()
			var wc [2]verbs.WC
			for {
				n, err := rcq.Wait(rctx, wc[:])
				if err != nil {
					if ctx.Err() == nil && rctx.Err() != nil {
						return // done
					}
					fail(fmt.Errorf("receive CQ after %d: %w", got.Load(), err))
					return
				}
				for _, w := range wc[:n] {
					i, r := int(w.WRID>>32), int(w.WRID&0xffffffff)
					if w.Status != verbs.WCSuccess || i >= nqp || w.Opcode != verbs.WCRecv {
						fail(fmt.Errorf("receive completion %+v", w))
						return
					}
					x := s[i]
					buf := x.mb.Buf()[r*slot:][:w.ByteLen]
					k := int(binary.LittleEndian.Uint64(buf))
					if k >= ops || int(w.ByteLen) != stressSize(k) || seen[i][k].Swap(true) {
						fail(fmt.Errorf("QP %d: message %d of %d bytes unexpected", i, k, w.ByteLen))
						return
					}
					for j := 8; j < len(buf); j++ {
						if buf[j] != stressByte(i, k, j) {
							fail(fmt.Errorf("QP %d message %d: byte %d differs", i, k, j))
							return
						}
					}
					received[i].Add(1)
					err := x.qb.PostRecv(&verbs.RecvWR{ID: w.WRID, SGL: []verbs.SGE{x.mb.SGE(r*slot, slot)}})
					if err != nil {
						fail(fmt.Errorf("QP %d repost: %w", i, err))
						return
					}
					got.Add(1)
				}
			}
		}()
	}
	if mode == "switch" {
		// Both devices go from inline to background with traffic in
		// flight, from a goroutine of their own.
		wg.Add(1)
		go func() {
			defer wg.Done()
			for got.Load() < total/3 && ctx.Err() == nil {
				time.Sleep(100 * time.Microsecond)
			}
			a.Start()
			b.Start()
		}()
	}
	stop := make(chan struct{})
	var readers sync.WaitGroup
	readers.Add(1)
	go func() { // control calls racing with the data path
		defer readers.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, x := range s {
				if st := x.qa.State(); st != verbs.StateRTS {
					fail(fmt.Errorf("QP state %v", st))
					return
				}
				_ = x.qb.Counters()
			}
			_ = a.Counters()
			_ = b.Counters()
			_ = a.LinkStats()
			time.Sleep(time.Millisecond)
		}
	}()
	wg.Wait()
	for got.Load() < total && ctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
	rcancel()
	rwg.Wait()
	close(stop)
	readers.Wait()
	close(errc)
	if err := <-errc; err != nil {
		t.Fatal(err) // the first failure; the rest may be its echoes
	}
	if got.Load() != total {
		t.Fatalf("received %d of %d messages", got.Load(), total)
	}
	for i := range s {
		if sent[i].Load() != received[i].Load() {
			t.Errorf("QP %d: sent %d, received %d", i, sent[i].Load(), received[i].Load())
		}
	}
	if c := a.Counters(); c.CompletedSends != nqp*ops {
		t.Errorf("device A completed %d sends, want %d", c.CompletedSends, nqp*ops)
	}
	if c := b.Counters(); c.CompletedRecvs != uint64(total) {
		t.Errorf("device B completed %d receives, want %d", c.CompletedRecvs, total)
	}
}
