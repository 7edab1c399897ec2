package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/uroce/uroce/internal/netns"
)

// TestLinkBackends runs tests over the raw backends (--link afpacket and
// afxdp) between two namespaces joined by a veth pair, the exchange over
// TCP across the same pair, as two hosts would.
func TestLinkBackends(t *testing.T) {
	netns.RequireRoot(t)
	for _, tc := range []struct {
		link, test string
		flags      []string
	}{
		{"afpacket", "write_lat", []string{"-s", "64", "-n", "200"}},
		{"afpacket", "write_bw", []string{"-s", "4096", "-n", "300", "-m", "1024"}},
		{"afxdp", "send_lat", []string{"-s", "64", "-n", "200"}},
		{"afxdp", "read_bw", []string{"-s", "3000", "-n", "300", "-m", "1024"}},
	} {
		t.Run(tc.link+"/"+tc.test, func(t *testing.T) {
			a, b := netns.New(t), netns.New(t)
			va, vb := netns.NewVeth(t, a, b)
			t.Logf("namespaces %s and %s", a.Name, b.Name)
			srvAddr, cliAddr := netip.MustParseAddr("10.201.0.1"), netip.MustParseAddr("10.201.0.2")
			va.AddAddr(t, netip.PrefixFrom(srvAddr, 24))
			vb.AddAddr(t, netip.PrefixFrom(cliAddr, 24))
			k, _ := kindByName(tc.test)
			flags := append([]string{"--link", tc.link}, tc.flags...)
			srvCfg, err := parseArgs(k, append(flags, "-d", va.Name), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			cliCfg, err := parseArgs(k, append(flags, "-d", vb.Name, srvAddr.String()), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			srvCfg.timeout, cliCfg.timeout = 2*time.Minute, 2*time.Minute
			var e pairEnds
			if err := a.Do(func() (err error) {
				addr, err := localAddr(srvCfg)
				if err != nil {
					return err
				}
				if e.srvDev, e.srvName, err = openDevice(srvCfg, addr); err != nil {
					return err
				}
				e.ln, err = net.Listen("tcp", net.JoinHostPort(srvAddr.String(), "0"))
				return err
			}); err != nil {
				t.Fatalf("server side: %v", err)
			}
			t.Cleanup(func() { e.srvDev.Close(); e.ln.Close() })
			if err := b.Do(func() (err error) {
				addr, err := localAddr(cliCfg)
				if err != nil {
					return err
				}
				if addr != cliAddr {
					t.Errorf("client runs on %v, want %v (-d %s)", addr, cliAddr, vb.Name)
				}
				e.cliDev, e.cliName, err = openDevice(cliCfg, addr)
				return err
			}); err != nil {
				t.Fatalf("client side: %v", err)
			}
			t.Cleanup(func() { e.cliDev.Close() })
			e.dial = func() (c net.Conn, err error) {
				// The connection belongs to the client's namespace.
				err = b.Do(func() error {
					c, err = dial(context.Background(), e.ln.Addr().String(), time.Minute)
					return err
				})
				return c, err
			}
			var so, co bytes.Buffer
			pc, err := e.run(context.Background(), srvCfg, cliCfg, &so, &co)
			if err != nil {
				t.Fatalf("%v\nserver:\n%s\nclient:\n%s", err, so.String(), co.String())
			}
			rows := tableRows(t, co.String())
			if len(rows) != 1 || int(rows[0]["#bytes"]) != srvCfg.size || int(rows[0]["#iterations"]) != srvCfg.iters {
				t.Errorf("client report %v", rows)
			}
			moved := pc.Server.RxBytes
			if k.verb == verbRead {
				moved = pc.Client.RxBytes
			}
			if want := uint64(srvCfg.size * srvCfg.iters); moved < want {
				t.Errorf("%d payload bytes crossed, want at least %d", moved, want)
			}
			if e.srvDev.Link().Info().Kind != tc.link || e.cliDev.Link().Info().Kind != tc.link {
				t.Errorf("links are %s and %s, want %s", e.srvDev.Link().Info().Kind, e.cliDev.Link().Info().Kind, tc.link)
			}
		})
	}
}
