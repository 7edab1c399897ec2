package afxdp_test

import (
	"testing"
	"time"

	"github.com/uroce/uroce/internal/netns"
	"github.com/uroce/uroce/pkg/link/afxdp"
)

// TestBusyPollRecvSpins: with WaitBusyPoll, a receiver that spins on Recv
// alone, never calling Wait (as an engine polling its CQ does), gets
// every packet, allocating nothing per packet, while Recv on an empty ring
// makes the busy-poll recvfrom that runs the device's NAPI.
func TestBusyPollRecvSpins(t *testing.T) {
	netns.RequireRoot(t)
	for _, mtu := range []int{1500, 9000} {
		p := netns.NewPair(t, pairConfig(mtu, 4))
		cfg := afxdp.Config{Wait: afxdp.WaitBusyPoll}
		a, b := open(t, p.A, cfg), open(t, p.B, cfg)
		if !b.BusyPoll() {
			t.Logf("MTU %d: the kernel refused SO_BUSY_POLL; Recv still spins on the ring", mtu)
		}
		for _, size := range []int{64, 4000} {
			if size > mtu-100 {
				continue
			}
			exchange(t, a, b, p.AddrB, []int{size}) // warm: neighbour cache, rings
			r := newRound(t, a, b, p.AddrB, size)
			spin := func() {
				r.send()
				for start := time.Now(); ; {
					n, err := b.Recv(r.rx)
					if err != nil {
						t.Fatal(err)
					}
					b.Release(r.rx[:n])
					if n > 0 {
						return
					}
					if time.Since(start) > giveUp {
						t.Fatalf("MTU %d, %d bytes: nothing arrived", mtu, size)
					}
				}
			}
			if n := testing.AllocsPerRun(200, spin); n != 0 {
				t.Errorf("MTU %d, %d-byte payload: %v allocations per packet", mtu, size, n)
			}
		}
	}
}
