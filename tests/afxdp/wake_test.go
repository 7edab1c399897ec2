package afxdp_test

import (
	"testing"
	"time"

	"github.com/uroce/uroce/internal/netns"
	"github.com/uroce/uroce/pkg/link/afxdp"
)

// TestWake: in every wait mode, Wake from another goroutine ends a Wait
// that would otherwise last until giveUp with nothing arriving, and a Wake
// made before a Wait ends that Wait at once. verbs relies on it to hand
// work to an engine asleep in the link instead of polling it.
func TestWake(t *testing.T) {
	netns.RequireRoot(t)
	for _, tc := range []struct {
		name string
		mode afxdp.WaitMode
	}{{"poll", afxdp.WaitPoll}, {"busy-poll", afxdp.WaitBusyPoll}, {"hybrid", afxdp.WaitHybrid}} {
		t.Run(tc.name, func(t *testing.T) {
			p := netns.NewPair(t, pairConfig(1500, 4))
			l := open(t, p.A, afxdp.Config{Wait: tc.mode})
			woke := make(chan struct{})
			go func() {
				defer close(woke)
				time.Sleep(5 * time.Millisecond) // most likely inside Wait by now
				l.Wake()
			}()
			start := time.Now()
			if err := l.Wait(giveUp); err != nil {
				t.Fatal(err)
			}
			<-woke
			if time.Since(start) >= giveUp {
				t.Fatalf("Wait ran to its timeout; Wake did not end it")
			}
			l.Wake()
			start = time.Now()
			if err := l.Wait(giveUp); err != nil {
				t.Fatal(err)
			}
			if time.Since(start) >= giveUp {
				t.Fatalf("a Wake before Wait did not end it")
			}
			if n, err := l.Recv(nil); n != 0 || err != nil {
				t.Fatalf("Recv after wakes: %d %v", n, err)
			}
		})
	}
}
