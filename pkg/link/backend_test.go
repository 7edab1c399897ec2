package link_test

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/uroce/uroce/pkg/link"
	_ "github.com/uroce/uroce/pkg/link/afpacket"
	_ "github.com/uroce/uroce/pkg/link/afxdp"
	_ "github.com/uroce/uroce/pkg/link/udp"
)

func TestBackends(t *testing.T) {
	if got, want := link.Backends(), []string{"afpacket", "afxdp", "udp"}; !slices.Equal(got, want) {
		t.Fatalf("Backends() = %v, want %v", got, want)
	}
}

// TestOpenDefault opens the default backend by name, on a loopback
// address of its own so as not to meet another test's socket on 4791.
func TestOpenDefault(t *testing.T) {
	addr := netip.MustParseAddr("127.0.79.1")
	l, err := link.Open(link.Default, link.Config{Addr: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if i := l.Info(); i.Kind != link.Default || i.Addr != addr {
		t.Errorf("Info() = %+v, want kind %s on %v", i, link.Default, addr)
	}
}

func TestOpenErrors(t *testing.T) {
	_, err := link.Open("nosuch", link.Config{})
	if !errors.Is(err, link.ErrUnknownBackend) || !strings.Contains(err.Error(), "afpacket, afxdp, udp") {
		t.Errorf("unknown backend: %v", err)
	}
	for _, name := range []string{"afpacket", "afxdp"} {
		if _, err := link.Open(name, link.Config{Addr: netip.MustParseAddr("127.0.79.2")}); !errors.Is(err, link.ErrNoInterface) {
			t.Errorf("%s without an interface: %v", name, err)
		}
	}
}

func TestRegisterPanics(t *testing.T) {
	open := func(link.Config) (link.Link, error) { return nil, nil }
	for _, c := range []struct {
		name string
		open link.Opener
	}{{"udp", open}, {"registertest", nil}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%q, %v) did not panic", c.name, c.open != nil)
				}
			}()
			link.Register(c.name, c.open)
		}()
	}
}
