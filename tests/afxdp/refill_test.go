package afxdp_test

import (
	"testing"
	"time"

	"github.com/uroce/uroce/internal/netns"
	"github.com/uroce/uroce/pkg/link"
	"github.com/uroce/uroce/pkg/link/afxdp"
)

// TestRefillBeforeSleep: Release leaves a packet's chunk for the next Recv
// or Wait to give back to the kernel. A receiver that held every chunk of
// a small ring (64) and released them all must still get the next packet
// while it sleeps in Wait: the chunks go back on Fill before the sleep.
func TestRefillBeforeSleep(t *testing.T) {
	netns.RequireRoot(t)
	p := netns.NewPair(t, pairConfig(1500, 4))
	a := open(t, p.A, afxdp.Config{})
	b := open(t, p.B, afxdp.Config{RingSize: 64, Wait: afxdp.WaitPoll})
	const ring = 64
	pk := make([]*link.Packet, 1)
	// send sends one packet, again while the next hop is being learnt;
	// false if a has no buffer. Only one goroutine sends at a time.
	send := func(psn uint32) bool {
		for {
			if a.Alloc(pk) != 1 {
				return false
			}
			fill(t, pk[0], psn, 100, p.AddrB)
			if _, err := a.Send(pk); err == nil {
				return true
			}
			time.Sleep(time.Millisecond)
		}
	}
	rx := make([]*link.Packet, ring)
	for round := range 3 {
		// Stragglers of the round before go first (their chunks go
		// back on Fill in these calls).
		for {
			if err := b.Wait(20 * time.Millisecond); err != nil {
				t.Fatal(err)
			}
			n, err := b.Recv(rx)
			if err != nil {
				t.Fatal(err)
			}
			b.Release(rx[:n])
			if n == 0 {
				break
			}
		}
		// Every chunk of b's ring, held until all have come.
		for i := range ring {
			if !send(uint32(round*1000 + i)) {
				t.Fatal("alloc failed")
			}
		}
		held := 0
		deadline := time.Now().Add(giveUp)
		for held < ring {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: %d of %d packets came; stats %+v", round, held, ring, b.Stats())
			}
			if err := b.Wait(100 * time.Millisecond); err != nil {
				t.Fatal(err)
			}
			n, err := b.Recv(rx[held:])
			if err != nil {
				t.Fatal(err)
			}
			held += n
		}
		b.Release(rx[:held])
		// Fill is empty now until b gives the chunks back; the next
		// packet must arrive while b waits.
		done, sent := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(sent)
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				send(uint32(round*1000 + 500 + i))
				time.Sleep(5 * time.Millisecond)
			}
		}()
		// One sleep: without its chunks the kernel drops every packet
		// until a Recv, and the Wait would last all of giveUp.
		err := b.Wait(giveUp)
		n, rerr := b.Recv(rx)
		close(done)
		<-sent
		if err != nil || rerr != nil {
			t.Fatal(err, rerr)
		}
		b.Release(rx[:n])
		if n == 0 {
			t.Fatalf("round %d: nothing came in one Wait after the ring's chunks were released; stats %+v", round, b.Stats())
		}
	}
}
