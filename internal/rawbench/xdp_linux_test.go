package rawbench

import (
	"testing"
	"time"

	"github.com/uroce/uroce/internal/netns"
)

// TestXDPPoller runs the AF_XDP floor's ping-pong busy-polled and with
// both ends asleep in the runtime's poller between frames. Asleep, every
// round trip needs the peer's wake-up; a frame that failed to wake a
// parked end would wait out the raw wait's 10 ms bound, and most round
// trips with it.
func TestXDPPoller(t *testing.T) {
	p := netns.NewPair(t, netns.PairConfig{})
	for _, poller := range []bool{false, true} {
		r, err := XDP(Config{Iters: 500, Warm: 50, Poller: poller}, p.A, p.B, p.AddrA, p.AddrB, 64)
		if err != nil {
			t.Fatalf("poller %v: %v", poller, err)
		}
		if r.Min <= 0 || r.P50 < r.Min || r.P99 < r.P50 {
			t.Fatalf("poller %v: round trips min %v p50 %v p99 %v", poller, r.Min, r.P50, r.P99)
		}
		if r.P50 >= 10*time.Millisecond {
			t.Fatalf("poller %v: round trip p50 %v: the ends were not woken by the frames", poller, r.P50)
		}
		t.Logf("poller %v: round trip p50 %v p99 %v", poller, r.P50, r.P99)
	}
}
