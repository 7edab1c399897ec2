package link

import (
	"net/netip"
	"testing"
	"time"

	"github.com/uroce/uroce/internal/netns"
	"github.com/uroce/uroce/pkg/link"
	"github.com/uroce/uroce/pkg/link/linktest"
)

// TestResolveAhead checks that a link told its peer ahead of time
// (link.Resolver, as a QP does at RTR) drops none of its first packets
// while the next hop is learnt; without it the first Send to a new
// destination drops with link.ErrResolving, which costs a transport a local
// ACK timeout.
func TestResolveAhead(t *testing.T) {
	netns.RequireRoot(t)
	for _, x := range backends {
		for _, fam := range []int{4, 6} {
			for _, ahead := range []bool{false, true} {
				name := x.name + map[int]string{4: "/v4", 6: "/v6"}[fam] + map[bool]string{false: "/cold", true: "/ahead"}[ahead]
				t.Run(name, func(t *testing.T) {
					// Resolve waits at most link.ResolveWait; an answer
					// later than that arrives in the background and the
					// packets sent before it drop, as documented. A slow
					// machine can stretch one ND exchange past the bound,
					// so a case whose Resolve ran out of time is tried
					// again on a fresh pair; one that returned in time
					// must drop nothing.
					for attempt := 1; ; attempt++ {
						late := tryResolveAhead(t, x, fam, ahead)
						if !late {
							return
						}
						if attempt == 3 {
							t.Fatalf("resolving ahead ran past link.ResolveWait (%v) on %d fresh pairs", link.ResolveWait, attempt)
						}
						t.Logf("attempt %d: Resolve ran past link.ResolveWait; again on a fresh pair", attempt)
					}
				})
			}
		}
	}
}

// tryResolveAhead runs one case of TestResolveAhead on a fresh pair. It
// reports late, without judging, when ahead and a Resolve call returned
// only at its bound with packets dropped; otherwise it checks the case.
func tryResolveAhead(t *testing.T, x backend, fam int, ahead bool) (late bool) {
	t.Helper()
	la, lb, ra, a, b := resolverPair(t, x, fam)
	if ahead {
		// Each waits for its answer: a netlink round trip and, in a
		// fresh namespace, one ARP or ND exchange over the veth.
		for _, r := range []struct {
			r   link.Resolver
			dst netip.Addr
		}{{ra, b}, {lb.(link.Resolver), a}} {
			start := time.Now()
			r.r.Resolve(r.dst)
			late = late || time.Since(start) >= link.ResolveWait
		}
	}
	for _, w := range [][2]link.Link{{la, lb}, {lb, la}} {
		dst, src := b, a
		if w[0] == lb {
			dst, src = a, b
		}
		if err := linktest.Exchange(t, w[0], w[1], dst, src, 1, 0, 1, 3*time.Second); err != nil {
			t.Fatalf("exchange: %v", err)
		}
	}
	dropped := la.Stats().TxDropped + lb.Stats().TxDropped
	if ahead && dropped != 0 {
		if late {
			return true
		}
		t.Errorf("resolved ahead: %d packets dropped", dropped)
	}
	if !ahead && dropped == 0 {
		t.Errorf("cold: no packet dropped while resolving; the test shows nothing")
	}
	return false
}

// TestResolveWhileOwnerWaits calls Resolve from another goroutine while
// the link's owner sits in Wait, as verbs' Modify does while a background
// engine (or a goroutine in CQ.Wait) owns the link: Resolve must not enter
// the data path, so neither side panics, and the owner still receives.
func TestResolveWhileOwnerWaits(t *testing.T) {
	netns.RequireRoot(t)
	for _, x := range backends {
		t.Run(x.name, func(t *testing.T) {
			la, lb, ra, a, b := resolverPair(t, x, 4)
			stop := make(chan struct{})
			owned := make(chan struct{})
			go func() {
				defer close(owned)
				for {
					select {
					case <-stop:
						return
					default:
					}
					la.Wait(time.Millisecond)
				}
			}()
			for range 50 {
				ra.Resolve(b)
			}
			close(stop)
			<-owned
			if err := linktest.Exchange(t, lb, la, a, b, 1, 0, 1, 3*time.Second); err != nil {
				t.Fatalf("exchange after: %v", err)
			}
		})
	}
}

// resolverPair opens x's links on both ends of a new veth pair of family
// fam, closed at cleanup, and returns A's as a link.Resolver; it skips
// backends whose kernel learns next hops (udp).
func resolverPair(t *testing.T, x backend, fam int) (la, lb link.Link, ra link.Resolver, a, b netip.Addr) {
	t.Helper()
	p := netns.NewPair(t, netns.PairConfig{})
	a, b = p.Addr(fam)
	la = openIn(t, x, p.A, a)
	t.Cleanup(func() { la.Close() })
	lb = openIn(t, x, p.B, b)
	t.Cleanup(func() { lb.Close() })
	ra, ok := la.(link.Resolver)
	if !ok {
		t.Skipf("%s learns no next hops itself", x.name)
	}
	return la, lb, ra, a, b
}
