package rawbench

import (
	"strconv"
	"testing"

	"github.com/uroce/uroce/internal/netns"
)

// TestXDPRC runs the RC-shaped floor briefly between two namespaces, one
// packet a message and four (IB MTU 1024 over a 1500-byte link): every
// frame's ICRC and PSN is checked on arrival, so completing the round
// trips means both ends built, stamped and verified each packet. At MTU
// 9000 a 4096-B packet's frame spans two UMEM chunks (multi-buffer). Held
// ACKs (Config.HoldACK) leave with the next message and asleep ends
// (Config.Poller) must be woken by each transmit.
func TestXDPRC(t *testing.T) {
	for _, mtu := range []int{1500, 9000} {
		t.Run(strconv.Itoa(mtu), func(t *testing.T) { testXDPRC(t, mtu) })
	}
}

func testXDPRC(t *testing.T, mtu int) {
	p := netns.NewPair(t, netns.PairConfig{MTU: mtu})
	pmtu := 1024
	if mtu == 9000 {
		pmtu = 4096
	}
	for _, cfg := range []Config{{Iters: 200, Warm: 50}, {Iters: 200, Warm: 50, HoldACK: true, Poller: true}} {
		for _, size := range []int{64, 4096} {
			r, err := XDPRC(cfg, p.A, p.B, p.AddrA, p.AddrB, size, pmtu)
			if err != nil {
				t.Fatalf("%d B, %+v: %v", size, cfg, err)
			}
			if r.Min <= 0 || r.P50 < r.Min || r.P99 < r.P50 {
				t.Fatalf("%d B, %+v: round trips min %v p50 %v p99 %v", size, cfg, r.Min, r.P50, r.P99)
			}
			t.Logf("%d B, held ACKs %v, asleep %v: RC floor round trip p50 %v", size, cfg.HoldACK, cfg.Poller, r.P50)
		}
	}
}
