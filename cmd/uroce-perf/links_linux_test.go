package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/uroce/uroce/internal/netns"
	"github.com/uroce/uroce/pkg/netinfo"
	"github.com/uroce/uroce/pkg/perftest"
	"github.com/uroce/uroce/xdp"
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

// TestXDPBind: --xdp_bind chooses AF_XDP's bind mode and the header says
// which one the link got. veth offers no zero-copy, so zero-copy fails to
// open with xdp.ErrZeroCopy, and auto falls back to copy, saying so.
func TestXDPBind(t *testing.T) {
	netns.RequireRoot(t)
	a, b := netns.New(t), netns.New(t)
	va, _ := netns.NewVeth(t, a, b)
	addr := netip.MustParseAddr("10.202.0.1")
	va.AddAddr(t, netip.PrefixFrom(addr, 24))
	k, _ := kindByName("write_lat")
	for _, tc := range []struct {
		flags    []string
		bindUsed string
		err      error
	}{
		{[]string{"--link", "afxdp"}, "copy", nil},
		{[]string{"--link", "afxdp", "--xdp_bind", "auto"}, "copy", nil},
		{[]string{"--link", "afxdp", "--xdp_bind", "copy"}, "copy", nil},
		{[]string{"--link", "afxdp", "--xdp_bind", "zero-copy"}, "", xdp.ErrZeroCopy},
		{[]string{"--link", "afpacket"}, "", nil},
	} {
		t.Run(strings.Join(tc.flags, " "), func(t *testing.T) {
			cfg, err := parseArgs(k, append(tc.flags, "-d", va.Name), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			err = a.Do(func() error {
				dev, _, err := openDevice(cfg, addr)
				if err == nil {
					dev.Close()
				}
				return err
			})
			if !errors.Is(err, tc.err) {
				t.Fatalf("openDevice: %v, want %v", err, tc.err)
			}
			if cfg.bindUsed != tc.bindUsed {
				t.Errorf("bind used %q, want %q", cfg.bindUsed, tc.bindUsed)
			}
			var out bytes.Buffer
			p := &printer{w: &out, cfg: cfg}
			p.Connected(nil, nil, perftest.SysData{})
			if got := strings.Contains(out.String(), " AF_XDP bind     : "+tc.bindUsed+"\n"); got != (tc.bindUsed != "") {
				t.Errorf("header:\n%s\nwant an AF_XDP bind line only for afxdp, naming %q", out.String(), tc.bindUsed)
			}
		})
	}
	for _, args := range [][]string{
		{"--xdp_bind", "copy"},                    // udp
		{"--link", "afxdp", "--xdp_bind", "fast"}, // no such mode
	} {
		if _, err := parseArgs(k, args, io.Discard); !errors.Is(err, ErrUsage) {
			t.Errorf("uroce-perf write_lat %v: %v, want a usage error", args, err)
		}
	}
}

// TestGIDIndex: with -d, -x N picks the local address from rxe's GID
// table of the interface (the link-local default GID, then IPv4, then
// IPv6), and the device opened on it has that address as its one GID.
// Without -x the first IPv4 address is taken, as perftest picks the
// IPv4 RoCE v2 GID by itself. An index past the table is a usage error
// that lists the table.
func TestGIDIndex(t *testing.T) {
	netns.RequireRoot(t)
	a, b := netns.New(t), netns.New(t)
	va, _ := netns.NewVeth(t, a, b)
	v4, v6 := netip.MustParseAddr("10.203.0.1"), netip.MustParseAddr("fd00:203::1")
	va.AddAddr(t, netip.PrefixFrom(v4, 24))
	va.AddAddr(t, netip.PrefixFrom(v6, 64))
	ll := netinfo.LinkLocal([6]byte(va.MAC)).WithZone(va.Name)
	k, _ := kindByName("write_lat")
	for _, tc := range []struct {
		flags []string
		want  netip.Addr
	}{
		{nil, v4},
		{[]string{"-x", "0"}, ll},
		{[]string{"-x", "1"}, v4},
		{[]string{"--gid-index", "2"}, v6},
	} {
		t.Run(strings.Join(append([]string{"x"}, tc.flags...), " "), func(t *testing.T) {
			cfg, err := parseArgs(k, append(tc.flags, "-d", va.Name), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			err = a.Do(func() error {
				local, err := localAddr(cfg)
				if err != nil {
					return err
				}
				if local != tc.want {
					t.Errorf("local address %v, want %v", local, tc.want)
				}
				dev, _, err := openDevice(cfg, local)
				if err != nil {
					return err
				}
				defer dev.Close()
				g, err := dev.GID(cfg.deviceGID())
				if err != nil {
					return err
				}
				if want := netinfo.GIDOf(tc.want.WithZone("")); g != want {
					t.Errorf("device GID %v, want %v", g, want)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
	cfg, err := parseArgs(k, []string{"-d", va.Name, "-x", "3"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	err = a.Do(func() error { _, err := localAddr(cfg); return err })
	if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "2 fd00:203::1") {
		t.Errorf("-x 3: %v, want a usage error listing the table", err)
	}
}
