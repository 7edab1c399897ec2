package netdev

import (
	"net/netip"
	"strings"
	"testing"
)

func TestResolve(t *testing.T) {
	for _, c := range []struct {
		host string
		want netip.AddrPort
	}{
		{"10.0.0.1", netip.MustParseAddrPort("10.0.0.1:7174")},
		{"::ffff:10.0.0.1", netip.MustParseAddrPort("10.0.0.1:7174")}, // unmapped, as rxe's IPv4 GIDs
		{"fe80::1", netip.MustParseAddrPort("[fe80::1]:7174")},
		{"localhost", netip.MustParseAddrPort("127.0.0.1:7174")},
	} {
		got, err := Resolve(c.host, 7174)
		if err != nil {
			t.Errorf("Resolve(%q): %v", c.host, err)
			continue
		}
		// localhost may resolve to ::1 first.
		if got != c.want && !(c.host == "localhost" && got.Addr().IsLoopback()) {
			t.Errorf("Resolve(%q) = %v, want %v", c.host, got, c.want)
		}
	}
	if _, err := Resolve("no-such-host.invalid", 1); err == nil || !strings.Contains(err.Error(), "getaddrinfo failed") {
		t.Errorf("unknown host: %v", err)
	}
}

func TestOpenErrors(t *testing.T) {
	if _, err := OpenAddr("eth0"); err == nil || !strings.Contains(err.Error(), `bad address "eth0"`) {
		t.Errorf("OpenAddr of a name: %v", err)
	}
	if _, err := Open("no-such-if0", ""); err == nil {
		t.Error("Open of a missing interface succeeded")
	}
}
