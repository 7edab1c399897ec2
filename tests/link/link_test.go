package link

import (
	"fmt"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/uroce/uroce/internal/netns"
	"github.com/uroce/uroce/pkg/link"
	"github.com/uroce/uroce/pkg/link/linktest"
)

// backend opens one kind of link on a veth end, inside its namespace.
type backend struct {
	name string
	open func(v netns.Veth, a netip.Addr) (link.Link, error)
}

var backends []backend

func register(b backend) { backends = append(backends, b) }

func openIn(t *testing.T, b backend, v netns.Veth, a netip.Addr) link.Link {
	t.Helper()
	var l link.Link
	if err := v.NS.Do(func() (err error) { l, err = b.open(v, a); return }); err != nil {
		t.Fatalf("%s: %v", b.name, err)
	}
	return l
}

func fds(t *testing.T) int {
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}

func TestMatrix(t *testing.T) {
	netns.RequireRoot(t)
	for _, x := range backends {
		for _, y := range backends {
			for _, fam := range []int{4, 6} {
				for _, mtu := range []int{1500, 9000} {
					t.Run(fmt.Sprintf("%s-%s/v%d/mtu%d", x.name, y.name, fam, mtu), func(t *testing.T) {
						exchange(t, x, y, fam, mtu)
					})
				}
			}
		}
	}
}

func exchange(t *testing.T, x, y backend, fam, mtu int) {
	p := netns.NewPair(t, netns.PairConfig{MTU: mtu})
	a, b := p.Addr(fam)
	before := fds(t)
	la := openIn(t, x, p.A, a)
	lb := openIn(t, y, p.B, b)
	closed := false
	defer func() {
		if !closed {
			la.Close()
			lb.Close()
		}
	}()
	if la.Info().MTU != mtu || lb.Info().MTU != mtu {
		t.Fatalf("MTU %d/%d, want %d", la.Info().MTU, lb.Info().MTU, mtu)
	}
	// One packet each way first: the kernel holds packets to a neighbour
	// it is still resolving in a small queue (unres_qlen_bytes) and drops
	// the rest of a burst; a transport retransmits, this test must not
	// have to.
	for _, w := range [][2]link.Link{{la, lb}, {lb, la}} {
		dst := b
		if w[0] == lb {
			dst = a
		}
		if err := linktest.Exchange(t, w[0], w[1], dst, netip.Addr{}, 1, 0, 1, 3*time.Second); err != nil {
			t.Fatalf("warm-up: %v", err)
		}
	}
	// The warm-up's first packets may have been dropped while the next hop
	// was learnt (link.ErrResolving); from here on nothing may be.
	warm := [2]link.Stats{la.Stats(), lb.Stats()}
	maxPayload := (la.Info().MaxRoCE() - 12 - 4) &^ 3
	for _, size := range []int{0, 64, 1024, maxPayload} {
		if err := linktest.Exchange(t, la, lb, b, a, 300, size, 32, 3*time.Second); err != nil {
			t.Fatalf("%s->%s %d B: %v", x.name, y.name, size, err)
		}
		if err := linktest.Exchange(t, lb, la, a, b, 300, size, 32, 3*time.Second); err != nil {
			t.Fatalf("%s->%s %d B: %v", y.name, x.name, size, err)
		}
	}
	for i, l := range []link.Link{la, lb} {
		s, w := l.Stats(), warm[i]
		if w.RxPackets != 1 || w.TxPackets != 1 || s.RxPackets != 1201 || s.TxPackets != 1201 ||
			s.RxICRCErrors != 0 || s.TxDropped != w.TxDropped {
			t.Errorf("%s stats %+v, after the warm-up %+v", l.Info().Kind, s, w)
		}
	}
	la.Close()
	lb.Close()
	closed = true
	// Sockets, eventfds and netlink subscriptions are gone (the last close
	// asynchronously, so give them a moment).
	for start := time.Now(); fds(t) != before; time.Sleep(10 * time.Millisecond) {
		if time.Since(start) > 5*time.Second {
			t.Fatalf("%d file descriptors before, %d after Close", before, fds(t))
		}
	}
}
