package verbs_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uroce/uroce/verbs"
)

// TestSharedQP: eight goroutines post WRITEs on one QP at once (ibv's
// post calls are thread-safe) while two goroutines poll its CQ; every WR
// completes exactly once and every byte lands.
func TestSharedQP(t *testing.T) {
	for _, mode := range []string{"inline", "background"} {
		t.Run(mode, func(t *testing.T) {
			const posters, each, size = 8, 150, 512
			a, b, qa, _, ma, mb, ca, cb := connectedPair()
			defer a.Close()
			defer b.Close()
			if mode == "background" {
				a.Start()
				b.Start()
			}
			for i := range ma.Buf() {
				ma.Buf()[i] = byte(i*7 + i>>8)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			// At most 48 WRs between post and poll: the 64-entry CQ
			// cannot overflow.
			tokens := make(chan struct{}, 48)
			var seen [posters * each]atomic.Bool
			var done atomic.Int64
			errc := make(chan error, posters+3)
			var wg sync.WaitGroup
			for g := range posters {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for k := range each {
						select {
						case tokens <- struct{}{}:
						case <-ctx.Done():
							return
						}
						off := (g*each + k) % (65536 / size) * size
						// Each region slot is written by one WR at a time:
						// slots repeat only 128 WRs later, and at most 48
						// are outstanding.
						wr := verbs.SendWR{ID: uint64(g*each + k), Opcode: verbs.WRWrite, Flags: verbs.SendSignaled,
							SGL: []verbs.SGE{ma.SGE(off, size)}, RemoteAddr: mb.Addr() + uint64(off), RKey: mb.RKey()}
						if err := postSendRetry(qa, &wr); err != nil {
							errc <- err
							cancel()
							return
						}
					}
				}()
			}
			for range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var wc [3]verbs.WC
					for done.Load() < posters*each {
						n, err := ca.Wait(ctx, wc[:])
						if err != nil {
							if done.Load() < posters*each {
								errc <- fmt.Errorf("after %d completions: %w", done.Load(), err)
								cancel()
							}
							return
						}
						for _, w := range wc[:n] {
							if w.Status != verbs.WCSuccess || w.WRID >= posters*each || seen[w.WRID].Swap(true) {
								errc <- fmt.Errorf("completion %+v", w)
								cancel()
								return
							}
							<-tokens
							if done.Add(1) == posters*each {
								cancel() // release the other poller
							}
						}
					}
				}()
			}
			if mode == "inline" {
				// Nobody else drives device B.
				wg.Add(1)
				go func() {
					defer wg.Done()
					var none [0]verbs.WC
					for ctx.Err() == nil {
						cb.Poll(none[:])
						time.Sleep(20 * time.Microsecond)
					}
				}()
			}
			wg.Wait()
			close(errc)
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			if done.Load() != posters*each {
				t.Fatalf("%d of %d completions", done.Load(), posters*each)
			}
			if !bytes.Equal(ma.Buf(), mb.Buf()) {
				t.Fatal("data differs")
			}
		})
	}
}
