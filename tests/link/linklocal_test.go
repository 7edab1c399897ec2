package link

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/uroce/uroce/internal/netns"
	"github.com/uroce/uroce/pkg/link"
	"github.com/uroce/uroce/pkg/link/linktest"
	"github.com/uroce/uroce/pkg/link/udp"
)

// TestLinkLocal exchanges packets between link-local IPv6 addresses, the
// GIDs rxe puts at index 0, on every pair of backends: the udp link binds
// with the zone, given ("fe80::1%veth") or found from the address, and
// sends on that interface; the GID carries no zone.
func TestLinkLocal(t *testing.T) {
	netns.RequireRoot(t)
	a := netip.MustParsePrefix("fe80::a:1/64")
	b := netip.MustParsePrefix("fe80::a:2/64")
	for _, x := range backends {
		for _, y := range backends {
			t.Run(x.name+"-"+y.name, func(t *testing.T) {
				p := netns.NewPair(t, netns.PairConfig{A: []netip.Prefix{a}, B: []netip.Prefix{b}})
				// A's udp link is given the zone, B's finds it.
				la := openIn(t, x, p.A, a.Addr().WithZone(p.A.Name))
				defer la.Close()
				lb := openIn(t, y, p.B, b.Addr())
				defer lb.Close()
				for _, l := range []link.Link{la, lb} {
					if z := l.Info().Addr.Zone(); z != "" {
						t.Errorf("%s: GID %v carries zone %q", l.Info().Kind, l.Info().Addr, z)
					}
				}
				if err := linktest.Exchange(t, la, lb, b.Addr(), netip.Addr{}, 1, 0, 1, 3*time.Second); err != nil {
					t.Fatalf("warm-up: %v", err)
				}
				if err := linktest.Exchange(t, lb, la, a.Addr(), netip.Addr{}, 1, 0, 1, 3*time.Second); err != nil {
					t.Fatalf("warm-up: %v", err)
				}
				for _, size := range []int{0, 1024} {
					if err := linktest.Exchange(t, la, lb, b.Addr(), a.Addr(), 100, size, 16, 3*time.Second); err != nil {
						t.Fatalf("%s->%s %d B: %v", x.name, y.name, size, err)
					}
					if err := linktest.Exchange(t, lb, la, a.Addr(), b.Addr(), 100, size, 16, 3*time.Second); err != nil {
						t.Fatalf("%s->%s %d B: %v", y.name, x.name, size, err)
					}
				}
			})
		}
	}
}

// TestLinkLocalErrors: a link-local address no interface holds, or one
// with a zone that names no interface, fails with udp.ErrAddr or the
// lookup's error and says what to give.
func TestLinkLocalErrors(t *testing.T) {
	netns.RequireRoot(t)
	p := netns.NewPair(t, netns.PairConfig{A: []netip.Prefix{netip.MustParsePrefix("fe80::b:1/64")}, B: []netip.Prefix{netip.MustParsePrefix("fe80::b:2/64")}})
	for _, tc := range []struct {
		addr, want string
		is         error
	}{
		{"fe80::b:9", "no interface holds it", udp.ErrAddr},
		{"fe80::b:1%nosuchif", "zone of fe80::b:1%nosuchif", nil},
		{"fd00::1%" + p.A.Name, "a zone is for link-local addresses only", udp.ErrAddr},
	} {
		err := p.A.NS.Do(func() error {
			l, err := udp.Open(udp.Config{Addr: netip.MustParseAddr(tc.addr)})
			if err == nil {
				l.Close()
			}
			return err
		})
		if err == nil || !strings.Contains(err.Error(), tc.want) || (tc.is != nil && !errors.Is(err, tc.is)) {
			t.Errorf("Open(%s): %v, want an error with %q", tc.addr, err, tc.want)
		}
	}
}
