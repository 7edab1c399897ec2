package netns_test

import (
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/uroce/uroce/internal/netns"
	vnetns "github.com/vishvananda/netns"
)

func TestUniqueName(t *testing.T) {
	seen := map[string]bool{}
	for range 2000 {
		n := netns.UniqueName(t, "abcdef")
		if len(n) > netns.IFNameMax {
			t.Fatalf("%q longer than %d", n, netns.IFNameMax)
		}
		if !strings.HasPrefix(n, "abcd") {
			t.Fatalf("%q lost its prefix", n)
		}
		if seen[n] {
			t.Fatalf("duplicate name %q", n)
		}
		seen[n] = true
	}
}

func TestPairPingUDP(t *testing.T) {
	netns.RequireRoot(t)
	var nsNames []string
	t.Run("pair", func(t *testing.T) {
		for _, fam := range []int{4, 6} {
			p := netns.NewPair(t, netns.PairConfig{MTU: 9000})
			nsNames = append(nsNames, p.A.NS.Name, p.B.NS.Name)
			a, b := p.Addr(fam)
			var conn *net.UDPConn
			if err := p.B.NS.Do(func() (err error) {
				conn, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(b, 9999)))
				return err
			}); err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if err := p.A.NS.Do(func() error {
				c, err := net.DialUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(a, 0)),
					net.UDPAddrFromAddrPort(netip.AddrPortFrom(b, 9999)))
				if err != nil {
					return err
				}
				defer c.Close()
				_, err = c.Write(make([]byte, 8000))
				return err
			}); err != nil {
				t.Fatal(err)
			}
			conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			buf := make([]byte, 9000)
			n, from, err := conn.ReadFromUDPAddrPort(buf)
			if err != nil {
				t.Fatalf("v%d: %v", fam, err)
			}
			if n != 8000 || from.Addr() != a {
				t.Fatalf("v%d: got %d bytes from %v", fam, n, from)
			}
		}
	})
	// The subtest's cleanups have run: its namespaces must be gone.
	for _, n := range nsNames {
		if _, err := os.Stat("/var/run/netns/" + n); err == nil {
			t.Errorf("namespace %s left behind", n)
		}
		if h, err := vnetns.GetFromName(n); err == nil {
			h.Close()
			t.Errorf("namespace %s still resolvable", n)
		}
	}
}

// TestParseSNMP reads a /proc/net/snmp's UDP rows by name.
func TestParseSNMP(t *testing.T) {
	b := []byte("Ip: Forwarding DefaultTTL\nIp: 1 64\nUdp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors\nUdp: 120 3 7 99 5 2\nUdpLite: InDatagrams\nUdpLite: 0\n")
	st := netns.ParseSNMP(b, "Udp:")
	if st["InDatagrams"] != 120 || st["RcvbufErrors"] != 5 || st["SndbufErrors"] != 2 || len(st) != 6 {
		t.Errorf("Udp: %v", st)
	}
	if ip := netns.ParseSNMP(b, "Ip:"); ip["DefaultTTL"] != 64 {
		t.Errorf("Ip: %v", ip)
	}
}
