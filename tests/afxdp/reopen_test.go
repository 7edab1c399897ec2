package afxdp_test

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/uroce/uroce/internal/netns"
	"github.com/uroce/uroce/pkg/link"
	"github.com/uroce/uroce/pkg/link/afxdp"
	"github.com/uroce/uroce/xdp"
)

// TestReopenAtOnce closes a link and opens the next on the same queue
// straight away, as a restarted service does, with frames arriving as the
// socket closes: Open must succeed every time (a bind that found the queue
// still held by the closed socket would fail with EBUSY), and each
// round's link carries traffic.
func TestReopenAtOnce(t *testing.T) {
	netns.RequireRoot(t)
	p := netns.NewPair(t, pairConfig(1500, 4))
	a := open(t, p.A, afxdp.Config{})
	for i := range 20 {
		var b *afxdp.Link
		if err := p.B.NS.Do(func() (err error) {
			b, err = afxdp.Open(afxdp.Config{Interface: p.B.Name})
			return err
		}); err != nil {
			t.Fatalf("round %d: open right after close: %v", i, err)
		}
		if i%5 == 0 {
			exchange(t, a, b, p.AddrB, []int{64})
		}
		// Close with frames arriving: they hold the socket in the kernel.
		pk := make([]*link.Packet, 64)
		for range 8 {
			n := a.Alloc(pk)
			for _, q := range pk[:n] {
				fill(t, q, uint32(i), 1024, p.AddrB)
			}
			a.Send(pk[:n])
		}
		if err := b.Close(); err != nil {
			t.Fatalf("round %d: close: %v", i, err)
		}
	}
}

// TestHeldQueueBusy: the wait for a closed socket's queue to come free
// does not hide a queue that a live socket holds: the second bind still
// fails with EBUSY.
func TestHeldQueueBusy(t *testing.T) {
	netns.RequireRoot(t)
	v, _ := multiQueuePair(t)
	err := v.NS.Do(func() error {
		s, err := xdp.Open(xdp.Config{Ifindex: v.Index, Queue: 0, NumFrames: 64, Mode: xdp.BindCopy})
		if err != nil {
			return err
		}
		defer s.Close()
		s2, err := xdp.Open(xdp.Config{Ifindex: v.Index, Queue: 0, NumFrames: 64, Mode: xdp.BindCopy})
		if err == nil {
			s2.Close()
			t.Error("a second socket bound a queue a live socket holds")
		} else if !errors.Is(err, unix.EBUSY) {
			t.Errorf("second bind: %v, want EBUSY", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
