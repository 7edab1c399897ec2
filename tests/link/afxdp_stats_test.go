package link

import (
	"errors"
	"testing"
	"time"

	"github.com/uroce/uroce/internal/netns"
	"github.com/uroce/uroce/pkg/link"
	"github.com/uroce/uroce/pkg/link/afxdp"
	"github.com/uroce/uroce/pkg/link/linktest"
)

// TestAFXDPSocketStats checks the kernel's socket counters as the link
// sums them: transmits kicked the sender's socket, nothing was dropped on a
// quiet veth, and a closed link says so.
func TestAFXDPSocketStats(t *testing.T) {
	netns.RequireRoot(t)
	var x backend
	for _, b := range backends {
		if b.name == "afxdp" {
			x = b
		}
	}
	p := netns.NewPair(t, netns.PairConfig{})
	a, b := p.Addr(4)
	la := openIn(t, x, p.A, a).(*afxdp.Link)
	defer la.Close()
	lb := openIn(t, x, p.B, b).(*afxdp.Link)
	defer lb.Close()
	la.Resolve(b)
	lb.Resolve(a)
	if err := linktest.Exchange(t, la, lb, b, a, 200, 1024, 32, 3*time.Second); err != nil {
		t.Fatalf("exchange: %v", err)
	}
	for _, l := range []*afxdp.Link{la, lb} {
		s, err := l.SocketStats()
		if err != nil {
			t.Fatalf("SocketStats: %v", err)
		}
		if s.Rx_dropped != 0 || s.Rx_ring_full != 0 || s.Rx_invalid_descs != 0 || s.Tx_invalid_descs != 0 {
			t.Errorf("drops on a quiet veth: %+v", s)
		}
	}
	if s, _ := la.SocketStats(); s.Kicks == 0 {
		t.Errorf("sender's socket never kicked: %+v", s)
	}
	la.Close()
	if _, err := la.SocketStats(); !errors.Is(err, link.ErrClosed) {
		t.Errorf("SocketStats after Close: %v, want link.ErrClosed", err)
	}
}
